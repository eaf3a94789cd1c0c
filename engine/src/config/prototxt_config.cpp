// Caffe's net and solver prototxt files into a NetConfig: the only engine file that sees protobuf.
// Parsed with protobuf's text format against engine/proto/caffe.proto (Caffe's own field names
// and numbers for the subset dltrain supports). Whatever dltrain would not do as Caffe does is
// refused with the file, the line and the field's name (never ignored): an unknown field by the
// parser, a known but unsupported one (or value) by the allowlists below, and a layer type dltrain
// does not run by its type. The values' ranges and choices are validate_config's, the one check
// YAML configs go through too (config/config_validate.cpp); this file records where each field was
// given so that its messages name the line and column.

#include "caffe.pb.h"
#include "config/config_readers.hpp"
#include "config/prototxt_upgrade.hpp"
#include "io/regular_file.hpp"
#include "net/layer_kind.hpp"

#include <dl/config.hpp>
#include <dl/error.hpp>

#include <fmt/format.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <type_traits>

namespace dl {
namespace {

namespace pb = google::protobuf;
using Tree = pb::TextFormat::ParseInfoTree;

constexpr std::uint64_t k_max_prototxt_bytes = 4U << 20;

struct ParseError {
    int m_line = 0;
    int m_column = 0;
    std::string m_message;
};

// Keeps the parser's first error (the later ones follow from it).
class FirstError final : public pb::io::ErrorCollector {
public:
    explicit FirstError(ParseError& out) : m_out(out) {}
    void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
        if (m_out.m_message.empty()) {
            m_out = ParseError{line + 1, column + 1, message};
        }
    }

private:
    ParseError& m_out;
};

struct Parsed {
    bool ok = false;
    ParseError error;
    std::unique_ptr<Tree> tree = std::make_unique<Tree>();
};

Parsed parse(const std::string& text, pb::Message& message) {
    Parsed parsed;
    FirstError collector(parsed.error);
    pb::TextFormat::Parser parser;
    parser.RecordErrorsTo(&collector);
    parser.WriteLocationsTo(parsed.tree.get());
    parsed.ok = parser.ParseFromString(text, &message);
    return parsed;
}

// The fields dltrain reads of the messages around the layers' own; any other field that a file
// sets is refused. A layer's *_param messages are its kind's (net/layers/, caffe_fields below).
const std::map<std::string, std::set<std::string>>& allowed_fields() {
    static const std::map<std::string, std::set<std::string>> fields = {
        {"caffe.NetParameter", {"name", "layer", "layers", "input", "input_shape", "input_dim"}},
        {"caffe.LayerParameter",
         {"name", "type", "bottom", "top", "loss_weight", "param", "include", "exclude"}},
        {"caffe.NetStateRule", {"phase", "min_level", "max_level", "stage", "not_stage"}},
        {"caffe.NetState", {"phase", "level", "stage"}}, // a solver's train_state, test_state
        {"caffe.ParamSpec", {"lr_mult", "decay_mult", "name"}},
        {"caffe.BlobShape", {"dim"}}, // Input's input_param.shape
        {"caffe.FillerParameter",
         {"type", "value", "min", "max", "mean", "std", "variance_norm", "sparse"}},
        {"caffe.SolverParameter",
         {"net",
          "net_param",
          "train_net",
          "train_net_param",
          "test_net",
          "test_net_param",
          "test_iter",
          "test_state",
          "train_state",
          "test_interval",
          "test_initialization",
          "test_compute_loss", // accepted: dltrain's test pass always reports the loss
          "base_lr",
          "display",
          "average_loss",
          "max_iter",
          "lr_policy",
          "gamma",
          "power",
          "momentum",
          "weight_decay",
          "regularization_type",
          "stepsize",
          "stepvalue",
          "snapshot",
          "snapshot_prefix",
          "snapshot_format",
          "snapshot_after_train",
          "solver_mode",
          "device_id",
          "random_seed",
          "type",
          "delta",
          "momentum2",
          "rms_decay",
          "solver_type"}},
    };
    return fields;
}

/// A kind's *_param messages (by their LayerParameter field name) and the fields of each that
/// it reads, requires, refuses or ignores: everything else in them is refused.
using CaffeFields = std::map<std::string, std::set<std::string>>;

class CaffeFieldList final : public FieldVisitor {
public:
    CaffeFields fields;
    void integer(const Field& f, int& /*value*/) override { add(f); }
    void number(const Field& f, float& /*value*/) override { add(f); }
    void flag(const Field& f, bool& /*value*/) override { add(f); }
    void flag(const Field& f, std::optional<bool>& /*value*/) override { add(f); }
    void text(const Field& f, std::string& /*value*/) override { add(f); }
    void numbers(const Field& f, std::vector<float>& /*value*/) override { add(f); }
    void integers(const Field& f, std::vector<int>& /*value*/) override { add(f); }
    void filler(const Field& f, FillerConfig& /*value*/) override { add(f); }
    void caffe_requires(CaffeField where, const char* /*value*/, const char* /*message*/) override {
        add(where);
    }
    void caffe_refuses(CaffeField where, const char* /*value*/, const char* /*message*/) override {
        add(where);
    }
    void caffe_ignores(CaffeField where) override { add(where); }

private:
    void add(const Field& f) {
        add(f.caffe);
        add(f.older);
    }
    void add(CaffeField where) {
        // LayerParameter's own fields (loss_weight) are in allowed_fields.
        if (where.message != nullptr && *where.message != '\0') {
            fields[where.message].insert(where.field);
        }
    }
};

CaffeFields caffe_fields(const LayerKind& kind) {
    CaffeFieldList list;
    LayerConfig scratch;
    kind.fields(list, scratch);
    return list.fields;
}

class Converter {
public:
    explicit Converter(std::filesystem::path file) : m_file(std::move(file)) {}

    [[noreturn]] void fail(int line, const std::string& message) const {
        throw Error(ErrorKind::config, fmt::format("{}:{}: {}", m_file.string(), line, message));
    }

    /// Every set field of `message` (and of its sub-messages) must be in the allowlist:
    /// `allow` where given, else allowed_fields; a LayerParameter's *_param messages by
    /// `param_fields`.
    void check_fields(const pb::Message& message, const Tree* tree, int line,
                      const std::set<std::string>* allow = nullptr,
                      const CaffeFields* param_fields = nullptr) const {
        const auto found = allowed_fields().find(message.GetDescriptor()->full_name());
        const pb::Reflection* reflection = message.GetReflection();
        std::vector<const pb::FieldDescriptor*> fields;
        reflection->ListFields(message, &fields);
        for (const pb::FieldDescriptor* field : fields) {
            const int count = field->is_repeated() ? reflection->FieldSize(message, field) : 1;
            const int field_line = line_of(tree, field, field->is_repeated() ? 0 : -1, line);
            const auto param = param_fields != nullptr ? param_fields->find(field->name())
                                                       : CaffeFields::const_iterator{};
            const bool is_param = param_fields != nullptr && param != param_fields->end();
            const bool ok =
                is_param || (allow != nullptr ? allow->count(field->name()) != 0
                                              : found != allowed_fields().end() &&
                                                    found->second.count(field->name()) != 0);
            if (!ok) {
                fail(field_line, fmt::format("field '{}' of {} is not supported by dltrain",
                                             field->name(), message.GetDescriptor()->name()));
            }
            if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE ||
                message.GetDescriptor()->full_name() == "caffe.NetParameter" ||
                message.GetDescriptor()->full_name() == "caffe.SolverParameter") {
                continue;
            }
            for (int i = 0; i < count; ++i) {
                const int index = field->is_repeated() ? i : -1;
                const pb::Message& sub = field->is_repeated()
                                             ? reflection->GetRepeatedMessage(message, field, i)
                                             : reflection->GetMessage(message, field);
                const Tree* nested =
                    tree != nullptr ? tree->GetTreeForNested(field, index) : nullptr;
                check_fields(sub, nested, line_of(tree, field, index, line),
                             is_param ? &param->second : nullptr);
            }
        }
    }

    static int line_of(const Tree* tree, const pb::FieldDescriptor* field, int index,
                       int fallback) {
        if (tree == nullptr) {
            return fallback;
        }
        const auto location = tree->GetLocation(field, index);
        return location.line >= 0 ? location.line + 1 : fallback;
    }

    /// Where the first (or only) value of a set field was given; protobuf's GetLocation
    /// aborts the process for a repeated field asked at index -1, so the index is 0 for those.
    static SourceMark mark_of(const Tree* tree, const pb::FieldDescriptor* field) {
        if (tree == nullptr) {
            return {};
        }
        const auto location = tree->GetLocation(field, field->is_repeated() ? 0 : -1);
        return location.line >= 0 ? SourceMark{location.line + 1, location.column + 1, {}}
                                  : SourceMark{};
    }

    /// The YAML key a Caffe field is read into, where the names differ.
    static std::string key_of(const std::string& field) {
        static const std::map<std::string, std::string> renamed = {{"include", "phase"},
                                                                   {"exclude", "phase"},
                                                                   {"concat_dim", "axis"},
                                                                   {"solver_type", "type"}};
        const auto found = renamed.find(field);
        return found != renamed.end() ? found->second : field;
    }

    /// Marks of `message`'s set fields by the YAML keys they are read into: a layer's *_param
    /// and transform_param fields are its own keys (Caffe's names), a filler's fields are
    /// "<filler>.<field>"; other sub-messages (param, include) are marked as a whole.
    static void record_marks(const pb::Message& message, const Tree* tree,
                             const std::string& prefix, SourceMarks& marks) {
        const pb::Reflection* reflection = message.GetReflection();
        std::vector<const pb::FieldDescriptor*> fields;
        reflection->ListFields(message, &fields);
        for (const pb::FieldDescriptor* field : fields) {
            const std::string key = prefix + key_of(field->name());
            const bool flatten = field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE &&
                                 !field->is_repeated() &&
                                 (field->name().ends_with("_param") ||
                                  field->message_type()->name() == "FillerParameter");
            if (!flatten) {
                marks.emplace(key, mark_of(tree, field));
                continue;
            }
            const Tree* nested = tree != nullptr ? tree->GetTreeForNested(field, -1) : nullptr;
            const bool filler = field->message_type()->name() == "FillerParameter";
            if (filler) {
                marks.emplace(key, mark_of(tree, field));
            }
            record_marks(reflection->GetMessage(message, field), nested, filler ? key + "." : "",
                         marks);
        }
    }

    /// A uint32 size field as the int the config holds: one past 2^31 - 1 would wrap to a
    /// negative size (4294967295 is -1).
    int to_int(std::uint32_t value, int line, const std::string& what) const {
        if (value > static_cast<std::uint32_t>(INT_MAX)) {
            fail(line, fmt::format("{} {} is beyond 2^31 - 1", what, value));
        }
        return static_cast<int>(value);
    }

    static FillerConfig filler(const caffe::FillerParameter& p) {
        FillerConfig f;
        f.type = p.type();
        f.value = p.value();
        f.min = p.min();
        f.max = p.max();
        f.mean = p.mean();
        f.std = p.std();
        f.sparse = p.sparse();
        f.variance_norm = p.variance_norm() == caffe::FillerParameter::FAN_OUT   ? "fan_out"
                          : p.variance_norm() == caffe::FillerParameter::AVERAGE ? "average"
                                                                                 : "fan_in";
        return f;
    }

    /// A layer's own fields, read from its prototxt as its kind lists them (net/layers/).
    class ProtoFields final : public FieldVisitor {
    public:
        ProtoFields(const Converter& converter, const caffe::LayerParameter& layer,
                    const Tree* tree, int line, std::string where)
            : m_converter(converter), m_layer(layer), m_tree(tree), m_line(line),
              m_where(std::move(where)) {}

        void integer(const Field& f, int& value) override {
            if (const auto at = source(f)) {
                value = at->field->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT32
                            ? get<std::int32_t>(*at)
                            : size(*at, f.key);
            }
        }
        void number(const Field& f, float& value) override {
            if (const auto at = source(f)) {
                value = get<float>(*at);
            }
        }
        void flag(const Field& f, bool& value) override {
            if (const auto at = source(f)) {
                value = get<bool>(*at);
            }
        }
        void flag(const Field& f, std::optional<bool>& value) override {
            if (const auto at = source(f); at && is_set(*at)) {
                value = get<bool>(*at);
            }
        }
        void text(const Field& f, std::string& value) override {
            if (const auto at = source(f)) {
                value = text_of(*at);
                if (at->field->cpp_type() == pb::FieldDescriptor::CPPTYPE_ENUM) {
                    std::transform(value.begin(), value.end(), value.begin(),
                                   [](unsigned char c) { return std::tolower(c); });
                }
            }
        }
        void numbers(const Field& f, std::vector<float>& value) override {
            if (const auto at = source(f)) {
                const pb::Reflection* r = at->message->GetReflection();
                value.clear();
                for (int i = 0; i < r->FieldSize(*at->message, at->field); ++i) {
                    value.push_back(r->GetRepeatedFloat(*at->message, at->field, i));
                }
            }
        }
        // A repeated uint32 (Slice's slice_point) as its values; a BlobShape (Reshape's
        // reshape_param.shape) or a repeated one (Input's input_param.shape, one shape) as its
        // dims, of which -1 and 0 are Reshape's own and the layers' checks refuse elsewhere.
        void integers(const Field& f, std::vector<int>& value) override {
            const auto at = source(f);
            if (!at) {
                return;
            }
            const pb::Reflection* r = at->message->GetReflection();
            const std::string what = fmt::format("{}: {}", m_where, f.key);
            if (at->field->cpp_type() == pb::FieldDescriptor::CPPTYPE_UINT32) {
                value.clear();
                for (int i = 0; i < r->FieldSize(*at->message, at->field); ++i) {
                    const std::uint32_t v = r->GetRepeatedUInt32(*at->message, at->field, i);
                    if (v > INT32_MAX) {
                        m_converter.fail(line_of(*at),
                                         fmt::format("{}: {} is out of range", what, v));
                    }
                    value.push_back(static_cast<int>(v));
                }
                return;
            }
            if (at->field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) {
                throw std::logic_error(std::string("no prototxt reader for list ") + f.key);
            }
            if (!at->field->is_repeated()) {
                read_dims(r->GetMessage(*at->message, at->field), *at, what, value);
                return;
            }
            if (const int shapes = r->FieldSize(*at->message, at->field); shapes != 1) {
                m_converter.fail(line_of(*at), fmt::format("{}: {} shapes; dltrain takes one (one "
                                                           "top)",
                                                           what, shapes));
            }
            read_dims(r->GetRepeatedMessage(*at->message, at->field, 0), *at, what, value);
        }
        template <typename At>
        void read_dims(const pb::Message& shape, const At& at, const std::string& what,
                       std::vector<int>& value) {
            const pb::FieldDescriptor* dim = shape.GetDescriptor()->FindFieldByName("dim");
            const pb::Reflection* dims = shape.GetReflection();
            value.clear();
            for (int i = 0; i < dims->FieldSize(shape, dim); ++i) {
                const std::int64_t size = dims->GetRepeatedInt64(shape, dim, i);
                if (size < -1 || size > INT32_MAX) {
                    m_converter.fail(line_of(at),
                                     fmt::format("{}: dim {} is out of range", what, size));
                }
                value.push_back(static_cast<int>(size));
            }
        }
        // One FillerParameter; of a repeated one (DummyData's data_filler, one per top), the one.
        void filler(const Field& f, FillerConfig& value) override {
            const auto at = source(f);
            if (!at) {
                return;
            }
            const pb::Reflection* r = at->message->GetReflection();
            if (!at->field->is_repeated()) {
                value = Converter::filler(dynamic_cast<const caffe::FillerParameter&>(
                    r->GetMessage(*at->message, at->field)));
                return;
            }
            if (const int fillers = r->FieldSize(*at->message, at->field); fillers != 1) {
                m_converter.fail(line_of(*at), fmt::format("{}: {}: {} fillers; dltrain takes one "
                                                           "(one top)",
                                                           m_where, f.key, fillers));
            }
            value = Converter::filler(dynamic_cast<const caffe::FillerParameter&>(
                r->GetRepeatedMessage(*at->message, at->field, 0)));
        }
        void caffe_requires(CaffeField where, const char* value, const char* message) override {
            const Located at = locate(where);
            if (is_set(at) && text_of(at) != value) {
                refuse(at, message);
            }
        }
        void caffe_refuses(CaffeField where, const char* value, const char* message) override {
            const Located at = locate(where);
            if (is_set(at) && text_of(at) == value) {
                refuse(at, message);
            }
        }

    private:
        struct Located {
            const pb::Message* message;
            const pb::FieldDescriptor* field;
            const Tree* tree;
        };

        [[nodiscard]] Located locate(CaffeField where) const {
            const pb::Message* message = &m_layer;
            const Tree* tree = m_tree;
            if (*where.message != '\0') {
                const pb::FieldDescriptor* holder =
                    m_layer.GetDescriptor()->FindFieldByName(where.message);
                if (holder == nullptr) {
                    throw std::logic_error(std::string("LayerParameter has no ") + where.message);
                }
                message = &m_layer.GetReflection()->GetMessage(m_layer, holder);
                tree = tree != nullptr ? tree->GetTreeForNested(holder, -1) : nullptr;
            }
            const pb::FieldDescriptor* field =
                message->GetDescriptor()->FindFieldByName(where.field);
            if (field == nullptr) {
                throw std::logic_error(std::string(where.message) + " has no " + where.field);
            }
            return Located{message, field, tree};
        }
        [[nodiscard]] static bool is_set(const Located& at) {
            const pb::Reflection* r = at.message->GetReflection();
            return at.field->is_repeated() ? r->FieldSize(*at.message, at.field) > 0
                                           : r->HasField(*at.message, at.field);
        }
        // Where a field's value comes from: its place if set, else its older place if set, else
        // Caffe's default at its place (a singular field's; a list unset stays as it is).
        [[nodiscard]] std::optional<Located> source(const Field& f) const {
            if (f.caffe.message == nullptr) {
                return std::nullopt;
            }
            const Located at = locate(f.caffe);
            if (is_set(at)) {
                return at;
            }
            if (f.older.message != nullptr) {
                if (const Located older = locate(f.older); is_set(older)) {
                    return older;
                }
            }
            if (f.caffe_keeps_default || at.field->is_repeated()) {
                return std::nullopt;
            }
            return at;
        }
        [[nodiscard]] int line_of(const Located& at) const {
            return Converter::line_of(at.tree, at.field, at.field->is_repeated() ? 0 : -1, m_line);
        }
        template <typename T> [[nodiscard]] T get(const Located& at) const {
            const pb::Reflection* r = at.message->GetReflection();
            const bool many = at.field->is_repeated();
            if constexpr (std::is_same_v<T, float>) {
                return many ? r->GetRepeatedFloat(*at.message, at.field, 0)
                            : r->GetFloat(*at.message, at.field);
            } else if constexpr (std::is_same_v<T, bool>) {
                return r->GetBool(*at.message, at.field);
            } else {
                return r->GetInt32(*at.message, at.field);
            }
        }
        // A uint32 size (one value of a repeated one: kernel_size, pad, stride) as the int the
        // config holds; 4294967295 would otherwise be -1.
        [[nodiscard]] int size(const Located& at, const char* key) const {
            const pb::Reflection* r = at.message->GetReflection();
            const std::string what = fmt::format("{}: {}", m_where, key);
            if (!at.field->is_repeated()) {
                return m_converter.to_int(r->GetUInt32(*at.message, at.field), line_of(at), what);
            }
            const int count = r->FieldSize(*at.message, at.field);
            const std::uint32_t first = r->GetRepeatedUInt32(*at.message, at.field, 0);
            for (int i = 1; i < count; ++i) {
                if (r->GetRepeatedUInt32(*at.message, at.field, i) != first) {
                    m_converter.fail(line_of(at),
                                     what + ": different values per axis are not supported");
                }
            }
            return m_converter.to_int(first, line_of(at), what);
        }
        // A field's value as text (an enum by its name), for the requires/refuses rules.
        [[nodiscard]] std::string text_of(const Located& at) const {
            const pb::Reflection* r = at.message->GetReflection();
            switch (at.field->cpp_type()) {
            case pb::FieldDescriptor::CPPTYPE_ENUM:
                return r->GetEnum(*at.message, at.field)->name();
            case pb::FieldDescriptor::CPPTYPE_STRING:
                return r->GetString(*at.message, at.field);
            case pb::FieldDescriptor::CPPTYPE_FLOAT:
                return fmt::format("{}", get<float>(at));
            case pb::FieldDescriptor::CPPTYPE_BOOL:
                return get<bool>(at) ? "true" : "false";
            case pb::FieldDescriptor::CPPTYPE_INT32:
                return std::to_string(get<std::int32_t>(at));
            case pb::FieldDescriptor::CPPTYPE_UINT32:
                return std::to_string(r->GetUInt32(*at.message, at.field));
            default:
                throw std::logic_error("no text for field " + at.field->name());
            }
        }
        [[noreturn]] void refuse(const Located& at, const char* message) const {
            // vformat, not fmt::runtime: the release builds with Debian 11's fmt 7.
            const std::string value = text_of(at);
            m_converter.fail(line_of(at), m_where + ": " +
                                              fmt::vformat(fmt::string_view(message),
                                                           fmt::make_format_args(value)));
        }

        const Converter& m_converter;
        const caffe::LayerParameter& m_layer;
        const Tree* m_tree;
        int m_line;
        std::string m_where;
    };

    static NetStateRule state_rule(const caffe::NetStateRule& r) {
        NetStateRule rule;
        if (r.has_phase()) {
            rule.phase = r.phase() == caffe::TRAIN ? Phase::train : Phase::test;
        }
        if (r.has_min_level()) {
            rule.min_level = r.min_level();
        }
        if (r.has_max_level()) {
            rule.max_level = r.max_level();
        }
        rule.stages.assign(r.stage().begin(), r.stage().end());
        rule.not_stages.assign(r.not_stage().begin(), r.not_stage().end());
        return rule;
    }

    LayerConfig layer(const caffe::LayerParameter& p, const Tree* tree, int line) const {
        LayerConfig l;
        l.name = p.name();
        l.type = p.type();
        l.line = line;
        const std::string where = fmt::format("layer '{}' ({})", p.name(), p.type());
        const LayerKind* kind = find_layer_kind(p.type());
        if (kind == nullptr) {
            std::string supported;
            for (const std::string& type : layer_type_names()) {
                supported += (supported.empty() ? "" : ", ") + type;
            }
            // The types Caffe's users meet that dltrain will not run, with why.
            static const std::map<std::string, std::string> why = {
                {"Python", ": a Python layer runs its module's code (python_param) inside Caffe's "
                           "process, and dltrain runs no Python"},
                {"WindowData", ": R-CNN's windows of images with their overlap labels are not a "
                               "source dltrain reads"},
                {"MemoryData", ": its arrays are handed over by a program that runs the net "
                               "(pycaffe's set_input_arrays), and dltrain runs no such program: "
                               "write them to an HDF5 file (HDF5Data) or an LMDB (Data)"}};
            const auto reason = why.find(p.type());
            fail(line, fmt::format("layer '{}': type '{}' is not supported by dltrain{} "
                                   "(supported: {})",
                                   p.name(), p.type(), reason != why.end() ? reason->second : "",
                                   supported));
        }
        const CaffeFields params = caffe_fields(*kind);
        // The layer's own *_param fields only; the others of LayerParameter are common.
        const std::set<std::string>& common = allowed_fields().at("caffe.LayerParameter");
        const pb::Reflection* reflection = p.GetReflection();
        std::vector<const pb::FieldDescriptor*> fields;
        reflection->ListFields(p, &fields);
        for (const pb::FieldDescriptor* field : fields) {
            if (common.count(field->name()) == 0 && params.count(field->name()) == 0) {
                fail(line_of(tree, field, field->is_repeated() ? 0 : -1, line),
                     fmt::format("{}: field '{}' does not apply to type {} in dltrain", where,
                                 field->name(), p.type()));
            }
        }
        check_fields(p, tree, line, nullptr, &params);
        record_marks(p, tree, "", l.marks);
        l.bottoms.assign(p.bottom().begin(), p.bottom().end());
        l.tops.assign(p.top().begin(), p.top().end());
        for (const auto& spec : p.param()) {
            l.params.push_back(ParamSpec{spec.lr_mult(), spec.decay_mult(), spec.name()});
        }
        // One rule that names only a phase is the config's `phase`; anything more is kept as
        // Caffe's rules.
        const bool plain =
            p.include_size() + p.exclude_size() == 1 && [](const caffe::NetStateRule& r) {
                return r.has_phase() && !r.has_min_level() && !r.has_max_level() &&
                       r.stage_size() == 0 && r.not_stage_size() == 0;
            }(p.include_size() == 1 ? p.include(0) : p.exclude(0));
        if (plain && p.include_size() == 1) {
            l.phase = p.include(0).phase() == caffe::TRAIN ? Phase::train : Phase::test;
        } else if (plain) {
            l.phase = p.exclude(0).phase() == caffe::TRAIN ? Phase::test : Phase::train;
        } else {
            for (const auto& rule : p.include()) {
                l.include.push_back(state_rule(rule));
            }
            for (const auto& rule : p.exclude()) {
                l.exclude.push_back(state_rule(rule));
            }
        }
        if (p.loss_weight_size() > 1) {
            fail(line, fmt::format("{}: one loss_weight per top is supported, for one top", where));
        }
        if (kind->defaults != nullptr) {
            kind->defaults(l);
        }
        ProtoFields reader(*this, p, tree, line, where);
        kind->fields(reader, l);
        if (kind->from_caffe != nullptr) {
            kind->from_caffe(l);
        }
        return l;
    }

    std::vector<LayerConfig> net(const caffe::NetParameter& net, const Tree& tree) const {
        check_fields(net, &tree, 1);
        if (net.layer_size() == 0 && net.layers_size() == 0) {
            fail(1, "the net has no 'layer' entries");
        }
        const pb::FieldDescriptor* v1_field = net.GetDescriptor()->FindFieldByName("layers");
        if (net.layer_size() != 0 && net.layers_size() != 0) {
            fail(line_of(&tree, v1_field, 0, 1),
                 "the net mixes 'layer' entries with legacy V1 'layers' ones (Caffe refuses "
                 "that too)");
        }
        std::vector<LayerConfig> layers = net_inputs(net, tree);
        // A V0 or V1 net is upgraded as Caffe reads it; its messages name the old entry's line.
        const auto entry_name = [&net](int i) {
            const caffe::V1LayerParameter& entry = net.layers(i);
            return entry.has_layer() ? entry.layer().name() : entry.name();
        };
        V0Upgrade v1;
        if (is_v0_net(net)) {
            v1 = upgrade_v0_net(net);
            if (v1.failed >= 0) {
                fail(line_of(&tree, v1_field, v1.failed, 1),
                     fmt::format("layer '{}' (Caffe's V0 format): {}", entry_name(v1.failed),
                                 v1.why));
            }
        } else {
            v1.layers.assign(net.layers().begin(), net.layers().end());
            for (int i = 0; i < net.layers_size(); ++i) {
                v1.origin.push_back(i);
            }
        }
        for (std::size_t k = 0; k < v1.layers.size(); ++k) {
            const int line = line_of(&tree, v1_field, v1.origin[k], 1);
            std::string why;
            const caffe::LayerParameter upgraded = upgrade_v1_layer(v1.layers[k], why);
            if (!why.empty()) {
                fail(line, fmt::format("layer '{}': {}", entry_name(v1.origin[k]), why));
            }
            layers.push_back(layer(upgraded, nullptr, line));
        }
        const pb::FieldDescriptor* field = net.GetDescriptor()->FindFieldByName("layer");
        for (int i = 0; i < net.layer_size(); ++i) {
            const int line = line_of(&tree, field, i, 1);
            layers.push_back(layer(net.layer(i), tree.GetTreeForNested(field, i), line));
        }
        return layers;
    }

    /// Caffe's older net-level inputs (`input: "data"` with `input_shape { dim … }`, or four
    /// `input_dim`s each), as Caffe's UpgradeNetInput makes them: an Input layer each, first.
    std::vector<LayerConfig> net_inputs(const caffe::NetParameter& net, const Tree& tree) const {
        const pb::Descriptor* d = net.GetDescriptor();
        const int line = line_of(&tree, d->FindFieldByName("input"), 0, 1);
        const bool by_shape = net.input_shape_size() > 0;
        if (net.input_size() == 0 && (by_shape || net.input_dim_size() > 0)) {
            fail(line_of(&tree, d->FindFieldByName(by_shape ? "input_shape" : "input_dim"), 0, 1),
                 "input_shape or input_dim without an 'input' naming the blob");
        }
        if (by_shape && net.input_dim_size() > 0) {
            fail(line, "give the inputs' input_shape or their input_dim, not both");
        }
        if (net.input_size() > 0 && (by_shape ? net.input_shape_size() != net.input_size()
                                              : net.input_dim_size() != 4 * net.input_size())) {
            fail(line, fmt::format("{} input(s) need {}, and the net gives {}", net.input_size(),
                                   by_shape ? fmt::format("{} input_shape", net.input_size())
                                            : fmt::format("{} input_dim", 4 * net.input_size()),
                                   by_shape ? net.input_shape_size() : net.input_dim_size()));
        }
        std::vector<LayerConfig> layers;
        for (int i = 0; i < net.input_size(); ++i) {
            LayerConfig l;
            l.name = net.input(i);
            l.type = "Input";
            l.tops = {net.input(i)};
            l.line = line;
            std::vector<std::int64_t> dims;
            if (by_shape) {
                dims.assign(net.input_shape(i).dim().begin(), net.input_shape(i).dim().end());
            } else {
                dims.assign(net.input_dim().begin() + 4 * i, net.input_dim().begin() + 4 * i + 4);
            }
            for (const std::int64_t size : dims) {
                if (size < 1 || size > INT32_MAX) {
                    fail(line, fmt::format("input '{}': size {} is out of range", l.name, size));
                }
                l.shape.push_back(static_cast<int>(size));
            }
            layers.push_back(std::move(l));
        }
        return layers;
    }

    SolverConfig solver(const caffe::SolverParameter& s, const Tree& tree,
                        SourceMarks& marks) const {
        check_fields(s, &tree, 1);
        record_marks(s, &tree, "", marks);
        const auto at = [&](const char* name) {
            return line_of(&tree, s.GetDescriptor()->FindFieldByName(name), -1, 1);
        };
        SolverConfig c;
        if (s.has_type() && s.has_solver_type()) {
            fail(at("solver_type"), "give type or the legacy solver_type, not both");
        }
        if (s.has_solver_type()) {
            static const std::map<int, std::string> legacy = {
                {caffe::SolverParameter::SGD, "SGD"},
                {caffe::SolverParameter::NESTEROV, "Nesterov"},
                {caffe::SolverParameter::ADAGRAD, "AdaGrad"},
                {caffe::SolverParameter::RMSPROP, "RMSProp"},
                {caffe::SolverParameter::ADADELTA, "AdaDelta"},
                {caffe::SolverParameter::ADAM, "Adam"}};
            const auto found = legacy.find(s.solver_type());
            if (found == legacy.end()) {
                fail(at("solver_type"), fmt::format("solver_type {} is not one of Caffe's (SGD, "
                                                    "NESTEROV, ADAGRAD, RMSPROP, ADADELTA, ADAM)",
                                                    static_cast<int>(s.solver_type())));
            }
            c.type = found->second;
        } else {
            c.type = s.type();
        }
        if (s.regularization_type() != "L2") {
            fail(at("regularization_type"),
                 fmt::format("regularization_type '{}' is not supported (L2)",
                             s.regularization_type()));
        }
        c.lr_policy = s.has_lr_policy() ? s.lr_policy() : "fixed";
        if (s.test_state_size() != 0 && s.test_state_size() != s.test_iter_size()) {
            fail(line_of(&tree, s.GetDescriptor()->FindFieldByName("test_state"), 0, 1),
                 fmt::format("{} test_state entries and {} test_iter: Caffe "
                             "takes one test_state per test net, each with "
                             "its test_iter",
                             s.test_state_size(), s.test_iter_size()));
        }
        if (s.test_iter_size() > 1 || s.test_state_size() != 0) {
            for (int i = 0; i < s.test_iter_size(); ++i) {
                SolverConfig::TestNet test;
                test.test_iter = s.test_iter(i);
                if (i < s.test_state_size()) {
                    const caffe::NetState& state = s.test_state(i);
                    if (state.has_phase() && state.phase() != caffe::TEST) {
                        fail(line_of(&tree, s.GetDescriptor()->FindFieldByName("test_state"), 0, 1),
                             "a test_state in the TRAIN phase: a test net "
                             "runs in the TEST phase");
                    }
                    test.state.level = state.level();
                    test.state.stages.assign(state.stage().begin(), state.stage().end());
                }
                c.test_nets.push_back(std::move(test));
            }
        }
        if (s.has_train_state()) {
            if (s.train_state().has_phase() && s.train_state().phase() != caffe::TRAIN) {
                fail(at("train_state"), "a train_state in the TEST phase: the train net runs in "
                                        "the TRAIN phase");
            }
            c.train_state.level = s.train_state().level();
            c.train_state.stages.assign(s.train_state().stage().begin(),
                                        s.train_state().stage().end());
        }
        c.base_lr = s.base_lr();
        c.momentum = s.momentum();
        c.momentum2 = s.momentum2();
        c.rms_decay = s.rms_decay();
        c.delta = s.delta();
        c.weight_decay = s.weight_decay();
        c.gamma = s.gamma();
        c.power = s.power();
        c.stepsize = s.stepsize();
        c.stepvalues.assign(s.stepvalue().begin(), s.stepvalue().end());
        c.max_iter = s.max_iter();
        c.test_interval = s.test_interval();
        c.test_iter = s.test_iter_size() != 0 ? s.test_iter(0) : 0;
        c.test_initialization = s.test_initialization();
        c.display = s.display();
        c.snapshot = s.snapshot();
        if (s.random_seed() >= 0) {
            c.random_seed = static_cast<unsigned>(s.random_seed());
        }
        return c;
    }

private:
    std::filesystem::path m_file;
};

std::string read_text(const std::filesystem::path& file) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
        throw Error(ErrorKind::config, fmt::format("config file {} does not exist", file.string()));
    }
    const std::vector<char> text =
        io::RegularFile(file, "config file").read_all(k_max_prototxt_bytes);
    return {text.begin(), text.end()};
}

[[noreturn]] void parse_failure(const std::filesystem::path& file, const ParseError& error) {
    throw Error(ErrorKind::config, fmt::format("{}:{}:{}: {}", file.string(), error.m_line,
                                               error.m_column, error.m_message));
}

NetConfig net_from(const std::filesystem::path& file, const std::string& text) {
    caffe::NetParameter net;
    const Parsed parsed = parse(text, net);
    if (!parsed.ok) {
        parse_failure(file, parsed.error);
    }
    NetConfig config;
    config.file = file;
    config.name = net.name();
    config.layers = Converter(file).net(net, *parsed.tree);
    return config;
}

bool names_net(const caffe::SolverParameter& solver) {
    return solver.has_net() || solver.has_train_net() || solver.has_net_param() ||
           solver.has_train_net_param();
}

/// Caffe resolves a solver's net path against the directory it runs in (its examples name
/// paths from the Caffe root); here the path as given, else next to the solver file.
std::filesystem::path net_path(const std::filesystem::path& solver, const std::string& net) {
    std::filesystem::path given(net);
    std::error_code ec;
    if (given.is_absolute() || std::filesystem::exists(given, ec)) {
        return given;
    }
    std::filesystem::path beside = solver.parent_path() / given;
    if (std::filesystem::exists(beside, ec)) {
        return beside;
    }
    return solver.parent_path() / given.filename();
}

} // namespace

bool is_solver_prototxt(const std::filesystem::path& file) {
    caffe::SolverParameter solver;
    return parse(read_text(file), solver).ok && names_net(solver);
}

std::filesystem::path caffe_snapshot_prefix(const std::filesystem::path& solver_file) {
    caffe::SolverParameter solver;
    (void)parse(read_text(solver_file), solver);
    if (!solver.has_snapshot_prefix() || solver.snapshot_prefix().empty()) {
        return std::filesystem::path(solver_file).replace_extension();
    }
    std::filesystem::path prefix = solver.snapshot_prefix();
    std::error_code ec;
    if (std::filesystem::is_directory(prefix, ec)) {
        return prefix / solver_file.stem();
    }
    return prefix;
}

namespace {

/// The nets a solver names, by file or inline, as one config. `net`/`net_param`: one net for
/// every phase. `train_net`/`train_net_param` with at most one `test_net`/`test_net_param`: the
/// train file's layers of the TRAIN state and the test file's of the TEST state, each marked
/// with its phase (Caffe builds each net from its own file; the test net borrows the train
/// net's weights by layer name, as here).
class SolverNets {
public:
    SolverNets(const std::filesystem::path& file, const caffe::SolverParameter& solver,
               const Tree& tree)
        : m_file(file), m_solver(solver), m_tree(tree), m_converter(file) {}

    NetConfig read() const {
        const bool generic = m_solver.has_net() || m_solver.has_net_param();
        const int tests = m_solver.test_net_size() + m_solver.test_net_param_size();
        if (generic && (m_solver.has_train_net() || m_solver.has_train_net_param())) {
            fail_at("train_net", "give net or train_net, not both (Caffe's rule)");
        }
        if (generic && tests != 0) {
            fail_at(m_solver.test_net_size() != 0 ? "test_net" : "test_net_param",
                    "test nets beside a net that holds its own test phase: dltrain builds the "
                    "test net from one or the other");
        }
        if (tests > 1) {
            fail_at(m_solver.test_net_size() != 0 ? "test_net" : "test_net_param",
                    fmt::format("{} test nets by file: dltrain takes one (several test nets "
                                "come from one net's test_state stages)",
                                tests));
        }
        if (tests != 0 && m_solver.test_state_size() != 0) {
            fail_at("test_state", "test_state with a test net file: give the stages in one net");
        }
        if (generic) {
            return net(m_solver.has_net_param() ? "net_param" : "net", m_solver.net());
        }
        NetConfig config = net(m_solver.has_train_net_param() ? "train_net_param" : "train_net",
                               m_solver.train_net());
        keep_phase(config, Phase::train);
        if (tests == 1) {
            NetConfig test = net(m_solver.test_net_size() != 0 ? "test_net" : "test_net_param",
                                 m_solver.test_net_size() != 0 ? m_solver.test_net(0) : "");
            keep_phase(test, Phase::test);
            config.layers.insert(config.layers.end(), test.layers.begin(), test.layers.end());
        }
        return config;
    }

private:
    [[noreturn]] void fail_at(const char* field, const std::string& message) const {
        m_converter.fail(line(field), message);
    }
    [[nodiscard]] int line(const char* field) const {
        const pb::FieldDescriptor* descriptor = m_solver.GetDescriptor()->FindFieldByName(field);
        return Converter::line_of(&m_tree, descriptor, descriptor->is_repeated() ? 0 : -1, 1);
    }

    // The net of `field`: a file named (`net`, `train_net`, `test_net`) or inline (*_param).
    NetConfig net(const char* field, const std::string& name) const {
        const pb::FieldDescriptor* descriptor = m_solver.GetDescriptor()->FindFieldByName(field);
        if (descriptor->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
            const int index = descriptor->is_repeated() ? 0 : -1;
            const pb::Reflection* reflection = m_solver.GetReflection();
            const auto& inline_net = dynamic_cast<const caffe::NetParameter&>(
                index < 0 ? reflection->GetMessage(m_solver, descriptor)
                          : reflection->GetRepeatedMessage(m_solver, descriptor, index));
            const Tree* nested = m_tree.GetTreeForNested(descriptor, index);
            const Tree empty;
            NetConfig config;
            config.file = m_file;
            config.name = inline_net.name();
            config.layers = m_converter.net(inline_net, nested != nullptr ? *nested : empty);
            return config;
        }
        const std::filesystem::path net_file = net_path(m_file, name);
        std::error_code ec;
        if (!std::filesystem::exists(net_file, ec)) {
            fail_at(field, fmt::format("net '{}' not found (looked as given and next to the "
                                       "solver: {})",
                                       name, net_file.string()));
        }
        return net_from(net_file, read_text(net_file));
    }

    static void keep_phase(NetConfig& config, Phase phase) {
        std::erase_if(config.layers, [phase](const LayerConfig& layer) {
            return !in_net(layer, NetState{phase});
        });
        for (LayerConfig& layer : config.layers) {
            layer.phase = phase;
            layer.include.clear();
            layer.exclude.clear();
        }
    }

    const std::filesystem::path& m_file;
    const caffe::SolverParameter& m_solver;
    const Tree& m_tree;
    Converter m_converter;
};

} // namespace

NetConfig read_prototxt(const std::filesystem::path& file) {
    const std::string text = read_text(file);
    // A solver names its net or holds it; a net file does not parse as a solver (or names none).
    caffe::SolverParameter solver;
    const Parsed as_solver = parse(text, solver);
    if (as_solver.ok && names_net(solver)) {
        const Converter converter(file);
        SourceMarks solver_marks;
        const SolverConfig solver_config = converter.solver(solver, *as_solver.tree, solver_marks);
        NetConfig config = SolverNets(file, solver, *as_solver.tree).read();
        config.solver = solver_config;
        config.solver_file = file;
        config.solver_line = 1;
        config.solver_marks = std::move(solver_marks);
        return config;
    }
    caffe::NetParameter net;
    const Parsed as_net = parse(text, net);
    if (!as_net.ok) {
        // Report the reading that got further: a solver with a typo fails as a net on its first
        // line.
        if (!as_solver.ok && as_solver.error.m_line > as_net.error.m_line) {
            parse_failure(file, as_solver.error);
        }
        parse_failure(file, as_net.error);
    }
    return net_from(file, text);
}

NetConfig load_prototxt(const std::filesystem::path& file) {
    NetConfig config = read_prototxt(file);
    validate_config(config);
    return config;
}

} // namespace dl
