// `dltrain convert`: a config written as Caffe's net and solver prototxt (the inverse of
// prototxt_config.cpp, field for field, so that reading the result back gives the same config),
// or a prototxt config written as dltrain's YAML.
#include "io/atomic_file.hpp"
#include "net/layer_kind.hpp"

#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/train.hpp>

#include <caffe.pb.h>
#include <fmt/format.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <iostream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dl {
namespace fs = std::filesystem;
namespace {

namespace pb = google::protobuf;

void put_filler(caffe::FillerParameter& out, const FillerConfig& in) {
    out.set_type(in.type);
    out.set_value(in.value);
    out.set_min(in.min);
    out.set_max(in.max);
    out.set_mean(in.mean);
    out.set_std(in.std);
    if (in.sparse >= 0) {
        out.set_sparse(in.sparse);
    }
    out.set_variance_norm(in.variance_norm == "fan_out"   ? caffe::FillerParameter::FAN_OUT
                          : in.variance_norm == "average" ? caffe::FillerParameter::AVERAGE
                                                          : caffe::FillerParameter::FAN_IN);
}

// A layer's own fields, written into its LayerParameter as its kind lists them (net/layers/):
// the inverse of the prototxt reader's, field for field.
class ProtoWrite final : public FieldVisitor {
public:
    explicit ProtoWrite(caffe::LayerParameter& layer) : m_layer(layer) {}

    void integer(const Field& f, int& value) override {
        if (const auto at = target(f, value == 0)) {
            const pb::Reflection* r = at->message->GetReflection();
            if (at->field->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT32) {
                r->SetInt32(at->message, at->field, value);
            } else if (at->field->is_repeated()) {
                r->AddUInt32(at->message, at->field, static_cast<std::uint32_t>(value));
            } else {
                r->SetUInt32(at->message, at->field, static_cast<std::uint32_t>(value));
            }
        }
    }
    void number(const Field& f, float& value) override {
        if (const auto at = target(f, value == 0.0F)) {
            const pb::Reflection* r = at->message->GetReflection();
            if (at->field->is_repeated()) {
                r->AddFloat(at->message, at->field, value);
            } else {
                r->SetFloat(at->message, at->field, value);
            }
        }
    }
    void flag(const Field& f, bool& value) override {
        if (const auto at = target(f, !value)) {
            at->message->GetReflection()->SetBool(at->message, at->field, value);
        }
    }
    void flag(const Field& f, std::optional<bool>& value) override {
        // Set, it is written whatever its value (unset and false differ: the test net's rule).
        if (const auto at = target(f, !value.has_value()); at && value) {
            at->message->GetReflection()->SetBool(at->message, at->field, *value);
        }
    }
    void text(const Field& f, std::string& value) override {
        const auto at = target(f, value.empty());
        if (!at) {
            return;
        }
        const pb::Reflection* r = at->message->GetReflection();
        if (at->field->cpp_type() != pb::FieldDescriptor::CPPTYPE_ENUM) {
            r->SetString(at->message, at->field, value);
            return;
        }
        std::string name = value;
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return std::toupper(c); });
        const pb::EnumValueDescriptor* named = at->field->enum_type()->FindValueByName(name);
        if (named == nullptr) {
            throw std::logic_error(
                fmt::format("{}: no value {} (the validator passed it)", f.key, name));
        }
        r->SetEnum(at->message, at->field, named);
    }
    void numbers(const Field& f, std::vector<float>& value) override {
        if (const auto at = target(f, value.empty())) {
            for (const float each : value) {
                at->message->GetReflection()->AddFloat(at->message, at->field, each);
            }
        }
    }
    // A repeated uint32 (Slice's slice_point); a BlobShape (Reshape's) or a repeated one
    // (Input's input_param.shape): one shape of these dims.
    void integers(const Field& f, std::vector<int>& value) override {
        const auto at = target(f, value.empty());
        if (!at) {
            return;
        }
        const pb::Reflection* r = at->message->GetReflection();
        if (at->field->cpp_type() == pb::FieldDescriptor::CPPTYPE_UINT32) {
            for (const int each : value) {
                r->AddUInt32(at->message, at->field, static_cast<std::uint32_t>(each));
            }
            return;
        }
        if (at->field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) {
            throw std::logic_error(std::string("no prototxt writer for list ") + f.key);
        }
        pb::Message* shape = at->field->is_repeated() ? r->AddMessage(at->message, at->field)
                                                      : r->MutableMessage(at->message, at->field);
        const pb::FieldDescriptor* dim = shape->GetDescriptor()->FindFieldByName("dim");
        for (const int size : value) {
            shape->GetReflection()->AddInt64(shape, dim, size);
        }
    }
    void filler(const Field& f, FillerConfig& value) override {
        if (const auto at = target(f, false)) {
            const pb::Reflection* r = at->message->GetReflection();
            put_filler(dynamic_cast<caffe::FillerParameter&>(
                           at->field->is_repeated() ? *r->AddMessage(at->message, at->field)
                                                    : *r->MutableMessage(at->message, at->field)),
                       value);
        }
    }

private:
    struct Target {
        pb::Message* message;
        const pb::FieldDescriptor* field;
    };
    // Where `f` is written; nothing for a YAML-only key or an empty value left out.
    std::optional<Target> target(const Field& f, bool empty) {
        if (f.caffe.message == nullptr || (empty && !f.written_when_empty)) {
            return std::nullopt;
        }
        pb::Message* message = &m_layer;
        if (*f.caffe.message != '\0') {
            const pb::FieldDescriptor* holder =
                m_layer.GetDescriptor()->FindFieldByName(f.caffe.message);
            message = m_layer.GetReflection()->MutableMessage(&m_layer, holder);
        }
        const pb::FieldDescriptor* field = message->GetDescriptor()->FindFieldByName(f.caffe.field);
        if (field == nullptr) {
            throw std::logic_error(std::string(f.caffe.message) + " has no " + f.caffe.field);
        }
        return Target{message, field};
    }
    caffe::LayerParameter& m_layer;
};

caffe::NetParameter net_message(const NetConfig& config, std::vector<std::string>& lost) {
    caffe::NetParameter net;
    net.set_name(config.name);
    for (const LayerConfig& in : config.layers) {
        caffe::LayerParameter& layer = *net.add_layer();
        layer.set_name(in.name);
        layer.set_type(in.type);
        for (const auto& bottom : in.bottoms) {
            layer.add_bottom(bottom);
        }
        for (const auto& top : in.tops) {
            layer.add_top(top);
        }
        if (in.phase) {
            layer.add_include()->set_phase(*in.phase == Phase::train ? caffe::TRAIN : caffe::TEST);
        }
        for (const auto& [rules, add] :
             {std::pair{&in.include, &caffe::LayerParameter::add_include},
              std::pair{&in.exclude, &caffe::LayerParameter::add_exclude}}) {
            for (const NetStateRule& rule : *rules) {
                caffe::NetStateRule& out = *(layer.*add)();
                if (rule.phase) {
                    out.set_phase(*rule.phase == Phase::train ? caffe::TRAIN : caffe::TEST);
                }
                if (rule.min_level) {
                    out.set_min_level(*rule.min_level);
                }
                if (rule.max_level) {
                    out.set_max_level(*rule.max_level);
                }
                for (const auto& stage : rule.stages) {
                    out.add_stage(stage);
                }
                for (const auto& stage : rule.not_stages) {
                    out.add_not_stage(stage);
                }
            }
        }
        for (const ParamSpec& spec : in.params) {
            caffe::ParamSpec& param = *layer.add_param();
            param.set_lr_mult(spec.lr_mult);
            param.set_decay_mult(spec.decay_mult);
            if (!spec.name.empty()) {
                param.set_name(spec.name);
            }
        }
        const LayerKind& kind = layer_kind(in.type);
        LayerConfig copy = in; // the fields are visited through a mutable config
        if (kind.to_caffe != nullptr) {
            kind.to_caffe(copy, lost); // what Caffe's format cannot say is noted, not dropped
        }
        ProtoWrite writer(layer);
        kind.fields(writer, copy);
    }
    return net;
}

caffe::SolverParameter solver_message(const SolverConfig& s, const std::string& net_file,
                                      std::vector<std::string>& lost) {
    caffe::SolverParameter solver;
    solver.set_net(net_file);
    solver.set_type(s.type);
    solver.set_base_lr(s.base_lr);
    solver.set_momentum(s.momentum);
    solver.set_momentum2(s.momentum2);
    solver.set_delta(s.delta);
    solver.set_rms_decay(s.rms_decay);
    solver.set_weight_decay(s.weight_decay);
    solver.set_lr_policy(s.lr_policy);
    solver.set_gamma(s.gamma);
    solver.set_power(s.power);
    solver.set_stepsize(s.stepsize);
    for (const int value : s.stepvalues) {
        solver.add_stepvalue(value);
    }
    solver.set_max_iter(s.max_iter);
    solver.set_test_interval(s.test_interval);
    if (!s.test_nets.empty()) {
        for (const auto& net : s.test_nets) {
            solver.add_test_iter(net.test_iter);
            caffe::NetState& state = *solver.add_test_state();
            state.set_level(net.state.level);
            for (const auto& stage : net.state.stages) {
                state.add_stage(stage);
            }
        }
    } else if (s.test_iter > 0) {
        solver.add_test_iter(s.test_iter);
    }
    if (s.train_state.level != 0 || !s.train_state.stages.empty()) {
        caffe::NetState& state = *solver.mutable_train_state();
        state.set_level(s.train_state.level);
        for (const auto& stage : s.train_state.stages) {
            state.add_stage(stage);
        }
    }
    solver.set_test_initialization(s.test_initialization);
    solver.set_display(s.display);
    solver.set_snapshot(s.snapshot);
    solver.set_random_seed(s.random_seed);
    if (s.keep_checkpoints != SolverConfig{}.keep_checkpoints) {
        lost.push_back(fmt::format("solver: keep_checkpoints {} (Caffe keeps every snapshot)",
                                   s.keep_checkpoints));
    }
    return solver;
}

std::string text_of(const google::protobuf::Message& message) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(message, &text);
    return text;
}

} // namespace

int convert_config(const ConvertOptions& options) {
    const NetConfig config = load_config(options.config); // a .prototxt is read as Caffe's
    const bool to_prototxt = options.output.extension() == ".prototxt";
    if (!to_prototxt) {
        io::write_atomically(options.output, to_yaml(config));
        std::cerr << fmt::format("dltrain: {} written from {}\n", options.output.string(),
                                 options.config.string());
        return exit_code::finished;
    }
    std::vector<std::string> lost;
    const std::string net = text_of(net_message(config, lost));
    std::string solver;
    if (options.solver_output) {
        // The solver names the net as Caffe resolves it: beside the solver file.
        solver = text_of(solver_message(config.solver, options.output.filename().string(), lost));
    }
    io::write_atomically(options.output, net);
    if (options.solver_output) {
        io::write_atomically(*options.solver_output, solver);
    }
    for (const auto& what : lost) {
        std::cerr << "dltrain: note: not in Caffe's format, left out: " << what << '\n';
    }
    std::cerr << fmt::format("dltrain: {}{} written from {}\n", options.output.string(),
                             options.solver_output ? " and " + options.solver_output->string() : "",
                             options.config.string());
    return exit_code::finished;
}

} // namespace dl
