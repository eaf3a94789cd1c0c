#include <dljob/adapters/hash_openssl.hpp>

#include <fmt/format.h>
#include <openssl/evp.h>

#include <array>
#include <new>
#include <stdexcept>

namespace dljob::adapters {

struct Digest::State {
    explicit State(DigestKind kind) : context(EVP_MD_CTX_new()) {
        if (context == nullptr) {
            throw std::bad_alloc();
        }
        const EVP_MD* md = kind == DigestKind::md5 ? EVP_md5() : EVP_sha256();
        if (EVP_DigestInit_ex(context, md, nullptr) != 1) {
            EVP_MD_CTX_free(context);
            throw std::runtime_error("EVP_DigestInit_ex failed");
        }
    }
    ~State() { EVP_MD_CTX_free(context); }
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    State(State&&) = delete;
    State& operator=(State&&) = delete;
    EVP_MD_CTX* context;
};

Digest::Digest(DigestKind kind) : m_state(std::make_unique<State>(kind)) {}
Digest::~Digest() = default;
Digest::Digest(Digest&&) noexcept = default;
Digest& Digest::operator=(Digest&&) noexcept = default;

void Digest::update(const void* data, std::size_t size) {
    EVP_DigestUpdate(m_state->context, data, size);
}

std::string Digest::hex_final() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> bytes{};
    unsigned int length = 0;
    EVP_DigestFinal_ex(m_state->context, bytes.data(), &length);
    std::string hex;
    hex.reserve(2U * length);
    for (unsigned int i = 0; i < length; ++i) {
        hex += fmt::format("{:02x}", bytes[i]);
    }
    return hex;
}

} // namespace dljob::adapters
