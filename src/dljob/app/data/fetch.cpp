#include <dljob/adapters/filesystem_posix.hpp>
#include <dljob/adapters/hash_nettle.hpp>
#include <dljob/adapters/http_curl.hpp>
#include <dljob/app/data/fetch.hpp>
#include <dljob/util/text.hpp>

#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <thread>
#include <vector>

namespace dljob::app {
namespace {

struct Checksums {
    std::string md5;
    std::string sha256;
    [[nodiscard]] bool any() const { return !md5.empty() || !sha256.empty(); }
};

struct Digests {
    std::string md5;
    std::string sha256;
    std::uint64_t bytes = 0;
};

Result<Digests> digest_file(const std::string& path) {
    auto fd = adapters::open_for_reading(path);
    if (!fd) {
        return fail(fd.error());
    }
    adapters::Digest md5(adapters::DigestKind::md5);
    adapters::Digest sha256(adapters::DigestKind::sha256);
    std::vector<char> buffer(std::size_t{1} << 20U);
    Digests out;
    while (true) {
        auto n = adapters::read_full(fd->get(), buffer.data(), buffer.size(), path);
        if (!n) {
            return fail(n.error());
        }
        if (*n == 0) {
            break;
        }
        md5.update(buffer.data(), *n);
        sha256.update(buffer.data(), *n);
        out.bytes += *n;
    }
    out.md5 = md5.hex_final();
    out.sha256 = sha256.hex_final();
    return out;
}

/// Empty when the digests match what is known; otherwise "expected sha256 X, actual Y".
std::string mismatch(const Checksums& expected, const Digests& actual) {
    if (!expected.sha256.empty() && expected.sha256 != actual.sha256) {
        return fmt::format("expected sha256 {}, actual {}", expected.sha256, actual.sha256);
    }
    if (!expected.md5.empty() && expected.md5 != actual.md5) {
        return fmt::format("expected md5 {}, actual {}", expected.md5, actual.md5);
    }
    return {};
}

Result<void> fsync_directory(const std::string& directory) {
    const adapters::UniqueFd fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd || ::fsync(fd.get()) != 0) {
        return fail(adapters::system_error("fsync", directory, errno));
    }
    return {};
}

// Publishes a verified file: fsync its bytes, rename over nothing (the final name is free,
// checked before), fsync the directory so the rename survives a crash.
Result<void> publish(int fd, const std::string& from, const std::string& to,
                     const std::string& directory) {
    if (::fsync(fd) != 0) {
        return fail(adapters::system_error("fsync", from, errno));
    }
    DLJOB_TRY(adapters::rename_path(from, to));
    return fsync_directory(directory);
}

struct Source {
    std::string url;
    Checksums expected;
    std::uint64_t size = 0; // 0: unknown
};

class Downloader {
public:
    Downloader(const FetchSettings& settings, HttpClient& http, const FetchCallbacks& callbacks)
        : m_settings(settings), m_http(http), m_callbacks(callbacks) {}

    /// Downloads `name` into `directory` from the first mirror that works.
    Result<FetchedFile> fetch(const std::string& directory, const std::string& name,
                              const std::vector<std::string>& urls, const Checksums& expected,
                              std::uint64_t size);

private:
    void notice(const std::string& line) const {
        if (m_callbacks.notice) {
            m_callbacks.notice(line);
        }
    }
    struct Attempt {
        bool done = false;
        bool not_found = false;
        bool stalled = false;
        std::string failure;
    };
    Attempt from_mirror(int fd, const std::string& part, const std::string& name,
                        const std::string& url, std::uint64_t size, Error& write_error);
    Result<std::string> from_mirrors(int fd, const std::string& part, const std::string& name,
                                     const std::vector<std::string>& urls, std::uint64_t size);

    // Where one request's bytes go: the part file at `position`, which a server that ignores
    // Range resets to 0.
    struct PartWrite {
        int fd;
        const std::string& part;
        std::uint64_t position;
        bool failed;
        Error& error;
    };
    HttpCallbacks part_callbacks(PartWrite& write, const std::string& name, std::uint64_t size);

    const FetchSettings& m_settings;
    HttpClient& m_http;
    const FetchCallbacks& m_callbacks;
};

HttpCallbacks Downloader::part_callbacks(PartWrite& write, const std::string& name,
                                         std::uint64_t size) {
    HttpCallbacks callbacks;
    callbacks.head = [&write](const HttpHead& head) {
        // Before any body byte the position is the offset asked for. A server that ignored
        // Range sends the whole file: take it from the start.
        if (write.position > 0 && !head.ranged) {
            if (::ftruncate(write.fd, 0) != 0) {
                write.error = adapters::system_error("truncate", write.part, errno);
                write.failed = true;
                return false;
            }
            write.position = 0;
        }
        return true;
    };
    callbacks.body = [&write](std::string_view bytes) {
        const char* data = bytes.data();
        std::size_t left = bytes.size();
        while (left > 0) {
            const ssize_t n = ::pwrite(write.fd, data, left, static_cast<off_t>(write.position));
            if (n < 0) {
                if (errno == EINTR) {
                    continue;
                }
                write.error = adapters::system_error("write", write.part, errno);
                write.failed = true;
                return false;
            }
            data += n;
            left -= static_cast<std::size_t>(n);
            write.position += static_cast<std::uint64_t>(n);
        }
        return true;
    };
    callbacks.progress = [this, &write, name, size](std::uint64_t received,
                                                    std::optional<std::uint64_t> total) {
        if (m_callbacks.progress) {
            const std::uint64_t base = write.position >= received ? write.position - received : 0;
            std::optional<std::uint64_t> whole =
                size > 0 ? std::optional<std::uint64_t>(size)
                         : (total ? std::optional<std::uint64_t>(*total + base) : total);
            m_callbacks.progress(name, base + received, whole);
        }
    };
    return callbacks;
}

Downloader::Attempt Downloader::from_mirror(int fd, const std::string& part,
                                            const std::string& name, const std::string& url,
                                            std::uint64_t size, Error& write_error) {
    Attempt result;
    auto delay = m_settings.backoff;
    for (int attempt = 1;; ++attempt) {
        struct stat st {};
        if (::fstat(fd, &st) != 0) {
            write_error = adapters::system_error("stat", part, errno);
            return result;
        }
        auto offset = static_cast<std::uint64_t>(st.st_size);
        if (size > 0 && offset > size) { // not the file we know: start over
            if (::ftruncate(fd, 0) != 0) {
                write_error = adapters::system_error("truncate", part, errno);
                return result;
            }
            offset = 0;
        }
        if (size > 0 && offset == size) {
            result.done = true;
            return result;
        }
        if (offset > 0) {
            notice(fmt::format("{}: resuming at {} from {}", name, human_bytes(offset), url));
        }
        PartWrite write{fd, part, offset, false, write_error};
        const HttpCallbacks callbacks = part_callbacks(write, name, size);
        HttpGet get;
        get.url = url;
        get.offset = offset;
        get.stall_seconds = m_settings.stall_seconds;
        auto outcome = m_http.get(get, callbacks);
        if (!outcome) {
            write_error = outcome.error();
            return result;
        }
        if (write.failed) {
            return result;
        }
        if (outcome->complete) {
            result.done = true;
            return result;
        }
        const long status = outcome->head.status;
        result.failure = outcome->failure;
        result.stalled = outcome->stalled;
        if (status == 404 || status == 410) {
            result.not_found = true;
            return result;
        }
        if (status == 416) { // the part is not a prefix the server knows: start over
            if (::ftruncate(fd, 0) != 0) {
                write_error = adapters::system_error("truncate", part, errno);
                return result;
            }
        } else if (status >= 400 && status < 500 && status != 408 && status != 429) {
            return result; // 401, 403...: this mirror will not serve it
        }
        if (attempt >= m_settings.attempts) {
            return result;
        }
        notice(fmt::format("{}: {} from {}; retrying in {:.1f} s (attempt {} of {})", name,
                           result.failure, url, static_cast<double>(delay.count()) / 1000.0,
                           attempt + 1, m_settings.attempts));
        std::this_thread::sleep_for(delay);
        delay = std::min(delay * 2, m_settings.max_backoff);
    }
}

/// Removes the part file when the fetch fails with nothing in it: the part is kept only for
/// its bytes, which a rerun resumes from. Armed once the part's lock is held, and destroyed
/// before the descriptor closes, so it never removes another fetch's part.
class EmptyPartRemover {
public:
    EmptyPartRemover(const std::string& path, int fd) : m_path(path), m_fd(fd) {}
    ~EmptyPartRemover() {
        struct stat st {};
        if (m_armed && ::fstat(m_fd, &st) == 0 && st.st_size == 0) {
            ::unlink(m_path.c_str());
        }
    }
    EmptyPartRemover(const EmptyPartRemover&) = delete;
    EmptyPartRemover& operator=(const EmptyPartRemover&) = delete;
    EmptyPartRemover(EmptyPartRemover&&) = delete;
    EmptyPartRemover& operator=(EmptyPartRemover&&) = delete;
    void disarm() { m_armed = false; }

private:
    const std::string& m_path;
    int m_fd;
    bool m_armed = true;
};

// Tries each mirror in turn (each with its retries) until one delivers the whole part; returns
// its URL. All of them 404: the part is removed. Otherwise it is kept for a rerun to resume.
Result<std::string> Downloader::from_mirrors(int fd, const std::string& part,
                                             const std::string& name,
                                             const std::vector<std::string>& urls,
                                             std::uint64_t size) {
    std::vector<std::string> not_found;
    std::string last_failure;
    bool stalled = false;
    for (const auto& url : urls) {
        Error write_error;
        write_error.code = ErrorCode::internal;
        const Attempt attempt = from_mirror(fd, part, name, url, size, write_error);
        if (!write_error.message.empty()) {
            return fail(write_error);
        }
        if (attempt.done) {
            return url;
        }
        if (attempt.not_found) {
            not_found.push_back(url);
            notice(fmt::format("{}: {} at {}", name, attempt.failure, url));
        } else {
            last_failure = fmt::format("{} ({})", url, attempt.failure);
            stalled = attempt.stalled;
            if (urls.size() > 1) {
                notice(fmt::format("{}: giving up on {} ({})", name, url, attempt.failure));
            }
        }
    }
    if (not_found.size() == urls.size()) {
        ::unlink(part.c_str());
        std::string list;
        for (const auto& url : not_found) {
            list += (list.empty() ? "" : ", ") + url;
        }
        return fail(ErrorCode::not_found, fmt::format("{} not found (HTTP 404): {}", name, list),
                    "check the URL; nothing was written");
    }
    return fail(stalled ? ErrorCode::timeout : ErrorCode::io,
                fmt::format("could not download {}: {}", name, last_failure),
                fmt::format("the bytes received so far are kept in {}; run the same command "
                            "again to resume",
                            part));
}

Result<FetchedFile> Downloader::fetch(const std::string& directory, const std::string& name,
                                      const std::vector<std::string>& urls,
                                      const Checksums& expected, std::uint64_t size) {
    const std::string final_path = directory + "/" + name;
    const std::string part = part_path(directory, name);
    FetchedFile fetched;
    fetched.path = final_path;

    const adapters::UniqueFd fd(
        ::open(part.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!fd) {
        return fail(adapters::system_error("create", part, errno));
    }
    // Many NFS and Lustre mounts refuse flock (ENOLCK, EOPNOTSUPP): download unlocked there
    // rather than not at all; only "held by someone else" stops us.
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        return fail(ErrorCode::io,
                    fmt::format("{} is being downloaded by another dljob fetch-data", final_path),
                    fmt::format("wait for it, or remove {} if no fetch is running", part));
    }
    EmptyPartRemover remove_if_empty(part, fd.get());
    // Another fetch may have finished while this one waited for nothing: check again, locked.
    if (adapters::path_exists(final_path)) {
        ::unlink(part.c_str());
        return fail(ErrorCode::io, fmt::format("{} appeared while fetching", final_path),
                    "run the command again to verify it");
    }

    auto used_url = from_mirrors(fd.get(), part, name, urls, size);
    if (!used_url) {
        return fail(used_url.error());
    }

    auto digests = digest_file(part);
    if (!digests) {
        return fail(digests.error());
    }
    if (const std::string wrong = mismatch(expected, *digests); !wrong.empty()) {
        ::unlink(part.c_str());
        return fail(ErrorCode::io,
                    fmt::format("checksum mismatch for {} from {}: {}", name, *used_url, wrong),
                    "the download was deleted; run again to retry, or check the checksum");
    }
    DLJOB_TRY(publish(fd.get(), part, final_path, directory));
    remove_if_empty.disarm();
    fetched.origin = *used_url;
    fetched.bytes = digests->bytes;
    fetched.sha256 = digests->sha256;
    fetched.verified = expected.any();
    return fetched;
}

// A file already at the final path was put there verified (by us) or by the user: check it.
Result<std::optional<FetchedFile>> existing_file(const std::string& path, const Checksums& expected,
                                                 const std::string& what) {
    if (!adapters::path_exists(path)) {
        return std::optional<FetchedFile>{};
    }
    auto digests = digest_file(path);
    if (!digests) {
        return fail(digests.error());
    }
    if (const std::string wrong = mismatch(expected, *digests); !wrong.empty()) {
        return fail(ErrorCode::io, fmt::format("{} exists but is not {}: {}", path, what, wrong),
                    "remove it and run the command again");
    }
    FetchedFile file;
    file.path = path;
    file.origin = path;
    file.already_present = true;
    file.bytes = digests->bytes;
    file.sha256 = digests->sha256;
    file.verified = expected.any();
    return std::optional<FetchedFile>(file);
}

// Copies a Debian package's file into the target, verified as it is read, through the same
// part-then-rename path as a download.
Result<FetchedFile> copy_verified(const std::string& from, const std::string& directory,
                                  const std::string& name, const Checksums& expected) {
    const std::string final_path = directory + "/" + name;
    const std::string part = part_path(directory, name);
    auto in = adapters::open_for_reading(from);
    if (!in) {
        return fail(in.error());
    }
    ::unlink(part.c_str());
    auto out = adapters::create_file(part);
    if (!out) {
        return fail(out.error());
    }
    adapters::Digest sha256(adapters::DigestKind::sha256);
    std::vector<char> buffer(std::size_t{1} << 20U);
    std::uint64_t bytes = 0;
    while (true) {
        auto n = adapters::read_full(in->get(), buffer.data(), buffer.size(), from);
        if (!n) {
            ::unlink(part.c_str());
            return fail(n.error());
        }
        if (*n == 0) {
            break;
        }
        sha256.update(buffer.data(), *n);
        if (auto w = adapters::write_all(out->get(), buffer.data(), *n, part); !w) {
            ::unlink(part.c_str());
            return fail(w.error());
        }
        bytes += *n;
    }
    const std::string actual = sha256.hex_final();
    if (actual != expected.sha256) {
        ::unlink(part.c_str());
        return fail(ErrorCode::io,
                    fmt::format("checksum mismatch for {}: expected sha256 {}, actual {}", from,
                                expected.sha256, actual),
                    "the installed package's file is damaged: reinstall it (apt-get install "
                    "--reinstall), or pass --no-debian to download");
    }
    DLJOB_TRY(publish(out->get(), part, final_path, directory));
    FetchedFile file;
    file.path = final_path;
    file.origin = from;
    file.bytes = bytes;
    file.sha256 = actual;
    file.verified = true;
    return file;
}

bool is_url(const std::string& text) {
    return text.find("://") != std::string::npos;
}

// The last path component of a URL, without query or fragment.
std::string url_file_name(const std::string& url) {
    std::string path = url.substr(url.find("://") + 3);
    path = path.substr(0, path.find_first_of("?#"));
    const auto slash = path.find('/');
    if (slash == std::string::npos) {
        return {};
    }
    path = path.substr(slash);
    return path.substr(path.rfind('/') + 1);
}

bool is_hex(const std::string& text, std::size_t length) {
    return text.size() == length &&
           std::all_of(text.begin(), text.end(), [](char c) { return std::isxdigit(c) != 0; });
}

template <class T> T env_number(const GetEnv& getenv, const char* name, T fallback) {
    const auto text = getenv(name);
    if (!text) {
        return fallback;
    }
    T value{};
    const auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
    return ec == std::errc{} && ptr == text->data() + text->size() && value > 0 ? value : fallback;
}

Result<void> make_directories(const std::string& directory) {
    std::error_code ec;
    std::filesystem::create_directories(directory, ec);
    if (ec || !adapters::is_directory(directory)) {
        return fail(ErrorCode::io, fmt::format("cannot create {}: {}", directory,
                                               ec ? ec.message() : std::string("not a directory")));
    }
    return {};
}

} // namespace

std::string part_path(const std::string& directory, const std::string& name) {
    return directory + "/." + name + ".part";
}

FetchSettings fetch_settings(const GetEnv& getenv) {
    FetchSettings settings;
    settings.stall_seconds =
        env_number(getenv, "DLJOB_FETCH_STALL_SECONDS", settings.stall_seconds);
    settings.attempts = env_number(getenv, "DLJOB_FETCH_ATTEMPTS", settings.attempts);
    settings.backoff = std::chrono::milliseconds(
        env_number<long>(getenv, "DLJOB_FETCH_BACKOFF_MS", settings.backoff.count()));
    if (const auto root = getenv("DLJOB_FETCH_DEBIAN_ROOT")) {
        settings.debian_root = *root;
    }
    if (const auto mirror = getenv("DLJOB_FETCH_MIRROR")) {
        settings.mirror = *mirror;
        while (!settings.mirror.empty() && settings.mirror.back() == '/') {
            settings.mirror.pop_back();
        }
    }
    return settings;
}

namespace {

Result<FetchResult> fetch_url(const FetchRequest& request, Downloader& downloader) {
    FetchResult result;
    // libcurl is allowed these and no other (adapters/http_curl.cpp): say so before
    // anything is created, rather than after an empty part file.
    const std::string scheme = util::ascii_lower(request.what.substr(0, request.what.find("://")));
    if (scheme != "http" && scheme != "https" && scheme != "ftp" && scheme != "ftps") {
        return fail(ErrorCode::usage,
                    fmt::format("{}: a {}:// URL (expected http, https, ftp or ftps)", request.what,
                                scheme),
                    scheme == "file" ? "for a local file, use `dljob pack` on it or copy it"
                                     : "give an http://, https://, ftp:// or ftps:// URL");
    }
    const std::string name = url_file_name(request.what);
    if (name.empty() || name == "." || name == "..") {
        return fail(ErrorCode::usage,
                    fmt::format("{}: the URL names no file to save", request.what),
                    "give a URL that ends in a file name");
    }
    Checksums expected;
    if (!request.sha256.empty()) {
        expected.sha256 = util::ascii_lower(request.sha256);
        if (!is_hex(expected.sha256, 64)) {
            return fail(ErrorCode::usage,
                        fmt::format("--sha256 {}: not a SHA-256 (64 hex digits)", request.sha256));
        }
    }
    result.directory = request.to.empty() ? std::string(".") : request.to;
    DLJOB_TRY(make_directories(result.directory));
    auto present = existing_file(result.directory + "/" + name, expected, "the expected file");
    if (!present) {
        return fail(present.error());
    }
    if (*present) {
        result.files.push_back(**present);
        return result;
    }
    auto file = downloader.fetch(result.directory, name, {request.what}, expected, 0);
    if (!file) {
        return fail(file.error());
    }
    result.files.push_back(*file);
    return result;
}

// A Debian package that ships every file of the dataset: no network at all.
bool all_in_debian_package(const CatalogDataset& dataset, const std::string& debian_dir) {
    return !dataset.debian_package.empty() &&
           std::all_of(dataset.files.begin(), dataset.files.end(), [&](const auto& f) {
               return adapters::path_exists(debian_dir + "/" + f.name);
           });
}

Result<FetchResult> fetch_catalog(const FetchRequest& request, const FetchSettings& settings,
                                  const GetEnv& getenv, Downloader& downloader,
                                  const std::function<void(const std::string&)>& notice) {
    FetchResult result;
    const CatalogDataset* dataset = find_catalog_dataset(request.what);
    if (dataset == nullptr) {
        std::string names;
        for (const auto& d : dataset_catalog()) {
            names += (names.empty() ? "" : ", ") + d.name;
        }
        return fail(ErrorCode::not_found, fmt::format("unknown dataset '{}'", request.what),
                    fmt::format("known datasets: {}; or give a URL", names));
    }
    if (!request.sha256.empty()) {
        return fail(ErrorCode::usage,
                    "--sha256 is for URLs; catalog datasets have known checksums");
    }
    if (request.to.empty()) {
        const auto home = getenv("HOME");
        if (!home || home->empty()) {
            return fail(ErrorCode::usage, "HOME is not set", "give --to DIR");
        }
        result.directory = *home + "/data/" + dataset->name;
    } else {
        result.directory = request.to;
    }
    DLJOB_TRY(make_directories(result.directory));

    const std::string debian_dir = settings.debian_root + "/" + dataset->debian_dir;
    const bool from_debian = !request.no_debian && all_in_debian_package(*dataset, debian_dir);
    if (from_debian) {
        notice(fmt::format("{}: using Debian's {} ({}), no download", dataset->name,
                           dataset->debian_package, debian_dir));
    }
    for (const auto& file : dataset->files) {
        const std::string final_path = result.directory + "/" + file.name;
        Checksums published{file.md5, file.sha256};
        Checksums debian{"", file.debian_sha256};
        // A file already in place may be the published one or Debian's recompressed copy.
        auto present = existing_file(final_path, published, "the published file");
        if (!present && !file.debian_sha256.empty()) {
            present = existing_file(final_path, debian, "Debian's copy");
        }
        if (!present) {
            return fail(present.error());
        }
        if (*present) {
            result.files.push_back(**present);
            continue;
        }
        std::vector<std::string> urls = file.urls;
        if (!settings.mirror.empty()) {
            urls.insert(urls.begin(), settings.mirror + "/" + dataset->name + "/" + file.name);
        }
        auto fetched =
            from_debian
                ? copy_verified(debian_dir + "/" + file.name, result.directory, file.name, debian)
                : downloader.fetch(result.directory, file.name, urls, published, file.size);
        if (!fetched) {
            return fail(fetched.error());
        }
        result.files.push_back(*fetched);
    }
    return result;
}

} // namespace

Result<FetchResult> fetch_data(const FetchRequest& request, const FetchSettings& settings,
                               const GetEnv& getenv, HttpClient& http,
                               const FetchCallbacks& callbacks) {
    Downloader downloader(settings, http, callbacks);
    if (is_url(request.what)) {
        return fetch_url(request, downloader);
    }
    return fetch_catalog(request, settings, getenv, downloader, [&](const std::string& line) {
        if (callbacks.notice) {
            callbacks.notice(line);
        }
    });
}

Result<FetchResult> fetch_data(const FetchRequest& request, const FetchSettings& settings,
                               const GetEnv& getenv, const FetchCallbacks& callbacks) {
    adapters::CurlHttpClient http;
    return fetch_data(request, settings, getenv, http, callbacks);
}

} // namespace dljob::app
