#pragma once
// Helpers for the tests that run several dltrain ranks (test_data_parallel.cpp under MPI's
// launchers, test_gloo.cpp as local processes): LeNet on Debian's Fashion-MNIST, the weights and
// metrics a run leaves, the documented tolerance against one rank, and a shell harness that does
// something to running ranks (a signal, a kill) and times what follows.

#include "engine_test_support.hpp"

#include <dl/backend.hpp>
#include <dl/checkpoint.hpp>
#include <dl/config.hpp>
#include <dl/net.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

namespace dl_test {

inline const std::filesystem::path& fashion_mnist() {
    static const std::filesystem::path data = "/usr/share/datasets/fashion-mnist";
    return data;
}

/// Why the LeNet runs cannot run here, or empty when they can.
inline std::string why_no_fashion_mnist() {
    if (std::filesystem::exists(fashion_mnist() / "train-images-idx3-ubyte.gz")) {
        return {};
    }
    return "no Fashion-MNIST in " + fashion_mnist().string() +
           " (apt install dataset-fashion-mnist)";
}

/// `text` in single quotes for sh.
inline std::string quoted(const std::string& text) {
    std::string out = "'";
    for (const char c : text) {
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return out + "'";
}

/// LeNet (recipes/networks/lenet.yaml) in `dir`/`name`.yaml with batch `batch` per rank, `iters`
/// steps, a loss line every step, one small test at the end, a checkpoint every `snapshot`.
inline std::filesystem::path lenet_config(const std::filesystem::path& dir, int batch, int iters,
                                          int snapshot = 0, const std::string& name = "lenet") {
    std::ifstream in(std::filesystem::path(DLJOB_SOURCE_DIR) / "recipes" / "networks" /
                     "lenet.yaml");
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const auto set = [&text](const std::string& key, const std::string& from,
                             const std::string& to) {
        text = std::regex_replace(text, std::regex(key + ": " + from), key + ": " + to);
    };
    set("batch_size", "64", std::to_string(batch));
    set("batch_size", "100", "50");
    set("max_iter", "10000", std::to_string(iters));
    set("test_interval", "500", "100000");
    set("test_iter", "100", "1");
    set("display", "100", "1");
    set("snapshot", "5000", std::to_string(snapshot));
    const std::filesystem::path file = dir / (name + ".yaml");
    std::ofstream(file) << text;
    return file;
}

/// `dltrain train` of a LeNet config on one CPU thread over Fashion-MNIST.
inline std::string lenet_train(const std::filesystem::path& config,
                               const std::filesystem::path& run, const std::string& extra = "") {
    return std::string(DLTRAIN_BINARY) + " train --device cpu --threads 1 --deadline none " +
           "--config " + config.string() + " --run-dir " + run.string() + " --data-dir " +
           fashion_mnist().string() + " " + extra;
}

/// Every parameter of `config`'s net as `checkpoint` holds it, in the net's order.
inline std::vector<float> weights(const std::filesystem::path& config,
                                  const std::filesystem::path& checkpoint) {
    const dl::NetConfig net_config = dl::load_config(config);
    auto backend = dl::make_backend("cpu", 1);
    dl::Net net(net_config, dl::Phase::train, *backend, net_config.solver.random_seed);
    dl::read_checkpoint(checkpoint, net, nullptr);
    std::vector<float> all;
    for (const auto& param : net.params()) {
        const auto values = param.tensor->read_data();
        all.insert(all.end(), values.begin(), values.end());
    }
    return all;
}

inline std::vector<nlohmann::json> metrics(const std::filesystem::path& run) {
    std::vector<nlohmann::json> lines;
    std::ifstream in(run / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
        lines.push_back(nlohmann::json::parse(line));
    }
    return lines;
}

/// The loss of every train line of a run's metrics.
inline std::vector<double> losses(const std::vector<nlohmann::json>& lines) {
    std::vector<double> values;
    for (const auto& line : lines) {
        if (line["type"] == "train") {
            values.push_back(line["loss"].get<double>());
        }
    }
    return values;
}

inline std::filesystem::path checkpoint(const std::filesystem::path& run, int iter) {
    char name[32];
    std::snprintf(name, sizeof(name), "iter_%08d.ckpt", iter);
    return run / "checkpoints" / name;
}

/// The documented tolerance (docs/data-parallel.md): after a few steps the weights of N ranks
/// of batch b and of one rank of batch N*b differ only by float summation order, by at most
/// 1e-5 of the largest weight.
inline void expect_equivalent(const std::vector<float>& a, const std::vector<float>& b,
                              const std::string& what, bool must_differ = true) {
    ASSERT_EQ(a.size(), b.size());
    float largest = 0.0F;
    float worst = 0.0F;
    bool differ = false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        largest = std::max(largest, std::fabs(a[i]));
        worst = std::max(worst, std::fabs(a[i] - b[i]));
        differ = differ || a[i] != b[i];
    }
    EXPECT_LE(worst, 1e-5F * largest)
        << what << ": largest difference " << worst << " against weights up to " << largest;
    // Equal to the bit would mean the ranks were not summed at all but one rank's weights won.
    if (must_differ) {
        EXPECT_TRUE(differ) << what << ": bit-identical to one rank, which summation order forbids";
    }
    std::cout << what << ": largest weight difference " << worst << " (" << worst / largest
              << " of the largest weight)\n";
}

/// Starts a run of ranks whose processes write their pids (with_pids), waits for its first loss
/// line, does `action` (a shell snippet with $r0 and $r1), waits for the launcher, and prints
/// exit=CODE and secs=SECONDS it took after the action.
inline std::string around_a_run(const std::string& start, const std::filesystem::path& dir,
                                const std::filesystem::path& run, const std::string& action) {
    const std::string script =
        start + " > " + (dir / "out.txt").string() + " 2>&1 & job=$!; " +
        "for i in $(seq 1 600); do grep -q '\"train\"' " + (run / "metrics.jsonl").string() +
        " 2>/dev/null && [ -s " + (dir / "pid.1").string() + " ] && break; sleep 0.05; done; " +
        "r0=$(cat " + (dir / "pid.0").string() + "); r1=$(cat " + (dir / "pid.1").string() +
        "); t0=$(date +%s); " + action + "; wait $job; code=$?; t1=$(date +%s); cat " +
        (dir / "out.txt").string() + "; echo exit=$code; echo secs=$((t1 - t0)); " +
        "kill -KILL $r0 $r1 2>/dev/null; true";
    return "sh -c " + quoted(script);
}

inline int seconds_after(const std::string& output) {
    const auto at = output.rfind("secs=");
    return at == std::string::npos ? 1000 : std::stoi(output.substr(at + 5));
}

/// `command` run by a shell that first writes its pid to `dir`/pid.<rank>, the rank from
/// DLTRAIN_RANK or the MPI launcher's variables.
inline std::string with_pids(const std::filesystem::path& dir, const std::string& command) {
    return "sh -c " +
           quoted("echo $$ > " + dir.string() +
                  "/pid.${DLTRAIN_RANK:-${OMPI_COMM_WORLD_RANK:-$PMI_RANK}}; exec " + command);
}

} // namespace dl_test
