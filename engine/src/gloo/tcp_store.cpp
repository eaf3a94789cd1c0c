// Rank 0's rendezvous store and its clients (tcp_store.hpp). The wire format, one request and one
// answer at a time on a connection, integers as 4 bytes big-endian:
//   set:  'S' key_size key value_size value   ->  'K'
//   get:  'G' key_size key                    ->  'Y' value_size value, or 'N' (not set yet)
// A client waits for a key by asking again every 20 ms: the server never blocks on a key, so one
// thread serves every rank, and a misbehaving connection is dropped, never waited for.

#include "gloo/tcp_store.hpp"

#include <dl/error.hpp>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <netdb.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>

namespace dl::gloo_comm {
namespace {

// A request arrives whole from a rank at once; a connection that dribbles is dropped.
constexpr auto k_request_window = std::chrono::seconds(2);
// Between two connection attempts while rank 0 does not listen yet.
constexpr auto k_connect_retry = std::chrono::milliseconds(100);

std::string errno_text(int error) {
    return std::generic_category().message(error);
}

// Milliseconds from now to `deadline` for poll(2), at most a minute (the caller polls again).
int poll_ms(Clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
}

// Whether `fd` became ready for `events` (or was closed: the next call says) before `deadline`.
bool ready(int fd, short events, Clock::time_point deadline) {
    while (true) {
        pollfd entry{fd, events, 0};
        const int found = ::poll(&entry, 1, poll_ms(deadline));
        if (found > 0) {
            return true;
        }
        if ((found == 0 && Clock::now() >= deadline) || (found < 0 && errno != EINTR)) {
            return false;
        }
    }
}

bool read_exact(int fd, void* data, std::size_t size, Clock::time_point deadline) {
    auto* at = static_cast<char*>(data);
    while (size > 0) {
        if (!ready(fd, POLLIN, deadline)) {
            return false;
        }
        const ssize_t got = ::recv(fd, at, size, MSG_DONTWAIT);
        if (got == 0) {
            return false; // closed by the other side
        }
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
                continue;
            }
            return false;
        }
        at += got;
        size -= static_cast<std::size_t>(got);
    }
    return true;
}

bool write_all(int fd, const std::string& bytes, Clock::time_point deadline) {
    const char* at = bytes.data();
    std::size_t size = bytes.size();
    while (size > 0) {
        if (!ready(fd, POLLOUT, deadline)) {
            return false;
        }
        // MSG_NOSIGNAL: a rank whose peer went away gets an error, not SIGPIPE.
        const ssize_t sent = ::send(fd, at, size, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (sent < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
                continue;
            }
            return false;
        }
        at += sent;
        size -= static_cast<std::size_t>(sent);
    }
    return true;
}

void put_u32(std::string& out, std::size_t value) {
    for (int shift = 24; shift >= 0; shift -= 8) {
        out.push_back(static_cast<char>((value >> static_cast<unsigned>(shift)) & 0xFFU));
    }
}

bool read_u32(int fd, std::uint32_t& value, Clock::time_point deadline) {
    unsigned char bytes[4] = {};
    if (!read_exact(fd, bytes, sizeof(bytes), deadline)) {
        return false;
    }
    value = (std::uint32_t{bytes[0]} << 24U) | (std::uint32_t{bytes[1]} << 16U) |
            (std::uint32_t{bytes[2]} << 8U) | std::uint32_t{bytes[3]};
    return true;
}

// A connected socket to host:port, or an invalid one (refused, unreachable, not resolved yet).
Socket try_connect(const std::string& host, int port, Clock::time_point deadline) {
    addrinfo hints{};
    hints.ai_family = AF_INET; // rank 0 listens on IPv4 (tcp_store.hpp)
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
        return {};
    }
    const std::unique_ptr<addrinfo, void (*)(addrinfo*)> owned(found, ::freeaddrinfo);
    for (const addrinfo* at = found; at != nullptr; at = at->ai_next) {
        Socket socket(::socket(at->ai_family, at->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                               at->ai_protocol));
        if (!socket.valid()) {
            continue;
        }
        if (::connect(socket.fd(), at->ai_addr, at->ai_addrlen) != 0 && errno != EINPROGRESS) {
            continue;
        }
        // A host that drops SYNs would hold a blocking connect for minutes: at most a second.
        const auto bound = std::min(deadline, Clock::now() + std::chrono::seconds(1));
        int error = 0;
        socklen_t length = sizeof(error);
        if (ready(socket.fd(), POLLOUT, bound) &&
            ::getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0) {
            return socket;
        }
    }
    return {};
}

} // namespace

Socket::~Socket() {
    if (m_fd >= 0) {
        ::close(m_fd);
    }
}

Socket& Socket::operator=(Socket&& other) noexcept {
    if (this != &other) {
        if (m_fd >= 0) {
            ::close(m_fd);
        }
        m_fd = other.m_fd;
        other.m_fd = -1;
    }
    return *this;
}

std::unique_ptr<TcpStore> TcpStore::serve(int port, int size, const Deadline& deadline) {
    std::unique_ptr<TcpStore> store(new TcpStore(deadline));
    Socket listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int on = 1;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    // SO_REUSEADDR: the port of the previous run, in TIME_WAIT for a minute, is free to serve
    // again; a port another program listens on is still refused.
    if (!listener.valid() ||
        ::setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
        // NOLINTNEXTLINE(*-reinterpret-cast): the sockets API takes the generic address
        ::bind(listener.fd(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(listener.fd(), 64) != 0) {
        throw Error(ErrorKind::device,
                    fmt::format("rank 0 of {}: cannot serve the rendezvous store on port {} of "
                                "this node ({}): {}; choose a free port in DLTRAIN_RENDEZVOUS",
                                size, port, deadline.where, errno_text(errno)));
    }
    store->m_serving = true;
    store->m_max_keys = 4 * static_cast<std::size_t>(size) + 16;
    store->m_max_clients = static_cast<std::size_t>(size) + 8;
    store->m_socket = std::move(listener);
    store->m_server = std::thread([server = store.get()] { server->serve_loop(); });
    return store;
}

std::unique_ptr<TcpStore> TcpStore::connect(const std::string& host, int port,
                                            const Deadline& deadline) {
    std::unique_ptr<TcpStore> store(new TcpStore(deadline));
    while (!deadline.passed()) {
        store->m_socket = try_connect(host, port, deadline.at);
        if (store->m_socket.valid()) {
            return store;
        }
        std::this_thread::sleep_for(k_connect_retry);
    }
    deadline.expire(fmt::format("answer from rank 0's store at {}:{} (is rank 0 started, and is "
                                "{} the name or address of its node?)",
                                host, port, host));
}

TcpStore::~TcpStore() {
    m_stop = true;
    if (m_server.joinable()) {
        m_server.join();
    }
}

void TcpStore::serve_loop() {
    std::vector<Socket> clients;
    while (!m_stop) {
        std::vector<pollfd> watched{{m_socket.fd(), POLLIN, 0}};
        for (const Socket& client : clients) {
            watched.push_back({client.fd(), POLLIN, 0});
        }
        // A tenth of a second between looks at m_stop: the destructor waits at most that long.
        if (::poll(watched.data(), watched.size(), 100) <= 0) {
            continue;
        }
        std::vector<Socket> kept;
        for (std::size_t i = 0; i < clients.size(); ++i) {
            const short events = watched[i + 1].revents;
            if (events == 0 || ((events & POLLIN) != 0 && serve_one(clients[i].fd()))) {
                kept.push_back(std::move(clients[i]));
            }
        }
        clients = std::move(kept);
        if ((watched[0].revents & POLLIN) != 0) {
            Socket client(::accept4(m_socket.fd(), nullptr, nullptr, SOCK_CLOEXEC));
            if (client.valid() && clients.size() < m_max_clients) {
                clients.push_back(std::move(client));
            }
        }
    }
}

// One request of one connection; false drops the connection (closed, malformed, over a limit).
bool TcpStore::serve_one(int fd) {
    const auto deadline = Clock::now() + k_request_window;
    char op = 0;
    std::uint32_t key_size = 0;
    if (!read_exact(fd, &op, 1, deadline) || !read_u32(fd, key_size, deadline) || key_size == 0 ||
        key_size > k_max_key) {
        return false;
    }
    std::string key(key_size, '\0');
    if (!read_exact(fd, key.data(), key.size(), deadline)) {
        return false;
    }
    std::string reply;
    if (op == 'S') {
        std::uint32_t value_size = 0;
        if (!read_u32(fd, value_size, deadline) || value_size > k_max_value) {
            return false;
        }
        std::vector<char> value(value_size);
        if (!read_exact(fd, value.data(), value.size(), deadline) || !put(key, std::move(value))) {
            return false;
        }
        reply.push_back('K');
    } else if (op == 'G') {
        const std::lock_guard<std::mutex> lock(m_mutex);
        const auto found = m_values.find(key);
        if (found == m_values.end()) {
            reply.push_back('N');
        } else {
            reply.push_back('Y');
            put_u32(reply, found->second.size());
            reply.append(found->second.begin(), found->second.end());
        }
    } else {
        return false;
    }
    return write_all(fd, reply, deadline);
}

bool TcpStore::put(const std::string& key, std::vector<char> value) {
    const std::lock_guard<std::mutex> lock(m_mutex);
    if (m_values.count(key) == 0 && m_values.size() >= m_max_keys) {
        return false;
    }
    m_values[key] = std::move(value);
    return true;
}

std::optional<std::vector<char>> TcpStore::request(char op, const std::string& key,
                                                   const std::vector<char>* value) {
    std::string message(1, op);
    put_u32(message, key.size());
    message += key;
    if (value != nullptr) {
        put_u32(message, value->size());
        message.append(value->begin(), value->end());
    }
    char answer = 0;
    if (!write_all(m_socket.fd(), message, m_deadline.at) ||
        !read_exact(m_socket.fd(), &answer, 1, m_deadline.at)) {
        lost("asked it for '" + key + "'");
    }
    if (answer != 'Y') {
        return std::nullopt; // 'K' to a set, 'N' to a get of a key not set yet
    }
    std::uint32_t size = 0;
    if (!read_u32(m_socket.fd(), size, m_deadline.at) || size > k_max_value) {
        lost("read '" + key + "'");
    }
    std::vector<char> bytes(size);
    if (!read_exact(m_socket.fd(), bytes.data(), bytes.size(), m_deadline.at)) {
        lost("read '" + key + "'");
    }
    return bytes;
}

void TcpStore::lost(const std::string& during) const {
    if (m_deadline.passed()) {
        m_deadline.expire("answer from rank 0's store");
    }
    throw Error(ErrorKind::device,
                fmt::format("rank {} of {}: the rendezvous store of rank 0 ({}) closed the "
                            "connection as this rank {}: rank 0 ended (see its error) or another "
                            "program serves that port",
                            m_deadline.rank, m_deadline.size, m_deadline.where, during));
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
    if (key.empty() || key.size() > k_max_key || data.size() > k_max_value) {
        throw Error(ErrorKind::device,
                    fmt::format("rendezvous key '{}' of {} bytes: expected a key of 1 to {} bytes "
                                "and at most {} bytes of value",
                                key, data.size(), k_max_key, k_max_value));
    }
    if (!m_serving) {
        request('S', key, &data);
    } else if (!put(key, data)) {
        throw Error(ErrorKind::device,
                    fmt::format("rendezvous key '{}': the store holds its {} keys already", key,
                                m_max_keys));
    }
}

std::vector<char> TcpStore::get(const std::string& key) {
    if (!m_serving) {
        while (true) {
            if (auto value = request('G', key, nullptr)) {
                return *value;
            }
            wait({key});
        }
    }
    wait({key});
    const std::lock_guard<std::mutex> lock(m_mutex);
    return m_values.at(key);
}

void TcpStore::wait(const std::vector<std::string>& keys) {
    wait_for_keys(
        keys,
        [this](const std::string& key) {
            if (m_serving) {
                const std::lock_guard<std::mutex> lock(m_mutex);
                return m_values.count(key) != 0;
            }
            return request('G', key, nullptr).has_value();
        },
        m_deadline);
}

// Gloo's own timeout is the context's, which meet() sets to what is left of the deadline: the
// store's deadline is the one bound.
void TcpStore::wait(const std::vector<std::string>& keys,
                    const std::chrono::milliseconds& /*timeout*/) {
    wait(keys);
}

} // namespace dl::gloo_comm
