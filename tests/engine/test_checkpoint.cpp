// Checkpoint integrity: a truncated, corrupted or unfinished checkpoint is detected and the
// previous complete one is used; only the newest N are kept.

#include "engine_test_support.hpp"

#include <dl/backend.hpp>
#include <dl/checkpoint.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>
#include <dl/solver.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

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

} // namespace
} // namespace dl
