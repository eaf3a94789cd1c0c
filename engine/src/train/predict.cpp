// `dltrain predict`: a deploy net over image files, as Caffe's classification example runs it
// (examples/cpp_classification): decode, resize to the Input's H x W, subtract the mean, forward,
// print the top-k of the last layer's top with the labels file's lines.

#include "data/image_decode.hpp"
#include "data/mean_file.hpp"
#include "io/caffemodel.hpp"
#include "io/regular_file.hpp"
#include "net/layer_kind.hpp"

#include <dl/backend.hpp>
#include <dl/checkpoint.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>
#include <dl/train.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

namespace dl {
namespace {

namespace fs = std::filesystem;

// A list or labels file is text of one line per entry; ImageNet's synset_words.txt is 31 KB.
constexpr std::uint64_t k_max_text_bytes = std::uint64_t{64} << 20;
// One image file, before decoding (decode_image bounds the decoded size).
constexpr std::uint64_t k_max_image_file_bytes = std::uint64_t{256} << 20;

std::vector<std::string> lines_of(const fs::path& file, const std::string& what) {
    const std::vector<char> text = io::RegularFile(file, what).read_all(k_max_text_bytes);
    std::vector<std::string> lines;
    std::string line;
    for (const char c : text) {
        if (c == '\n') {
            lines.push_back(line);
            line.clear();
        } else if (c != '\r') {
            line += c;
        }
    }
    if (!line.empty()) {
        lines.push_back(line);
    }
    return lines;
}

/// The images to classify: those named, then the list's (Caffe's image list: the first field
/// of each line; blank lines and # comments skipped).
std::vector<fs::path> image_paths(const PredictOptions& options) {
    std::vector<fs::path> paths = options.images;
    if (options.list) {
        for (const auto& line : lines_of(*options.list, "image list")) {
            const auto start = line.find_first_not_of(" \t");
            if (start == std::string::npos || line[start] == '#') {
                continue;
            }
            const auto end = line.find_first_of(" \t", start);
            paths.emplace_back(line.substr(start, end == std::string::npos ? end : end - start));
        }
    }
    if (paths.empty()) {
        throw Error(ErrorKind::usage, "no images: name image files, or --list FILE");
    }
    return paths;
}

/// The one Input layer the deploy net is fed through; a Data layer means a train_val net.
LayerConfig& deploy_input(NetConfig& config) {
    LayerConfig* input = nullptr;
    for (auto& layer : config.layers) {
        if (layer.phase && *layer.phase != Phase::test) {
            continue;
        }
        if (has_role(layer, LayerRole::input)) {
            throw Error(ErrorKind::config,
                        fmt::format("{}: layer '{}' ({}) reads a data set: predict takes a deploy "
                                    "net, fed through an Input layer (Caffe's deploy.prototxt)",
                                    config.file.string(), layer.name, layer.type));
        }
        if (layer.type != "Input") {
            continue;
        }
        if (input != nullptr) {
            throw Error(ErrorKind::config,
                        fmt::format("{}: Input layers '{}' and '{}': predict feeds one",
                                    config.file.string(), input->name, layer.name));
        }
        input = &layer;
    }
    if (input == nullptr) {
        throw Error(ErrorKind::config,
                    fmt::format("{}: no Input layer: predict takes a deploy net (Caffe's "
                                "deploy.prototxt)",
                                config.file.string()));
    }
    if (input->shape.size() != 4 || (input->shape[1] != 1 && input->shape[1] != 3)) {
        throw Error(ErrorKind::config,
                    fmt::format("{}: Input layer '{}' is {}: predict feeds images, N x C x H x W "
                                "with C 1 or 3",
                                config.file.string(), input->name, fmt::join(input->shape, "x")));
    }
    return *input;
}

/// The per-channel values subtracted from every pixel (zeros without a mean).
std::vector<float> channel_means(const PredictOptions& options, int channels) {
    if (options.mean_file && !options.mean_values.empty()) {
        throw Error(ErrorKind::usage, "--mean and --mean-value: give one");
    }
    if (options.mean_file) {
        return data::load_channel_means(*options.mean_file, channels);
    }
    if (options.mean_values.empty()) {
        return std::vector<float>(static_cast<std::size_t>(channels), 0.0F);
    }
    if (options.mean_values.size() == 1) {
        return std::vector<float>(static_cast<std::size_t>(channels), options.mean_values[0]);
    }
    if (options.mean_values.size() != static_cast<std::size_t>(channels)) {
        throw Error(ErrorKind::usage,
                    fmt::format("--mean-value gives {} values for images of {} channel(s): one, "
                                "or one per channel (BGR)",
                                options.mean_values.size(), channels));
    }
    return options.mean_values;
}

void load_weights(const fs::path& weights, Net& net) {
    if (!io::is_caffemodel(weights)) {
        (void)read_checkpoint(weights, net, nullptr);
        return;
    }
    const WeightsCopy copy = io::copy_caffemodel_weights(weights, net);
    if (!copy.kept.empty() || !copy.reshaped.empty()) {
        std::vector<std::string> missing = copy.kept;
        missing.insert(missing.end(), copy.reshaped.begin(), copy.reshaped.end());
        throw Error(ErrorKind::config,
                    fmt::format("weights file {} lacks parameters of this network: {}",
                                weights.string(), fmt::join(missing, "; ")));
    }
}

/// The top of the net's last layer in the test phase: its output, as Caffe's output blob.
std::string output_blob(const NetConfig& config) {
    for (auto layer = config.layers.rbegin(); layer != config.layers.rend(); ++layer) {
        if ((!layer->phase || *layer->phase == Phase::test) && !layer->tops.empty()) {
            return layer->tops.front();
        }
    }
    throw Error(ErrorKind::config, fmt::format("{}: no layer has a top", config.file.string()));
}

void print_top(const fs::path& image, const float* scores, int classes, int top_k,
               const std::vector<std::string>& labels) {
    std::vector<int> order(static_cast<std::size_t>(classes));
    std::iota(order.begin(), order.end(), 0);
    const int k = std::min(top_k, classes);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [scores](int a, int b) {
        return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
    });
    std::cout << fmt::format("---------- Prediction for {} ----------\n", image.string());
    for (int i = 0; i < k; ++i) {
        const auto c = static_cast<std::size_t>(order[static_cast<std::size_t>(i)]);
        std::cout << fmt::format("{:.4f} - \"{}\"\n", scores[c],
                                 labels.empty() ? std::to_string(c) : labels[c]);
    }
}

} // namespace

int predict(const PredictOptions& options) {
    if (options.top_k < 1) {
        throw Error(ErrorKind::usage, "--top-k must be at least 1");
    }
    NetConfig config = load_config(options.model);
    LayerConfig& input = deploy_input(config);
    const std::vector<fs::path> images = image_paths(options);
    const int channels = input.shape[1];
    const int height = input.shape[2];
    const int width = input.shape[3];
    const std::vector<float> mean = channel_means(options, channels);
    // The deploy file's N bounds the batch (BVLC's say 10); fewer images, a smaller one.
    const int batch = static_cast<int>(std::min<std::size_t>(images.size(), input.shape[0]));
    input.shape[0] = batch;
    const std::string input_blob = input.tops.front();
    const std::string output = output_blob(config);

    auto backend =
        make_backend(options.device.empty() ? default_device() : options.device, options.threads);
    Net net(config, Phase::test, *backend, config.solver.random_seed);
    load_weights(options.weights, net);
    Tensor* in = net.blob(input_blob);
    Tensor* out = net.blob(output);
    const auto classes = static_cast<int>(out->count() / static_cast<std::size_t>(batch));
    std::vector<std::string> labels;
    if (options.labels) {
        labels = lines_of(*options.labels, "labels file");
        if (labels.size() != static_cast<std::size_t>(classes)) {
            throw Error(ErrorKind::config,
                        fmt::format("labels file {} has {} lines; the net's output '{}' has {} "
                                    "classes (one line per class, as synset_words.txt)",
                                    options.labels->string(), labels.size(), output, classes));
        }
    }

    const auto plane = static_cast<std::size_t>(height) * width;
    const std::size_t per_image = plane * static_cast<std::size_t>(channels);
    std::vector<float> values(per_image * static_cast<std::size_t>(batch));
    for (std::size_t first = 0; first < images.size(); first += static_cast<std::size_t>(batch)) {
        const std::size_t count = std::min(images.size() - first, static_cast<std::size_t>(batch));
        std::fill(values.begin(), values.end(), 0.0F);
        for (std::size_t i = 0; i < count; ++i) {
            const fs::path& path = images[first + i];
            const std::vector<char> file =
                io::RegularFile(path, "image").read_all(k_max_image_file_bytes);
            const data::DecodedImage image = data::resize_bilinear(
                data::decode_image(std::vector<std::uint8_t>(file.begin(), file.end()), channels,
                                   "image " + path.string()),
                height, width);
            float* dst = values.data() + i * per_image;
            for (std::size_t c = 0; c < static_cast<std::size_t>(channels); ++c) {
                for (std::size_t p = 0; p < plane; ++p) {
                    dst[c * plane + p] = static_cast<float>(image.pixels[c * plane + p]) - mean[c];
                }
            }
        }
        in->write_data(values.data());
        (void)net.forward();
        const std::vector<float> scores = out->read_data();
        for (std::size_t i = 0; i < count; ++i) {
            print_top(images[first + i], scores.data() + i * static_cast<std::size_t>(classes),
                      classes, options.top_k, labels);
        }
    }
    return exit_code::finished;
}

} // namespace dl
