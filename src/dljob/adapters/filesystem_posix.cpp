#include <dljob/adapters/filesystem_posix.hpp>
#include <dljob/util/filesystem_types.hpp>

#include <fmt/format.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <utility>
#include <vector>

namespace dljob::adapters {
namespace {

Result<void> remove_below(int dir_fd, const std::string& shown) {
    DIR* dir = fdopendir(dup(dir_fd));
    if (dir == nullptr) {
        return fail(system_error("cannot list", shown, errno));
    }
    std::vector<std::pair<std::string, bool>> children;
    while (const dirent* entry = readdir(dir)) {
        const std::string name = entry->d_name;
        if (name == "." || name == "..") {
            continue;
        }
        struct stat st {};
        if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
            continue;
        }
        children.emplace_back(name, S_ISDIR(st.st_mode));
    }
    closedir(dir);
    for (const auto& [name, is_dir] : children) {
        const std::string child_shown = fmt::format("{}/{}", shown, name);
        if (is_dir) {
            const int child =
                openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (child < 0) {
                return fail(system_error("cannot open directory", child_shown, errno));
            }
            const UniqueFd owned(child);
            DLJOB_TRY(remove_below(owned.get(), child_shown));
            if (unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0) {
                return fail(system_error("cannot remove directory", child_shown, errno));
            }
        } else if (unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) {
            return fail(system_error("cannot remove", child_shown, errno));
        }
    }
    return {};
}

} // namespace

UniqueFd::~UniqueFd() {
    if (m_fd >= 0) {
        close(m_fd);
    }
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
        if (m_fd >= 0) {
            close(m_fd);
        }
        m_fd = other.release();
    }
    return *this;
}

int UniqueFd::release() noexcept {
    return std::exchange(m_fd, -1);
}

std::string errno_text(int error_number) {
    std::array<char, 256> buffer{};
    return strerror_r(error_number, buffer.data(), buffer.size());
}

Error system_error(const std::string& what, const std::string& path, int error_number) {
    Error error{ErrorCode::io, fmt::format("{} {}: {}", what, path, errno_text(error_number)), {}};
    if (error_number == ENOSPC || error_number == EDQUOT) {
        error.hint = "the file system is full or over quota (bytes or files): free space, or "
                     "stage to another --to";
    }
    return error;
}

const char* file_type_name(std::uint32_t mode) {
    switch (mode & S_IFMT) {
    case S_IFREG:
        return "regular file";
    case S_IFDIR:
        return "directory";
    case S_IFLNK:
        return "symbolic link";
    case S_IFIFO:
        return "FIFO";
    case S_IFSOCK:
        return "socket";
    case S_IFCHR:
        return "character device";
    case S_IFBLK:
        return "block device";
    default:
        return "special file";
    }
}

namespace {

/// Takes an fd opened with O_NONBLOCK: refuses it unless it is a regular file, then makes it
/// blocking again. O_NONBLOCK is what keeps the open of a FIFO from waiting forever for a
/// writer; on a regular file it changes nothing, and is cleared only to say so plainly.
Result<UniqueFd> keep_if_regular(UniqueFd fd, const std::string& path) {
    struct stat st {};
    if (fstat(fd.get(), &st) != 0) {
        return fail(system_error("cannot stat", path, errno));
    }
    if (!S_ISREG(st.st_mode)) {
        return fail(
            ErrorCode::io,
            fmt::format("{} is a {}, expected a regular file", path, file_type_name(st.st_mode)),
            "a dataset's files (manifest, index, data) must be regular files");
    }
    const int flags = fcntl(fd.get(), F_GETFL);
    if (flags < 0 || fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
        return fail(system_error("cannot configure", path, errno));
    }
    return fd;
}

} // namespace

Result<UniqueFd> open_for_reading(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        Error error = system_error("cannot open", path, errno);
        if (errno == ENOENT) {
            error.code = ErrorCode::not_found;
        }
        return fail(std::move(error));
    }
    return keep_if_regular(UniqueFd(fd), path);
}

Result<UniqueFd> open_regular_below(const std::string& root, const std::string& relative) {
    const std::string shown = root + "/" + relative;
    int dir = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        return fail(system_error("cannot open directory", root, errno));
    }
    UniqueFd current(dir);
    std::size_t start = 0;
    for (;;) {
        const std::size_t slash = relative.find('/', start);
        const bool last = slash == std::string::npos;
        const std::string name = relative.substr(start, last ? std::string::npos : slash - start);
        const std::string so_far = root + "/" + relative.substr(0, last ? relative.size() : slash);
        const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (last ? O_NONBLOCK : O_DIRECTORY);
        const int fd = ::openat(current.get(), name.c_str(), flags);
        if (fd < 0) {
            const int error_number = errno;
            struct stat st {};
            if ((error_number == ELOOP || error_number == ENOTDIR) &&
                fstatat(current.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(st.st_mode)) {
                return fail(ErrorCode::config_invalid,
                            fmt::format("{} is a symbolic link{}", so_far,
                                        last ? std::string() : fmt::format(" (in {})", shown)),
                            "a pack holds only regular files and directories: name the "
                            "link's target in the list, or copy it into the tree");
            }
            Error error = system_error("cannot open", so_far, error_number);
            if (error_number == ENOENT) {
                error.code = ErrorCode::not_found;
            }
            return fail(std::move(error));
        }
        if (last) {
            return keep_if_regular(UniqueFd(fd), shown);
        }
        current = UniqueFd(fd);
        start = slash + 1;
    }
}

Result<UniqueFd> create_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        return fail(system_error("cannot create", path, errno));
    }
    return UniqueFd(fd);
}

Result<void> write_all(int fd, const char* data, std::size_t size, const std::string& path) {
    while (size > 0) {
        const ssize_t n = ::write(fd, data, size);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return fail(system_error("cannot write", path, errno));
        }
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return {};
}

Result<std::size_t> read_full(int fd, char* data, std::size_t size, const std::string& path) {
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = ::read(fd, data + done, size - done);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return fail(system_error("cannot read", path, errno));
        }
        if (n == 0) {
            break;
        }
        done += static_cast<std::size_t>(n);
    }
    return done;
}

Result<std::size_t> read_some(int fd, char* data, std::size_t size, const std::string& path) {
    for (;;) {
        const ssize_t n = ::read(fd, data, size);
        if (n >= 0) {
            return static_cast<std::size_t>(n);
        }
        if (errno != EINTR) {
            return fail(system_error("cannot read", path, errno));
        }
    }
}

Result<MappedRange> MappedRange::map(int fd, std::uint64_t offset, std::size_t length,
                                     const std::string& path) {
    void* data = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(offset));
    if (data == MAP_FAILED) { // NOLINT(performance-no-int-to-ptr): the API's own constant
        return fail(system_error("cannot map", path, errno));
    }
    return MappedRange(static_cast<const char*>(data), length);
}

MappedRange::~MappedRange() {
    if (m_data != nullptr) {
        // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): munmap takes a void*
        ::munmap(const_cast<char*>(m_data), m_size);
    }
}

MappedRange::MappedRange(MappedRange&& other) noexcept
    : m_data(std::exchange(other.m_data, nullptr)), m_size(std::exchange(other.m_size, 0)) {}

MappedRange& MappedRange::operator=(MappedRange&& other) noexcept {
    if (this != &other) {
        MappedRange dropped(std::move(*this));
        m_data = std::exchange(other.m_data, nullptr);
        m_size = std::exchange(other.m_size, 0);
    }
    return *this;
}

namespace {

// Where the SIGBUS handler jumps back to while this thread runs guarded reads; null otherwise.
// The handler reads it, so it is a plain pointer in initial-exec TLS (async-signal-safe).
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
thread_local sigjmp_buf* t_guarded_reads = nullptr;
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
struct sigaction g_previous_sigbus {};

extern "C" void on_sigbus(int /*signal*/) {
    if (sigjmp_buf* resume = t_guarded_reads; resume != nullptr) {
        t_guarded_reads = nullptr;
        siglongjmp(*resume, 1); // NOLINT(cert-err52-cpp): the only way out of a faulting load
    }
    // Not a guarded read: the previous disposition (by default a core dump) takes the fault
    // when the faulting instruction runs again.
    sigaction(SIGBUS, &g_previous_sigbus, nullptr);
}

void install_sigbus_handler() {
    static const bool installed = [] {
        struct sigaction action {};
        action.sa_handler = on_sigbus;
        // SA_NODEFER: SIGBUS stays unblocked in the handler, so jumping out of it needs no
        // signal mask restored, and sigsetjmp need not save one (a system call per block).
        action.sa_flags = SA_NODEFER;
        sigemptyset(&action.sa_mask);
        return sigaction(SIGBUS, &action, &g_previous_sigbus) == 0;
    }();
    (void)installed;
}

} // namespace

Result<void> guard_mapped_reads(const std::function<void()>& reads, const std::string& path) {
    install_sigbus_handler();
    sigjmp_buf resume;
    if (sigsetjmp(resume, 0) != 0) { // NOLINT(cert-err52-cpp): see on_sigbus
        return fail(ErrorCode::io,
                    fmt::format("cannot read {}: it shrank while being read, or its file system "
                                "failed (SIGBUS on a mapped page)",
                                path),
                    "check that nothing rewrites the file and that its file system is healthy, "
                    "then run the command again");
    }
    t_guarded_reads = &resume;
    reads();
    t_guarded_reads = nullptr;
    return {};
}

Result<std::string> read_text_file(const std::string& path, std::size_t max_bytes) {
    auto fd = open_for_reading(path);
    if (!fd) {
        return fail(fd.error());
    }
    // Sized from fstat, not from the limit: zeroing a 16 MiB buffer for a 500-byte manifest
    // cost 4,000 page faults, a fifth of a whole stage-data run.
    std::size_t capacity = 4096;
    struct stat st {};
    if (fstat(fd->get(), &st) == 0 && S_ISREG(st.st_mode)) {
        capacity = static_cast<std::size_t>(
                       std::min<std::uint64_t>(static_cast<std::uint64_t>(st.st_size), max_bytes)) +
                   1;
    }
    std::string text(capacity, '\0');
    std::size_t used = 0;
    for (;;) {
        auto n = read_some(fd->get(), text.data() + used, text.size() - used, path);
        if (!n) {
            return fail(n.error());
        }
        if (*n == 0) {
            break;
        }
        used += *n;
        if (used > max_bytes) {
            return fail(ErrorCode::io, fmt::format("{} is larger than {} bytes", path, max_bytes));
        }
        if (used == text.size()) {
            text.resize(std::min(text.size() * 2, max_bytes + 1));
        }
    }
    text.resize(used);
    return text;
}

Result<void> write_text_file(const std::string& path, const std::string& text) {
    const std::string temporary = fmt::format("{}.tmp.{}", path, getpid());
    {
        auto fd = create_file(temporary);
        if (!fd) {
            return fail(fd.error());
        }
        if (auto written = write_all(fd->get(), text.data(), text.size(), temporary); !written) {
            unlink(temporary.c_str());
            return written;
        }
    }
    if (::rename(temporary.c_str(), path.c_str()) != 0) {
        const int error_number = errno;
        unlink(temporary.c_str());
        return fail(system_error("cannot rename into place", path, error_number));
    }
    return {};
}

bool path_exists(const std::string& path) {
    struct stat st {};
    return lstat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
    struct stat st {};
    return lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Result<void> make_private_directory(const std::string& path) {
    if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
        return fail(system_error("cannot create directory", path, errno));
    }
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) {
        return fail(system_error("cannot stat", path, errno));
    }
    if (!S_ISDIR(st.st_mode)) {
        return fail(ErrorCode::io, fmt::format("{} exists and is not a directory", path),
                    "remove it, or stage to another --to");
    }
    if (st.st_uid != geteuid()) {
        return fail(
            ErrorCode::io,
            fmt::format("{} belongs to uid {}, not to you (uid {})", path, st.st_uid, geteuid()),
            "someone else created it in a shared directory: stage to another --to");
    }
    return {};
}

Result<void> remove_tree(const std::string& path) {
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) {
        return errno == ENOENT ? Result<void>{} : fail(system_error("cannot stat", path, errno));
    }
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(path.c_str()) != 0 && errno != ENOENT) {
            return fail(system_error("cannot remove", path, errno));
        }
        return {};
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        return fail(system_error("cannot open directory", path, errno));
    }
    const UniqueFd owned(fd);
    DLJOB_TRY(remove_below(owned.get(), path));
    if (rmdir(path.c_str()) != 0 && errno != ENOENT) {
        return fail(system_error("cannot remove directory", path, errno));
    }
    return {};
}

Result<void> rename_path(const std::string& from, const std::string& to) {
    if (::rename(from.c_str(), to.c_str()) != 0) {
        return fail(system_error(fmt::format("cannot rename {} to", from), to, errno));
    }
    return {};
}

Result<FilesystemSpace> filesystem_space(const std::string& path) {
    struct statvfs vfs {};
    if (statvfs(path.c_str(), &vfs) != 0) {
        Error error = system_error("cannot inspect the file system of", path, errno);
        if (errno == ENOENT) {
            error.code = ErrorCode::not_found;
        }
        return fail(std::move(error));
    }
    struct statfs fs {};
    FilesystemSpace space;
    space.block_size = vfs.f_frsize != 0 ? vfs.f_frsize : vfs.f_bsize;
    space.bytes_total = static_cast<std::uint64_t>(vfs.f_blocks) * space.block_size;
    space.bytes_available = static_cast<std::uint64_t>(vfs.f_bavail) * space.block_size;
    space.inodes_available = vfs.f_favail;
    space.inodes_reported = vfs.f_files != 0;
    space.type_name = "unknown";
    if (statfs(path.c_str(), &fs) == 0) {
        if (const auto* type = util::find_filesystem_type(static_cast<std::uint64_t>(fs.f_type))) {
            space.type_name = type->name;
            space.ram_disk = type->ram_disk;
        }
    }
    return space;
}

FilesystemKind filesystem_kind(const std::string& path) {
    std::string probe = path.empty() ? "." : path;
    struct stat st {};
    while (::stat(probe.c_str(), &st) != 0 && probe != "/" && probe != ".") {
        const auto slash = probe.find_last_of('/');
        probe = slash == std::string::npos ? "." : slash == 0 ? "/" : probe.substr(0, slash);
    }
    FilesystemKind kind;
    struct statfs fs {};
    if (statfs(probe.c_str(), &fs) != 0) {
        return kind;
    }
    const auto* type = util::find_filesystem_type(static_cast<std::uint64_t>(fs.f_type));
    kind.known = true;
    kind.name = type != nullptr ? type->name : fmt::format("0x{:x}", fs.f_type);
    kind.network = type != nullptr && type->shared;
    return kind;
}

Result<FileLock> FileLock::acquire(const std::string& path, const std::function<void()>& on_wait) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        return fail(system_error("cannot open lock file", path, errno));
    }
    UniqueFd owned(fd);
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
        return FileLock(std::move(owned));
    }
    if (errno != EWOULDBLOCK) {
        return fail(system_error("cannot lock", path, errno));
    }
    if (on_wait) {
        on_wait();
    }
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            return fail(system_error("cannot lock", path, errno));
        }
    }
    return FileLock(std::move(owned));
}

Result<std::optional<FileLock>> FileLock::try_acquire(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        return fail(system_error("cannot open lock file", path, errno));
    }
    UniqueFd owned(fd);
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
        return std::optional<FileLock>(FileLock(std::move(owned)));
    }
    if (errno != EWOULDBLOCK) {
        return fail(system_error("cannot lock", path, errno));
    }
    return std::optional<FileLock>();
}

Result<TreeWriter> TreeWriter::open(const std::string& root) {
    const int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        return fail(system_error("cannot open directory", root, errno));
    }
    return TreeWriter(UniqueFd(fd), root);
}

Result<void> TreeWriter::make_directories(const std::string& relative) const {
    std::size_t end = 0;
    while (end != std::string::npos) {
        end = relative.find('/', end + 1);
        const std::string prefix = relative.substr(0, end);
        if (mkdirat(m_fd.get(), prefix.c_str(), 0755) == 0) {
            continue;
        }
        if (errno != EEXIST) {
            return fail(system_error("cannot create directory", m_root + "/" + prefix, errno));
        }
        struct stat st {};
        if (fstatat(m_fd.get(), prefix.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISDIR(st.st_mode)) {
            return fail(ErrorCode::io,
                        fmt::format("cannot create directory {}/{}: a file of that name exists "
                                    "(the archive has two entries with one path)",
                                    m_root, prefix));
        }
    }
    return {};
}

Result<UniqueFd> TreeWriter::create_file(const std::string& relative, std::uint32_t mode) const {
    return create_file_in(m_fd.get(), relative, 0, mode);
}

Result<UniqueFd> TreeWriter::open_directory(const std::string& relative) const {
    const int fd = openat(m_fd.get(), relative.empty() ? "." : relative.c_str(),
                          O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        return fail(system_error("cannot open directory", m_root + "/" + relative, errno));
    }
    return UniqueFd(fd);
}

Result<UniqueFd> TreeWriter::create_file_in(int dir_fd, const std::string& relative,
                                            std::size_t name_offset, std::uint32_t mode) const {
    const int fd = openat(dir_fd, relative.c_str() + name_offset,
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) {
        Error error = system_error("cannot create", m_root + "/" + relative, errno);
        if (errno == EEXIST) {
            error.message += " (the archive has two entries with this path)";
        }
        return fail(std::move(error));
    }
    return UniqueFd(fd);
}

Result<void> TreeWriter::make_symlink(const std::string& relative,
                                      const std::string& target) const {
    if (symlinkat(target.c_str(), m_fd.get(), relative.c_str()) != 0) {
        Error error = system_error("cannot create symlink", m_root + "/" + relative, errno);
        if (errno == EEXIST) {
            error.message += " (the archive has two entries with this path)";
        }
        return fail(std::move(error));
    }
    return {};
}

} // namespace dljob::adapters
