#include "io/atomic_file.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

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

AtomicFile::AtomicFile(fs::path path) : m_path(std::move(path)), m_tmp(m_path.string() + ".tmp") {
    m_fd = ::open(m_tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (m_fd < 0) {
        fail(m_tmp, m_path, std::strerror(errno));
    }
}

AtomicFile::~AtomicFile() {
    if (m_fd >= 0) {
        ::close(m_fd);
        std::error_code ignored;
        fs::remove(m_tmp, ignored);
    }
}

void AtomicFile::write(const void* data, std::size_t size) {
    const auto* bytes = static_cast<const char*>(data);
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = ::write(m_fd, bytes + done, size - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            const int error = errno;
            ::close(m_fd);
            m_fd = -1;
            fail(m_tmp, m_path, std::strerror(error));
        }
        done += static_cast<std::size_t>(n);
    }
}

void AtomicFile::commit() {
    const int fd = m_fd;
    m_fd = -1; // from here on the failures below remove the temporary themselves
    if (::fsync(fd) != 0) {
        const int error = errno;
        ::close(fd);
        fail(m_tmp, m_path, std::strerror(error));
    }
    if (::close(fd) != 0) {
        fail(m_tmp, m_path, std::strerror(errno));
    }
    std::error_code ec;
    fs::rename(m_tmp, m_path, ec);
    if (ec) {
        fail(m_tmp, m_path, ec.message());
    }
    fsync_directory(m_path.parent_path());
}

void write_atomically(const fs::path& path, const char* data, std::size_t size) {
    AtomicFile file(path);
    file.write(data, size);
    file.commit();
}

} // namespace dl::io
