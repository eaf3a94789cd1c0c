// Caffe's UpgradeV1LayerParameter, by reflection: V1 and today's LayerParameter share the names
// and message types of their common fields (bottom, top, include, every *_param), so those are
// copied by name; the rest (the type enum, blobs_lr, weight_decay, param names) are Caffe's
// renames.

#include "config/prototxt_upgrade.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
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

} // namespace

caffe::LayerParameter upgrade_v1_layer(const caffe::V1LayerParameter& v1, std::string& why) {
    caffe::LayerParameter layer;
    why.clear();
    if (v1.has_layer()) {
        why = "a V0 layer (Caffe's format before May 2014, 'layers { layer { … } }'): upgrade "
              "the file with Caffe's upgrade_net_proto_text, then give dltrain the upgraded one";
        return layer;
    }
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

} // namespace dl
