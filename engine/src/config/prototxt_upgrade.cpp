// Caffe's UpgradeV1LayerParameter, by reflection: V1 and today's LayerParameter share the names
// and message types of their common fields (bottom, top, include, every *_param), so those are
// copied by name; the rest (the type enum, blobs_lr, weight_decay, param names) are Caffe's
// renames. A V0 net becomes V1 layers first (UpgradeV0Net), its fields moved by one table.

#include "config/prototxt_upgrade.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

namespace dl {
namespace {

namespace pb = google::protobuf;

// UpgradeV1LayerType's table.
const std::map<caffe::V1LayerParameter::LayerType, const char*>& v1_type_names() {
    using V1 = caffe::V1LayerParameter;
    static const std::map<V1::LayerType, const char*> names = {
        {V1::ABSVAL, "AbsVal"},
        {V1::ACCURACY, "Accuracy"},
        {V1::ARGMAX, "ArgMax"},
        {V1::BNLL, "BNLL"},
        {V1::CONCAT, "Concat"},
        {V1::CONTRASTIVE_LOSS, "ContrastiveLoss"},
        {V1::CONVOLUTION, "Convolution"},
        {V1::DECONVOLUTION, "Deconvolution"},
        {V1::DATA, "Data"},
        {V1::DROPOUT, "Dropout"},
        {V1::DUMMY_DATA, "DummyData"},
        {V1::EUCLIDEAN_LOSS, "EuclideanLoss"},
        {V1::ELTWISE, "Eltwise"},
        {V1::EXP, "Exp"},
        {V1::FLATTEN, "Flatten"},
        {V1::HDF5_DATA, "HDF5Data"},
        {V1::HDF5_OUTPUT, "HDF5Output"},
        {V1::HINGE_LOSS, "HingeLoss"},
        {V1::IM2COL, "Im2col"},
        {V1::IMAGE_DATA, "ImageData"},
        {V1::INFOGAIN_LOSS, "InfogainLoss"},
        {V1::INNER_PRODUCT, "InnerProduct"},
        {V1::LRN, "LRN"},
        {V1::MEMORY_DATA, "MemoryData"},
        {V1::MULTINOMIAL_LOGISTIC_LOSS, "MultinomialLogisticLoss"},
        {V1::MVN, "MVN"},
        {V1::POOLING, "Pooling"},
        {V1::POWER, "Power"},
        {V1::RELU, "ReLU"},
        {V1::SIGMOID, "Sigmoid"},
        {V1::SIGMOID_CROSS_ENTROPY_LOSS, "SigmoidCrossEntropyLoss"},
        {V1::SILENCE, "Silence"},
        {V1::SOFTMAX, "Softmax"},
        {V1::SOFTMAX_LOSS, "SoftmaxWithLoss"},
        {V1::SPLIT, "Split"},
        {V1::SLICE, "Slice"},
        {V1::TANH, "TanH"},
        {V1::WINDOW_DATA, "WindowData"},
        {V1::THRESHOLD, "Threshold"}};
    return names;
}

// One set field of `from` into the field of the same name in `to`.
void copy_field(const pb::Message& from, const pb::FieldDescriptor* field, pb::Message& to,
                const pb::FieldDescriptor* target) {
    const pb::Reflection* in = from.GetReflection();
    const pb::Reflection* out = to.GetReflection();
    if (!field->is_repeated()) {
        if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
            out->MutableMessage(&to, target)->CopyFrom(in->GetMessage(from, field));
        } else {
            out->SetString(&to, target, in->GetString(from, field)); // name: the only scalar
        }
        return;
    }
    for (int i = 0; i < in->FieldSize(from, field); ++i) {
        switch (field->cpp_type()) {
        case pb::FieldDescriptor::CPPTYPE_MESSAGE:
            out->AddMessage(&to, target)->CopyFrom(in->GetRepeatedMessage(from, field, i));
            break;
        case pb::FieldDescriptor::CPPTYPE_STRING:
            out->AddString(&to, target, in->GetRepeatedString(from, field, i));
            break;
        default: // loss_weight
            out->AddFloat(&to, target, in->GetRepeatedFloat(from, field, i));
            break;
        }
    }
}

// UpgradeV0LayerType's table.
const std::map<std::string, caffe::V1LayerParameter::LayerType, std::less<>>& v0_types() {
    using V1 = caffe::V1LayerParameter;
    static const std::map<std::string, V1::LayerType, std::less<>> types = {
        {"accuracy", V1::ACCURACY},
        {"bnll", V1::BNLL},
        {"concat", V1::CONCAT},
        {"conv", V1::CONVOLUTION},
        {"data", V1::DATA},
        {"dropout", V1::DROPOUT},
        {"euclidean_loss", V1::EUCLIDEAN_LOSS},
        {"flatten", V1::FLATTEN},
        {"hdf5_data", V1::HDF5_DATA},
        {"hdf5_output", V1::HDF5_OUTPUT},
        {"im2col", V1::IM2COL},
        {"images", V1::IMAGE_DATA},
        {"infogain_loss", V1::INFOGAIN_LOSS},
        {"innerproduct", V1::INNER_PRODUCT},
        {"lrn", V1::LRN},
        {"multinomial_logistic_loss", V1::MULTINOMIAL_LOGISTIC_LOSS},
        {"pool", V1::POOLING},
        {"relu", V1::RELU},
        {"sigmoid", V1::SIGMOID},
        {"softmax", V1::SOFTMAX},
        {"softmax_loss", V1::SOFTMAX_LOSS},
        {"split", V1::SPLIT},
        {"tanh", V1::TANH},
        {"window_data", V1::WINDOW_DATA}};
    return types;
}

// Where UpgradeV0LayerParameter puts each V0 field: for a layer of `type` ("*": any type), the
// V1 field at the dotted path `to`. A V0 field set on a type with no row here has no place.
struct Move {
    std::string_view from;
    std::string_view type;
    std::string_view to;
};
constexpr Move k_moves[] = {{"num_output", "conv", "convolution_param.num_output"},
                            {"num_output", "innerproduct", "inner_product_param.num_output"},
                            {"biasterm", "conv", "convolution_param.bias_term"},
                            {"biasterm", "innerproduct", "inner_product_param.bias_term"},
                            {"weight_filler", "conv", "convolution_param.weight_filler"},
                            {"weight_filler", "innerproduct", "inner_product_param.weight_filler"},
                            {"bias_filler", "conv", "convolution_param.bias_filler"},
                            {"bias_filler", "innerproduct", "inner_product_param.bias_filler"},
                            {"pad", "conv", "convolution_param.pad"},
                            {"pad", "pool", "pooling_param.pad"},
                            {"kernelsize", "conv", "convolution_param.kernel_size"},
                            {"kernelsize", "pool", "pooling_param.kernel_size"},
                            {"group", "conv", "convolution_param.group"},
                            {"stride", "conv", "convolution_param.stride"},
                            {"stride", "pool", "pooling_param.stride"},
                            {"pool", "pool", "pooling_param.pool"},
                            {"dropout_ratio", "dropout", "dropout_param.dropout_ratio"},
                            {"local_size", "lrn", "lrn_param.local_size"},
                            {"alpha", "lrn", "lrn_param.alpha"},
                            {"beta", "lrn", "lrn_param.beta"},
                            {"k", "lrn", "lrn_param.k"},
                            {"source", "data", "data_param.source"},
                            {"source", "hdf5_data", "hdf5_data_param.source"},
                            {"source", "images", "image_data_param.source"},
                            {"source", "window_data", "window_data_param.source"},
                            {"source", "infogain_loss", "infogain_loss_param.source"},
                            {"batchsize", "data", "data_param.batch_size"},
                            {"batchsize", "hdf5_data", "hdf5_data_param.batch_size"},
                            {"batchsize", "images", "image_data_param.batch_size"},
                            {"batchsize", "window_data", "window_data_param.batch_size"},
                            {"rand_skip", "data", "data_param.rand_skip"},
                            {"rand_skip", "images", "image_data_param.rand_skip"},
                            {"shuffle_images", "images", "image_data_param.shuffle"},
                            {"new_height", "images", "image_data_param.new_height"},
                            {"new_width", "images", "image_data_param.new_width"},
                            {"concat_dim", "concat", "concat_param.concat_dim"},
                            {"det_fg_threshold", "window_data", "window_data_param.fg_threshold"},
                            {"det_bg_threshold", "window_data", "window_data_param.bg_threshold"},
                            {"det_fg_fraction", "window_data", "window_data_param.fg_fraction"},
                            {"det_context_pad", "window_data", "window_data_param.context_pad"},
                            {"det_crop_mode", "window_data", "window_data_param.crop_mode"},
                            {"hdf5_output_param", "hdf5_output", "hdf5_output_param"},
                            {"scale", "*", "transform_param.scale"},
                            {"meanfile", "*", "transform_param.mean_file"},
                            {"cropsize", "*", "transform_param.crop_size"},
                            {"mirror", "*", "transform_param.mirror"},
                            {"blobs_lr", "*", "blobs_lr"},
                            {"weight_decay", "*", "weight_decay"}};

const Move* move_of(std::string_view field, std::string_view type) {
    for (const Move& move : k_moves) {
        if (move.from == field && (move.type == type || move.type == "*")) {
            return &move;
        }
    }
    return nullptr;
}

// Element `i` of `field` in `from` (i < 0: the singular field) into `target` of `to`, which
// differs from the source only in integer width, an enum of the same names, or being repeated.
void move_value(const pb::Message& from, const pb::FieldDescriptor* field, int i, pb::Message& to,
                const pb::FieldDescriptor* target) {
    const pb::Reflection* in = from.GetReflection();
    const pb::Reflection* out = to.GetReflection();
    const bool add = target->is_repeated();
    switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
        (add ? out->AddMessage(&to, target) : out->MutableMessage(&to, target))
            ->CopyFrom(in->GetMessage(from, field));
        return;
    case pb::FieldDescriptor::CPPTYPE_STRING: {
        const std::string value = in->GetString(from, field);
        add ? out->AddString(&to, target, value) : out->SetString(&to, target, value);
        return;
    }
    case pb::FieldDescriptor::CPPTYPE_BOOL: {
        const bool value = in->GetBool(from, field);
        add ? out->AddBool(&to, target, value) : out->SetBool(&to, target, value);
        return;
    }
    case pb::FieldDescriptor::CPPTYPE_FLOAT: {
        const float value =
            i < 0 ? in->GetFloat(from, field) : in->GetRepeatedFloat(from, field, i);
        add ? out->AddFloat(&to, target, value) : out->SetFloat(&to, target, value);
        return;
    }
    case pb::FieldDescriptor::CPPTYPE_ENUM: { // V0's PoolMethod: the same names as Pooling's
        const pb::EnumValueDescriptor* value =
            target->enum_type()->FindValueByName(in->GetEnum(from, field)->name());
        add ? out->AddEnum(&to, target, value) : out->SetEnum(&to, target, value);
        return;
    }
    default: { // uint32 and int32 (V0's new_height is signed, ImageData's is not)
        const std::int64_t value = field->cpp_type() == pb::FieldDescriptor::CPPTYPE_UINT32
                                       ? in->GetUInt32(from, field)
                                       : in->GetInt32(from, field);
        add ? out->AddUInt32(&to, target, static_cast<std::uint32_t>(value))
            : out->SetUInt32(&to, target, static_cast<std::uint32_t>(value));
        return;
    }
    }
}

// Every set field of `from` to the path `to` in `layer`: a nested message per dot.
void move_field(const pb::Message& from, const pb::FieldDescriptor* field, std::string_view to,
                caffe::V1LayerParameter& layer) {
    pb::Message* message = &layer;
    for (std::size_t dot = to.find('.'); dot != std::string_view::npos; dot = to.find('.')) {
        const pb::FieldDescriptor* nested =
            message->GetDescriptor()->FindFieldByName(std::string(to.substr(0, dot)));
        message = message->GetReflection()->MutableMessage(message, nested);
        to.remove_prefix(dot + 1);
    }
    const pb::FieldDescriptor* target = message->GetDescriptor()->FindFieldByName(std::string(to));
    if (!field->is_repeated()) {
        move_value(from, field, -1, *message, target);
        return;
    }
    for (int i = 0; i < from.GetReflection()->FieldSize(from, field); ++i) {
        move_value(from, field, i, *message, target);
    }
}

// UpgradeV0LayerParameter: one V0 entry (its `layer` and its bottoms and tops) as a V1 layer.
caffe::V1LayerParameter upgrade_v0_layer(const caffe::V1LayerParameter& entry, std::string& why) {
    caffe::V1LayerParameter layer;
    const caffe::V0LayerParameter& v0 = entry.layer();
    layer.mutable_bottom()->CopyFrom(entry.bottom());
    layer.mutable_top()->CopyFrom(entry.top());
    layer.set_name(v0.name());
    const auto type = v0_types().find(v0.type());
    if (type == v0_types().end()) {
        why = fmt::format("V0 layer type '{}' has no name in Caffe's upgrade", v0.type());
        return layer;
    }
    layer.set_type(type->second);
    std::vector<const pb::FieldDescriptor*> fields;
    v0.GetReflection()->ListFields(v0, &fields);
    for (const pb::FieldDescriptor* field : fields) {
        const std::string& name = field->name();
        // new_num and new_channels: Caffe's upgrade drops them too (no layer ever read them).
        if (name == "name" || name == "type" || name == "new_num" || name == "new_channels") {
            continue;
        }
        if (name == "blobs") {
            why = "weights (blobs) inside a prototxt: give them as a .caffemodel with --weights";
            return layer;
        }
        const Move* move = move_of(name, v0.type());
        if (move == nullptr) {
            why = fmt::format("V0 field '{}' has no place in a '{}' layer (Caffe's upgrade "
                              "finds none either)",
                              name, v0.type());
            return layer;
        }
        move_field(v0, field, move->to, layer);
    }
    return layer;
}

} // namespace

caffe::LayerParameter upgrade_v1_layer(const caffe::V1LayerParameter& v1, std::string& why) {
    caffe::LayerParameter layer;
    why.clear();
    if (v1.blobs_size() != 0) {
        why = "weights (blobs) inside a prototxt: give them as a .caffemodel with --weights";
        return layer;
    }
    const auto type = v1_type_names().find(v1.type());
    if (type == v1_type_names().end()) {
        why = fmt::format("V1 layer type {} has no name in Caffe's upgrade",
                          caffe::V1LayerParameter::LayerType_Name(v1.type()));
        return layer;
    }
    layer.set_type(type->second);
    const pb::Reflection* reflection = v1.GetReflection();
    std::vector<const pb::FieldDescriptor*> fields;
    reflection->ListFields(v1, &fields);
    for (const pb::FieldDescriptor* field : fields) {
        const pb::FieldDescriptor* target =
            caffe::LayerParameter::descriptor()->FindFieldByName(field->name());
        // Same name and type: copied. The V1-only fields are Caffe's renames, below.
        if (target != nullptr && target->type() == field->type() &&
            target->is_repeated() == field->is_repeated() &&
            (target->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE ||
             target->message_type() == field->message_type())) {
            copy_field(v1, field, layer, target);
        }
    }
    layer.clear_param(); // V1's `param` is names; today's is ParamSpecs, rebuilt below
    const int specs = std::max(
        {v1.param_size(), v1.blobs_lr_size(), v1.weight_decay_size(), v1.blob_share_mode_size()});
    for (int i = 0; i < specs; ++i) {
        caffe::ParamSpec& spec = *layer.add_param();
        if (i < v1.param_size()) {
            spec.set_name(v1.param(i));
        }
        if (i < v1.blobs_lr_size()) {
            spec.set_lr_mult(v1.blobs_lr(i));
        }
        if (i < v1.weight_decay_size()) {
            spec.set_decay_mult(v1.weight_decay(i));
        }
        if (i < v1.blob_share_mode_size()) {
            spec.set_share_mode(v1.blob_share_mode(i) == caffe::V1LayerParameter::STRICT
                                    ? caffe::ParamSpec::STRICT
                                    : caffe::ParamSpec::PERMISSIVE);
        }
    }
    return layer;
}

bool is_v0_net(const caffe::NetParameter& net) {
    return std::any_of(net.layers().begin(), net.layers().end(),
                       [](const caffe::V1LayerParameter& entry) { return entry.has_layer(); });
}

V0Upgrade upgrade_v0_net(const caffe::NetParameter& net) {
    V0Upgrade out;
    const auto fail = [&out](int entry, std::string why) {
        out.layers.clear();
        out.origin.clear();
        out.failed = entry;
        out.why = std::move(why);
        return out;
    };
    // UpgradeV0PaddingLayers: the entry that last wrote each blob (-1: a net input).
    std::map<std::string, int> writer;
    for (const std::string& input : net.input()) {
        writer[input] = -1;
    }
    std::vector<caffe::V1LayerParameter> folded;
    for (int i = 0; i < net.layers_size(); ++i) {
        const caffe::V1LayerParameter& entry = net.layers(i);
        if (!entry.has_layer()) {
            return fail(i, "a V1 layer among V0 ones ('layers { layer { … } }'): give the net "
                           "in one format");
        }
        const std::string& type = entry.layer().type();
        if (type != "padding") {
            folded.push_back(entry);
            out.origin.push_back(i);
        }
        for (int j = 0; j < entry.bottom_size(); ++j) {
            const auto from = writer.find(entry.bottom(j));
            if (from == writer.end()) {
                return fail(i, fmt::format("bottom '{}' is neither a net input nor an earlier "
                                           "layer's top",
                                           entry.bottom(j)));
            }
            if (from->second < 0 || net.layers(from->second).layer().type() != "padding") {
                continue;
            }
            const caffe::V1LayerParameter& padding = net.layers(from->second);
            if (type != "conv" && type != "pool") {
                return fail(i, fmt::format("padding layer '{}' feeds a '{}' layer; Caffe folds "
                                           "padding only into a conv or pool layer",
                                           padding.layer().name(), type));
            }
            if (entry.bottom_size() != 1 || padding.bottom_size() != 1 || padding.top_size() != 1) {
                return fail(i, fmt::format("padding layer '{}' and the layer it feeds take one "
                                           "bottom each, and the padding gives one top",
                                           padding.layer().name()));
            }
            folded.back().mutable_layer()->set_pad(padding.layer().pad());
            folded.back().set_bottom(j, padding.bottom(0));
        }
        for (const std::string& top : entry.top()) {
            writer[top] = i;
        }
    }
    for (std::size_t k = 0; k < folded.size(); ++k) {
        std::string why;
        out.layers.push_back(upgrade_v0_layer(folded[k], why));
        if (!why.empty()) {
            return fail(out.origin[k], why);
        }
    }
    return out;
}

} // namespace dl
