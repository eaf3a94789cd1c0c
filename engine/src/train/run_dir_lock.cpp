#include "train/run_dir_lock.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>
#include <sys/file.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <iostream>

namespace dl {

RunDirLock::RunDirLock(const std::filesystem::path& run_dir) {
    const auto path = run_dir / file_name;
    m_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (m_fd < 0) {
        throw Error(ErrorKind::training,
                    fmt::format("cannot open {}: {}", path.string(), std::strerror(errno)));
    }
    if (::flock(m_fd, LOCK_EX | LOCK_NB) != 0) {
        const int error = errno;
        if (error == EWOULDBLOCK) {
            char holder[256] = {};
            const ssize_t got = ::pread(m_fd, holder, sizeof(holder) - 1, 0);
            std::string who = got > 0 ? std::string(holder, static_cast<std::size_t>(got)) : "";
            while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) {
                who.pop_back();
            }
            ::close(m_fd);
            m_fd = -1;
            throw Error(ErrorKind::usage,
                        fmt::format("run directory {} is in use by another training ({}): two "
                                    "trainings would overwrite each other's metrics and "
                                    "checkpoints; wait for it to end, or use another --run-dir",
                                    run_dir.string(), who.empty() ? "holder unknown" : who));
        }
        // ENOLCK, EOPNOTSUPP: a file system without locks. Training is still possible.
        std::cerr << fmt::format("dltrain: warning: cannot lock {} ({}): nothing stops a second "
                                 "training on this run directory\n",
                                 path.string(), std::strerror(error));
        ::close(m_fd);
        m_fd = -1;
        return;
    }
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    ::gmtime_r(&now, &utc);
    char when[32] = {};
    std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &utc);
    const std::string who = fmt::format("pid {} on {} since {}\n", ::getpid(), host, when);
    if (::ftruncate(m_fd, 0) == 0) {
        // Only for the message a second training prints: a short write costs nothing else.
        [[maybe_unused]] const ssize_t written = ::pwrite(m_fd, who.data(), who.size(), 0);
    }
}

RunDirLock::~RunDirLock() {
    if (m_fd >= 0) {
        ::close(m_fd); // releases the lock
    }
}

} // namespace dl
