#include <dljob/util/files.hpp>
#include <dljob/util/paths.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace dljob::util {
namespace {

class UtilPaths : public ::testing::Test {
protected:
    void SetUp() override {
        for (const char* name : {"DLJOB_STORE", "DLJOB_RUNS_DIR", "XDG_DATA_HOME", "HOME"}) {
            const char* value = std::getenv(name);
            saved.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
        }
    }
    void TearDown() override {
        for (const auto& [name, value] : saved) {
            if (value) {
                ::setenv(name.c_str(), value->c_str(), 1);
            } else {
                ::unsetenv(name.c_str());
            }
        }
    }
    std::vector<std::pair<std::string, std::optional<std::string>>> saved;
};

TEST_F(UtilPaths, StoreFollowsOverrideThenXdgThenHome) {
    ::unsetenv("DLJOB_STORE");
    ::unsetenv("XDG_DATA_HOME");
    ::setenv("HOME", "/home/u", 1);
    EXPECT_EQ(job_store_path(), "/home/u/.local/share/dljob/jobs.db");
    EXPECT_EQ(runs_dir(), "/home/u/.local/share/dljob/runs");
    ::setenv("XDG_DATA_HOME", "/xdg", 1);
    EXPECT_EQ(job_store_path(), "/xdg/dljob/jobs.db");
    ::setenv("DLJOB_STORE", "/custom/x.db", 1);
    ::setenv("DLJOB_RUNS_DIR", "/custom/runs", 1);
    EXPECT_EQ(job_store_path(), "/custom/x.db");
    EXPECT_EQ(runs_dir(), "/custom/runs");
}

TEST_F(UtilPaths, AtomicWriteReplacesWholeFile) {
    const auto file =
        std::filesystem::temp_directory_path() / ("dljob-atomic-" + std::to_string(::getpid()));
    ASSERT_EQ(write_file_atomic(file, "a much longer first version"), "");
    ASSERT_EQ(write_file_atomic(file, "short", true), "");
    EXPECT_EQ(read_file(file), "short");
    EXPECT_NE(std::filesystem::status(file).permissions() & std::filesystem::perms::owner_exec,
              std::filesystem::perms::none);
    std::filesystem::remove(file);
    EXPECT_FALSE(read_file(file).has_value());
    EXPECT_NE(write_file_atomic("/nonexistent-dir/x", "x"), "");
}

TEST_F(UtilPaths, RandomHexHasLengthAndDiffers) {
    const auto a = random_hex(12);
    EXPECT_EQ(a.size(), 12U);
    EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_NE(a, random_hex(12));
}

} // namespace
} // namespace dljob::util
