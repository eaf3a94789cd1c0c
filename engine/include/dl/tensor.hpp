#pragma once
// An NCHW float tensor with its gradient, in the memory of the backend that computes on it
// (host memory unless told otherwise). Storage is allocated when the net is set up and never
// inside a training step. data() and diff() are backend pointers: host code reads and writes
// them through read_data/write_data (which copy) unless memory().host_accessible().

#include <dl/memory.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace dl {

class Tensor {
public:
    Tensor() = default;
    explicit Tensor(Memory* memory) : m_memory(memory) {}
    explicit Tensor(std::vector<int> shape, Memory* memory = nullptr) : m_memory(memory) {
        reshape(std::move(shape));
    }

    /// New zero-filled storage for `shape`, in the same memory.
    void reshape(std::vector<int> shape) {
        m_shape = std::move(shape);
        m_count = 1;
        for (int dim : m_shape) {
            m_count *= static_cast<std::size_t>(dim);
        }
        m_data = Buffer(memory(), m_count * sizeof(float));
        m_diff = m_has_diff ? Buffer(memory(), m_count * sizeof(float)) : Buffer();
    }

    /// A parameter shared by name (Caffe's ParamSpec `name`): it computes with `owner`'s values
    /// (no storage of its own for them) and keeps a gradient of its own, which the net adds into
    /// the owner's after the backward pass.
    static std::shared_ptr<Tensor> sharing_values_of(const std::shared_ptr<Tensor>& owner) {
        auto shared = std::make_shared<Tensor>(owner->m_memory);
        shared->m_shape = owner->m_shape;
        shared->m_count = owner->m_count;
        shared->m_diff = Buffer(owner->memory(), owner->m_count * sizeof(float));
        shared->m_values_from = owner;
        return shared;
    }

    /// A tensor that is only ever computed forward (the test net's activations) keeps no
    /// gradient storage: diff() is nullptr from here on. Caffe gets the same by allocating diffs
    /// lazily; here storage still never appears inside a step.
    void drop_gradient() {
        m_has_diff = false;
        m_diff = Buffer();
    }
    [[nodiscard]] bool has_gradient() const { return m_has_diff; }

    [[nodiscard]] Memory& memory() const { return m_memory != nullptr ? *m_memory : host_memory(); }
    [[nodiscard]] const std::vector<int>& shape() const { return m_shape; }
    [[nodiscard]] int dim(std::size_t axis) const {
        return axis < m_shape.size() ? m_shape[axis] : 1;
    }
    [[nodiscard]] std::size_t count() const { return m_count; }
    /// Elements per item of the batch (everything after axis 0).
    [[nodiscard]] std::size_t inner() const {
        return m_shape.empty() || m_shape[0] == 0 ? 0
                                                  : count() / static_cast<std::size_t>(m_shape[0]);
    }
    [[nodiscard]] std::string shape_string() const {
        std::string text;
        for (std::size_t i = 0; i < m_shape.size(); ++i) {
            if (i > 0) {
                text += 'x';
            }
            text += std::to_string(m_shape[i]);
        }
        return text;
    }

    float* data() { return m_values_from ? m_values_from->data() : m_data.as<float>(); }
    [[nodiscard]] const float* data() const {
        return m_values_from ? m_values_from->data() : m_data.as<float>();
    }
    float* diff() { return m_diff.as<float>(); }
    [[nodiscard]] const float* diff() const { return m_diff.as<float>(); }

    /// Host copies (count() values), whatever the memory.
    [[nodiscard]] std::vector<float> read_data() const {
        return m_values_from ? m_values_from->read_data() : read(m_data);
    }
    [[nodiscard]] std::vector<float> read_diff() const { return read(m_diff); }
    /// The first value of data (a loss or an accuracy).
    [[nodiscard]] float read_scalar() const {
        float value = 0.0F;
        if (m_count > 0) {
            memory().download(&value, data(), sizeof(float));
        }
        return value;
    }
    /// Overwrites data (diff) with count() values from the host.
    void write_data(const float* values) {
        memory().upload(data(), values, m_count * sizeof(float));
    }
    void write_diff(const float* values) {
        memory().upload(m_diff.get(), values, m_count * sizeof(float));
    }

private:
    [[nodiscard]] std::vector<float> read(const Buffer& buffer) const {
        std::vector<float> values(m_count);
        if (m_count > 0) {
            memory().download(values.data(), buffer.get(), m_count * sizeof(float));
        }
        return values;
    }

    Memory* m_memory = nullptr;
    std::vector<int> m_shape;
    std::size_t m_count = 0;
    Buffer m_data;
    Buffer m_diff;
    bool m_has_diff = true;
    std::shared_ptr<Tensor> m_values_from; // set for a parameter shared by name
};

} // namespace dl
