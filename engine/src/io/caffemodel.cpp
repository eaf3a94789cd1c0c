#include "io/caffemodel.hpp"

#include "io/atomic_file.hpp"
#include "io/regular_file.hpp"

#include <dl/error.hpp>
#include <dl/tensor.hpp>

#include <caffe.pb.h>
#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <climits>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dl::io {
namespace fs = std::filesystem;
namespace {

// protobuf's own parse limit is 2 GiB; VGG-16's weights are 528 MiB.
constexpr std::uint64_t k_max_file = (std::uint64_t{2} << 30U) - 1;
// A parsed message takes hundreds of bytes (a LayerParameter about a kilobyte) where the file
// spends two or three on an empty one: 20 MB of empty layers parsed to 4.3 GB. Counted before
// parsing, against far more than any Caffe net has (ResNet-152: 600 layers, 900 blobs).
constexpr std::uint64_t k_max_layers = 100'000;
constexpr std::uint64_t k_max_blobs = 1'000'000;

struct Blob {
    std::string layer;
    int index = 0;
    const ::caffe::BlobProto* proto = nullptr;
};

/// The blob's shape as dltrain stores the parameter: the N-D `shape`, or the legacy 4-D dims
/// with their leading 1s dropped (V1 wrote an inner product's weights as 1 x 1 x N x K and its
/// bias as 1 x 1 x 1 x N).
std::vector<int> blob_shape(const ::caffe::BlobProto& blob) {
    std::vector<int> shape;
    if (blob.has_shape()) {
        for (const auto dim : blob.shape().dim()) {
            shape.push_back(dim < 0 || dim > INT_MAX ? -1 : static_cast<int>(dim));
        }
        return shape;
    }
    shape = {blob.num(), blob.channels(), blob.height(), blob.width()};
    while (shape.size() > 1 && shape.front() == 1) {
        shape.erase(shape.begin());
    }
    return shape;
}

std::string shape_text(const std::vector<int>& shape) {
    return fmt::format("{}", fmt::join(shape, "x"));
}

// Counts the `blob_field` entries of the message `in` is limited to; false on malformed bytes.
template <typename Refuse>
bool count_blobs(google::protobuf::io::CodedInputStream& in, int blob_field, std::uint64_t& blobs,
                 const Refuse& refuse) {
    using google::protobuf::internal::WireFormatLite;
    for (std::uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
        if (WireFormatLite::GetTagFieldNumber(tag) == blob_field && ++blobs > k_max_blobs) {
            refuse(blobs, "blobs", k_max_blobs);
        }
        if (!WireFormatLite::SkipField(&in, tag)) {
            return false;
        }
    }
    return true;
}

// A V1 layer's blobs (6), and those of a V0 layer (1) inside it (50).
template <typename Refuse>
bool count_blobs_v1(google::protobuf::io::CodedInputStream& in, std::uint64_t& blobs,
                    const Refuse& refuse) {
    using google::protobuf::internal::WireFormatLite;
    for (std::uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
        const int field = WireFormatLite::GetTagFieldNumber(tag);
        if (field == 6 && ++blobs > k_max_blobs) {
            refuse(blobs, "blobs", k_max_blobs);
        }
        std::uint32_t length = 0;
        if (field == 1 &&
            WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
            if (!in.ReadVarint32(&length) || length > INT_MAX) {
                return false;
            }
            const auto limit = in.PushLimit(static_cast<int>(length));
            if (!count_blobs(in, 50, blobs, refuse)) {
                return false;
            }
            in.PopLimit(limit);
        } else if (!WireFormatLite::SkipField(&in, tag)) {
            return false;
        }
    }
    return true;
}

// NetParameter's layer (100) and V1 layers (2) fields, and their blobs (LayerParameter's 7,
// V1LayerParameter's 6, a V0 layer's 50), counted by walking the wire format without building
// anything. Malformed bytes end the walk quietly: the parse after it says what is wrong.
void check_counts(const std::vector<char>& bytes, const fs::path& file) {
    using google::protobuf::internal::WireFormatLite;
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                              static_cast<int>(bytes.size()));
    in.SetTotalBytesLimit(INT_MAX);
    std::uint64_t layers = 0;
    std::uint64_t blobs = 0;
    const auto refuse = [&](std::uint64_t count, const char* what, std::uint64_t max) {
        throw Error(ErrorKind::config,
                    fmt::format("weights file {} holds more than {} {} ({} so far): not a model "
                                "dltrain can use (a damaged or hostile file?)",
                                file.string(), max, what, count));
    };
    for (std::uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
        const int field = WireFormatLite::GetTagFieldNumber(tag);
        if ((field != 100 && field != 2) ||
            WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
            if (!WireFormatLite::SkipField(&in, tag)) {
                return;
            }
            continue;
        }
        std::uint32_t length = 0;
        if (!in.ReadVarint32(&length) || length > INT_MAX) {
            return;
        }
        if (++layers > k_max_layers) {
            refuse(layers, "layers", k_max_layers);
        }
        const auto limit = in.PushLimit(static_cast<int>(length));
        const bool walked =
            field == 100 ? count_blobs(in, 7, blobs, refuse) : count_blobs_v1(in, blobs, refuse);
        if (!walked) {
            return;
        }
        in.PopLimit(limit);
    }
}

caffe::NetParameter read_net(const fs::path& file) {
    const RegularFile in(file, "weights file");
    const std::vector<char> bytes = in.read_all(k_max_file);
    check_counts(bytes, file);
    google::protobuf::io::CodedInputStream stream(
        reinterpret_cast<const std::uint8_t*>(bytes.data()), static_cast<int>(bytes.size()));
    stream.SetTotalBytesLimit(INT_MAX);
    ::caffe::NetParameter net;
    if (!net.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage()) {
        throw Error(ErrorKind::config,
                    fmt::format("weights file {} is not a Caffe model (a NetParameter in "
                                "protobuf's binary format)",
                                file.string()));
    }
    if (net.layer_size() > 0 && net.layers_size() > 0) {
        throw Error(ErrorKind::config,
                    fmt::format("weights file {} has layers in both the current and the V1 "
                                "format, which Caffe refuses too",
                                file.string()));
    }
    return net;
}

std::vector<Blob> blobs_of(const ::caffe::NetParameter& net) {
    std::vector<Blob> blobs;
    for (const auto& layer : net.layer()) {
        for (int i = 0; i < layer.blobs_size(); ++i) {
            blobs.push_back({layer.name(), i, &layer.blobs(i)});
        }
    }
    for (const auto& layer : net.layers()) {
        // A V0 layer keeps its name and blobs inside; Caffe's upgrade moves them out unchanged.
        const auto& name = layer.has_layer() ? layer.layer().name() : layer.name();
        const auto& held = layer.has_layer() ? layer.layer().blobs() : layer.blobs();
        for (int i = 0; i < held.size(); ++i) {
            blobs.push_back({name, i, &held.Get(i)});
        }
    }
    return blobs;
}

} // namespace

bool is_caffemodel(const fs::path& file) {
    return file.extension() == ".caffemodel";
}

WeightsCopy copy_caffemodel_weights(const fs::path& file, Net& net) {
    const ::caffe::NetParameter model = read_net(file);
    std::map<std::string, const Param*> wanted;
    for (const auto& param : net.params()) {
        wanted.emplace(param.name, &param);
    }
    WeightsCopy copy;
    for (const Blob& blob : blobs_of(model)) {
        const std::string name = fmt::format("{}.{}", blob.layer, blob.index);
        const auto found = wanted.find(name);
        if (found == wanted.end()) {
            copy.unused.push_back(name);
            continue;
        }
        Tensor& tensor = *found->second->tensor;
        const std::vector<int> shape = blob_shape(*blob.proto);
        if (shape != tensor.shape()) {
            copy.reshaped.push_back(fmt::format("{}: {} in the file, {} here", name,
                                                shape_text(shape), tensor.shape_string()));
            wanted.erase(found);
            continue;
        }
        const auto count = static_cast<std::size_t>(tensor.count());
        std::vector<float> values(count);
        if (static_cast<std::size_t>(blob.proto->data_size()) == count) {
            std::copy(blob.proto->data().begin(), blob.proto->data().end(), values.begin());
        } else if (static_cast<std::size_t>(blob.proto->double_data_size()) == count) {
            for (std::size_t i = 0; i < count; ++i) {
                values[i] = static_cast<float>(blob.proto->double_data(static_cast<int>(i)));
            }
        } else {
            throw Error(
                ErrorKind::config,
                fmt::format("weights file {}: blob {} has shape {} but {} values", file.string(),
                            name, shape_text(shape),
                            std::max(blob.proto->data_size(), blob.proto->double_data_size())));
        }
        tensor.write_data(values.data());
        copy.copied.push_back(name);
        wanted.erase(found);
    }
    if (copy.copied.empty()) {
        std::vector<std::string> found = copy.unused;
        found.insert(found.end(), copy.reshaped.begin(), copy.reshaped.end());
        throw Error(ErrorKind::config,
                    found.empty()
                        ? fmt::format("weights file {} holds no weights", file.string())
                        : fmt::format("weights file {} has no parameter of this network (it has: "
                                      "{})",
                                      file.string(), fmt::join(found, "; ")));
    }
    for (const auto& param : net.params()) {
        if (wanted.count(param.name) != 0) {
            copy.kept.push_back(param.name);
        }
    }
    return copy;
}

void write_caffemodel(const fs::path& file, const NetConfig& config, const Net& net) {
    ::caffe::NetParameter model;
    model.set_name(config.name);
    std::map<std::string, std::string> types;
    for (const auto& layer : config.layers) {
        types.emplace(layer.name, layer.type);
    }
    ::caffe::LayerParameter* current = nullptr;
    for (const auto& param : net.params()) {
        const std::string layer = param.name.substr(0, param.name.rfind('.'));
        if (current == nullptr || current->name() != layer) {
            current = model.add_layer();
            current->set_name(layer);
            const auto type = types.find(layer);
            current->set_type(type != types.end() ? type->second : std::string());
        }
        ::caffe::BlobProto* blob = current->add_blobs();
        for (const int dim : param.tensor->shape()) {
            blob->mutable_shape()->add_dim(dim);
        }
        const std::vector<float> values = param.tensor->read_data();
        blob->mutable_data()->Add(values.begin(), values.end());
    }
    std::string bytes;
    if (!model.SerializeToString(&bytes)) {
        throw Error(ErrorKind::training,
                    fmt::format("cannot write {}: the model does not serialize", file.string()));
    }
    write_atomically(file, bytes);
}

} // namespace dl::io
