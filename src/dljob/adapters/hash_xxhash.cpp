#include <dljob/adapters/hash_xxhash.hpp>

#include <fmt/format.h>

#include <xxhash.h>

#include <new>

namespace dljob::adapters {

struct Xxh3Hasher::State {
    State() : state(XXH3_createState()) {
        if (state == nullptr) {
            throw std::bad_alloc();
        }
        XXH3_128bits_reset(state);
    }
    ~State() { XXH3_freeState(state); }
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    State(State&&) = delete;
    State& operator=(State&&) = delete;
    XXH3_state_t* state;
};

Xxh3Hasher::Xxh3Hasher() : m_state(std::make_unique<State>()) {}
Xxh3Hasher::~Xxh3Hasher() = default;
Xxh3Hasher::Xxh3Hasher(Xxh3Hasher&&) noexcept = default;
Xxh3Hasher& Xxh3Hasher::operator=(Xxh3Hasher&&) noexcept = default;

void Xxh3Hasher::update(const void* data, std::size_t size) {
    XXH3_128bits_update(m_state->state, data, size);
}

namespace {
std::string to_hex(XXH128_hash_t hash) {
    XXH128_canonical_t canonical;
    XXH128_canonicalFromHash(&canonical, hash);
    std::string hex;
    hex.reserve(32);
    for (const unsigned char byte : canonical.digest) {
        hex += fmt::format("{:02x}", byte);
    }
    return hex;
}
} // namespace

std::string Xxh3Hasher::hex_digest() const {
    return to_hex(XXH3_128bits_digest(m_state->state));
}

std::string xxh3_128_hex(std::string_view data) {
    return to_hex(XXH3_128bits(data.data(), data.size()));
}

} // namespace dljob::adapters
