#include "unit/data/data_test_support.hpp"

#include <dljob/util/files.hpp>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <unistd.h>

#include <filesystem>
#include <string>

namespace dljob::util {
namespace {

// read_file serves run-directory records (exit_code, job_identity, continuation records) that
// anything with write access to the run directory can replace: a FIFO there hung `dljob status`
// waiting for a writer, and a link to /dev/zero read without end.
TEST(ReadFile, RefusesWhatIsNotARegularFileWithoutWaitingOnIt) {
    test::ScratchDir dir;
    const auto fifo = dir.path() / "exit_code";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_FALSE(read_file(fifo)); // returns at once: a blocking open would hang the test
    const auto zero = dir.path() / "job_identity";
    std::filesystem::create_symlink("/dev/zero", zero);
    EXPECT_FALSE(read_file(zero));
    EXPECT_FALSE(read_file(dir.path()));
    EXPECT_FALSE(read_file(dir.path() / "missing"));
}

TEST(ReadFile, ReadsAFileUpToItsLimitAndRefusesALargerOne) {
    test::ScratchDir dir;
    const auto path = dir.path() / "record";
    test::write_file(path, std::string(100, 'x'));
    ASSERT_TRUE(read_file(path, 100));
    EXPECT_EQ(read_file(path, 100)->size(), 100U);
    EXPECT_FALSE(read_file(path, 99));
    // A sparse file costs nothing to make at any size: it is refused by its size, unread.
    const auto sparse = dir.path() / "sparse";
    test::write_file(sparse, "");
    std::filesystem::resize_file(sparse, default_max_read + 1);
    EXPECT_FALSE(read_file(sparse));
}

} // namespace
} // namespace dljob::util
