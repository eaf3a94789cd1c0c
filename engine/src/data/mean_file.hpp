#pragma once
// Caffe's mean.binaryproto (compute_image_mean): one BlobProto holding the mean image, read into
// C x H x W floats for the Data layer's mean_file (pixel - mean[c][h][w], then scale). The
// BlobProto is decoded by hand from protobuf's wire format (records/protobuf_wire.hpp).
//
// BlobProto (caffe.proto): num/channels/height/width = 1-4 (legacy 4-D shape, used when any is
// set), data = 5 (packed floats), shape = 7 (BlobShape, dim = 1: packed int64), double_data = 8
// (used instead of data when present).

#include <cstdint>
#include <filesystem>
#include <vector>

namespace dl::data {

/// The mean image; throws dl::Error(config) naming the file when it is not a BlobProto, its
/// shape is not 1 x C x H x W (or C x H x W), its values are not as many as the shape says, or
/// the shape is not `channels` x `height` x `width`.
std::vector<float> load_mean_file(const std::filesystem::path& file, int channels, int height,
                                  int width);

/// The most values per channel load_channel_means reads (ImageNet's mean is 256 x 256).
inline constexpr std::int64_t k_max_mean_plane = std::int64_t{4096} * 4096;

/// One mean per channel, each the average of its plane of a 1 x C x H x W mean image of any
/// H x W: what Caffe's classification example subtracts from an image of another size.
std::vector<float> load_channel_means(const std::filesystem::path& file, int channels);

} // namespace dl::data
