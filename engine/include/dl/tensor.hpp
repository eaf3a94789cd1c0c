#pragma once
// An NCHW float tensor with its gradient. Storage is allocated when the net is set up and
// never inside a training step.

#include <cstddef>
#include <string>
#include <vector>

namespace dl {

class Tensor {
public:
    Tensor() = default;
    explicit Tensor(std::vector<int> shape) { reshape(std::move(shape)); }

    void reshape(std::vector<int> shape) {
        m_shape = std::move(shape);
        std::size_t count = 1;
        for (int dim : m_shape) {
            count *= static_cast<std::size_t>(dim);
        }
        m_data.assign(count, 0.0F);
        m_diff.assign(count, 0.0F);
    }

    [[nodiscard]] const std::vector<int>& shape() const { return m_shape; }
    [[nodiscard]] int dim(std::size_t axis) const {
        return axis < m_shape.size() ? m_shape[axis] : 1;
    }
    [[nodiscard]] std::size_t count() const { return m_data.size(); }
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

    float* data() { return m_data.data(); }
    [[nodiscard]] const float* data() const { return m_data.data(); }
    float* diff() { return m_diff.data(); }
    [[nodiscard]] const float* diff() const { return m_diff.data(); }

private:
    std::vector<int> m_shape;
    std::vector<float> m_data;
    std::vector<float> m_diff;
};

} // namespace dl
