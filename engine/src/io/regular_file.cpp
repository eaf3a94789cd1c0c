#include "io/regular_file.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dl::io {
namespace {

const char* kind_of(mode_t mode) {
    if (S_ISFIFO(mode)) {
        return "a FIFO";
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
    return "not a plain file";
}

} // namespace

RegularFile::RegularFile(const std::filesystem::path& path, const std::string& what)
    : m_path(path), m_what(what) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
    m_fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (m_fd < 0) {
        const int error = errno;
        if (error == ENOENT || error == ENOTDIR) {
            throw Error(ErrorKind::config,
                        fmt::format("{} {} does not exist", what, path.string()));
        }
        throw Error(ErrorKind::config, fmt::format("cannot read {} {}: {}", what, path.string(),
                                                   std::strerror(error)));
    }
    struct stat info = {};
    if (::fstat(m_fd, &info) != 0 || !S_ISREG(info.st_mode)) {
        const bool directory = S_ISDIR(info.st_mode);
        const char* kind = kind_of(info.st_mode);
        ::close(m_fd);
        m_fd = -1;
        if (directory) {
            throw Error(ErrorKind::config,
                        fmt::format("{} {} is a directory, not a file", what, path.string()));
        }
        throw Error(ErrorKind::config, fmt::format("{} {} is {}, not a regular file: refused "
                                                   "rather than waited on",
                                                   what, path.string(), kind));
    }
    // Reads of a regular file never block; blocking mode back for libraries that expect it.
    const int flags = ::fcntl(m_fd, F_GETFL);
    if (flags >= 0) {
        ::fcntl(m_fd, F_SETFL, flags & ~O_NONBLOCK);
    }
    m_size = static_cast<std::uint64_t>(info.st_size);
}

RegularFile::~RegularFile() {
    if (m_fd >= 0) {
        ::close(m_fd);
    }
}

int RegularFile::release() {
    const int fd = m_fd;
    m_fd = -1;
    return fd;
}

std::vector<char> RegularFile::read_all(std::uint64_t max_bytes) const {
    if (m_size > max_bytes) {
        throw Error(ErrorKind::config,
                    fmt::format("{} {} is {} bytes, more than the {} bytes a {} may have", m_what,
                                m_path.string(), m_size, max_bytes, m_what));
    }
    std::vector<char> bytes(static_cast<std::size_t>(m_size));
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n =
            ::pread(m_fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            throw Error(ErrorKind::config, fmt::format("cannot read {} {}: {}", m_what,
                                                       m_path.string(), std::strerror(errno)));
        }
        if (n == 0) {
            break; // shrunk since fstat
        }
        done += static_cast<std::size_t>(n);
    }
    bytes.resize(done);
    return bytes;
}

} // namespace dl::io
