#include <dljob/adapters/http_curl.hpp>

#include <curl/curl.h>
#include <fmt/format.h>

#include <array>
#include <charconv>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

namespace dljob::adapters {
namespace {

struct CurlDelete {
    void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
using CurlHandle = std::unique_ptr<CURL, CurlDelete>;

// curl_global_init is not thread-safe before 7.84 and must run once per process.
void global_init() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
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
    curl_easy_getinfo(transfer.handle, CURLINFO_RESPONSE_CODE, &head.status);
    head.ranged = head.status == 206;
    if (head.ranged) {
        head.total_size = transfer.range_total;
    } else {
        curl_off_t length = -1;
        curl_easy_getinfo(transfer.handle, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
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

} // namespace

CurlHttpClient::CurlHttpClient() {
    global_init();
}
CurlHttpClient::~CurlHttpClient() = default;

Result<HttpOutcome> CurlHttpClient::get(const HttpGet& request, const HttpCallbacks& callbacks) {
    const CurlHandle handle(curl_easy_init());
    if (!handle) {
        return fail(ErrorCode::internal, "curl_easy_init failed");
    }
    Transfer transfer;
    transfer.handle = handle.get();
    transfer.request = &request;
    transfer.callbacks = &callbacks;
    std::array<char, CURL_ERROR_SIZE> error_text{};
    const std::string range = fmt::format("{}-", request.offset);

    CURL* h = handle.get();
    curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_text.data());
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https,ftp,ftps");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https,ftp,ftps");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
    // Error statuses end the transfer before any body byte reaches on_body, so an error page is
    // never written into a dataset file.
    curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, request.connect_timeout_seconds);
    // A stalled server: no byte for stall_seconds ends the transfer (on_progress; the retry
    // loop then resumes from what arrived). The low-speed limit is the backstop.
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, request.stall_seconds + 10);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "dljob-fetch-data");
    // Datasets are compressed already; asking for gzip would only cost CPU.
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, nullptr);
    if (request.offset > 0) {
        curl_easy_setopt(h, CURLOPT_RANGE, range.c_str());
    }
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &transfer);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &transfer);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &transfer);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);

    const CURLcode code = curl_easy_perform(h);
    HttpOutcome& outcome = transfer.outcome;
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
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &outcome.head.status);
    }
    switch (code) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
        return fail(
            ErrorCode::usage,
            fmt::format("cannot fetch {}: {}", request.url,
                        error_text[0] != '\0' ? error_text.data() : curl_easy_strerror(code)),
            "give an http://, https://, ftp:// or ftps:// URL");
    case CURLE_HTTP_RETURNED_ERROR:
        outcome.failure = fmt::format("HTTP {}", outcome.head.status);
        break;
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_ABORTED_BY_CALLBACK:
        outcome.stalled = true;
        outcome.failure = transfer.stalled || code == CURLE_ABORTED_BY_CALLBACK
                              ? fmt::format("no data for {} s (stalled)", request.stall_seconds)
                              : std::string(error_text.data());
        break;
    case CURLE_WRITE_ERROR:
        if (transfer.aborted) {
            outcome.failure = "aborted";
            break;
        }
        [[fallthrough]];
    default:
        outcome.failure = error_text[0] != '\0' ? std::string(error_text.data())
                                                : std::string(curl_easy_strerror(code));
        break;
    }
    return outcome;
}

} // namespace dljob::adapters
