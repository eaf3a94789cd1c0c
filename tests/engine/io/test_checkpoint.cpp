// Checkpoint integrity: a truncated, corrupted or unfinished checkpoint is detected and the
// previous complete one is used; only the newest N are kept.

#include "engine_test_support.hpp"
#include "io/checksum.hpp"

#include <dl/backend.hpp>
#include <dl/checkpoint.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>
#include <dl/solver.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

namespace dl {
namespace {

namespace fs = std::filesystem;

class Checkpoints : public ::testing::Test {
protected:
    dl_test::TempDir m_dir;
    NetConfig m_config = [] {
        NetConfig config = parse_config(dl_test::tiny_net_yaml(10), "tiny.yaml");
        for (auto& layer : config.layers) {
            layer.shape = {1, 8, 8};
        }
        return config;
    }();
    std::unique_ptr<Backend> m_backend = make_backend("cpu", 1);
    Net m_net{m_config, Phase::train, *m_backend, 3};
    Solver m_solver{m_config.solver, m_net, *m_backend};

    fs::path save(int iteration, int keep = 5) {
        TrainingState state;
        state.iteration = iteration;
        state.train_cursor = static_cast<std::uint64_t>(iteration) * 8;
        // Two test nets (Caffe's test_state), each with its cursor.
        state.test_cursors = {static_cast<std::uint64_t>(iteration) * 2,
                              static_cast<std::uint64_t>(iteration) * 3};
        state.test_nets = {"test level 0 stages [on-train]", "test level 0 stages [on-test]"};
        std::ostringstream rng;
        rng << m_net.rng();
        state.rng_state = rng.str(); // as dltrain writes it: a checkpoint without one is refused
        // Make the weights depend on the iteration, so the loaded one can be told apart.
        m_net.params()[0].tensor->data()[0] = static_cast<float>(iteration);
        m_solver.history()[0].data()[0] = static_cast<float>(iteration) / 2;
        return write_checkpoint(m_dir.path(), state, m_net, m_solver, keep);
    }

    std::optional<fs::path> latest(std::vector<std::string>& warnings) {
        return find_latest_checkpoint(
            m_dir.path(), [&](const std::string& warning) { warnings.push_back(warning); });
    }
};

TEST_F(Checkpoints, RoundTripRestoresWeightsHistoryAndState) {
    const fs::path file = save(40);
    m_net.params()[0].tensor->data()[0] = -1.0F;
    m_solver.history()[0].data()[0] = -1.0F;
    const TrainingState state = read_checkpoint(file, m_net, &m_solver);
    EXPECT_EQ(state.iteration, 40);
    EXPECT_EQ(state.train_cursor, 320U);
    EXPECT_EQ(state.test_cursors, (std::vector<std::uint64_t>{80U, 120U}));
    EXPECT_EQ(state.test_nets, (std::vector<std::string>{"test level 0 stages [on-train]",
                                                         "test level 0 stages [on-test]"}));
    EXPECT_EQ(m_solver.iteration(), 40);
    EXPECT_EQ(m_net.params()[0].tensor->data()[0], 40.0F);
    EXPECT_EQ(m_solver.history()[0].data()[0], 20.0F);
}

TEST_F(Checkpoints, TruncatedNewestIsSkippedWithAWarning) {
    save(10);
    const fs::path newest = save(20);
    fs::resize_file(newest, fs::file_size(newest) - 100);
    std::vector<std::string> warnings;
    const auto found = latest(warnings);
    ASSERT_TRUE(found);
    EXPECT_EQ(found->filename(), "iter_00000010.ckpt");
    ASSERT_EQ(warnings.size(), 1U);
    EXPECT_NE(warnings[0].find("truncated"), std::string::npos) << warnings[0];
}

TEST_F(Checkpoints, FlippedByteIsDetectedByTheChecksum) {
    save(10);
    const fs::path newest = save(20);
    for (const std::size_t offset :
         {std::size_t{9}, std::size_t{5000}, fs::file_size(newest) - 3}) {
        std::string bytes = dl_test::read_file(newest);
        const std::string original = bytes;
        bytes[offset] = static_cast<char>(bytes[offset] ^ 0x10);
        std::ofstream(newest, std::ios::binary | std::ios::trunc) << bytes;
        const auto problem = checkpoint_problem(newest);
        ASSERT_TRUE(problem) << "flip at " << offset << " not detected";
        EXPECT_NE(problem->find("checksum"), std::string::npos) << *problem;
        std::vector<std::string> warnings;
        EXPECT_EQ(latest(warnings)->filename(), "iter_00000010.ckpt");
        std::ofstream(newest, std::ios::binary | std::ios::trunc) << original;
        EXPECT_FALSE(checkpoint_problem(newest));
    }
}

TEST_F(Checkpoints, KillDuringWriteLeavesThePreviousOneUsable) {
    save(10);
    // A kill before the marker: the data file is whole but has no completion marker, and a
    // kill mid-write leaves only a .tmp file.
    const fs::path newest = save(20);
    fs::remove(fs::path(newest).replace_extension(".done"));
    std::ofstream(m_dir.path() / "iter_00000030.ckpt.tmp") << "partial";
    std::vector<std::string> warnings;
    const auto found = latest(warnings);
    ASSERT_TRUE(found);
    EXPECT_EQ(found->filename(), "iter_00000010.ckpt");
    const TrainingState state = read_checkpoint(*found, m_net, &m_solver);
    EXPECT_EQ(state.iteration, 10);
    EXPECT_EQ(m_net.params()[0].tensor->data()[0], 10.0F);
}

TEST_F(Checkpoints, ReadingACorruptCheckpointDirectlyFails) {
    const fs::path file = save(10);
    fs::resize_file(file, 64);
    EXPECT_THROW(read_checkpoint(file, m_net, &m_solver), Error);
}

TEST_F(Checkpoints, KeepsOnlyTheNewestN) {
    for (int i = 1; i <= 5; ++i) {
        save(i * 10, 2);
    }
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(m_dir.path())) {
        names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"iter_00000040.ckpt", "iter_00000040.done",
                                               "iter_00000050.ckpt", "iter_00000050.done"}));
}

NetConfig renamed(NetConfig config, const std::string& from, const std::string& to) {
    for (auto& layer : config.layers) {
        if (layer.name == from) {
            layer.name = to;
        }
    }
    return config;
}

std::vector<float> values(const Net& net, const std::string& name) {
    for (const auto& param : net.params()) {
        if (param.name == name) {
            return {param.tensor->data(), param.tensor->data() + param.tensor->count()};
        }
    }
    ADD_FAILURE() << "no parameter " << name;
    return {};
}

TEST_F(Checkpoints, WeightsAreCopiedByNameAndARenamedLayerKeepsItsFiller) {
    const fs::path file = save(7);
    // Caffe's fine-tuning move: rename the last layer so that it starts from its filler.
    const NetConfig config = renamed(m_config, "ip2", "ip2_new");
    Net net(config, Phase::train, *m_backend, 99);
    const auto filler = values(net, "ip2_new.0");
    ASSERT_NE(values(net, "conv1.0"), values(m_net, "conv1.0")); // another seed: other weights
    const WeightsCopy copy = copy_weights(file, net);
    EXPECT_EQ(copy.copied, (std::vector<std::string>{"conv1.0", "conv1.1", "ip1.0", "ip1.1"}));
    EXPECT_EQ(copy.kept, (std::vector<std::string>{"ip2_new.0", "ip2_new.1"}));
    EXPECT_EQ(copy.unused, (std::vector<std::string>{"ip2.0", "ip2.1"}));
    for (const char* name : {"conv1.0", "conv1.1", "ip1.0", "ip1.1"}) {
        EXPECT_EQ(values(net, name), values(m_net, name)) << name;
    }
    EXPECT_EQ(values(net, "ip2_new.0"), filler);
}

TEST_F(Checkpoints, WeightsOfAnotherShapeAreRefusedNamingBothShapes) {
    const fs::path file = save(7);
    NetConfig config = m_config;
    for (auto& layer : config.layers) {
        if (layer.name == "ip1") {
            layer.num_output = 12;
        }
    }
    Net net(config, Phase::train, *m_backend, 3);
    try {
        (void)copy_weights(file, net);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::config);
        const std::string message = e.what();
        EXPECT_NE(message.find("ip1.0 is 16x64 there and 12x64 in the network"), std::string::npos)
            << message;
        EXPECT_NE(message.find(file.string()), std::string::npos) << message;
    }
}

TEST_F(Checkpoints, WeightsSharingNoParameterNameAreRefused) {
    const fs::path file = save(7);
    const NetConfig config =
        renamed(renamed(renamed(m_config, "conv1", "c1"), "ip1", "f1"), "ip2", "f2");
    Net net(config, Phase::train, *m_backend, 3);
    try {
        (void)copy_weights(file, net);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::config);
        EXPECT_NE(std::string(e.what()).find("has no parameter of this network (it has: conv1.0"),
                  std::string::npos)
            << e.what();
    }
}

// ---- crafted checkpoints: a valid checksum over lengths that lie -----------------------------

/// Byte offsets of a checkpoint's fields, found by walking it as docs/engine.md lays it out.
struct Offsets {
    std::size_t iteration = 12;
    std::size_t test_count = 24; // then per test net a u64 cursor and its state's text
    std::size_t rng_length = 0;
    std::size_t rng_text = 0;
    std::size_t param_count = 0;
    std::size_t first_name_length = 0;
    std::size_t first_rank = 0;
    std::size_t first_dim = 0;
    std::size_t history_count = 0;
    std::size_t first_history_size = 0;
};

template <typename T> T get_at(const std::string& bytes, std::size_t at) {
    T value{};
    std::memcpy(&value, bytes.data() + at, sizeof(T));
    return value;
}
template <typename T> void put_at(std::string& bytes, std::size_t at, T value) {
    std::memcpy(bytes.data() + at, &value, sizeof(T));
}

Offsets offsets_of(const std::string& bytes) {
    Offsets at;
    std::size_t net = at.test_count + 4;
    for (std::uint32_t i = 0; i < get_at<std::uint32_t>(bytes, at.test_count); ++i) {
        net += 8;
        net += 4 + get_at<std::uint32_t>(bytes, net);
    }
    at.rng_length = net;
    at.rng_text = net + 4;
    at.param_count = at.rng_text + get_at<std::uint32_t>(bytes, at.rng_length);
    std::size_t pos = at.param_count + 4;
    const auto params = get_at<std::uint32_t>(bytes, at.param_count);
    for (std::uint32_t i = 0; i < params; ++i) {
        if (i == 0) {
            at.first_name_length = pos;
        }
        pos += 4 + get_at<std::uint32_t>(bytes, pos);
        if (i == 0) {
            at.first_rank = pos;
            at.first_dim = pos + 4;
        }
        const auto rank = get_at<std::uint32_t>(bytes, pos);
        pos += 4;
        std::size_t count = 1;
        for (std::uint32_t d = 0; d < rank; ++d) {
            count *= static_cast<std::size_t>(get_at<std::int32_t>(bytes, pos));
            pos += 4;
        }
        pos += count * sizeof(float);
    }
    at.history_count = pos;
    at.first_history_size = pos + 4;
    return at;
}

/// Rewrites the checkpoint with `bytes` (checksum excluded) and a fresh checksum and marker: the
/// file is then exactly what a writer with those lengths would have left.
void rewrite(const fs::path& file, std::string body) {
    const std::uint64_t sum = io::checksum(body.data(), body.size());
    body.append(reinterpret_cast<const char*>(&sum), sizeof(sum));
    std::ofstream(file, std::ios::binary | std::ios::trunc) << body;
    std::ofstream(fs::path(file).replace_extension(".done"), std::ios::trunc)
        << fmt::format("size={} xxh64={:016x}\n", body.size(), sum);
}

// A version 1 checkpoint (one u64 test cursor, no count), as dltrain wrote before Caffe's
// several test nets, still resumes.
TEST_F(Checkpoints, VersionOneWithItsSingleTestCursorStillReads) {
    const fs::path file = save(30);
    const std::string original = dl_test::read_file(file);
    std::string body = original.substr(0, original.size() - sizeof(std::uint64_t));
    const Offsets at = offsets_of(body);
    ASSERT_EQ(get_at<std::uint32_t>(body, 8), 3U);
    ASSERT_EQ(get_at<std::uint32_t>(body, at.test_count), 2U);
    put_at<std::uint32_t>(body, 8, 1U);
    // The count and the test nets' cursors and states become one u64 cursor.
    std::string cursor(sizeof(std::uint64_t), '\0');
    put_at<std::uint64_t>(cursor, 0, 77U);
    body.replace(at.test_count, at.rng_length - at.test_count, cursor);
    rewrite(file, body);
    m_net.params()[0].tensor->data()[0] = -1.0F;
    const TrainingState state = read_checkpoint(file, m_net, &m_solver);
    EXPECT_EQ(state.iteration, 30);
    EXPECT_EQ(state.train_cursor, 240U);
    EXPECT_EQ(state.test_cursors, std::vector<std::uint64_t>{77U});
    EXPECT_TRUE(state.test_nets.empty());
    EXPECT_EQ(m_net.params()[0].tensor->data()[0], 30.0F);
}

// Version 2: a count and the cursors, without the nets' states; read by position.
TEST_F(Checkpoints, VersionTwoWithoutTheNetsStatesStillReads) {
    const fs::path file = save(30);
    const std::string original = dl_test::read_file(file);
    std::string body = original.substr(0, original.size() - sizeof(std::uint64_t));
    const Offsets at = offsets_of(body);
    put_at<std::uint32_t>(body, 8, 2U);
    std::string cursors(4 + 2 * sizeof(std::uint64_t), '\0');
    put_at<std::uint32_t>(cursors, 0, 2U);
    put_at<std::uint64_t>(cursors, 4, 5U);
    put_at<std::uint64_t>(cursors, 12, 6U);
    body.replace(at.test_count, at.rng_length - at.test_count, cursors);
    rewrite(file, body);
    const TrainingState state = read_checkpoint(file, m_net, &m_solver);
    EXPECT_EQ(state.test_cursors, (std::vector<std::uint64_t>{5U, 6U}));
    EXPECT_TRUE(state.test_nets.empty());
    EXPECT_EQ(test_cursors_for(state, {"test level 0 stages [x]"}), std::vector<std::uint64_t>{5U});
}

// Each test net resumes at its own cursor, found by its state: a config that dropped or
// reordered test nets between runs hands none another's position.
TEST(TestCursors, GoToTheNetOfTheSameState) {
    TrainingState saved;
    saved.test_cursors = {1, 2, 3};
    saved.test_nets = {"a", "b", "c"};
    EXPECT_EQ(test_cursors_for(saved, {"a", "c"}), (std::vector<std::uint64_t>{1, 3}));
    EXPECT_EQ(test_cursors_for(saved, {"c", "a", "new"}), (std::vector<std::uint64_t>{3, 1, 0}));
    // Several nets of one state (test_iter without test_state): the k-th takes the k-th.
    saved.test_cursors = {5, 6};
    saved.test_nets = {"t", "t"};
    EXPECT_EQ(test_cursors_for(saved, {"t", "t", "t"}), (std::vector<std::uint64_t>{5, 6, 0}));
}

TEST_F(Checkpoints, CraftedLengthsAreRefusedBeforeAnythingIsAllocated) {
    save(10);
    const fs::path newest = save(20);
    const std::string original = dl_test::read_file(newest);
    const std::string body = original.substr(0, original.size() - sizeof(std::uint64_t));
    const Offsets at = offsets_of(body);
    ASSERT_EQ(get_at<std::uint32_t>(body, at.param_count), 6U);
    ASSERT_EQ(get_at<std::uint32_t>(body, at.first_rank), 4U); // conv1.0: 4x1x3x3

    struct Craft {
        const char* what;
        std::function<void(std::string&)> change;
        const char* expected; // in the problem text
    };
    const std::vector<Craft> crafts = {
        {"name length 0xfffffff0",
         [&](std::string& b) { put_at<std::uint32_t>(b, at.first_name_length, 0xfffffff0U); },
         "has a name of 4294967280 bytes"},
        {"parameter count 0xffffffff",
         [&](std::string& b) { put_at<std::uint32_t>(b, at.param_count, 0xffffffffU); },
         "4294967295 parameters do not fit"},
        {"negative iteration", [&](std::string& b) { put_at<std::int32_t>(b, at.iteration, -5); },
         "iteration -5 is negative"},
        {"trailing bytes", [&](std::string& b) { b.append(16, '\0'); },
         "16 bytes follow the solver history"},
        {"rank 0x7fffffff",
         [&](std::string& b) { put_at<std::uint32_t>(b, at.first_rank, 0x7fffffffU); },
         "has rank 2147483647"},
        {"negative dimension", [&](std::string& b) { put_at<std::int32_t>(b, at.first_dim, -1); },
         "has dimension -1"},
        {"dimension 0x7fffffff",
         [&](std::string& b) { put_at<std::int32_t>(b, at.first_dim, 0x7fffffff); },
         "a parameter's values needs"},
        {"history count 0xffffffff",
         [&](std::string& b) { put_at<std::uint32_t>(b, at.history_count, 0xffffffffU); },
         "solver history tensors do not fit"},
        {"history size 2^61",
         [&](std::string& b) {
             put_at<std::uint64_t>(b, at.first_history_size, std::uint64_t{1} << 61);
         },
         "a solver history's values needs"},
        {"history size 2^63 (bytes overflow)",
         [&](std::string& b) {
             put_at<std::uint64_t>(b, at.first_history_size, std::uint64_t{1} << 63);
         },
         "solver history 0 has 9223372036854775808 values"},
        {"RNG state length 0xffffffff",
         [&](std::string& b) { put_at<std::uint32_t>(b, at.rng_length, 0xffffffffU); },
         "the RNG state needs 4294967295 bytes"},
        {"RNG state text", [&](std::string& b) { b[at.rng_text] = 'x'; },
         "not a std::mt19937 state"},
        {"version", [&](std::string& b) { put_at<std::uint32_t>(b, 8, 7U); }, "unknown version 7"},
        {"test cursor count 0xffffffff",
         [&](std::string& b) { put_at<std::uint32_t>(b, at.test_count, 0xffffffffU); },
         "4294967295 test cursors"},
    };
    for (const Craft& craft : crafts) {
        std::string crafted = body;
        craft.change(crafted);
        rewrite(newest, crafted);
        const auto problem = checkpoint_problem(newest);
        ASSERT_TRUE(problem) << craft.what << ": accepted";
        EXPECT_NE(problem->find(craft.expected), std::string::npos)
            << craft.what << ": " << *problem;
        // --resume auto falls back to the previous good one, as for a bad checksum.
        std::vector<std::string> warnings;
        const auto found = latest(warnings);
        ASSERT_TRUE(found) << craft.what;
        EXPECT_EQ(found->filename(), "iter_00000010.ckpt") << craft.what;
        // --resume PATH and --weights PATH: exit 3 (a config error) saying what is wrong.
        for (const bool weights : {false, true}) {
            try {
                if (weights) {
                    (void)copy_weights(newest, m_net);
                } else {
                    (void)read_checkpoint(newest, m_net, &m_solver);
                }
                ADD_FAILURE() << craft.what << ": read";
            } catch (const Error& e) {
                EXPECT_EQ(e.kind(), ErrorKind::config) << craft.what;
                EXPECT_NE(std::string(e.what()).find(craft.expected), std::string::npos)
                    << e.what();
            }
        }
    }
    std::ofstream(newest, std::ios::binary | std::ios::trunc) << original;
    rewrite(newest, body);
    EXPECT_FALSE(checkpoint_problem(newest));
}

TEST_F(Checkpoints, AnUnreadableMarkerOrAnOutOfRangeNameIsSkipped) {
    save(10);
    const fs::path newest = save(20);
    const fs::path marker = fs::path(newest).replace_extension(".done");
    for (const char* text : {"size=abc xxh64=0\n", "size=99999999999999999999999 xxh64=0\n",
                             "size=-1 xxh64=0\n", ""}) {
        std::ofstream(marker, std::ios::trunc) << text;
        const auto problem = checkpoint_problem(newest);
        ASSERT_TRUE(problem) << text;
        EXPECT_NE(problem->find("unreadable completion marker"), std::string::npos) << *problem;
        std::vector<std::string> warnings;
        EXPECT_EQ(latest(warnings)->filename(), "iter_00000010.ckpt") << text;
    }
    // A name with more digits than an iteration holds is not one dltrain wrote.
    fs::copy_file(newest, m_dir.path() / "iter_99999999999.ckpt");
    std::vector<std::string> warnings;
    const auto found = latest(warnings);
    ASSERT_TRUE(found);
    EXPECT_EQ(found->filename(), "iter_00000010.ckpt");
}

TEST_F(Checkpoints, AFifoIsRefusedNotWaitedOn) {
    save(10);
    const fs::path newest = save(20);
    // A FIFO in place of the newest checkpoint, and in place of a marker: opening either for
    // reading would wait for a writer that never comes. A thread writes to them after 10 s so
    // that code which waits ends (and fails below) instead of hanging the suite.
    fs::remove(newest);
    ASSERT_EQ(::mkfifo(newest.c_str(), 0600), 0);
    const fs::path older_marker = m_dir.path() / "iter_00000010.done";
    const std::string marker_text = dl_test::read_file(older_marker);
    const fs::path fifo_marker = m_dir.path() / "iter_00000005.done";
    std::ofstream(m_dir.path() / "iter_00000005.ckpt") << "x";
    ASSERT_EQ(::mkfifo(fifo_marker.c_str(), 0600), 0);
    std::atomic<bool> done{false};
    std::thread unblock([&] {
        for (int i = 0; i < 100 && !done; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        while (!done) {
            for (const fs::path& fifo : {newest, fifo_marker}) {
                const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
                if (fd >= 0) {
                    ::close(fd);
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    });
    const auto start = std::chrono::steady_clock::now();
    const auto problem = checkpoint_problem(newest);
    const auto marker_problem = checkpoint_problem(m_dir.path() / "iter_00000005.ckpt");
    std::vector<std::string> warnings;
    const auto found = latest(warnings);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    done = true;
    unblock.join();
    ASSERT_TRUE(problem);
    EXPECT_NE(problem->find("is a FIFO, not a regular file"), std::string::npos) << *problem;
    ASSERT_TRUE(marker_problem);
    EXPECT_NE(marker_problem->find("is a FIFO"), std::string::npos) << *marker_problem;
    ASSERT_TRUE(found);
    EXPECT_EQ(found->filename(), "iter_00000010.ckpt");
    EXPECT_LT(waited, 5.0) << "waited on a FIFO";
    EXPECT_THROW((void)read_checkpoint(newest, m_net, &m_solver), Error);
}

} // namespace
} // namespace dl
