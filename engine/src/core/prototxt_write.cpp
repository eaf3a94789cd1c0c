// `dltrain convert`: a config written as Caffe's net and solver prototxt (the inverse of
// prototxt_config.cpp, field for field, so that reading the result back gives the same config),
// or a prototxt config written as dltrain's YAML.
#include "io/atomic_file.hpp"

#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/train.hpp>

#include <caffe.pb.h>
#include <fmt/format.h>
#include <google/protobuf/text_format.h>

#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace dl {
namespace fs = std::filesystem;
namespace {

void put_filler(caffe::FillerParameter& out, const FillerConfig& in) {
    out.set_type(in.type);
    out.set_value(in.value);
    out.set_min(in.min);
    out.set_max(in.max);
    out.set_mean(in.mean);
    out.set_std(in.std);
    out.set_variance_norm(in.variance_norm == "fan_out"   ? caffe::FillerParameter::FAN_OUT
                          : in.variance_norm == "average" ? caffe::FillerParameter::AVERAGE
                                                          : caffe::FillerParameter::FAN_IN);
}

/// What a YAML config says that Caffe's format cannot: written out as a note, not dropped silently.
void note_lost(const LayerConfig& in, std::vector<std::string>& lost) {
    if (in.type != "Data") {
        return;
    }
    if (in.shuffle) {
        lost.push_back(fmt::format("layer '{}': shuffle (Caffe reads in file order)", in.name));
    }
    if (!in.label_source.empty() && in.label_source != in.source) {
        lost.push_back(fmt::format("layer '{}': label_source {} (Caffe's Data layer reads labels "
                                   "from its source)",
                                   in.name, in.label_source));
    }
    if (!in.shape.empty()) {
        lost.push_back(fmt::format("layer '{}': shape (Caffe takes it from the data)", in.name));
    }
}

void write_data(const LayerConfig& in, caffe::LayerParameter& layer) {
    caffe::DataParameter& data = *layer.mutable_data_param();
    data.set_source(in.source);
    data.set_batch_size(static_cast<unsigned>(in.batch_size));
    data.set_backend(in.backend == "leveldb" ? caffe::DataParameter::LEVELDB
                                             : caffe::DataParameter::LMDB);
    caffe::TransformationParameter& transform = *layer.mutable_transform_param();
    transform.set_scale(in.scale);
    for (const float mean : in.mean_value) {
        transform.add_mean_value(mean);
    }
    if (!in.mean_file.empty()) {
        transform.set_mean_file(in.mean_file);
    }
    if (in.crop_size > 0) {
        transform.set_crop_size(static_cast<unsigned>(in.crop_size));
    }
    if (in.mirror) {
        transform.set_mirror(true);
    }
}

void write_convolution(const LayerConfig& in, caffe::LayerParameter& layer) {
    caffe::ConvolutionParameter& conv = *layer.mutable_convolution_param();
    conv.set_num_output(static_cast<unsigned>(in.num_output));
    conv.add_kernel_size(static_cast<unsigned>(in.kernel_size));
    conv.add_stride(static_cast<unsigned>(in.stride));
    conv.add_pad(static_cast<unsigned>(in.pad));
    conv.set_group(static_cast<unsigned>(in.group));
    conv.set_bias_term(in.bias_term);
    put_filler(*conv.mutable_weight_filler(), in.weight_filler);
    put_filler(*conv.mutable_bias_filler(), in.bias_filler);
}

void write_pooling(const LayerConfig& in, caffe::LayerParameter& layer) {
    caffe::PoolingParameter& pool = *layer.mutable_pooling_param();
    pool.set_pool(in.pool == "ave" ? caffe::PoolingParameter::AVE : caffe::PoolingParameter::MAX);
    pool.set_kernel_size(static_cast<unsigned>(in.kernel_size));
    pool.set_stride(static_cast<unsigned>(in.stride));
    pool.set_pad(static_cast<unsigned>(in.pad));
}

void write_inner_product(const LayerConfig& in, caffe::LayerParameter& layer) {
    caffe::InnerProductParameter& ip = *layer.mutable_inner_product_param();
    ip.set_num_output(static_cast<unsigned>(in.num_output));
    ip.set_bias_term(in.bias_term);
    put_filler(*ip.mutable_weight_filler(), in.weight_filler);
    put_filler(*ip.mutable_bias_filler(), in.bias_filler);
}

void write_dropout(const LayerConfig& in, caffe::LayerParameter& layer) {
    layer.mutable_dropout_param()->set_dropout_ratio(in.dropout_ratio);
}

void write_lrn(const LayerConfig& in, caffe::LayerParameter& layer) {
    caffe::LRNParameter& lrn = *layer.mutable_lrn_param();
    lrn.set_local_size(static_cast<unsigned>(in.local_size));
    lrn.set_alpha(in.alpha);
    lrn.set_beta(in.beta);
    lrn.set_k(in.k);
}

void write_batch_norm(const LayerConfig& in, caffe::LayerParameter& layer) {
    caffe::BatchNormParameter& bn = *layer.mutable_batch_norm_param();
    if (in.use_global_stats) {
        bn.set_use_global_stats(*in.use_global_stats);
    }
    bn.set_moving_average_fraction(in.moving_average_fraction);
    bn.set_eps(in.eps);
}

void write_scale(const LayerConfig& in, caffe::LayerParameter& layer) {
    caffe::ScaleParameter& scale = *layer.mutable_scale_param();
    scale.set_bias_term(in.bias_term);
    put_filler(*scale.mutable_filler(), in.filler);
    put_filler(*scale.mutable_bias_filler(), in.bias_filler);
}

void write_concat(const LayerConfig& in, caffe::LayerParameter& layer) {
    layer.mutable_concat_param()->set_axis(in.axis);
}

void write_eltwise(const LayerConfig& in, caffe::LayerParameter& layer) {
    caffe::EltwiseParameter& eltwise = *layer.mutable_eltwise_param();
    eltwise.set_operation(in.operation == "prod"  ? caffe::EltwiseParameter::PROD
                          : in.operation == "max" ? caffe::EltwiseParameter::MAX
                                                  : caffe::EltwiseParameter::SUM);
    for (const float c : in.coeff) {
        eltwise.add_coeff(c);
    }
}

void write_softmax_loss(const LayerConfig& in, caffe::LayerParameter& layer) {
    layer.add_loss_weight(in.loss_weight);
}

void write_accuracy(const LayerConfig& in, caffe::LayerParameter& layer) {
    layer.mutable_accuracy_param()->set_top_k(static_cast<unsigned>(in.top_k));
}

// Each type's own fields, by its writer above.
const std::map<std::string, void (*)(const LayerConfig&, caffe::LayerParameter&)>& type_writers() {
    static const std::map<std::string, void (*)(const LayerConfig&, caffe::LayerParameter&)>
        writers = {
            {"Data", &write_data},
            {"Convolution", &write_convolution},
            {"Pooling", &write_pooling},
            {"InnerProduct", &write_inner_product},
            {"Dropout", &write_dropout},
            {"LRN", &write_lrn},
            {"BatchNorm", &write_batch_norm},
            {"Scale", &write_scale},
            {"Concat", &write_concat},
            {"Eltwise", &write_eltwise},
            {"SoftmaxWithLoss", &write_softmax_loss},
            {"Accuracy", &write_accuracy},
        };
    return writers;
}

caffe::NetParameter net_message(const NetConfig& config, std::vector<std::string>& lost) {
    caffe::NetParameter net;
    net.set_name(config.name);
    for (const LayerConfig& in : config.layers) {
        note_lost(in, lost);
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
        for (const ParamSpec& spec : in.params) {
            caffe::ParamSpec& param = *layer.add_param();
            param.set_lr_mult(spec.lr_mult);
            param.set_decay_mult(spec.decay_mult);
        }
        if (const auto writer = type_writers().find(in.type); writer != type_writers().end()) {
            writer->second(in, layer);
        }
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
    if (s.test_iter > 0) {
        solver.add_test_iter(s.test_iter);
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
