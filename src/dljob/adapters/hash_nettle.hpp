#pragma once
// MD5 and SHA-256 (Nettle), behind a header that shows no Nettle type.
// MD5 is here only because the published checksums of MNIST, Fashion-MNIST and CIFAR-10
// (torchvision's lists, the datasets' own pages) are MD5; it detects corruption, not tampering,
// which is why fetch-data records SHA-256 too where it is known.

#include <memory>
#include <string>
#include <string_view>

namespace dljob::adapters {

enum class DigestKind { md5, sha256 };

class Digest {
public:
    explicit Digest(DigestKind kind);
    ~Digest();
    Digest(const Digest&) = delete;
    Digest& operator=(const Digest&) = delete;
    Digest(Digest&&) noexcept;
    Digest& operator=(Digest&&) noexcept;

    void update(const void* data, std::size_t size);
    /// Lower-case hex of the digest; the object cannot be updated afterwards.
    std::string hex_final();

private:
    struct State;
    std::unique_ptr<State> m_state;
};

} // namespace dljob::adapters
