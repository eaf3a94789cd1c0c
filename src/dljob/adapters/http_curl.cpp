#include <dljob/adapters/http_curl.hpp>

#include <curl/curl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

namespace dljob::adapters {
namespace {

bool is_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_dir(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// libcurl is opened on first use, not linked: it and the ~30 libraries it loads (TLS,
// Kerberos, LDAP, IDN...) cost every dljob start 10-14 ms here, a quarter of a whole
// stage-data run, and only fetch-data needs them. Only the libcurl 7/8 ABI (soname 4) is used.
constexpr const char* curl_soname = "libcurl.so.4";

// Option numbers are libcurl's ABI. The _STR forms came in 7.85 and the bitmask forms are
// deprecated since; the release bundles Debian 11's 7.74 and a site's libcurl may be older, so
// both are named here by number (the headers of either age lack or deprecate one of them).
constexpr auto opt_protocols = static_cast<CURLoption>(CURLOPTTYPE_LONG + 181);
constexpr auto opt_redir_protocols = static_cast<CURLoption>(CURLOPTTYPE_LONG + 182);
constexpr auto opt_protocols_str = static_cast<CURLoption>(CURLOPTTYPE_STRINGPOINT + 318);
constexpr auto opt_redir_protocols_str = static_cast<CURLoption>(CURLOPTTYPE_STRINGPOINT + 319);

struct CurlApi {
    decltype(&curl_global_init) global_init = nullptr;
    decltype(&curl_easy_init) easy_init = nullptr;
    decltype(&curl_easy_setopt) setopt = nullptr;
    decltype(&curl_easy_perform) perform = nullptr;
    decltype(&curl_easy_getinfo) getinfo = nullptr;
    decltype(&curl_easy_cleanup) cleanup = nullptr;
    decltype(&curl_easy_strerror) strerror = nullptr;
};

Result<CurlApi> load_curl() {
    // Never closed: libcurl keeps global state (TLS back ends) for the process's lifetime.
    void* library = dlopen(curl_soname, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
        const char* why = dlerror();
        return fail(ErrorCode::not_found,
                    fmt::format("cannot load {}: {}", curl_soname, why != nullptr ? why : "?"),
                    "fetching needs libcurl: install it (Debian: apt install libcurl4) or load "
                    "your site's curl module");
    }
    CurlApi api;
    auto bind = [&](auto& function, const char* name) -> bool {
        function = reinterpret_cast<std::remove_reference_t<decltype(function)>>( // NOLINT
            dlsym(library, name));
        return function != nullptr;
    };
    for (const bool bound :
         {bind(api.global_init, "curl_global_init"), bind(api.easy_init, "curl_easy_init"),
          bind(api.setopt, "curl_easy_setopt"), bind(api.perform, "curl_easy_perform"),
          bind(api.getinfo, "curl_easy_getinfo"), bind(api.cleanup, "curl_easy_cleanup"),
          bind(api.strerror, "curl_easy_strerror")}) {
        if (!bound) {
            return fail(ErrorCode::internal,
                        fmt::format("{} lacks a libcurl function dljob calls", curl_soname),
                        "install a libcurl of version 7.62 or later");
        }
    }
    // curl_global_init is not thread-safe before 7.84 and must run once per process: this
    // function runs once, inside a function-local static's initialisation.
    api.global_init(CURL_GLOBAL_DEFAULT);
    return api;
}

Result<const CurlApi*> curl() {
    static const Result<CurlApi> api = load_curl();
    if (!api) {
        return fail(api.error());
    }
    return &*api;
}

struct CurlDelete {
    const CurlApi* api = nullptr;
    void operator()(CURL* handle) const { api->cleanup(handle); }
};
using CurlHandle = std::unique_ptr<CURL, CurlDelete>;

struct Transfer {
    const CurlApi* api = nullptr;
    CURL* handle = nullptr;
    const HttpGet* request = nullptr;
    const HttpCallbacks* callbacks = nullptr;
    HttpOutcome outcome;
    std::optional<std::uint64_t> range_total; // from Content-Range: bytes a-b/TOTAL
    bool head_sent = false;
    bool aborted = false;
    // Stall detection: libcurl's low-speed check averages over a sliding window of about 5 s,
    // so after a burst it notices silence late; the progress callback sees every byte count.
    std::chrono::steady_clock::time_point last_byte = std::chrono::steady_clock::now();
    curl_off_t last_count = 0;
    bool stalled = false;
};

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
    if (text.size() < prefix.size()) {
        return false;
    }
    for (std::size_t i = 0; i < prefix.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(text[i])) !=
            std::tolower(static_cast<unsigned char>(prefix[i]))) {
            return false;
        }
    }
    return true;
}

// Each header line, including those of redirects: a new status line starts over.
std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
    auto& transfer = *static_cast<Transfer*>(user);
    const std::string_view line(data, size * count);
    if (starts_with_nocase(line, "HTTP/")) {
        transfer.range_total.reset();
    } else if (starts_with_nocase(line, "content-range:")) {
        const auto slash = line.rfind('/');
        if (slash != std::string_view::npos) {
            std::uint64_t total = 0;
            const char* first = line.data() + slash + 1;
            const auto [ptr, ec] = std::from_chars(first, line.data() + line.size(), total);
            if (ec == std::errc{} && ptr != first) {
                transfer.range_total = total;
            }
        }
    }
    return size * count;
}

bool send_head(Transfer& transfer) {
    if (transfer.head_sent) {
        return true;
    }
    transfer.head_sent = true;
    HttpHead& head = transfer.outcome.head;
    transfer.api->getinfo(transfer.handle, CURLINFO_RESPONSE_CODE, &head.status);
    head.ranged = head.status == 206;
    if (head.ranged) {
        head.total_size = transfer.range_total;
    } else {
        curl_off_t length = -1;
        transfer.api->getinfo(transfer.handle, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
        if (length >= 0) {
            head.total_size = static_cast<std::uint64_t>(length);
        }
    }
    if (transfer.callbacks->head && !transfer.callbacks->head(head)) {
        transfer.aborted = true;
        return false;
    }
    return true;
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
    auto& transfer = *static_cast<Transfer*>(user);
    const std::size_t bytes = size * count;
    if (!send_head(transfer)) {
        return 0; // a short count makes libcurl abort with CURLE_WRITE_ERROR
    }
    if (transfer.callbacks->body && !transfer.callbacks->body(std::string_view(data, bytes))) {
        transfer.aborted = true;
        return 0;
    }
    transfer.outcome.body_bytes += bytes;
    return bytes;
}

int on_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t /*ultotal*/,
                curl_off_t /*ulnow*/) {
    auto& transfer = *static_cast<Transfer*>(user);
    const auto clock = std::chrono::steady_clock::now();
    if (now != transfer.last_count) {
        transfer.last_count = now;
        transfer.last_byte = clock;
    } else if (clock - transfer.last_byte > std::chrono::seconds(transfer.request->stall_seconds)) {
        transfer.stalled = true;
        return 1; // CURLE_ABORTED_BY_CALLBACK
    }
    if (transfer.callbacks->progress) {
        std::optional<std::uint64_t> whole;
        if (total > 0) {
            whole = static_cast<std::uint64_t>(total);
        }
        transfer.callbacks->progress(static_cast<std::uint64_t>(now), whole);
    }
    return 0;
}

// The transfer's options: the protocols allowed, redirects, the stall limits and the
// callbacks that write the body through `transfer`.
Result<void> set_options(const CurlApi& api, CURL* h, const HttpGet& request,
                         const std::string& range, const CaCertificates& ca, char* error_text,
                         Transfer& transfer) {
    api.setopt(h, CURLOPT_URL, request.url.c_str());
    api.setopt(h, CURLOPT_ERRORBUFFER, error_text);
    constexpr long allowed = CURLPROTO_HTTP | CURLPROTO_HTTPS | CURLPROTO_FTP | CURLPROTO_FTPS;
    const bool restricted =
        (api.setopt(h, opt_protocols_str, "http,https,ftp,ftps") == CURLE_OK &&
         api.setopt(h, opt_redir_protocols_str, "http,https,ftp,ftps") == CURLE_OK) ||
        (api.setopt(h, opt_protocols, allowed) == CURLE_OK &&
         api.setopt(h, opt_redir_protocols, allowed) == CURLE_OK);
    if (!restricted) {
        return fail(
            ErrorCode::internal,
            fmt::format("{} refuses to limit transfers to http, https, ftp and ftps", curl_soname),
            "use a libcurl of version 7.62 or later");
    }
    // The CA certificates libcurl was built to look for are the build machine's (Debian's
    // path, which RHEL and SUSE do not have): name the host's own (find_ca_certificates).
    if (!ca.file.empty()) {
        api.setopt(h, CURLOPT_CAINFO, ca.file.c_str());
    }
    if (!ca.directory.empty()) {
        api.setopt(h, CURLOPT_CAPATH, ca.directory.c_str());
    }
    api.setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    api.setopt(h, CURLOPT_MAXREDIRS, 10L);
    // Error statuses end the transfer before any body byte reaches on_body, so an error page is
    // never written into a dataset file.
    api.setopt(h, CURLOPT_FAILONERROR, 1L);
    api.setopt(h, CURLOPT_NOSIGNAL, 1L);
    api.setopt(h, CURLOPT_CONNECTTIMEOUT, request.connect_timeout_seconds);
    // A stalled server: no byte for stall_seconds ends the transfer (on_progress; the retry
    // loop then resumes from what arrived). The low-speed limit is the backstop.
    api.setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    api.setopt(h, CURLOPT_LOW_SPEED_TIME, request.stall_seconds + 10);
    api.setopt(h, CURLOPT_USERAGENT, "dljob-fetch-data");
    // Datasets are compressed already; asking for gzip would only cost CPU.
    api.setopt(h, CURLOPT_ACCEPT_ENCODING, nullptr);
    if (request.offset > 0) {
        api.setopt(h, CURLOPT_RANGE, range.c_str());
    }
    api.setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    api.setopt(h, CURLOPT_HEADERDATA, &transfer);
    api.setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    api.setopt(h, CURLOPT_WRITEDATA, &transfer);
    api.setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    api.setopt(h, CURLOPT_XFERINFODATA, &transfer);
    api.setopt(h, CURLOPT_NOPROGRESS, 0L);
    return {};
}

std::string ca_summary(const CaCertificates& ca) {
    if (ca.file.empty() && ca.directory.empty()) {
        std::string tried;
        for (const auto& path : ca.tried) {
            tried += (tried.empty() ? "" : ", ") + path;
        }
        return "no CA certificates found; looked at " + tried;
    }
    return fmt::format("CA certificates from {}", ca.file.empty() ? ca.directory : ca.file);
}

} // namespace

CaCertificates find_ca_certificates(const std::function<const char*(const char*)>& getenv,
                                    const std::function<bool(const std::string&)>& readable_file,
                                    const std::function<bool(const std::string&)>& readable_dir) {
    CaCertificates ca;
    const auto named = [&](const char* variable) -> std::string {
        const char* value = getenv(variable);
        return value != nullptr ? std::string(value) : std::string();
    };
    for (const char* variable : {"CURL_CA_BUNDLE", "SSL_CERT_FILE"}) {
        if (const auto path = named(variable); !path.empty()) {
            ca.tried.push_back(fmt::format("${}={}", variable, path));
            if (!readable_file(path)) {
                ca.error = fmt::format("{}={} is not a readable file", variable, path);
                return ca;
            }
            ca.file = path;
            break;
        }
    }
    if (const auto dir = named("SSL_CERT_DIR"); !dir.empty()) {
        ca.tried.push_back(fmt::format("$SSL_CERT_DIR={}", dir));
        if (!readable_dir(dir)) {
            ca.error = fmt::format("SSL_CERT_DIR={} is not a readable folder", dir);
            return ca;
        }
        ca.directory = dir;
    }
    if (!ca.file.empty() || !ca.directory.empty()) {
        return ca;
    }
    // Where each family of Linux keeps its bundle (the list CMake's and Go's own probes use).
    for (const char* path : {"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu
                             "/etc/pki/tls/certs/ca-bundle.crt",   // RHEL, Rocky, Fedora
                             "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // RHEL 7+
                             "/etc/ssl/ca-bundle.pem",                            // SUSE
                             "/etc/ssl/cert.pem"}) {                              // Alpine
        ca.tried.emplace_back(path);
        if (readable_file(path)) {
            ca.file = path;
            break;
        }
    }
    // OpenSSL's hashed folder (SUSE's and Debian's); harmless where the bundle has it all.
    ca.tried.emplace_back("/etc/ssl/certs");
    if (readable_dir("/etc/ssl/certs")) {
        ca.directory = "/etc/ssl/certs";
    }
    return ca;
}

CurlHttpClient::CurlHttpClient() = default;
CurlHttpClient::~CurlHttpClient() = default;

namespace {

// The CA certificates of this machine, as find_ca_certificates looks for them.
CaCertificates system_ca() {
    return find_ca_certificates(
        [](const char* name) { return std::getenv(name); }, // NOLINT(concurrency-mt-unsafe)
        [](const std::string& path) { return ::access(path.c_str(), R_OK) == 0 && is_file(path); },
        [](const std::string& path) {
            return ::access(path.c_str(), R_OK | X_OK) == 0 && is_dir(path);
        });
}

// What a finished transfer comes to: the outcome (complete, or why not, stalled or not), or an
// error where retrying cannot help (a malformed URL, a certificate that does not verify).
Result<HttpOutcome> finish(const CurlApi& api, CURL* h, CURLcode code, Transfer& transfer,
                           const char* error_text, const CaCertificates& ca) {
    const HttpGet& request = *transfer.request;
    HttpOutcome& outcome = transfer.outcome;
    const std::string why = error_text[0] != '\0' ? error_text : api.strerror(code);
    if (code == CURLE_OK) {
        // An empty body never calls on_body: the head still has to be seen.
        if (!send_head(transfer)) {
            outcome.failure = "aborted";
            return outcome;
        }
        outcome.complete = true;
        return outcome;
    }
    if (!transfer.head_sent) {
        api.getinfo(h, CURLINFO_RESPONSE_CODE, &outcome.head.status);
    }
    switch (code) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
        return fail(ErrorCode::usage, fmt::format("cannot fetch {}: {}", request.url, why),
                    "give an http://, https://, ftp:// or ftps:// URL");
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_PEER_FAILED_VERIFICATION:
        // Retrying cannot help: the certificate or the CA store is wrong, not the network.
        return fail(ErrorCode::io,
                    fmt::format("cannot verify {}: {} ({})", request.url, why, ca_summary(ca)),
                    "set SSL_CERT_FILE to the CA bundle your site uses (RHEL: "
                    "/etc/pki/tls/certs/ca-bundle.crt, SUSE: /etc/ssl/ca-bundle.pem)");
    case CURLE_HTTP_RETURNED_ERROR:
        outcome.failure = fmt::format("HTTP {}", outcome.head.status);
        break;
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_ABORTED_BY_CALLBACK:
        outcome.stalled = true;
        outcome.failure = transfer.stalled || code == CURLE_ABORTED_BY_CALLBACK
                              ? fmt::format("no data for {} s (stalled)", request.stall_seconds)
                              : std::string(error_text);
        break;
    case CURLE_WRITE_ERROR:
        if (transfer.aborted) {
            outcome.failure = "aborted";
            break;
        }
        [[fallthrough]];
    default:
        outcome.failure = why;
        break;
    }
    return outcome;
}

} // namespace

Result<HttpOutcome> CurlHttpClient::get(const HttpGet& request, const HttpCallbacks& callbacks) {
    auto loaded = curl();
    if (!loaded) {
        return fail(loaded.error());
    }
    const CurlApi& api = **loaded;
    const CurlHandle handle(api.easy_init(), CurlDelete{&api});
    if (!handle) {
        return fail(ErrorCode::internal, "curl_easy_init failed");
    }
    Transfer transfer;
    transfer.api = &api;
    transfer.handle = handle.get();
    transfer.request = &request;
    transfer.callbacks = &callbacks;
    std::array<char, CURL_ERROR_SIZE> error_text{};
    const std::string range = fmt::format("{}-", request.offset);

    CURL* h = handle.get();
    const CaCertificates ca = system_ca();
    if (!ca.error.empty()) {
        return fail(ErrorCode::usage, ca.error,
                    "point it at your site's CA bundle, or unset it to use the system's");
    }
    if (auto set = set_options(api, h, request, range, ca, error_text.data(), transfer); !set) {
        return fail(set.error());
    }

    return finish(api, h, api.perform(h), transfer, error_text.data(), ca);
}

} // namespace dljob::adapters
