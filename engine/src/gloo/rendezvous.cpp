// The Gloo plugin's rendezvous (rendezvous.hpp): the store, the TCP device, the full mesh.

#include "gloo/rendezvous.hpp"

#include "gloo/tcp_store.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <cctype>
#include <filesystem>
#include <system_error>
#include <thread>

namespace dl::gloo_comm {
namespace {

namespace fs = std::filesystem;

std::chrono::milliseconds milliseconds_left(const Deadline& deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline.at - Clock::now());
    return std::max(left, std::chrono::milliseconds(1));
}

// Gloo's FileStore, with waits bounded by the rendezvous deadline (its own get waits 30 s
// whatever the timeout), a clear refusal of a key file that is there already, and this rank's
// files removed when it is done with them, so that the directory serves the next run.
class DirectoryStore final : public ::gloo::rendezvous::FileStore {
public:
    DirectoryStore(const std::string& directory, Deadline deadline)
        : FileStore(directory), m_deadline(std::move(deadline)) {}
    ~DirectoryStore() override {
        for (const auto& path : m_written) {
            std::error_code ignored;
            fs::remove(path, ignored);
        }
    }
    DirectoryStore(const DirectoryStore&) = delete;
    DirectoryStore& operator=(const DirectoryStore&) = delete;
    DirectoryStore(DirectoryStore&&) = delete;
    DirectoryStore& operator=(DirectoryStore&&) = delete;

    void set(const std::string& key, const std::vector<char>& data) override {
        std::error_code error;
        if (fs::exists(objectPath(key), error)) {
            throw Error(ErrorKind::device,
                        fmt::format("rank {} of {}: the rendezvous {} holds this rank's key '{}' "
                                    "already ({}): left by a run that did not end, or another "
                                    "run of the same ranks is meeting there; give each run an "
                                    "empty directory",
                                    m_deadline.rank, m_deadline.size, m_deadline.where, key,
                                    objectPath(key)));
        }
        FileStore::set(key, data);
        m_written.push_back(objectPath(key));
    }
    std::vector<char> get(const std::string& key) override {
        wait({key});
        return FileStore::get(key);
    }
    void wait(const std::vector<std::string>& keys) override {
        wait_for_keys(
            keys, [this](const std::string& key) { return check({key}); }, m_deadline);
    }
    void wait(const std::vector<std::string>& keys,
              const std::chrono::milliseconds& /*timeout*/) override {
        wait(keys);
    }

private:
    Deadline m_deadline;
    // This rank's key files (Debian 11's Gloo has no getAllKeyFilePaths).
    std::vector<std::string> m_written;
};

std::unique_ptr<::gloo::rendezvous::Store> make_store(const Options& options,
                                                      const Deadline& deadline) {
    if (options.store_port != 0) {
        return options.rank == 0
                   ? std::unique_ptr<::gloo::rendezvous::Store>(
                         TcpStore::serve(options.store_port, options.size, deadline))
                   : TcpStore::connect(options.store_host, options.store_port, deadline);
    }
    std::error_code error;
    fs::create_directories(options.rendezvous, error);
    if (!fs::is_directory(options.rendezvous, error)) {
        throw Error(ErrorKind::usage,
                    fmt::format("DLTRAIN_RENDEZVOUS='{}': not a directory, and it cannot be made "
                                "({}): expected a directory every rank sees, or tcp://HOST:PORT",
                                options.rendezvous, error ? error.message() : "a file"));
    }
    return std::make_unique<DirectoryStore>(options.rendezvous, deadline);
}

std::shared_ptr<::gloo::transport::Device> make_device(const Options& options) {
    ::gloo::transport::tcp::attr attr;
    attr.iface = options.iface;
    try {
        return ::gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
        throw Error(ErrorKind::device,
                    fmt::format("rank {} of {}: no address for Gloo's TCP transport ({}): set "
                                "DLTRAIN_GLOO_IFACE to the network interface the ranks share "
                                "(eth0, ib0; lo when every rank runs on this machine)",
                                options.rank, options.size, e.what()));
    }
}

} // namespace

void Deadline::expire(const std::string& missing) const {
    throw Error(ErrorKind::device,
                fmt::format("rank {} of {}: the rendezvous through {} did not complete within "
                            "{:g} s (DLTRAIN_RENDEZVOUS_TIMEOUT): no {}; were all {} ranks "
                            "started, each with DLTRAIN_WORLD_SIZE={} and this "
                            "DLTRAIN_RENDEZVOUS?",
                            rank, size, where, seconds, missing, size, size));
}

void wait_for_keys(const std::vector<std::string>& keys,
                   const std::function<bool(const std::string&)>& present,
                   const Deadline& deadline) {
    for (const auto& key : keys) {
        while (!present(key)) {
            if (deadline.passed()) {
                // Gloo's keys are "rank_<r>" (a host name) and "<r>" (the addresses).
                std::size_t digits = key.size();
                while (digits > 0 && std::isdigit(static_cast<unsigned char>(key[digits - 1]))) {
                    --digits;
                }
                deadline.expire(digits < key.size() ? fmt::format("word from rank {} (key '{}')",
                                                                  key.substr(digits), key)
                                                    : fmt::format("key '{}'", key));
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
}

Meeting meet(const Options& options) {
    Deadline deadline{
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(options.rendezvous_timeout_s)),
        options.rendezvous_timeout_s, options.rank, options.size,
        options.store_port != 0 ? options.rendezvous : "directory " + options.rendezvous};
    Meeting meeting;
    meeting.store = make_store(options, deadline);
    meeting.transport = options.store_port != 0 ? "tcp, tcp rendezvous" : "tcp, file rendezvous";
    auto device = make_device(options);
    auto context = std::make_shared<::gloo::rendezvous::Context>(options.rank, options.size);
    // Connecting the pairs is bounded by what is left of the rendezvous; the collectives then
    // by the collective timeout.
    context->setTimeout(milliseconds_left(deadline));
    try {
        context->connectFullMesh(*meeting.store, device);
    } catch (const Error&) {
        throw;
    } catch (const std::exception& e) {
        if (deadline.passed()) {
            deadline.expire(fmt::format("connection to every rank ({})", e.what()));
        }
        throw Error(ErrorKind::device,
                    fmt::format("rank {} of {}: the rendezvous through {} failed: {}; a rank "
                                "ended, or a key left by an earlier run named an address "
                                "nobody listens on (give each run an empty directory)",
                                options.rank, options.size, deadline.where, e.what()));
    }
    context->setTimeout(std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::duration<double>(options.timeout_s)));
    meeting.context = std::move(context);
    return meeting;
}

} // namespace dl::gloo_comm
