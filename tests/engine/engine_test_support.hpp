#pragma once
// Helpers for the engine tests: temporary directories, tiny IDX data sets and a tiny network
// that trains in milliseconds.

#include "test_paths.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>

#include <gtest/gtest.h>

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace dl_test {

class TempDir {
public:
    TempDir() {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "dl_engine_test_XXXXXX").string();
        m_path = ::mkdtemp(pattern.data());
    }
    ~TempDir() {
        std::error_code error;
        std::filesystem::remove_all(m_path, error);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    TempDir(TempDir&&) = delete;
    TempDir& operator=(TempDir&&) = delete;
    [[nodiscard]] const std::filesystem::path& path() const { return m_path; }

private:
    std::filesystem::path m_path;
};

/// An environment assignment giving Open MPI's mpirun a session directory of this test process's
/// own: two mpiruns of tests ctest runs at once race to create /tmp/ompi.<host>.<uid>, and the
/// loser fails in orte_init ("mkdir ... File exists").
inline std::string ompi_session_env() {
    static const TempDir base;
    return "OMPI_MCA_orte_tmpdir_base=" + base.path().string() + " ";
}

/// `bytes` as the whole of `path`, its folder made first.
inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
    if (path.has_parent_path()) {
        std::filesystem::create_directories(path.parent_path());
    }
    std::ofstream(path, std::ios::binary) << bytes;
}

inline void put_be32(std::string& out, std::uint32_t value) {
    for (int shift = 24; shift >= 0; shift -= 8) {
        out.push_back(static_cast<char>((value >> shift) & 0xFFU));
    }
}

/// Writes `count` random size x size images (3 classes, each with a class-dependent bright
/// quadrant, so a net can learn them) as IDX files; gzip-compressed when `gz`.
inline void write_tiny_dataset(const std::filesystem::path& dir, const std::string& prefix,
                               int count, int size, std::uint32_t seed, bool gz = false) {
    std::mt19937 rng(seed);
    std::string images;
    std::string labels;
    put_be32(images, 0x00000803);
    put_be32(images, static_cast<std::uint32_t>(count));
    put_be32(images, static_cast<std::uint32_t>(size));
    put_be32(images, static_cast<std::uint32_t>(size));
    put_be32(labels, 0x00000801);
    put_be32(labels, static_cast<std::uint32_t>(count));
    for (int i = 0; i < count; ++i) {
        const int label = static_cast<int>(rng() % 3);
        labels.push_back(static_cast<char>(label));
        for (int y = 0; y < size; ++y) {
            for (int x = 0; x < size; ++x) {
                const bool bright = (label == 0 && y < size / 2) || (label == 1 && x < size / 2) ||
                                    (label == 2 && y >= size / 2 && x >= size / 2);
                images.push_back(static_cast<char>((bright ? 128 : 0) + rng() % 100));
            }
        }
    }
    const std::string suffix = gz ? ".gz" : "";
    const auto write = [&](const std::string& name, const std::string& bytes) {
        const std::filesystem::path path = dir / (name + suffix);
        if (gz) {
            gzFile file = gzopen(path.c_str(), "wb");
            gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size()));
            gzclose(file);
        } else {
            std::ofstream(path, std::ios::binary) << bytes;
        }
    };
    write(prefix + "-images-idx3-ubyte", images);
    write(prefix + "-labels-idx1-ubyte", labels);
}

/// A small LeNet-like net over 8x8 images with every trainable layer kind and Dropout.
/// `shuffle`: the training Data layer draws a fresh order every epoch (12 batches).
inline std::string tiny_net_yaml(int max_iter, const std::string& solver_type = "SGD",
                                 bool shuffle = false) {
    return R"(name: tiny
layers:
  - {name: data, type: Data, top: [data, label], phase: train, source: train-images-idx3-ubyte,
     label_source: train-labels-idx1-ubyte, batch_size: 8, scale: 0.00390625, shuffle: )" +
           std::string(shuffle ? "true" : "false") + R"(}
  - {name: data, type: Data, top: [data, label], phase: test, source: test-images-idx3-ubyte,
     label_source: test-labels-idx1-ubyte, batch_size: 10, scale: 0.00390625}
  - {name: conv1, type: Convolution, bottom: data, top: conv1, num_output: 4, kernel_size: 3,
     pad: 1, param: [{lr_mult: 1}, {lr_mult: 2}], weight_filler: {type: xavier}}
  - {name: pool1, type: Pooling, bottom: conv1, top: pool1, pool: max, kernel_size: 2, stride: 2}
  - {name: ip1, type: InnerProduct, bottom: pool1, top: ip1, num_output: 16,
     weight_filler: {type: msra}}
  - {name: relu1, type: ReLU, bottom: ip1, top: ip1}
  - {name: drop1, type: Dropout, bottom: ip1, top: ip1, dropout_ratio: 0.25}
  - {name: ip2, type: InnerProduct, bottom: ip1, top: ip2, num_output: 3,
     weight_filler: {type: gaussian, std: 0.1}}
  - {name: accuracy, type: Accuracy, bottom: [ip2, label], top: accuracy, phase: test}
  - {name: loss, type: SoftmaxWithLoss, bottom: [ip2, label], top: loss}
solver:
  type: )" +
           solver_type +
           R"(
  base_lr: 0.05
  momentum: 0.9
  weight_decay: 0.0005
  lr_policy: inv
  gamma: 0.0001
  power: 0.75
  max_iter: )" +
           std::to_string(max_iter) +
           R"(
  test_interval: 50
  test_iter: 3
  display: 10
  snapshot: 50
  keep_checkpoints: 2
  random_seed: 7
)";
}

/// A directory with the tiny data sets (train 96 images, test 30) and tiny.yaml.
inline std::filesystem::path make_tiny_workspace(const std::filesystem::path& dir, int max_iter,
                                                 const std::string& solver_type = "SGD",
                                                 bool shuffle = false) {
    write_tiny_dataset(dir, "train", 96, 8, 1);
    write_tiny_dataset(dir, "test", 30, 8, 2);
    const auto config = dir / "tiny.yaml";
    std::ofstream(config) << tiny_net_yaml(max_iter, solver_type, shuffle);
    return config;
}

inline std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The config error `text` (a YAML net) gets, checked to be one (exit 3's kind); a failure of
/// the test when it parses.
inline std::string config_error(const std::string& text) {
    try {
        dl::parse_config(text, "bad.yaml");
    } catch (const dl::Error& e) {
        EXPECT_EQ(e.kind(), dl::ErrorKind::config);
        return e.what();
    }
    ADD_FAILURE() << "no error for:\n" << text;
    return {};
}

/// `dltrain train` of `config` into `run_dir`, without a deadline, with `extra` arguments.
inline std::string train_command(const std::filesystem::path& config,
                                 const std::filesystem::path& run_dir, const std::string& extra) {
    return std::string(DLTRAIN_BINARY) + " train --config " + config.string() + " --run-dir " +
           run_dir.string() + " --deadline none " + extra;
}

/// Why the CUDA backend cannot run here, or empty when it can.
inline std::string why_no_gpu() {
    const auto names = dl::backend_names();
    if (std::find(names.begin(), names.end(), "cuda") == names.end()) {
        return "dltrain was built without CUDA (-DDLJOB_CUDA=OFF or no toolkit/cuDNN)";
    }
    try {
        dl::make_backend("cuda:0", 1);
    } catch (const dl::Error& e) {
        return e.what();
    }
    return {};
}

/// The Caffe prototxt files the tests read (BVLC's, unmodified, and hostile ones).
inline std::filesystem::path corpus() {
    return std::filesystem::path(DLJOB_SOURCE_DIR) / "tests/engine/prototxt";
}

} // namespace dl_test
