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

} // namespace
} // namespace dl
