#include <dljob/adapters/hash_nettle.hpp>

#include <fmt/format.h>
#include <nettle/md5.h>
#include <nettle/sha2.h>

#include <array>
#include <variant>

namespace dljob::adapters {

// Nettle rather than OpenSSL's libcrypto: libarchive loads Nettle anyway, and libcrypto was
// 2-3 ms of every dljob start for two hashes that only fetch-data uses.
struct Digest::State {
    std::variant<md5_ctx, sha256_ctx> context;
};

Digest::Digest(DigestKind kind) : m_state(std::make_unique<State>()) {
    if (kind == DigestKind::md5) {
        md5_ctx context{};
        md5_init(&context);
        m_state->context = context;
    } else {
        sha256_ctx context{};
        sha256_init(&context);
        m_state->context = context;
    }
}
Digest::~Digest() = default;
Digest::Digest(Digest&&) noexcept = default;
Digest& Digest::operator=(Digest&&) noexcept = default;

void Digest::update(const void* data, std::size_t size) {
    const auto* bytes = static_cast<const std::uint8_t*>(data);
    if (auto* md5 = std::get_if<md5_ctx>(&m_state->context)) {
        md5_update(md5, size, bytes);
    } else {
        sha256_update(&std::get<sha256_ctx>(m_state->context), size, bytes);
    }
}

std::string Digest::hex_final() {
    std::array<std::uint8_t, SHA256_DIGEST_SIZE> bytes{};
    std::size_t length = 0;
    if (auto* md5 = std::get_if<md5_ctx>(&m_state->context)) {
        length = MD5_DIGEST_SIZE;
        md5_digest(md5, length, bytes.data());
    } else {
        length = SHA256_DIGEST_SIZE;
        sha256_digest(&std::get<sha256_ctx>(m_state->context), length, bytes.data());
    }
    std::string hex;
    hex.reserve(2U * length);
    for (std::size_t i = 0; i < length; ++i) {
        hex += fmt::format("{:02x}", bytes[i]);
    }
    return hex;
}

} // namespace dljob::adapters
