// The real dltrain binary: run directory, bit-identical resume, SIGTERM and deadline exits,
// exit codes. Pinned to --device cpu: the bit-for-bit claims are the CPU's (on a GPU machine
// dltrain would otherwise pick the GPU; its runs are in test_gpu_dltrain.cpp).

#include "engine_test_support.hpp"
#include "support/run_process.hpp"

#include <dl/checkpoint.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

namespace {

namespace fs = std::filesystem;
using dljob::test::run_shell;

class Dltrain : public ::testing::Test {
protected:
    dl_test::TempDir m_dir;

    fs::path workspace(int max_iter, const std::string& solver = "SGD", bool shuffle = false) {
        return dl_test::make_tiny_workspace(m_dir.path(), max_iter, solver, shuffle);
    }

    static std::string train_command(const fs::path& config, const fs::path& run_dir,
                                     const std::string& extra = "") {
        return std::string(DLTRAIN_BINARY) + " train --device cpu --config " + config.string() +
               " --run-dir " + run_dir.string() + " --threads 2 --deadline none " + extra;
    }

    // Whether the run wrote its final record (read whole: the writer may be mid-line).
    static bool metrics_end(const fs::path& run_dir) {
        std::ifstream in(run_dir / "metrics.jsonl");
        std::ostringstream text;
        text << in.rdbuf();
        const std::string all = text.str();
        return !all.empty() && all.back() == '\n' &&
               all.find(R"("type":"final")") != std::string::npos;
    }

    static std::string shell_quote(const std::string& text) {
        std::string quoted = "'";
        for (const char c : text) {
            quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
        }
        return quoted + "'";
    }

    // The tiny net with a second test Data layer, of stage on-train, on the training images
    // (12 a batch: 8 batches); the test set's layer excludes that stage.
    static std::string with_on_train_stage(std::string yaml) {
        const std::string test_data = "phase: test, source: test-images-idx3-ubyte,";
        EXPECT_NE(yaml.find(test_data), std::string::npos);
        yaml.replace(yaml.find(test_data), test_data.size(),
                     "phase: test, exclude: [{stage: [on-train]}], source: "
                     "test-images-idx3-ubyte,");
        yaml.insert(yaml.find("  - {name: conv1,"),
                    "  - {name: data, type: Data, top: [data, label], include: [{phase: test, "
                    "stage: [on-train]}],\n     source: train-images-idx3-ubyte, label_source: "
                    "train-labels-idx1-ubyte, batch_size: 12,\n     scale: 0.00390625}\n");
        return yaml;
    }

    static std::vector<nlohmann::json> metrics(const fs::path& run_dir) {
        std::vector<nlohmann::json> lines;
        std::ifstream in(run_dir / "metrics.jsonl");
        std::string line;
        while (std::getline(in, line)) {
            lines.push_back(nlohmann::json::parse(line));
        }
        return lines;
    }
};

TEST_F(Dltrain, TrainWritesTheRunDirectoryContract) {
    const auto config = workspace(100);
    const fs::path run = m_dir.path() / "run";
    const auto result = run_shell(train_command(config, run));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_TRUE(fs::exists(run / "config.resolved.yaml"));
    EXPECT_TRUE(fs::exists(run / "checkpoints" / "iter_00000100.ckpt"));
    EXPECT_TRUE(fs::exists(run / "checkpoints" / "iter_00000100.done"));
    const auto lines = metrics(run);
    ASSERT_GE(lines.size(), 3U);
    EXPECT_EQ(lines.front()["type"], "start");
    int train_lines = 0;
    for (const auto& line : lines) {
        if (line["type"] == "train") {
            ++train_lines;
            for (const char* key : {"iter", "max_iter", "loss", "lr", "images_per_s",
                                    "data_wait_fraction", "elapsed_s"}) {
                EXPECT_TRUE(line.contains(key)) << key << " missing in " << line.dump();
            }
        }
    }
    EXPECT_EQ(train_lines, 10);
    const auto& final_line = lines.back();
    EXPECT_EQ(final_line["type"], "final");
    EXPECT_EQ(final_line["status"], "completed");
    EXPECT_EQ(final_line["iter"], 100);
    // The tiny problem is learnable: well above chance (1/3) after 100 iterations.
    EXPECT_GT(final_line["test_accuracy"].get<double>(), 0.6) << final_line.dump();
    EXPECT_GT(final_line["train_images_per_s"].get<double>(), 0.0);
    // Where the wall time went: each part was timed (tests ran, a checkpoint was written), and
    // the parts that do not overlap fit in the whole.
    for (const char* key : {"setup_s", "first_step_s", "test_s", "checkpoint_s"}) {
        ASSERT_TRUE(final_line.contains(key)) << key << " missing in " << final_line.dump();
        EXPECT_GT(final_line[key].get<double>(), 0.0) << key << " in " << final_line.dump();
    }
    EXPECT_LE(final_line["setup_s"].get<double>() + final_line["test_s"].get<double>() +
                  final_line["checkpoint_s"].get<double>(),
              final_line["wall_s"].get<double>())
        << final_line.dump();
}

// The job's log is what people watch (`dljob logs --follow`, `tail -f slurm-*.out`): every
// metrics line is also printed on stdout, as text, with the same numbers.
TEST_F(Dltrain, StdoutShowsEachMetricsLineAsText) {
    const auto config = workspace(100);
    const fs::path run = m_dir.path() / "run";
    const auto result = run_shell("{ " + train_command(config, run) + " 2>/dev/null; }");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    std::vector<std::string> printed;
    std::istringstream out(result.output);
    for (std::string line; std::getline(out, line);) {
        printed.push_back(line);
    }
    const auto lines = metrics(run);
    ASSERT_EQ(printed.size(), lines.size()) << result.output;
    // The start line names the build (type and flags), so a slow run can be traced to it.
    const std::string build = lines.front().value("build", "");
    EXPECT_NE(build.find(" -O"), std::string::npos) << lines.front().dump();
    // ... and the CPU's BLAS kernels (dl/blas.hpp), so a slow CPU run shows them too.
    const std::string blas = lines.front().value("blas", "");
    EXPECT_FALSE(blas.empty()) << lines.front().dump();
    EXPECT_EQ(printed.front(), "dltrain: training from iteration 0 to 100 on cpu (2 threads), "
                               "batch 8, " +
                                   build + " build, OpenBLAS " + blas + " kernels");
    for (std::size_t i = 1; i + 1 < lines.size(); ++i) {
        const auto& line = lines[i];
        const std::string iter = fmt::format("iter {}/100  ", line["iter"].get<int>());
        if (line["type"] == "train") {
            EXPECT_EQ(printed[i].rfind(
                          iter + fmt::format("loss {:.4f}  lr ", line["loss"].get<double>()), 0),
                      0U)
                << printed[i];
            EXPECT_NE(printed[i].find(" img/s  data wait "), std::string::npos) << printed[i];
        } else {
            EXPECT_EQ(printed[i], iter + fmt::format("test accuracy {:.4f}  loss {:.4f}",
                                                     line["accuracy"].get<double>(),
                                                     line["loss"].get<double>()));
        }
    }
    const auto& last = lines.back();
    EXPECT_EQ(printed.back().rfind(fmt::format("dltrain: completed at iteration 100 of 100: test "
                                               "accuracy {:.4f}, loss {:.4f}; ",
                                               last["test_accuracy"].get<double>(),
                                               last["test_loss"].get<double>()),
                                   0),
              0U)
        << printed.back();
}

// dljob tells a job that makes progress from one that does not by the newest entry of the
// checkpoint directory: a run resumed from its own newest checkpoint that takes no step leaves
// the directory as it found it.
TEST_F(Dltrain, AResumeThatTakesNoStepRewritesNoCheckpoint) {
    const auto config = workspace(100);
    const fs::path run = m_dir.path() / "run";
    ASSERT_EQ(run_shell(train_command(config, run)).exit_code, 0);
    const fs::path newest = run / "checkpoints" / "iter_00000100.ckpt";
    ASSERT_TRUE(fs::exists(newest));
    const auto written = fs::last_write_time(newest);
    const auto entries = [&] {
        std::vector<std::string> names;
        for (const auto& entry : fs::directory_iterator(run / "checkpoints")) {
            names.push_back(entry.path().filename().string());
        }
        std::sort(names.begin(), names.end());
        return names;
    };
    const auto before = entries();
    const auto resumed = run_shell(train_command(config, run, "--resume auto"));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resuming from"), std::string::npos) << resumed.output;
    EXPECT_EQ(fs::last_write_time(newest), written);
    EXPECT_EQ(entries(), before);
}

TEST_F(Dltrain, ResumedRunIsBitIdenticalToAnUnbrokenOne) {
    // SGD-shuffled: a fresh data order every 12 iterations, so the resume lands mid-epoch.
    for (const std::string solver : {"SGD", "Adam", "SGD-shuffled"}) {
        const bool shuffled = solver == "SGD-shuffled";
        const auto config = workspace(200, shuffled ? "SGD" : solver, shuffled);
        const fs::path straight = m_dir.path() / ("straight_" + solver);
        const fs::path broken = m_dir.path() / ("broken_" + solver);
        ASSERT_EQ(run_shell(train_command(config, straight)).exit_code, 0);
        ASSERT_EQ(run_shell(train_command(config, broken, "--max-iter 100")).exit_code, 0);
        const auto resumed = run_shell(train_command(config, broken, "--resume auto"));
        ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
        EXPECT_NE(resumed.output.find("resuming from"), std::string::npos) << resumed.output;
        // Weights, momentum/Adam history, data cursors and RNG state, byte for byte.
        const std::string a = dl_test::read_file(straight / "checkpoints" / "iter_00000200.ckpt");
        const std::string b = dl_test::read_file(broken / "checkpoints" / "iter_00000200.ckpt");
        ASSERT_FALSE(a.empty());
        EXPECT_TRUE(a == b) << solver << ": the resumed run's iteration-200 checkpoint differs";
        // The same losses after the resume point.
        const auto loss_at = [](const std::vector<nlohmann::json>& lines, int iter) {
            for (const auto& line : lines) {
                if (line["type"] == "train" && line["iter"] == iter) {
                    return line["loss"].get<double>();
                }
            }
            return -1.0;
        };
        EXPECT_EQ(loss_at(metrics(straight), 150), loss_at(metrics(broken), 150));
    }
}

TEST_F(Dltrain, SigtermLeavesACompleteCheckpointAndExits75) {
    const auto config = workspace(1000000);
    const fs::path run = m_dir.path() / "run";
    // Start, wait for the first train line, send SIGTERM, report the exit code.
    const std::string script = train_command(config, run) + " & pid=$!; " +
                               "for i in $(seq 1 200); do grep -q '\"train\"' " +
                               (run / "metrics.jsonl").string() +
                               " 2>/dev/null && break; sleep 0.05; done; kill -TERM $pid; "
                               "wait $pid; echo exit=$?";
    const auto result = run_shell("sh -c '" + [&] {
        std::string quoted;
        for (const char c : script) {
            quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
        }
        return quoted;
    }() + "'");
    EXPECT_NE(result.output.find("exit=75"), std::string::npos) << result.output;
    const auto found = dl::find_latest_checkpoint(run / "checkpoints", [](const std::string&) {});
    ASSERT_TRUE(found) << "no complete checkpoint after SIGTERM";
    EXPECT_FALSE(dl::checkpoint_problem(*found));
    const auto lines = metrics(run);
    EXPECT_EQ(lines.back()["type"], "final");
    EXPECT_EQ(lines.back()["status"], "checkpointed");
    // The run goes on from there.
    const auto resumed = run_shell(train_command(
        config, run,
        "--resume auto --max-iter " + std::to_string(lines.back()["iter"].get<int>() + 20)));
    EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
}

// A rank whose parent is killed without a word to it (a YARN kill ends Spark's task, not the
// task's child): with DLTRAIN_DIE_WITH_PARENT=1 the parent's end is a SIGTERM, so the rank
// checkpoints and ends instead of training on as an orphan. SIGHUP (PySpark's daemon sends it
// to its group) is a stop too.
TEST_F(Dltrain, TheParentsDeathAndAHangupAreStopsThatCheckpoint) {
    const auto config = workspace(1000000);
    for (const char* how : {"parent", "hup"}) {
        const fs::path run = m_dir.path() / how;
        const std::string metrics_file = (run / "metrics.jsonl").string();
        const std::string wait_train = "for i in $(seq 1 200); do grep -q '\"train\"' " +
                                       metrics_file + " 2>/dev/null && break; sleep 0.05; done; ";
        // The parent: a shell that starts dltrain, waits for its first step and is killed.
        const std::string parent = std::string(how) == "parent"
                                       ? "DLTRAIN_DIE_WITH_PARENT=1 " + train_command(config, run) +
                                             " & " + wait_train + "kill -KILL $$"
                                       : train_command(config, run) + " & pid=$!; " + wait_train +
                                             "kill -HUP $pid; wait $pid; echo exit=$?";
        const auto result = run_shell("sh -c " + shell_quote(parent));
        if (std::string(how) == "hup") {
            EXPECT_NE(result.output.find("exit=75"), std::string::npos) << result.output;
        }
        // The orphan's end is not waited for by anyone: look for its final record, bounded.
        for (int i = 0; i < 600 && !metrics_end(run); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        const auto lines = metrics(run);
        ASSERT_FALSE(lines.empty()) << how;
        EXPECT_EQ(lines.back()["type"], "final") << how;
        EXPECT_EQ(lines.back()["status"], "checkpointed") << how;
        EXPECT_TRUE(dl::find_latest_checkpoint(run / "checkpoints", [](const std::string&) {}))
            << how;
    }
}

TEST_F(Dltrain, DeadlineCheckpointsAndExits75) {
    const auto config = workspace(100000000);
    const fs::path run = m_dir.path() / "run";
    const auto result =
        run_shell(std::string(DLTRAIN_BINARY) + " train --device cpu --config " + config.string() +
                  " --run-dir " + run.string() + " --threads 1 --deadline 1");
    EXPECT_EQ(result.exit_code, 75) << result.output;
    EXPECT_TRUE(dl::find_latest_checkpoint(run / "checkpoints", [](const std::string&) {}));
}

TEST_F(Dltrain, SchedulerEndTimeFromTheEnvironmentIsHonoured) {
    const auto config = workspace(100000000);
    const fs::path run = m_dir.path() / "run";
    // An end time 121 s from now leaves 1 s after the 120 s safety margin.
    const auto result = run_shell("SLURM_JOB_END_TIME=$(( $(date +%s) + 121 )) " +
                                  std::string(DLTRAIN_BINARY) + " train --device cpu --config " +
                                  config.string() + " --run-dir " + run.string() + " --threads 1");
    EXPECT_EQ(result.exit_code, 75) << result.output;
}

TEST_F(Dltrain, ExitCodesSeparateUsageConfigAndData) {
    const auto config = workspace(10);
    EXPECT_EQ(run_shell(std::string(DLTRAIN_BINARY) + " train --config").exit_code, 2);
    EXPECT_EQ(run_shell(std::string(DLTRAIN_BINARY) + " train --device cpu --config " +
                        config.string() + " --run-dir " + (m_dir.path() / "r").string() +
                        " --deadline soon")
                  .exit_code,
              2);
    const auto missing = run_shell(train_command(config, m_dir.path() / "r2",
                                                 "--data-dir " + (m_dir.path() / "none").string()));
    EXPECT_EQ(missing.exit_code, 3) << missing.output;
    std::ofstream(m_dir.path() / "bad.yaml") << "layers:\n  - {name: x, type: Nope}\n";
    const auto bad = run_shell(train_command(m_dir.path() / "bad.yaml", m_dir.path() / "r3"));
    EXPECT_EQ(bad.exit_code, 3);
    EXPECT_NE(bad.output.find("bad.yaml:2"), std::string::npos) << bad.output;
}

TEST_F(Dltrain, WeightsStartAFineTuneAndARequeuedJobResumesItsOwnRun) {
    const auto config = workspace(50);
    const fs::path pretrained = m_dir.path() / "pretrained";
    ASSERT_EQ(run_shell(train_command(config, pretrained)).exit_code, 0);
    const std::string weights =
        "--weights " + (pretrained / "checkpoints" / "iter_00000050.ckpt").string();
    const auto first_loss = [](const std::vector<nlohmann::json>& lines) {
        for (const auto& line : lines) {
            if (line["type"] == "train") {
                return line["loss"].get<double>();
            }
        }
        return -1.0;
    };

    const fs::path tuned = m_dir.path() / "tuned";
    const auto first = run_shell(train_command(config, tuned, "--max-iter 60 " + weights));
    ASSERT_EQ(first.exit_code, 0) << first.output;
    EXPECT_NE(first.output.find("6 parameters from"), std::string::npos) << first.output;
    const auto lines = metrics(tuned);
    EXPECT_NE(lines.front()["weights_from"].get<std::string>().find("iter_00000050.ckpt"),
              std::string::npos);
    // Iteration 0 starts from trained weights (a fresh start's solver and data position).
    EXPECT_EQ(lines[1]["iter"], 0);
    EXPECT_LT(first_loss(lines), 0.8 * first_loss(metrics(pretrained)));

    // The job requeued with the same command line: its own checkpoint wins over --weights.
    const auto again =
        run_shell(train_command(config, tuned, "--max-iter 80 --resume auto " + weights));
    ASSERT_EQ(again.exit_code, 0) << again.output;
    EXPECT_NE(again.output.find("resuming from"), std::string::npos) << again.output;
    EXPECT_NE(again.output.find("--weights not used"), std::string::npos) << again.output;
    const auto resumed = metrics(tuned);
    const auto start = std::find_if(resumed.begin(), resumed.end(), [](const auto& line) {
        return line["type"] == "start" && line["iter"] == 60;
    });
    ASSERT_NE(start, resumed.end());
    EXPECT_EQ((*start)["weights_from"], "");
}

TEST_F(Dltrain, BadWeightsLeaveNoRunDirectory) {
    const auto config = workspace(10);
    const fs::path run = m_dir.path() / "run";
    const auto missing =
        run_shell(train_command(config, run, "--weights " + (m_dir.path() / "no.ckpt").string()));
    EXPECT_EQ(missing.exit_code, 3) << missing.output;
    EXPECT_NE(missing.output.find("weights file " + (m_dir.path() / "no.ckpt").string() +
                                  " does not exist"),
              std::string::npos)
        << missing.output;
    EXPECT_FALSE(fs::exists(run));
    // Caffe's rule: resume a snapshot or fine-tune from weights, not both.
    const auto both =
        run_shell(train_command(config, run,
                                "--resume " + (m_dir.path() / "a.ckpt").string() + " --weights " +
                                    (m_dir.path() / "b.ckpt").string()));
    EXPECT_EQ(both.exit_code, 2) << both.output;
    EXPECT_NE(both.output.find("not both"), std::string::npos) << both.output;
    EXPECT_FALSE(fs::exists(run));
}

TEST_F(Dltrain, CheckBuildsTheNetsWithoutTraining) {
    const auto config = workspace(10);
    const std::string check = std::string(DLTRAIN_BINARY) + " check --config ";
    // The tiny config has no `shape`: its data, next to it, gives the shapes.
    const auto good = run_shell(check + config.string());
    EXPECT_EQ(good.exit_code, 0) << good.output;
    EXPECT_NE(good.output.find(": ok"), std::string::npos) << good.output;

    std::string text = dl_test::read_file(config);
    const auto at = text.find("kernel_size: 3");
    ASSERT_NE(at, std::string::npos);
    text.replace(at, 14, "kernel_size: 30");
    std::ofstream(m_dir.path() / "bad.yaml") << text;
    const auto bad = run_shell(check + (m_dir.path() / "bad.yaml").string());
    EXPECT_EQ(bad.exit_code, 3) << bad.output;
    EXPECT_NE(bad.output.find("bad.yaml:"), std::string::npos) << bad.output;
    EXPECT_NE(bad.output.find("kernel_size 30 does not fit"), std::string::npos) << bad.output;

    // Elsewhere, without its data and without `shape`: it parses; the rest waits for the job.
    fs::create_directories(m_dir.path() / "elsewhere");
    fs::copy_file(config, m_dir.path() / "elsewhere" / "tiny.yaml");
    const auto away = run_shell(check + (m_dir.path() / "elsewhere" / "tiny.yaml").string());
    EXPECT_EQ(away.exit_code, 0) << away.output;
    EXPECT_NE(away.output.find("not checked: layer 'data' has no 'shape'"), std::string::npos)
        << away.output;
    EXPECT_NE(away.output.find(": parses"), std::string::npos) << away.output;
    const auto with_data = run_shell(check + (m_dir.path() / "elsewhere" / "tiny.yaml").string() +
                                     " --data-dir " + m_dir.path().string());
    EXPECT_EQ(with_data.exit_code, 0) << with_data.output;
    EXPECT_NE(with_data.output.find(": ok"), std::string::npos) << with_data.output;
}

// `dltrain time`: a row per layer with wall-clock and CPU milliseconds, forward and backward, and
// the step's CPU in all; every figure a non-negative number, the CPU total their sum.
TEST_F(Dltrain, CheckRefusesAPoolingLayerInPlace) {
    // Its top named as its bottom: check passed, and train segfaulted.
    const auto config = workspace(10);
    std::string text = dl_test::read_file(config);
    const std::string pool = "bottom: conv1, top: pool1";
    ASSERT_NE(text.find(pool), std::string::npos);
    text.replace(text.find(pool), pool.size(), "bottom: conv1, top: conv1");
    text.replace(text.find("bottom: pool1"), 13, "bottom: conv1");
    std::ofstream(config) << text;
    const auto check =
        run_shell(std::string(DLTRAIN_BINARY) + " check --config " + config.string());
    EXPECT_EQ(check.exit_code, 3) << check.output;
    EXPECT_NE(check.output.find("tiny.yaml:9: layer 'pool1' (Pooling): top 'conv1' is also its "
                                "bottom, and layer type Pooling cannot run in place"),
              std::string::npos)
        << check.output;
    const auto train = run_shell(train_command(config, m_dir.path() / "run"));
    EXPECT_EQ(train.exit_code, 3) << train.output;
}

TEST_F(Dltrain, TimePrintsWallAndCpuMillisecondsPerLayer) {
    const auto config = workspace(10);
    const auto result = run_shell(std::string(DLTRAIN_BINARY) + " time --device cpu --config " +
                                  config.string() + " --threads 1 --iterations 3");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    std::istringstream out(result.output);
    std::string header;
    std::getline(out, header);
    EXPECT_NE(header.find("fwd cpu ms"), std::string::npos) << header;
    EXPECT_NE(header.find("bwd cpu ms"), std::string::npos) << header;
    std::vector<std::string> layers;
    double cpu_sum = 0.0;
    std::string line;
    while (std::getline(out, line) && line.rfind("Average", 0) != 0) {
        std::istringstream row(line);
        std::string name;
        std::string type;
        std::array<double, 4> ms{-1.0, -1.0, -1.0, -1.0};
        row >> name >> type >> ms[0] >> ms[1] >> ms[2] >> ms[3];
        ASSERT_FALSE(row.fail()) << line;
        for (double value : ms) {
            EXPECT_GE(value, 0.0) << line;
        }
        cpu_sum += ms[2] + ms[3];
        layers.push_back(name);
    }
    EXPECT_EQ(layers, (std::vector<std::string>{"data", "conv1", "pool1", "ip1", "relu1", "drop1",
                                                "ip2", "loss"}));
    const auto at = result.output.find("Average CPU time per forward-backward: ");
    ASSERT_NE(at, std::string::npos) << result.output;
    const double cpu_total = std::stod(result.output.substr(at + 39));
    EXPECT_GT(cpu_total, 0.0);
    EXPECT_NEAR(cpu_total, cpu_sum, 0.001 * static_cast<double>(layers.size()) + 1e-9);
}

TEST_F(Dltrain, TestCommandScoresACheckpoint) {
    const auto config = workspace(60);
    const fs::path run = m_dir.path() / "run";
    ASSERT_EQ(run_shell(train_command(config, run)).exit_code, 0);
    const auto result =
        run_shell(std::string(DLTRAIN_BINARY) + " test --device cpu --config " + config.string() +
                  " --weights " + (run / "checkpoints" / "iter_00000060.ckpt").string());
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const auto line = nlohmann::json::parse(result.output);
    EXPECT_EQ(line["iter"], 60);
    EXPECT_GT(line["accuracy"].get<double>(), 0.5);
    // Caffe's `caffe test -iterations N`: that many batches; 0 is refused.
    const auto two = run_shell(std::string(DLTRAIN_BINARY) + " test --device cpu --config " +
                               config.string() + " --iterations 2 --weights " +
                               (run / "checkpoints" / "iter_00000060.ckpt").string());
    ASSERT_EQ(two.exit_code, 0) << two.output;
    EXPECT_EQ(nlohmann::json::parse(two.output)["batches"], 2);
    EXPECT_NE(line["batches"], 2);
    const auto zero = run_shell(std::string(DLTRAIN_BINARY) + " test --device cpu --config " +
                                config.string() + " --iterations 0 --weights " +
                                (run / "checkpoints" / "iter_00000060.ckpt").string() + " 2>&1");
    EXPECT_EQ(zero.exit_code, 2) << zero.output;
}

// Caffe's -stage and -level (and dltrain's --stage, --level): `test` builds the test net of that
// state (here a second test Data layer, on the training images, 12 a batch: the whole set is 8
// batches), `time` and `train` the train net of that level (a layer from level 1 up).
TEST_F(Dltrain, StageAndLevelBuildTheNetOfThatState) {
    const auto config = workspace(20);
    std::string yaml = with_on_train_stage(dl_test::read_file(config));
    const std::string excluded = "exclude: [{stage: [on-train]}]";
    yaml.replace(yaml.find(excluded), excluded.size(),
                 "exclude: [{stage: [on-train]}, {stage: [bare]}]");
    yaml.insert(yaml.find("  - {name: accuracy,"),
                "  - {name: deep, type: ReLU, bottom: ip2, top: ip2, include: [{min_level: 1}]}\n");
    std::ofstream(config, std::ios::trunc) << yaml;
    const fs::path run = m_dir.path() / "run";
    ASSERT_EQ(run_shell(train_command(config, run, "--level 1 --stage warm")).exit_code, 0);
    const std::string resolved = dl_test::read_file(run / "config.resolved.yaml");
    EXPECT_NE(resolved.find("train_state: {level: 1, stage: [warm]}"), std::string::npos)
        << resolved;
    const std::string weights = (run / "checkpoints" / "iter_00000020.ckpt").string();
    const std::string test = std::string(DLTRAIN_BINARY) + " test --device cpu --config " +
                             config.string() + " --weights " + weights;
    const auto plain = run_shell(test);
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    EXPECT_EQ(nlohmann::json::parse(plain.output)["batches"], 3); // the solver's test_iter
    EXPECT_FALSE(nlohmann::json::parse(plain.output).contains("stages"));
    for (const std::string flag : {" --stage on-train", " -stage on-train", " -stage=on-train"}) {
        const auto staged = run_shell(test + flag);
        ASSERT_EQ(staged.exit_code, 0) << flag << ": " << staged.output;
        const auto line = nlohmann::json::parse(staged.output);
        EXPECT_EQ(line["batches"], 8) << flag;
        EXPECT_EQ(line["stages"], nlohmann::json::array({"on-train"})) << flag;
    }
    // A state whose net has no Data layer (the test set's excludes stage bare): said with it.
    const auto bare = run_shell(test + " --stage bare 2>&1");
    EXPECT_EQ(bare.exit_code, 3) << bare.output;
    EXPECT_NE(bare.output.find("no Data layer in the test net (test level 0 stages [bare])"),
              std::string::npos)
        << bare.output;
    const std::string time = std::string(DLTRAIN_BINARY) + " time --device cpu --config " +
                             config.string() + " --threads 1 --iterations 1";
    const auto shallow = run_shell(time);
    const auto deep = run_shell(time + " -level 1");
    ASSERT_EQ(shallow.exit_code, 0) << shallow.output;
    ASSERT_EQ(deep.exit_code, 0) << deep.output;
    EXPECT_EQ(shallow.output.find("\ndeep "), std::string::npos) << shallow.output;
    EXPECT_NE(deep.output.find("\ndeep "), std::string::npos) << deep.output;
}

// A test net on the train net's files (the MNIST autoencoder's test-on-train net) shares the
// train net's copy of them: the run holds no more data than with the test set's net alone.
TEST_F(Dltrain, ATestNetOnTheTrainFilesSharesTheirCopy) {
    const auto config = workspace(10);
    const std::string plain = dl_test::read_file(config);
    std::string staged = with_on_train_stage(plain);
    const std::string test_iter = "  test_iter: 3\n";
    staged.replace(staged.find(test_iter), test_iter.size(),
                   "  test_state: [{test_iter: 2, stage: [on-train]}, {test_iter: 3}]\n");
    const auto data_bytes = [this](const std::string& yaml, const std::string& name) {
        const fs::path file = m_dir.path() / (name + ".yaml");
        std::ofstream(file) << yaml;
        const fs::path run = m_dir.path() / name;
        const auto result = run_shell(train_command(file, run));
        EXPECT_EQ(result.exit_code, 0) << result.output;
        const auto lines = metrics(run);
        const auto tests = std::count_if(lines.begin(), lines.end(),
                                         [](const auto& line) { return line["type"] == "test"; });
        return std::make_pair(lines.empty() ? -1 : lines.front().value("data_bytes", -1), tests);
    };
    const auto [alone, one_test] = data_bytes(plain, "plain");
    const auto [shared, two_tests] = data_bytes(staged, "staged");
    EXPECT_EQ(one_test, 2);    // before the first step and at the end (test_interval 50)
    EXPECT_EQ(two_tests, 4);   // the on-train net's and the test set's, each time
    EXPECT_GT(alone, 96 * 64); // the train set's pixels at least
    EXPECT_EQ(shared, alone);
}

TEST_F(Dltrain, GzipAndRawDataGiveTheSameTraining) {
    const auto config = workspace(30);
    const fs::path gz_dir = m_dir.path() / "gz";
    fs::create_directories(gz_dir);
    dl_test::write_tiny_dataset(gz_dir, "train", 96, 8, 1, true);
    dl_test::write_tiny_dataset(gz_dir, "test", 30, 8, 2, true);
    // The config names the raw files; the gz ones get the raw names via a second config.
    std::string text = dl_test::read_file(config);
    for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                             "test-images-idx3-ubyte", "test-labels-idx1-ubyte"}) {
        const auto pos = text.find(name);
        text.insert(pos + std::string(name).size(), ".gz");
    }
    std::ofstream(m_dir.path() / "gz.yaml") << text;
    ASSERT_EQ(run_shell(train_command(config, m_dir.path() / "raw_run")).exit_code, 0);
    ASSERT_EQ(run_shell(train_command(m_dir.path() / "gz.yaml", m_dir.path() / "gz_run",
                                      "--data-dir " + gz_dir.string()))
                  .exit_code,
              0);
    EXPECT_EQ(dl_test::read_file(m_dir.path() / "raw_run" / "checkpoints" / "iter_00000030.ckpt"),
              dl_test::read_file(m_dir.path() / "gz_run" / "checkpoints" / "iter_00000030.ckpt"));
}

} // namespace

namespace {

TEST(DltrainThreads, OneAndThreeThreadsTrainBitIdentically) {
    const dl_test::TempDir dir;
    const auto config = dl_test::make_tiny_workspace(dir.path(), 40);
    for (const char* threads : {"1", "3"}) {
        const auto result = dljob::test::run_shell(
            std::string(DLTRAIN_BINARY) + " train --device cpu --config " + config.string() +
            " --run-dir " + (dir.path() / threads).string() + " --deadline none --threads " +
            threads);
        ASSERT_EQ(result.exit_code, 0) << result.output;
    }
    EXPECT_TRUE(dl_test::read_file(dir.path() / "1" / "checkpoints" / "iter_00000040.ckpt") ==
                dl_test::read_file(dir.path() / "3" / "checkpoints" / "iter_00000040.ckpt"));
}

// A job given one CPU of the node (Slurm's cpuset, srun --cpu-bind, taskset) gets one thread by
// default, not one per CPU of the node.
TEST(DltrainThreads, DefaultThreadCountFollowsTheCpuAffinity) {
    const dl_test::TempDir dir;
    const auto config = dl_test::make_tiny_workspace(dir.path(), 2);
    const auto result = dljob::test::run_shell(
        "taskset -c 0 " + std::string(DLTRAIN_BINARY) + " train --device cpu --config " +
        config.string() + " --run-dir " + (dir.path() / "run").string() + " --deadline none");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    std::ifstream in(dir.path() / "run" / "metrics.jsonl");
    std::string first;
    std::getline(in, first);
    const auto start = nlohmann::json::parse(first);
    EXPECT_EQ(start.at("type"), "start");
    EXPECT_EQ(start.at("threads"), 1) << first;
}

} // namespace
