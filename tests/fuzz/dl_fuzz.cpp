// libFuzzer targets for everything dltrain reads from a file a user or a damaged disk hands it:
// net and solver configs (prototxt and YAML, through `dltrain check`'s path; a net through one
// training step), Caffe weights,
// checkpoints (the checksum and marker made to agree, so the fuzzer reaches the parser behind
// them), mean files, IDX and CIFAR files, Caffe Datums, packed datasets and images. A dl::Error is
// the expected answer to a bad input; a crash, a sanitizer report, a leak, any other exception or
// an allocation past libFuzzer's limit is a finding. tests/fuzz/run.sh builds and runs them.
//
//   DL_FUZZ_TARGET=prototxt build-fuzz/tests/fuzz/dl_fuzz CORPUS_DIR -max_total_time=60
//   DL_FUZZ_SEEDS=DIR build-fuzz/tests/fuzz/dl_fuzz   (writes a valid caffemodel and checkpoint)

#include "data/cifar_dataset.hpp"
#include "data/datum_dataset.hpp"
#include "data/idx_dataset.hpp"
#include "data/image_decode.hpp"
#include "data/image_list.hpp"
#include "data/mean_file.hpp"
#include "data/pack_reader.hpp"
#include "fuzz_support.hpp"
#include "io/caffemodel.hpp"
#include "io/checksum.hpp"
#include "net/layer_kind.hpp"

#include <dl/backend.hpp>
#include <dl/checkpoint.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>
#include <dl/solver.hpp>
#include <dl/train.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Data sets may take this much: far above what a fuzz input can honestly describe, far below
// libFuzzer's RSS limit, so a size taken on a header's word is refused, not allocated.
constexpr std::uint64_t k_budget_bytes = std::uint64_t{64} << 20;

fs::path g_dir;

fs::path write_file(const std::string& name, const std::uint8_t* data, std::size_t size) {
    const fs::path file = g_dir / name;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    return file;
}

// The net the weights and checkpoint targets load into: tests/engine's tiny net.
constexpr const char* k_net_yaml = R"(name: tiny
layers:
  - {name: data, type: Data, top: [data, label], phase: train, source: train-images-idx3-ubyte,
     label_source: train-labels-idx1-ubyte, batch_size: 8, scale: 0.00390625}
  - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 4, kernel_size: 3,
     pad: 1, weight_filler: {type: xavier}}
  - {name: pool1, type: Pooling, bottom: conv1, top: pool1, pool: max, kernel_size: 2, stride: 2}
  - {name: ip1, type: InnerProduct, bottom: pool1, top: ip1, num_output: 16,
     weight_filler: {type: msra}}
  - {name: relu1, type: ReLU, bottom: ip1, top: ip1}
  - {name: ip2, type: InnerProduct, bottom: ip1, top: ip2, num_output: 3,
     weight_filler: {type: gaussian, std: 0.1}}
  - {name: loss, type: SoftmaxWithLoss, bottom: [ip2, label], top: loss}
solver:
  type: Adam
  base_lr: 0.01
  max_iter: 10
)";

struct TinyNet {
    dl::NetConfig config = [] {
        dl::NetConfig parsed = dl::parse_config(k_net_yaml, "tiny.yaml");
        for (auto& layer : parsed.layers) {
            layer.shape = {1, 8, 8};
        }
        return parsed;
    }();
    std::unique_ptr<dl::Backend> backend = dl::make_backend("cpu", 1);
    dl::Net net{config, dl::Phase::train, *backend, 3};
    dl::Solver solver{config.solver, net, *backend};
};

void config_target(const std::uint8_t* data, std::size_t size, const char* name) {
    const fs::path file = write_file(name, data, size);
    dl::check_config(file, std::nullopt, "64M");
}

// A net as far as training goes: read; written as dltrain's YAML (the run directory's
// config.resolved.yaml) and read back, which must give the same config; every input without a
// shape given a small one and at most 2 items a batch; checked as `dltrain check` does, within
// 64 MB; then its train net built with its fillers' values, and one forward pass, backward pass
// and solver update on made-up inputs and labels each loss can take.
void net_target(const std::uint8_t* data, std::size_t size) {
    dl::NetConfig config = dl::load_config(write_file("net.prototxt", data, size));
    const std::string yaml = dl::to_yaml(config);
    try {
        if (dl::to_yaml(dl::parse_config(yaml, "resolved.yaml")) != yaml) {
            std::fprintf(stderr, "dl_fuzz: the config read back from its YAML differs:\n%s\n",
                         yaml.c_str());
            std::abort();
        }
    } catch (const dl::Error& e) {
        std::fprintf(stderr, "dl_fuzz: the config's own YAML is refused: %s\n%s\n", e.what(),
                     yaml.c_str());
        std::abort();
    }
    for (auto& layer : config.layers) {
        if (dl::has_role(layer, dl::LayerRole::input)) {
            if (layer.shape.empty()) {
                layer.shape = {1, 8, 8};
            }
            layer.batch_size = std::min(layer.batch_size, 2);
        } else if (layer.type == "Input" && layer.shape.size() > 1) {
            layer.shape[0] = std::min(layer.shape[0], 2); // its batch
        }
    }
    const fs::path shaped = g_dir / "shaped.yaml";
    std::ofstream(shaped, std::ios::trunc) << dl::to_yaml(config);
    if (!dl::check_config(shaped, std::nullopt, "64M").empty()) {
        return;
    }
    const dl::NetConfig checked = dl::load_config(shaped);
    const auto backend = dl::make_backend("cpu", 1);
    dl::Net net(checked, dl::Phase::train, *backend, 1);
    for (const dl::NetInput& input : net.inputs()) {
        std::vector<float> values(input.data->count());
        for (std::size_t i = 0; i < values.size(); ++i) {
            values[i] = static_cast<float>(i % 7) - 3.0F;
        }
        input.data->write_data(values.data());
        if (input.labels != nullptr) {
            std::vector<float> labels(input.labels->count());
            for (std::size_t i = 0; i < labels.size(); ++i) {
                labels[i] = static_cast<float>(i % std::max(input.label_classes, 1));
            }
            input.labels->write_data(labels.data());
        }
    }
    net.forward();
    net.backward();
    dl::Solver solver(checked.solver, net, *backend);
    solver.apply_update();
}

// Lines of `--solver KEY=VALUE` (dltrain train/check/time) over the tiny net's config.
void solver_overrides_target(const std::uint8_t* data, std::size_t size) {
    (void)dl::parse_config(k_net_yaml, "tiny.yaml", fuzz::lines_of(data, size, 64));
}

void caffemodel_target(const std::uint8_t* data, std::size_t size) {
    TinyNet tiny;
    dl::io::copy_caffemodel_weights(write_file("in.caffemodel", data, size), tiny.net);
}

// The fuzzer's bytes become a checkpoint whose trailing checksum and marker are right for them.
void checkpoint_target(const std::uint8_t* data, std::size_t size) {
    std::string bytes(reinterpret_cast<const char*>(data), size);
    const std::uint64_t sum = dl::io::checksum(bytes.data(), bytes.size());
    bytes.append(reinterpret_cast<const char*>(&sum), sizeof(sum));
    const fs::path file = g_dir / "iter_1.ckpt";
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    std::ofstream(g_dir / "iter_1.done", std::ios::trunc)
        << fmt::format("size={} xxh64={:016x}\n", bytes.size(), sum);
    TinyNet tiny;
    dl::read_checkpoint(file, tiny.net, &tiny.solver);
}

void mean_target(const std::uint8_t* data, std::size_t size) {
    const fs::path file = write_file("mean.binaryproto", data, size);
    try {
        dl::data::load_mean_file(file, 1, 8, 8);
    } catch (const dl::Error&) {
    }
    dl::data::load_channel_means(file, 3);
}

// First byte: where the image file ends and the label file starts (as a share of the rest).
void idx_target(const std::uint8_t* data, std::size_t size) {
    if (size == 0) {
        return;
    }
    const std::size_t rest = size - 1;
    const std::size_t split = rest * data[0] / 255;
    const fs::path images = write_file("images-idx3-ubyte", data + 1, split);
    const fs::path labels = write_file("labels-idx1-ubyte", data + 1 + split, rest - split);
    const dl::data::DataBudget budget{k_budget_bytes, "the fuzz budget"};
    try {
        dl::data::read_idx_header(images, budget);
    } catch (const dl::Error&) {
    }
    dl::data::load_idx(images, labels, budget);
}

void cifar_target(const std::uint8_t* data, std::size_t size) {
    const fs::path dir = g_dir / "cifar";
    fs::create_directories(dir);
    const fs::path file = dir / "data_batch_1.bin";
    std::ofstream(file, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    dl::data::load_cifar(file, true);
}

// Records separated by the byte sequence "\n--\n"; the first two bytes choose labels and
// header-only reading.
void datum_target(const std::uint8_t* data, std::size_t size) {
    if (size < 2) {
        return;
    }
    const bool with_labels = (data[0] & 1U) != 0;
    const bool header_only = (data[1] & 1U) != 0;
    dl::data::DatumSet set("fuzz LMDB", with_labels, header_only,
                           dl::data::DataBudget{k_budget_bytes, "the fuzz budget"});
    const std::string_view all(reinterpret_cast<const char*>(data) + 2, size - 2);
    std::size_t start = 0;
    std::size_t index = 0;
    while (start <= all.size() && index < 64) {
        const std::size_t end = all.find("\n--\n", start);
        const std::size_t stop = end == std::string_view::npos ? all.size() : end;
        set.add(index, fmt::format("{:08}", index), all.substr(start, stop - start));
        ++index;
        if (end == std::string_view::npos) {
            break;
        }
        start = end + 4;
    }
    set.finish(index);
}

// A pack directory (`dljob pack`'s, as a damaged copy may leave it): the input's parts,
// separated by "\n@@@@\n", are manifest.json, index.tsv, chunks.tsv and the data files (each
// written as data.tar and as the N-th zstd shard's name); an empty part is an absent file. Every
// member is read.
void pack_target(const std::uint8_t* data, std::size_t size) {
    const std::string_view all(reinterpret_cast<const char*>(data), size);
    const fs::path dir = g_dir / "pack";
    fs::remove_all(dir);
    fs::create_directories(dir);
    constexpr std::string_view k_separator = "\n@@@@\n";
    std::size_t start = 0;
    for (int part = 0; start <= all.size() && part < 8; ++part) {
        const std::size_t end = std::min(all.find(k_separator, start), all.size());
        const std::string_view bytes = all.substr(start, end - start);
        const auto write = [&](const std::string& name) {
            if (bytes.empty()) {
                return; // absent (a version 1 pack has no chunks.tsv)
            }
            std::ofstream(dir / name, std::ios::binary)
                .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        };
        if (part == 0) {
            write("manifest.json");
        } else if (part == 1) {
            write("index.tsv");
        } else if (part == 2) {
            write("chunks.tsv");
        } else {
            write(part == 3 ? "data.tar" : fmt::format("data-{:05}.tar", part - 4));
            write(fmt::format("data-{:05}.tar.zst", part - 3));
        }
        start = end + k_separator.size();
    }
    const dl::data::Pack pack(dir);
    for (const dl::data::PackEntry& entry : pack.files()) {
        (void)pack.read(entry);
    }
}

// Caffe's ImageData list: byte 0 chooses colour and the resize (none, or 1 to 15 times 7 pixels
// a side), the rest is the list; its paths name files under images/, where a.pgm (2 x 3 grey),
// b.pgm (3 x 2) and "c d.pgm" (2 x 3) exist.
void image_list_target(const std::uint8_t* data, std::size_t size) {
    if (size == 0) {
        return;
    }
    const fs::path images = g_dir / "images";
    if (!fs::exists(images)) {
        fs::create_directories(images);
        const auto pgm = [&](const char* name, int width, int height) {
            std::ofstream(images / name, std::ios::binary)
                << "P5\n"
                << width << ' ' << height << "\n255\n"
                << std::string(static_cast<std::size_t>(width * height), '\x7f');
        };
        pgm("a.pgm", 3, 2);
        pgm("b.pgm", 2, 3);
        pgm("c d.pgm", 3, 2);
    }
    const fs::path list = write_file("list.txt", data + 1, size - 1);
    dl::data::ImageListOptions options;
    options.image_path = [&](const std::string& name) { return images / name; };
    const int side = (data[0] >> 1U) % 16 * 7;
    options.new_height = side;
    options.new_width = side;
    options.is_color = (data[0] & 1U) != 0;
    const dl::data::DataBudget budget{k_budget_bytes, "the fuzz budget"};
    try {
        dl::data::read_image_list_header(list, options);
    } catch (const dl::Error&) {
    }
    dl::data::load_image_list(list, options, budget);
}

void image_target(const std::uint8_t* data, std::size_t size) {
    if (size == 0) {
        return;
    }
    constexpr int k_channels[] = {0, 1, 3}; // the image's own, grey, colour
    const std::vector<std::uint8_t> bytes(data + 1, data + size);
    const auto image = dl::data::decode_image(bytes, k_channels[data[0] % 3], "fuzz image");
    if (image.height > 0 && image.width > 0 && image.height * image.width < (1 << 16)) {
        dl::data::resize_bilinear(image, 1 + data[0] % 17, 1 + data[0] % 13);
    }
}

using Target = std::function<void(const std::uint8_t*, std::size_t)>;

const std::map<std::string, Target>& targets() {
    static const std::map<std::string, Target> all{
        {"prototxt",
         [](const std::uint8_t* d, std::size_t n) { config_target(d, n, "in.prototxt"); }},
        {"yaml", [](const std::uint8_t* d, std::size_t n) { config_target(d, n, "in.yaml"); }},
        {"net", net_target},
        {"solver", solver_overrides_target},
        {"caffemodel", caffemodel_target},
        {"checkpoint", checkpoint_target},
        {"mean", mean_target},
        {"idx", idx_target},
        {"cifar", cifar_target},
        {"datum", datum_target},
        {"pack", pack_target},
        {"image", image_target},
        {"imagelist", image_list_target},
    };
    return all;
}

const Target* g_target = nullptr;
bool g_verbose = false;

// A valid caffemodel and checkpoint body of the tiny net, as seeds for those two targets.
void write_seeds(const fs::path& dir) {
    TinyNet tiny;
    fs::create_directories(dir / "caffemodel");
    dl::io::write_caffemodel(dir / "caffemodel" / "tiny.caffemodel", tiny.config, tiny.net);
    dl::TrainingState state;
    state.iteration = 1;
    state.test_cursors = {5};
    state.test_nets = {"test level 0 stages []"};
    std::ostringstream rng;
    rng << tiny.net.rng();
    state.rng_state = rng.str();
    const fs::path written = dl::write_checkpoint(g_dir, state, tiny.net, tiny.solver, 1);
    std::ifstream in(written, std::ios::binary);
    std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    bytes.resize(bytes.size() - sizeof(std::uint64_t)); // the target appends the checksum
    fs::create_directories(dir / "checkpoint");
    std::ofstream(dir / "checkpoint" / "tiny.ckpt", std::ios::binary) << bytes;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    fuzz::start("dl_fuzz", g_dir, write_seeds);
    const char* name = std::getenv("DL_FUZZ_TARGET");
    const auto found = name == nullptr ? targets().end() : targets().find(name);
    if (found == targets().end()) {
        std::string names;
        for (const auto& [key, target] : targets()) {
            names += " " + key;
        }
        std::fprintf(stderr, "dl_fuzz: set DL_FUZZ_TARGET to one of:%s\n", names.c_str());
        std::exit(2);
    }
    g_target = &found->second;
    g_verbose = std::getenv("DL_FUZZ_VERBOSE") != nullptr;
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        (*g_target)(data, size);
    } catch (const dl::Error& e) {
        // The answer a bad input should get; DL_FUZZ_VERBOSE=1 prints it (replaying one input).
        if (g_verbose) {
            std::fprintf(stderr, "dl_fuzz: refused: %s\n", e.what());
        }
    }
    return 0;
}
