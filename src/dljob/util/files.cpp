#include <dljob/util/files.hpp>

#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

namespace dljob::util {

std::string write_file_atomic(const std::filesystem::path& path, std::string_view content,
                              bool executable) {
    // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict for
    // `"." + std::string&&` (GCC bug 105329), which stops a Release build with warnings as errors.
    std::string name = ".";
    name += path.filename().string();
    name += ".tmp";
    name += random_hex(6);
    const std::filesystem::path temp = path.parent_path() / name;
    const int fd =
        ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, executable ? 0755 : 0644);
    if (fd < 0) {
        return std::string("cannot create ") + temp.string() + ": " + std::strerror(errno);
    }
    std::size_t written = 0;
    while (written < content.size()) {
        const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            std::string message =
                std::string("cannot write ") + temp.string() + ": " + std::strerror(errno);
            ::close(fd);
            ::unlink(temp.c_str());
            return message;
        }
        written += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
        std::string message =
            std::string("cannot flush ") + temp.string() + ": " + std::strerror(errno);
        ::unlink(temp.c_str());
        return message;
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) {
        std::string message = std::string("cannot rename ") + temp.string() + " to " +
                              path.string() + ": " + std::strerror(errno);
        ::unlink(temp.c_str());
        return message;
    }
    return {};
}

std::optional<std::string> read_file(const std::filesystem::path& path, std::size_t max_bytes) {
    BoundedRead read = read_regular_file(path, max_bytes);
    if (read.status != BoundedRead::Status::ok) {
        return std::nullopt;
    }
    return std::move(read.content);
}

std::string non_regular_kind(unsigned int st_mode) {
    const auto mode = static_cast<mode_t>(st_mode);
    if (S_ISREG(mode)) {
        return {};
    }
    if (S_ISDIR(mode)) {
        return "a directory";
    }
    if (S_ISFIFO(mode)) {
        return "a FIFO (named pipe)";
    }
    if (S_ISCHR(mode)) {
        return "a character device";
    }
    if (S_ISBLK(mode)) {
        return "a block device";
    }
    if (S_ISSOCK(mode)) {
        return "a socket";
    }
    return "not a regular file";
}

std::string non_regular_kind(const std::filesystem::path& path) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
        return {};
    }
    return non_regular_kind(info.st_mode);
}

BoundedRead read_regular_file(const std::filesystem::path& path, std::size_t max_bytes) {
    BoundedRead out;
    const auto refuse = [&](BoundedRead::Status status, std::string what) {
        out.status = status;
        out.what = std::move(what);
        out.content.clear();
        return out;
    };
    struct stat before {};
    if (::stat(path.c_str(), &before) != 0) {
        return refuse(errno == ENOENT || errno == ENOTDIR ? BoundedRead::Status::missing
                                                          : BoundedRead::Status::unreadable,
                      std::strerror(errno));
    }
    if (auto kind = non_regular_kind(before.st_mode); !kind.empty()) {
        return refuse(BoundedRead::Status::not_regular, std::move(kind));
    }
    if (static_cast<std::uint64_t>(before.st_size) > max_bytes) {
        out.size = static_cast<std::uint64_t>(before.st_size);
        return refuse(BoundedRead::Status::too_large, {});
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        return refuse(errno == ENOENT ? BoundedRead::Status::missing
                                      : BoundedRead::Status::unreadable,
                      std::strerror(errno));
    }
    struct stat opened {};
    if (::fstat(fd, &opened) != 0) {
        std::string why = std::strerror(errno);
        ::close(fd);
        return refuse(BoundedRead::Status::unreadable, std::move(why));
    }
    if (auto kind = non_regular_kind(opened.st_mode); !kind.empty()) {
        ::close(fd);
        return refuse(BoundedRead::Status::not_regular, std::move(kind));
    }
    std::array<char, 65536> buffer{};
    while (out.content.size() <= max_bytes) {
        const std::size_t want = std::min(buffer.size(), max_bytes + 1 - out.content.size());
        const ssize_t n = ::read(fd, buffer.data(), want);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            std::string why = std::strerror(errno);
            ::close(fd);
            return refuse(BoundedRead::Status::unreadable, std::move(why));
        }
        if (n == 0) {
            break;
        }
        out.content.append(buffer.data(), static_cast<std::size_t>(n));
    }
    ::close(fd);
    if (out.content.size() > max_bytes) {
        out.size = out.content.size();
        return refuse(BoundedRead::Status::too_large, {});
    }
    return out;
}

std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string random_hex(std::size_t length) {
    static constexpr std::array<char, 16> digits{'0', '1', '2', '3', '4', '5', '6', '7',
                                                 '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
    std::random_device device;
    std::string out;
    out.reserve(length);
    for (std::size_t i = 0; i < length; ++i) {
        out.push_back(digits.at(device() % digits.size()));
    }
    return out;
}

} // namespace dljob::util
