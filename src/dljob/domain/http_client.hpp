#pragma once
// HttpClient: one GET, streamed to callbacks, optionally from a byte offset. The interface is
// small so `fetch-data` (app/data/fetch.cpp) does resuming, retries, verification and the atomic
// rename itself, whatever library moves the bytes (adapters/http_curl.cpp).

#include <dljob/domain/result.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace dljob {

struct HttpGet {
    std::string url;
    std::uint64_t offset = 0;          // > 0: ask for the bytes from here on (Range)
    long stall_seconds = 60;           // give up after this long without a byte
    long connect_timeout_seconds = 30; // per connection attempt
};

/// What the server answered, known before the first byte of the body is handed on.
struct HttpHead {
    long status = 0;     // 200, 206...
    bool ranged = false; // 206: the body starts at HttpGet::offset; otherwise at 0
    std::optional<std::uint64_t> total_size; // of the whole resource, when the server said
};

/// How a transfer ended. `complete` is false when the connection broke, stalled or the server
/// answered with an error status; the caller decides whether to retry.
struct HttpOutcome {
    HttpHead head;
    bool complete = false;
    bool stalled = false; // no byte for stall_seconds
    std::uint64_t body_bytes = 0;
    std::string failure; // why it is not complete ("connection reset", "HTTP 503"...)
};

struct HttpCallbacks {
    std::function<bool(const HttpHead&)> head;        // false aborts the transfer
    std::function<bool(std::string_view bytes)> body; // false aborts the transfer
    std::function<void(std::uint64_t received, std::optional<std::uint64_t> total)> progress;
};

class HttpClient {
public:
    virtual ~HttpClient() = default;
    HttpClient() = default;
    HttpClient(const HttpClient&) = delete;
    HttpClient& operator=(const HttpClient&) = delete;
    HttpClient(HttpClient&&) = delete;
    HttpClient& operator=(HttpClient&&) = delete;

    /// Only a failure to even try (a malformed URL, an unsupported scheme, no memory) is an
    /// Error; everything that happens on the wire is in the outcome.
    virtual Result<HttpOutcome> get(const HttpGet& request, const HttpCallbacks& callbacks) = 0;
};

} // namespace dljob
