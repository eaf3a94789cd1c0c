#include "io/atomic_file.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace dl::io {
namespace fs = std::filesystem;
namespace {

void fsync_directory(const fs::path& dir) {
    const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

[[noreturn]] void fail(const fs::path& tmp, const fs::path& path, const std::string& why) {
    std::error_code ignored;
    fs::remove(tmp, ignored); // a half-written temporary is of use to nobody
    throw Error(ErrorKind::training, fmt::format("cannot write {}: {}", path.string(), why));
}

} // namespace

void write_atomically(const fs::path& path, const char* data, std::size_t size) {
    const fs::path tmp = path.string() + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fail(tmp, path, std::strerror(errno));
    }
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = ::write(fd, data + done, size - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            const int error = errno;
            ::close(fd);
            fail(tmp, path, std::strerror(error));
        }
        done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0) {
        const int error = errno;
        ::close(fd);
        fail(tmp, path, std::strerror(error));
    }
    if (::close(fd) != 0) {
        fail(tmp, path, std::strerror(errno));
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        fail(tmp, path, ec.message());
    }
    fsync_directory(path.parent_path());
}

} // namespace dl::io
