#include "unit/data/data_test_support.hpp"

#include <dljob/adapters/filesystem_posix.hpp>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace dljob::adapters {
namespace {

using test::ScratchDir;

constexpr std::size_t page = 4096;

std::string pattern(std::size_t size) {
    std::string bytes(size, '\0');
    for (std::size_t i = 0; i < size; ++i) {
        bytes[i] = static_cast<char>('a' + (i * 7) % 26);
    }
    return bytes;
}

/// Reads every page of `range` and returns the sum of the bytes read.
unsigned touch_every_page(const MappedRange& range) {
    unsigned sum = 0;
    for (std::size_t at = 0; at < range.size(); at += page) {
        sum += static_cast<unsigned char>(*static_cast<const volatile char*>(range.data() + at));
    }
    return sum;
}

TEST(MappedRange, ShowsTheFileBytesFromTheOffset) {
    ScratchDir dir;
    const std::string path = dir / "f";
    const std::string bytes = pattern(3 * page + 100);
    test::write_file(path, bytes);
    auto fd = open_for_reading(path);
    ASSERT_TRUE(fd);
    auto range = MappedRange::map(fd->get(), page, 2 * page + 100, path);
    ASSERT_TRUE(range) << range.error().message;
    EXPECT_EQ(std::string(range->data(), range->size()), bytes.substr(page));
}

TEST(MappedRange, AnUnmappableFileIsAnErrorNamingIt) {
    ScratchDir dir;
    const std::string path = dir / "fifo";
    ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const UniqueFd owned(fd);
    auto range = MappedRange::map(fd, 0, page, path);
    ASSERT_FALSE(range);
    EXPECT_NE(range.error().message.find(path), std::string::npos) << range.error().message;
}

/// A map of two pages of a file that is then cut to nothing: reading it raises SIGBUS.
struct ShrunkFile {
    ScratchDir dir;
    std::string path = dir / "shrinks";
    UniqueFd fd;
    std::optional<MappedRange> range;
    ShrunkFile() {
        test::write_file(path, pattern(2 * page));
        auto opened = open_for_reading(path);
        fd = std::move(*opened);
        auto mapped = MappedRange::map(fd.get(), 0, 2 * page, path);
        range.emplace(std::move(*mapped));
        EXPECT_EQ(truncate(path.c_str(), 0), 0);
    }
};

TEST(GuardMappedReads, ASigbusBecomesAnIoErrorNamingTheFile) {
    ShrunkFile file;
    unsigned sum = 0;
    auto guarded = guard_mapped_reads([&] { sum = touch_every_page(*file.range); }, file.path);
    ASSERT_FALSE(guarded) << "the read of a cut page returned " << sum;
    EXPECT_EQ(guarded.error().code, ErrorCode::io);
    EXPECT_NE(guarded.error().message.find(file.path), std::string::npos)
        << guarded.error().message;

    // The guard is ready again: a second fault is caught too, and good pages read normally.
    EXPECT_FALSE(guard_mapped_reads([&] { sum = touch_every_page(*file.range); }, file.path));
    ScratchDir dir;
    const std::string good = dir / "good";
    test::write_file(good, pattern(2 * page));
    auto fd = open_for_reading(good);
    ASSERT_TRUE(fd);
    auto range = MappedRange::map(fd->get(), 0, 2 * page, good);
    ASSERT_TRUE(range);
    EXPECT_TRUE(guard_mapped_reads([&] { sum = touch_every_page(*range); }, good));
    const std::string bytes = pattern(2 * page);
    EXPECT_EQ(sum, static_cast<unsigned char>(bytes[0]) + static_cast<unsigned char>(bytes[page]));
}

TEST(GuardMappedReadsDeathTest, ASigbusOutsideTheGuardStillEndsTheProcess) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            ShrunkFile file;
            // The handler is installed by the first guarded read, and must not swallow faults
            // that no guard expects.
            (void)guard_mapped_reads([] {}, file.path);
            touch_every_page(*file.range);
            std::_Exit(0);
        },
        ::testing::KilledBySignal(SIGBUS), "");
}

} // namespace
} // namespace dljob::adapters
