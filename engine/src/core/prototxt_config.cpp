// Caffe's net and solver prototxt files into a NetConfig: the only engine file that sees protobuf.
// Parsed with protobuf's text format against engine/proto/caffe.proto (Caffe's own field names
// and numbers for the subset dltrain supports). Whatever dltrain would not do as Caffe does is
// refused with the file, the line and the field's name (never ignored): an unknown field by the
// parser, a known but unsupported one (or value) by the allowlists below, and a layer type dltrain
// does not run by its type. The values' ranges and choices are validate_config's, the one check
// YAML configs go through too (core/config_validate.cpp); this file records where each field was
// given so that its messages name the line and column.

#include "caffe.pb.h"
#include "core/config_readers.hpp"
#include "io/regular_file.hpp"

#include <dl/config.hpp>
#include <dl/error.hpp>

#include <fmt/format.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <set>

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

// The fields dltrain reads, per message; any other field that a file sets is refused. Fields
// whose values are limited are checked where they are read.
const std::map<std::string, std::set<std::string>>& allowed_fields() {
    static const std::map<std::string, std::set<std::string>> fields = {
        {"caffe.NetParameter", {"name", "layer"}},
        {"caffe.LayerParameter",
         {"name",
          "type",
          "bottom",
          "top",
          "loss_weight",
          "param",
          "include",
          "exclude",
          "transform_param",
          "loss_param",
          "accuracy_param",
          "batch_norm_param",
          "concat_param",
          "convolution_param",
          "data_param",
          "dropout_param",
          "eltwise_param",
          "inner_product_param",
          "lrn_param",
          "pooling_param",
          "relu_param",
          "scale_param",
          "sigmoid_param",
          "softmax_param",
          "tanh_param"}},
        {"caffe.NetStateRule", {"phase"}},
        {"caffe.ParamSpec", {"lr_mult", "decay_mult"}},
        {"caffe.FillerParameter", {"type", "value", "min", "max", "mean", "std", "variance_norm"}},
        {"caffe.TransformationParameter",
         {"scale", "mean_value", "mean_file", "crop_size", "mirror"}},
        {"caffe.DataParameter",
         {"source", "batch_size", "backend", "scale", "crop_size", "mirror", "prefetch"}},
        {"caffe.LossParameter", {"normalization", "normalize"}},
        {"caffe.AccuracyParameter", {"top_k", "axis"}},
        {"caffe.BatchNormParameter", {"use_global_stats", "moving_average_fraction", "eps"}},
        {"caffe.ConcatParameter", {"axis", "concat_dim"}},
        {"caffe.ConvolutionParameter",
         {"num_output", "bias_term", "pad", "kernel_size", "stride", "group", "weight_filler",
          "bias_filler", "engine", "axis"}},
        {"caffe.DropoutParameter", {"dropout_ratio"}},
        {"caffe.EltwiseParameter", {"operation", "coeff", "stable_prod_grad"}},
        {"caffe.InnerProductParameter",
         {"num_output", "bias_term", "weight_filler", "bias_filler", "axis"}},
        {"caffe.LRNParameter", {"local_size", "alpha", "beta", "norm_region", "k", "engine"}},
        {"caffe.PoolingParameter",
         {"pool", "pad", "kernel_size", "stride", "engine", "round_mode"}},
        {"caffe.ReLUParameter", {"negative_slope", "engine"}},
        {"caffe.ScaleParameter", {"axis", "num_axes", "filler", "bias_term", "bias_filler"}},
        {"caffe.SigmoidParameter", {"engine"}},
        {"caffe.SoftmaxParameter", {"engine", "axis"}},
        {"caffe.TanHParameter", {"engine"}},
        {"caffe.SolverParameter",
         {"net",
          "train_net",
          "test_iter",
          "test_interval",
          "test_initialization",
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
          "solver_type"}},
    };
    return fields;
}

// The *_param field each supported layer type may carry.
const std::map<std::string, std::set<std::string>>& layer_params() {
    static const std::map<std::string, std::set<std::string>> params = {
        {"Data", {"data_param", "transform_param"}},
        {"Convolution", {"convolution_param"}},
        {"Pooling", {"pooling_param"}},
        {"InnerProduct", {"inner_product_param"}},
        {"ReLU", {"relu_param"}},
        {"Sigmoid", {"sigmoid_param"}},
        {"TanH", {"tanh_param"}},
        {"Dropout", {"dropout_param"}},
        {"LRN", {"lrn_param"}},
        {"BatchNorm", {"batch_norm_param"}},
        {"Scale", {"scale_param"}},
        {"Concat", {"concat_param"}},
        {"Eltwise", {"eltwise_param"}},
        {"SoftmaxWithLoss", {"softmax_param", "loss_param"}},
        {"Accuracy", {"accuracy_param"}},
    };
    return params;
}

class Converter {
public:
    explicit Converter(std::filesystem::path file) : m_file(std::move(file)) {}

    [[noreturn]] void fail(int line, const std::string& message) const {
        throw Error(ErrorKind::config, fmt::format("{}:{}: {}", m_file.string(), line, message));
    }

    /// Every set field of `message` (and of its sub-messages) must be in the allowlist.
    void check_fields(const pb::Message& message, const Tree* tree, int line,
                      const std::set<std::string>& extra = {}) const {
        const auto& allow = allowed_fields();
        const auto found = allow.find(message.GetDescriptor()->full_name());
        const pb::Reflection* reflection = message.GetReflection();
        std::vector<const pb::FieldDescriptor*> fields;
        reflection->ListFields(message, &fields);
        for (const pb::FieldDescriptor* field : fields) {
            const int count = field->is_repeated() ? reflection->FieldSize(message, field) : 1;
            const int field_line = line_of(tree, field, field->is_repeated() ? 0 : -1, line);
            const bool ok = (found != allow.end() && found->second.count(field->name()) != 0) ||
                            extra.count(field->name()) != 0;
            if (!ok && field->name() == "layers" &&
                message.GetDescriptor()->name() == "NetParameter") {
                fail(field_line, "a legacy V1 net ('layers' entries): upgrade it with Caffe's "
                                 "upgrade_net_proto_text, then give dltrain the upgraded file");
            }
            if (!ok) {
                fail(field_line, fmt::format("field '{}' of {} is not supported by dltrain",
                                             field->name(), message.GetDescriptor()->name()));
            }
            if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
                for (int i = 0; i < count; ++i) {
                    const int index = field->is_repeated() ? i : -1;
                    const pb::Message& sub = field->is_repeated()
                                                 ? reflection->GetRepeatedMessage(message, field, i)
                                                 : reflection->GetMessage(message, field);
                    const Tree* nested =
                        tree != nullptr ? tree->GetTreeForNested(field, index) : nullptr;
                    if (message.GetDescriptor()->full_name() != "caffe.NetParameter" &&
                        message.GetDescriptor()->full_name() != "caffe.SolverParameter") {
                        check_fields(sub, nested, line_of(tree, field, index, line));
                    }
                }
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
        f.variance_norm = p.variance_norm() == caffe::FillerParameter::FAN_OUT   ? "fan_out"
                          : p.variance_norm() == caffe::FillerParameter::AVERAGE ? "average"
                                                                                 : "fan_in";
        return f;
    }

    /// One value of a repeated size field (kernel_size, pad, stride), or its default.
    int one(const pb::RepeatedField<std::uint32_t>& values, int fallback, int line,
            const std::string& what) const {
        if (values.size() > 1 &&
            std::any_of(values.begin(), values.end(), [&](auto v) { return v != values[0]; })) {
            fail(line, fmt::format("{}: different values per axis are not supported", what));
        }
        return values.empty() ? fallback : to_int(values[0], line, what);
    }

    LayerConfig layer(const caffe::LayerParameter& p, const Tree* tree, int line) const {
        LayerConfig l;
        l.name = p.name();
        l.type = p.type();
        l.line = line;
        const std::string where = fmt::format("layer '{}' ({})", p.name(), p.type());
        const auto params = layer_params().find(p.type());
        if (params == layer_params().end()) {
            std::string supported;
            for (const auto& [type, fields] : layer_params()) {
                supported += (supported.empty() ? "" : ", ") + type;
            }
            fail(line, fmt::format("layer '{}': type '{}' is not supported by dltrain "
                                   "(supported: {})",
                                   p.name(), p.type(), supported));
        }
        // The layer's own *_param fields only; the others of LayerParameter are common.
        std::set<std::string> extra;
        std::set<std::string> common = {"name",  "type",    "bottom",  "top",
                                        "param", "include", "exclude", "loss_weight"};
        const pb::Reflection* reflection = p.GetReflection();
        std::vector<const pb::FieldDescriptor*> fields;
        reflection->ListFields(p, &fields);
        for (const pb::FieldDescriptor* field : fields) {
            if (common.count(field->name()) == 0 && params->second.count(field->name()) == 0) {
                fail(line_of(tree, field, field->is_repeated() ? 0 : -1, line),
                     fmt::format("{}: field '{}' does not apply to type {} in dltrain", where,
                                 field->name(), p.type()));
            }
        }
        check_fields(p, tree, line);
        record_marks(p, tree, "", l.marks);
        l.bottoms.assign(p.bottom().begin(), p.bottom().end());
        l.tops.assign(p.top().begin(), p.top().end());
        for (const auto& spec : p.param()) {
            l.params.push_back(ParamSpec{spec.lr_mult(), spec.decay_mult()});
        }
        // Phase rules: include { phase: X } keeps the layer in X only, exclude the other.
        if (p.include_size() + p.exclude_size() > 1) {
            fail(line, fmt::format("{}: more than one include/exclude rule", where));
        }
        if (p.include_size() == 1 && p.include(0).has_phase()) {
            l.phase = p.include(0).phase() == caffe::TRAIN ? Phase::train : Phase::test;
        }
        if (p.exclude_size() == 1 && p.exclude(0).has_phase()) {
            l.phase = p.exclude(0).phase() == caffe::TRAIN ? Phase::test : Phase::train;
        }
        if (p.loss_weight_size() > 1) {
            fail(line, fmt::format("{}: one loss_weight per top is supported, for one top", where));
        }
        // Each type's own fields, by its reader below.
        using Reader = void (Converter::*)(const caffe::LayerParameter&, LayerConfig&, int,
                                           const std::string&) const;
        static const std::map<std::string, Reader> readers = {
            {"Data", &Converter::read_data},
            {"Convolution", &Converter::read_convolution},
            {"Pooling", &Converter::read_pooling},
            {"InnerProduct", &Converter::read_inner_product},
            {"ReLU", &Converter::read_relu},
            {"Dropout", &Converter::read_dropout},
            {"LRN", &Converter::read_lrn},
            {"BatchNorm", &Converter::read_batch_norm},
            {"Scale", &Converter::read_scale},
            {"Concat", &Converter::read_concat},
            {"Eltwise", &Converter::read_eltwise},
            {"SoftmaxWithLoss", &Converter::read_softmax_loss},
            {"Accuracy", &Converter::read_accuracy},
        };
        if (const auto reader = readers.find(p.type()); reader != readers.end()) {
            (this->*(reader->second))(p, l, line, where);
        }
        return l;
    }

    void read_data(const caffe::LayerParameter& p, LayerConfig& l, int line,
                   const std::string& where) const {
        const auto& d = p.data_param();
        // Checked against the source when it is read (data::check_backend): a file names
        // databases that need not exist where it is converted or validated.
        l.backend = d.backend() == caffe::DataParameter::LMDB ? "lmdb" : "leveldb";
        l.source = d.source();
        if (p.top_size() > 1) {
            l.label_source = d.source();
        }
        l.batch_size = to_int(d.batch_size(), line, where + ": batch_size");
        l.scale = p.transform_param().has_scale() ? p.transform_param().scale() : d.scale();
        l.mean_value.assign(p.transform_param().mean_value().begin(),
                            p.transform_param().mean_value().end());
        l.mean_file = p.transform_param().mean_file();
        // Caffe's older files say crop_size and mirror in data_param; Caffe moves them into
        // transform_param (UpgradeNetDataTransformation), and so does this.
        const auto& t = p.transform_param();
        l.crop_size =
            to_int(t.has_crop_size() ? t.crop_size() : d.crop_size(), line, where + ": crop_size");
        l.mirror = t.has_mirror() ? t.mirror() : d.mirror();
    }

    void read_convolution(const caffe::LayerParameter& p, LayerConfig& l, int line,
                          const std::string& where) const {
        const auto& c = p.convolution_param();
        if (c.axis() != 1) {
            fail(line, fmt::format("{}: axis {} (only 1)", where, c.axis()));
        }
        l.num_output = to_int(c.num_output(), line, where + ": num_output");
        l.kernel_size = one(c.kernel_size(), 0, line, where + ": kernel_size");
        l.stride = one(c.stride(), 1, line, where + ": stride");
        l.pad = one(c.pad(), 0, line, where + ": pad");
        l.group = to_int(c.group(), line, where + ": group");
        l.bias_term = c.bias_term();
        l.weight_filler =
            c.has_weight_filler() ? filler(c.weight_filler()) : FillerConfig{"constant"};
        l.bias_filler = filler(c.bias_filler());
    }

    void read_pooling(const caffe::LayerParameter& p, LayerConfig& l, int line,
                      const std::string& where) const {
        const auto& q = p.pooling_param();
        if (q.pool() == caffe::PoolingParameter::STOCHASTIC) {
            fail(line, fmt::format("{}: pool STOCHASTIC is not supported (MAX, AVE)", where));
        }
        if (q.round_mode() != caffe::PoolingParameter::CEIL) {
            fail(line, fmt::format("{}: round_mode FLOOR is not supported (CEIL)", where));
        }
        l.pool = q.pool() == caffe::PoolingParameter::MAX ? "max" : "ave";
        l.kernel_size = to_int(q.kernel_size(), line, where + ": kernel_size");
        l.stride = to_int(q.stride(), line, where + ": stride");
        l.pad = to_int(q.pad(), line, where + ": pad");
    }

    void read_inner_product(const caffe::LayerParameter& p, LayerConfig& l, int line,
                            const std::string& where) const {
        const auto& ip = p.inner_product_param();
        if (ip.axis() != 1) {
            fail(line, fmt::format("{}: axis {} (only 1)", where, ip.axis()));
        }
        l.num_output = to_int(ip.num_output(), line, where + ": num_output");
        l.bias_term = ip.bias_term();
        l.weight_filler =
            ip.has_weight_filler() ? filler(ip.weight_filler()) : FillerConfig{"constant"};
        l.bias_filler = filler(ip.bias_filler());
    }

    void read_relu(const caffe::LayerParameter& p, LayerConfig& /*l*/, int line,
                   const std::string& where) const {
        if (p.relu_param().negative_slope() != 0.0F) {
            fail(line, fmt::format("{}: negative_slope (leaky ReLU) is not supported", where));
        }
    }

    void read_dropout(const caffe::LayerParameter& p, LayerConfig& l, int /*line*/,
                      const std::string& /*where*/) const {
        l.dropout_ratio = p.dropout_param().dropout_ratio();
    }

    void read_lrn(const caffe::LayerParameter& p, LayerConfig& l, int line,
                  const std::string& where) const {
        const auto& n = p.lrn_param();
        if (n.norm_region() != caffe::LRNParameter::ACROSS_CHANNELS) {
            fail(line, fmt::format("{}: norm_region WITHIN_CHANNEL is not supported", where));
        }
        l.local_size = to_int(n.local_size(), line, where + ": local_size");
        l.alpha = n.alpha();
        l.beta = n.beta();
        l.k = n.k();
    }

    void read_batch_norm(const caffe::LayerParameter& p, LayerConfig& l, int /*line*/,
                         const std::string& /*where*/) const {
        const auto& b = p.batch_norm_param();
        if (b.has_use_global_stats()) {
            l.use_global_stats = b.use_global_stats();
        }
        l.moving_average_fraction = b.moving_average_fraction();
        l.eps = b.eps();
        // Caffe sets these parameters' lr_mult to 0 itself; old prototxts say so explicitly.
        for (auto& spec : l.params) {
            spec = ParamSpec{0.0F, 0.0F};
        }
    }

    void read_scale(const caffe::LayerParameter& p, LayerConfig& l, int line,
                    const std::string& where) const {
        const auto& s = p.scale_param();
        if (s.axis() != 1 || s.num_axes() != 1) {
            fail(line, fmt::format("{}: axis {} num_axes {} (only 1 and 1)", where, s.axis(),
                                   s.num_axes()));
        }
        l.bias_term = s.bias_term();
        if (s.has_filler()) {
            l.filler = filler(s.filler());
        }
        l.bias_filler = filler(s.bias_filler());
    }

    void read_concat(const caffe::LayerParameter& p, LayerConfig& l, int /*line*/,
                     const std::string& /*where*/) const {
        const auto& c = p.concat_param();
        l.axis = c.has_axis() ? c.axis() : static_cast<int>(c.concat_dim());
    }

    void read_eltwise(const caffe::LayerParameter& p, LayerConfig& l, int /*line*/,
                      const std::string& /*where*/) const {
        const auto& e = p.eltwise_param();
        l.operation = e.operation() == caffe::EltwiseParameter::PROD  ? "prod"
                      : e.operation() == caffe::EltwiseParameter::MAX ? "max"
                                                                      : "sum";
        l.coeff.assign(e.coeff().begin(), e.coeff().end());
    }

    void read_softmax_loss(const caffe::LayerParameter& p, LayerConfig& l, int line,
                           const std::string& where) const {
        if (p.softmax_param().axis() != 1) {
            fail(line,
                 fmt::format("{}: softmax axis {} (only 1)", where, p.softmax_param().axis()));
        }
        if (p.loss_param().normalization() == caffe::LossParameter::NONE ||
            (p.loss_param().has_normalize() && !p.loss_param().normalize())) {
            // Without ignore_label, FULL, VALID and BATCH_SIZE are all the batch mean.
            fail(line, fmt::format("{}: loss normalization NONE is not supported (the loss "
                                   "is the mean over the batch)",
                                   where));
        }
        l.loss_weight = p.loss_weight_size() == 1 ? p.loss_weight(0) : 1.0F;
    }

    void read_accuracy(const caffe::LayerParameter& p, LayerConfig& l, int line,
                       const std::string& where) const {
        if (p.accuracy_param().axis() != 1) {
            fail(line, fmt::format("{}: axis {} (only 1)", where, p.accuracy_param().axis()));
        }
        l.top_k = to_int(p.accuracy_param().top_k(), line, where + ": top_k");
    }

    std::vector<LayerConfig> net(const caffe::NetParameter& net, const Tree& tree) const {
        check_fields(net, &tree, 1);
        if (net.layer_size() == 0) {
            fail(1, "the net has no 'layer' entries (legacy V1 'layers' files are not supported: "
                    "upgrade them with Caffe's upgrade_net_proto_text)");
        }
        const pb::FieldDescriptor* field = net.GetDescriptor()->FindFieldByName("layer");
        std::vector<LayerConfig> layers;
        for (int i = 0; i < net.layer_size(); ++i) {
            const int line = line_of(&tree, field, i, 1);
            layers.push_back(layer(net.layer(i), tree.GetTreeForNested(field, i), line));
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
                {caffe::SolverParameter::ADAM, "Adam"}};
            const auto found = legacy.find(s.solver_type());
            if (found == legacy.end()) {
                fail(at("solver_type"), "solver_type: only SGD, NESTEROV and ADAM are supported");
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
        if (s.test_iter_size() > 1) {
            // The second one's line: the file gives one per test net, and dltrain has one.
            fail(line_of(&tree, s.GetDescriptor()->FindFieldByName("test_iter"), 1, 1),
                 "a second test_iter: one test_iter (one test net) is supported");
        }
        c.base_lr = s.base_lr();
        c.momentum = s.momentum();
        c.momentum2 = s.momentum2();
        c.delta = s.delta();
        c.weight_decay = s.weight_decay();
        c.gamma = s.gamma();
        c.power = s.power();
        c.stepsize = s.stepsize();
        c.stepvalues.assign(s.stepvalue().begin(), s.stepvalue().end());
        c.max_iter = s.max_iter();
        c.test_interval = s.test_interval();
        c.test_iter = s.test_iter_size() == 1 ? s.test_iter(0) : 0;
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
    return parse(read_text(file), solver).ok && (solver.has_net() || solver.has_train_net());
}

NetConfig read_prototxt(const std::filesystem::path& file) {
    const std::string text = read_text(file);
    // A solver names its net; a net file does not parse as a solver (or names none).
    caffe::SolverParameter solver;
    const Parsed as_solver = parse(text, solver);
    const bool names_net = solver.has_net() || solver.has_train_net();
    if (as_solver.ok && names_net) {
        const Converter converter(file);
        SourceMarks solver_marks;
        const SolverConfig solver_config = converter.solver(solver, *as_solver.tree, solver_marks);
        const std::string net_name = solver.has_net() ? solver.net() : solver.train_net();
        const std::filesystem::path net_file = net_path(file, net_name);
        std::error_code ec;
        if (!std::filesystem::exists(net_file, ec)) {
            const auto field =
                solver.GetDescriptor()->FindFieldByName(solver.has_net() ? "net" : "train_net");
            converter.fail(Converter::line_of(as_solver.tree.get(), field, -1, 1),
                           fmt::format("net '{}' not found (looked as given and next to the "
                                       "solver: {})",
                                       net_name, net_file.string()));
        }
        NetConfig config = net_from(net_file, read_text(net_file));
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
