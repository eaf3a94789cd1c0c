#pragma once
// The rendezvous store of DLTRAIN_RENDEZVOUS=tcp://HOST:PORT: rank 0 serves a key-value map on
// PORT (every IPv4 address of its node) while the ranks meet; the others connect to HOST:PORT.
// Only what Gloo's full mesh needs: set a key, get a key, wait for keys (by polling get).
//
// Bounded, because anything on the network may connect to the port while it is open: a key is
// at most 256 bytes and a value 1 MiB (a rank's addresses are about 128 bytes per peer), the map
// holds at most 4 keys per rank, at most size + 8 connections are served at once, a request must
// arrive whole within 2 s, and every read and wait of a rank ends at the rendezvous deadline.

#include "gloo/rendezvous.hpp"

#include <gloo/rendezvous/store.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dl::gloo_comm {

/// A socket descriptor, closed with its owner.
class Socket {
public:
    Socket() = default;
    explicit Socket(int fd) : m_fd(fd) {}
    ~Socket();
    Socket(const Socket&) = delete;
    Socket& operator=(const Socket&) = delete;
    Socket(Socket&& other) noexcept : m_fd(other.m_fd) { other.m_fd = -1; }
    Socket& operator=(Socket&& other) noexcept;
    [[nodiscard]] int fd() const { return m_fd; }
    [[nodiscard]] bool valid() const { return m_fd >= 0; }

private:
    int m_fd = -1;
};

class TcpStore final : public ::gloo::rendezvous::Store {
public:
    /// Rank 0: serves the map on `port` to `size` - 1 other ranks until destroyed.
    static std::unique_ptr<TcpStore> serve(int port, int size, const Deadline& deadline);
    /// The other ranks: connects to rank 0's store, retrying until the deadline (rank 0 may not
    /// listen yet).
    static std::unique_ptr<TcpStore> connect(const std::string& host, int port,
                                             const Deadline& deadline);
    ~TcpStore() override;
    TcpStore(const TcpStore&) = delete;
    TcpStore& operator=(const TcpStore&) = delete;
    TcpStore(TcpStore&&) = delete;
    TcpStore& operator=(TcpStore&&) = delete;

    void set(const std::string& key, const std::vector<char>& data) override;
    std::vector<char> get(const std::string& key) override;
    void wait(const std::vector<std::string>& keys) override;
    void wait(const std::vector<std::string>& keys,
              const std::chrono::milliseconds& timeout) override;

    static constexpr std::size_t k_max_key = 256;
    static constexpr std::size_t k_max_value = std::size_t{1} << 20;

private:
    explicit TcpStore(Deadline deadline) : m_deadline(std::move(deadline)) {}
    // Rank 0's side.
    void serve_loop();
    bool serve_one(int fd);
    bool put(const std::string& key, std::vector<char> value);
    // The other ranks' side: one request and its answer; nothing when the key is not there.
    std::optional<std::vector<char>> request(char op, const std::string& key,
                                             const std::vector<char>* value);
    [[noreturn]] void lost(const std::string& during) const;

    Deadline m_deadline;
    bool m_serving = false;
    std::size_t m_max_keys = 0;
    std::size_t m_max_clients = 0;
    std::mutex m_mutex; // the map: the serving thread and rank 0's own calls
    std::map<std::string, std::vector<char>> m_values;
    Socket m_socket; // rank 0: listening; the others: connected to rank 0
    std::atomic<bool> m_stop{false};
    std::thread m_server;
};

} // namespace dl::gloo_comm
