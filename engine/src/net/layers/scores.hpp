#pragma once
// SoftmaxWithLoss and Accuracy read scores N x classes (x 1 x 1) and N labels.

#include "net/layer.hpp"

#include <fmt/format.h>

namespace dl::layers {

class ScoresAndLabelsLayer : public Layer {
public:
    using Layer::Layer;
    [[nodiscard]] std::size_t min_bottoms() const override { return 2; }
    [[nodiscard]] std::size_t max_bottoms() const override { return 2; }

protected:
    /// Rows and classes of the scores; one label per row, or a config error naming both layers.
    void read_scores_and_labels(const Blobs& bottom, const std::vector<std::string>& producers) {
        m_rows = bottom[0]->dim(0);
        m_classes = static_cast<int>(bottom[0]->inner());
        if (bottom[1]->count() != static_cast<std::size_t>(m_rows)) {
            fail(fmt::format("'{}' from layer '{}' has {} rows but '{}' from layer '{}' has {} "
                             "labels",
                             m_config.bottoms[0], producers[0], m_rows, m_config.bottoms[1],
                             producers[1], bottom[1]->count()));
        }
    }
    [[nodiscard]] int label_classes() const override { return m_classes; }
    int m_rows = 0;
    int m_classes = 0;
};

} // namespace dl::layers
