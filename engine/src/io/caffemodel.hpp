#pragma once
// Caffe's binary weights (.caffemodel: a NetParameter whose layers carry their blobs), read and
// written by layer name, so a model moves between Caffe and dltrain both ways. Blob i of layer
// L is dltrain's parameter "L.i" (weights 0, bias 1), in Caffe's shapes.

#include <dl/checkpoint.hpp>
#include <dl/config.hpp>
#include <dl/net.hpp>

#include <filesystem>

namespace dl::io {

/// Whether --weights names a Caffe model rather than a dltrain checkpoint (Caffe's suffix).
bool is_caffemodel(const std::filesystem::path& file);

/// Caffe's fine-tuning rule: every blob whose layer name and index the net has and whose shape
/// matches is copied; a parameter the file lacks, or whose shape differs (the renamed or
/// resized classifier of a fine-tuning recipe), keeps its filler's values and is listed. Reads
/// the current format and V1 (`layers`). Throws dl::Error(config) naming the file for an
/// unreadable one, the V0 format, or a file with no parameter of this net.
WeightsCopy copy_caffemodel_weights(const std::filesystem::path& file, Net& net);

/// Writes every parameter of `net` as a .caffemodel (layers named and typed as in `config`,
/// N-D blob shapes), through a temporary file renamed into place.
void write_caffemodel(const std::filesystem::path& file, const NetConfig& config, const Net& net);

} // namespace dl::io
