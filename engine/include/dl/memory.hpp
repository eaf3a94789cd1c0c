#pragma once
// Where a backend keeps tensors. The CPU backend's memory is the host's; the CUDA backend's is
// the GPU's, and host code reaches it only through upload and download (no CUDA type here).

#include <cstddef>
#include <utility>

namespace dl {

class Memory {
public:
    virtual ~Memory() = default;
    Memory() = default;
    Memory(const Memory&) = delete;
    Memory& operator=(const Memory&) = delete;
    Memory(Memory&&) = delete;
    Memory& operator=(Memory&&) = delete;

    /// Zero-filled memory of `bytes` (never inside a training step); throws dl::Error.
    virtual void* allocate(std::size_t bytes) = 0;
    virtual void release(void* pointer) noexcept = 0;
    /// Host to backend, ordered after earlier backend work; `src` may be reused on return.
    virtual void upload(void* dst, const void* src, std::size_t bytes) = 0;
    /// Backend to host; waits for earlier backend work first.
    virtual void download(void* dst, const void* src, std::size_t bytes) = 0;
    /// Within backend memory, ordered like the ops.
    virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
    /// True when host code may dereference the pointers (the CPU backend).
    [[nodiscard]] virtual bool host_accessible() const = 0;
};

/// Plain host memory (aligned, zeroed): the CPU backend's, and the default of a Tensor.
Memory& host_memory();

/// An owned allocation in some Memory; move-only.
class Buffer {
public:
    Buffer() = default;
    Buffer(Memory& memory, std::size_t bytes)
        : m_memory(&memory), m_bytes(bytes),
          m_pointer(bytes > 0 ? memory.allocate(bytes) : nullptr) {}
    ~Buffer() { reset(); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer(Buffer&& other) noexcept
        : m_memory(other.m_memory), m_bytes(std::exchange(other.m_bytes, 0)),
          m_pointer(std::exchange(other.m_pointer, nullptr)) {}
    Buffer& operator=(Buffer&& other) noexcept {
        if (this != &other) {
            reset();
            m_memory = other.m_memory;
            m_bytes = std::exchange(other.m_bytes, 0);
            m_pointer = std::exchange(other.m_pointer, nullptr);
        }
        return *this;
    }

    [[nodiscard]] void* get() const { return m_pointer; }
    [[nodiscard]] std::size_t bytes() const { return m_bytes; }
    template <typename T> [[nodiscard]] T* as() const { return static_cast<T*>(m_pointer); }

private:
    void reset() noexcept {
        if (m_pointer != nullptr) {
            m_memory->release(m_pointer);
            m_pointer = nullptr;
        }
    }
    Memory* m_memory = nullptr;
    std::size_t m_bytes = 0;
    void* m_pointer = nullptr;
};

} // namespace dl
