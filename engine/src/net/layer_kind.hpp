#pragma once
// What the engine knows of a layer type, in one place: its keys (read and written in YAML and in
// Caffe's prototxt from this one description), the checks of their values, its shape rule (which
// the net and the memory plan both use) and its layer class. Each type is one file under
// net/layers/; net/layer_table.cpp lists them (an explicit table, not self-registration, which a
// static link drops).

#include <dl/backend.hpp>
#include <dl/config.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dl {

class Layer;

/// A shape in 64 bits: the memory plan works out sizes before anything is allocated, so a
/// dimension past 2^31 - 1 is reported instead of wrapping.
using Shape = std::vector<std::int64_t>;

/// A layer's tops, parameters and own buffer for given bottoms.
struct Planned {
    std::vector<Shape> tops;
    std::vector<Shape> params;
    std::uint64_t buffer = 0; // floats or int32s of a buffer the layer keeps (masks, argmax)
    int buffer_copies = 1;
    std::string buffer_what;
};

/// Where Caffe's LayerParameter keeps a field: a sub-message ("convolution_param"; "" for
/// LayerParameter's own fields) and the field's name in it. No message: not in Caffe's format.
struct CaffeField {
    const char* message = nullptr;
    const char* field = nullptr;
};

/// One key of a layer.
struct Field {
    const char* key = nullptr;      // the YAML key (Caffe's field name where it has one)
    CaffeField caffe;               // where a prototxt has it (read and written)
    CaffeField older;               // read from here when `caffe` is not set (Caffe's older files)
    bool written_when_empty = true; // false: a writer leaves out 0, false, "", [] and unset
    bool caffe_keeps_default = false; // unset in a prototxt: the config's default, not Caffe's
    const char* expected = nullptr;   // what a YAML value must be, for messages about lists

    Field& or_older(const char* message, const char* field) {
        older = CaffeField{message, field};
        return *this;
    }
    Field& when_set() {
        written_when_empty = false;
        return *this;
    }
    Field& keeping_default() {
        caffe_keeps_default = true;
        return *this;
    }
    Field& expecting(const char* what) {
        expected = what;
        return *this;
    }
};

/// `key` in Caffe's `message` under the same name (nullptr: YAML only).
inline Field field(const char* key, const char* message = nullptr,
                   const char* caffe_name = nullptr) {
    Field f;
    f.key = key;
    if (message != nullptr) {
        f.caffe = CaffeField{message, caffe_name != nullptr ? caffe_name : key};
    }
    return f;
}

/// What a layer's `fields` function hands each key to: the YAML and prototxt readers and
/// writers and the list of keys are each one of these.
class FieldVisitor {
public:
    FieldVisitor() = default;
    virtual ~FieldVisitor() = default;
    FieldVisitor(const FieldVisitor&) = delete;
    FieldVisitor& operator=(const FieldVisitor&) = delete;
    FieldVisitor(FieldVisitor&&) = delete;
    FieldVisitor& operator=(FieldVisitor&&) = delete;

    virtual void integer(const Field& f, int& value) = 0;
    virtual void number(const Field& f, float& value) = 0;
    virtual void flag(const Field& f, bool& value) = 0;
    virtual void flag(const Field& f, std::optional<bool>& value) = 0;
    /// A string; where Caffe's field is an enum, its value name in lower case ("max", "sum").
    virtual void text(const Field& f, std::string& value) = 0;
    virtual void numbers(const Field& f, std::vector<float>& value) = 0;
    virtual void integers(const Field& f, std::vector<int>& value) = 0;
    virtual void filler(const Field& f, FillerConfig& value) = 0;
    /// `param: [{lr_mult, decay_mult}]`, read for every type; written always or when given.
    virtual void params(std::vector<ParamSpec>& /*value*/, bool /*written_when_empty*/) {}
    /// A Caffe field dltrain keeps no value of, which must be `value` (as text: "1", "CEIL")
    /// where a prototxt sets it; else the prototxt is refused with `message` ("{}" is the value
    /// found). Caffe's defaults of these fields are what dltrain does.
    virtual void caffe_requires(CaffeField /*where*/, const char* /*value*/,
                                const char* /*message*/) {}
    /// The same, refusing `value`.
    virtual void caffe_refuses(CaffeField /*where*/, const char* /*value*/,
                               const char* /*message*/) {}
    /// A Caffe field accepted and left alone (`engine`: dltrain picks its own kernels).
    virtual void caffe_ignores(CaffeField /*where*/) {}
};

/// The value checks a layer's `check` function calls; each throws dl::Error(config) naming the
/// file, line and column of the key where the reader marked it, else the layer's line.
class LayerChecks {
public:
    LayerChecks() = default;
    virtual ~LayerChecks() = default;
    LayerChecks(const LayerChecks&) = delete;
    LayerChecks& operator=(const LayerChecks&) = delete;
    LayerChecks(LayerChecks&&) = delete;
    LayerChecks& operator=(LayerChecks&&) = delete;

    [[noreturn]] virtual void fail(const std::string& key, const std::string& message) const = 0;
    /// "layer 'NAME'", for messages.
    [[nodiscard]] virtual std::string where() const = 0;
    /// A size the layer needs: absent is "needs key", present but below `minimum` out of range.
    virtual void required_at_least(const std::string& key, int value, int minimum) const = 0;
    virtual void at_least(const std::string& key, int value, int minimum) const = 0;
    virtual void at_most(const std::string& key, int value, int maximum) const = 0;
    virtual void finite(const std::string& key, float value) const = 0;
    virtual void choice(const std::string& key, const std::string& value,
                        const std::vector<std::string>& choices) const = 0;
    virtual void filler(const std::string& key, const FillerConfig& value) const = 0;
    /// kernel_size (required), stride and pad of a convolution or pooling window.
    virtual void window() const = 0;
};

/// What the net and the trainer do with a layer beyond running it.
enum class LayerRole {
    compute, // forward and backward, nothing more
    input,   // hands the net its data (Data): the trainer fills its tops, the memory plan
             // counts an input stage
    loss,    // its top is the objective, reported in training and test
    metric,  // its top is a measure reported in the test pass (Accuracy)
};

struct LayerKind {
    const char* type = nullptr;
    // Whether a top may be the layer's own bottom: only where forward and backward never read a
    // value they have overwritten (the activations, Dropout's mask, BatchNorm and Scale keep a
    // copy of what their backward needs). The others read their input while they write their
    // output, so in place they compute garbage or write past the blob.
    bool in_place = false;
    LayerRole role = LayerRole::compute;
    // Takes no bottoms: its tops' shapes are its own (Input, DummyData) or its data's (the Data
    // layers), so the memory plan starts from it.
    bool no_bottoms = false;
    // Has parameters (weights, running statistics): its tops carry a gradient even when its
    // bottoms do not (net/splits.cpp works out which blobs get one before the net is built).
    bool has_params = false;
    void (*fields)(FieldVisitor&, LayerConfig&) = nullptr;
    void (*check)(const LayerConfig&, const LayerChecks&) = nullptr;
    /// The shape rule: nothing when the bottoms do not fit (the layer's setup says why); throws
    /// dl::Error(config) when a size passes what the layers' int arithmetic holds.
    std::optional<Planned> (*plan)(const LayerConfig&, const std::vector<const Shape*>&) = nullptr;
    std::unique_ptr<Layer> (*make)(const LayerConfig&, Backend&) = nullptr;
    void (*defaults)(LayerConfig&) = nullptr;   // before either reader (Scale's bias_term)
    void (*from_caffe)(LayerConfig&) = nullptr; // after a prototxt is read
    /// Before a prototxt is written: sets what Caffe's format needs and adds to `lost` each key
    /// it cannot say ("layer 'data': shuffle (Caffe reads in file order)").
    void (*to_caffe)(LayerConfig&, std::vector<std::string>& lost) = nullptr;
};

/// Every layer type, in the table's order (net/layer_table.cpp).
const std::vector<LayerKind>& layer_kinds();
/// The kind of `type`, or nullptr.
const LayerKind* find_layer_kind(const std::string& type);
/// The kind of a layer whose type the reader has checked (std::out_of_range otherwise).
const LayerKind& layer_kind(const std::string& type);
/// Whether `layer`'s type has `role` (false for a type not in the table).
bool has_role(const LayerConfig& layer, LayerRole role);
/// The type names, in the table's order, for messages.
std::vector<std::string> layer_type_names();

/// The YAML keys of a kind past the common ones (name, type, bottom, top, phase, param), in its
/// fields' order.
std::vector<std::string> layer_keys(const LayerKind& kind);

/// The layer for config.type.
std::unique_ptr<Layer> make_layer(const LayerConfig& config, Backend& backend);
/// Whether a layer of `type` may have a top that is also its bottom.
bool may_run_in_place(const std::string& type);
/// The types that may, in the table's order, for messages.
std::vector<std::string> in_place_types();

} // namespace dl
