#pragma once
// `dljob fetch-data NAME|URL [--to DIR]`: downloads a dataset of the catalog (MNIST,
// Fashion-MNIST, CIFAR-10) or any URL on a login or transfer node (compute nodes usually have no
// internet), resumable, retried, verified, and renamed into place only once verified.
//
// For each file: DIR/.NAME.part receives the bytes (flock'ed, so two fetches of one file do not
// interleave); a rerun continues it with a Range request; a verified part is fsynced and renamed
// to DIR/NAME. A checksum mismatch deletes the part. Nothing is ever written at DIR/NAME itself
// before the bytes are verified.

#include <dljob/app/data/dataset_catalog.hpp>
#include <dljob/domain/http_client.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/stage.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dljob::app {

struct FetchRequest {
    std::string what;       // a catalog name or a URL
    std::string to;         // target directory; default $HOME/data/NAME, or . for a URL
    std::string sha256;     // for a URL: expected SHA-256 (optional)
    bool no_debian = false; // download even when the Debian package is installed
};

/// Knobs read from the environment (DLJOB_FETCH_*), so tests can be quick.
struct FetchSettings {
    long stall_seconds = 60; // DLJOB_FETCH_STALL_SECONDS
    int attempts = 5;        // per mirror, DLJOB_FETCH_ATTEMPTS
    std::chrono::milliseconds backoff{
        2000}; // first wait, doubled each time; DLJOB_FETCH_BACKOFF_MS
    std::chrono::milliseconds max_backoff{60000};
    std::string debian_root = "/usr/share/datasets"; // DLJOB_FETCH_DEBIAN_ROOT
    /// A site's own mirror, tried first for catalog datasets as MIRROR/NAME/FILE
    /// (DLJOB_FETCH_MIRROR; many clusters keep one on a transfer node).
    std::string mirror;
};

FetchSettings fetch_settings(const GetEnv& getenv);

struct FetchedFile {
    std::string path;
    std::string origin; // the URL or the Debian file it came from
    bool already_present = false;
    std::uint64_t bytes = 0;
    std::string sha256;
    bool verified = false; // against a known checksum
};

struct FetchResult {
    std::string directory;
    std::vector<FetchedFile> files;
};

struct FetchCallbacks {
    std::function<void(const std::string& line)> notice; // retries, sources (may be empty)
    /// Bytes of `name` so far (including a resumed part) and the total when known.
    std::function<void(const std::string& name, std::uint64_t bytes,
                       std::optional<std::uint64_t> total)>
        progress;
};

Result<FetchResult> fetch_data(const FetchRequest& request, const FetchSettings& settings,
                               const GetEnv& getenv, HttpClient& http,
                               const FetchCallbacks& callbacks);
/// fetch_data over the real network (libcurl): what the CLI runs.
Result<FetchResult> fetch_data(const FetchRequest& request, const FetchSettings& settings,
                               const GetEnv& getenv, const FetchCallbacks& callbacks);

/// The part file beside DIR/NAME that a download writes to.
std::string part_path(const std::string& directory, const std::string& name);

} // namespace dljob::app
