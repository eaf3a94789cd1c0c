// Numerical gradient checks (Caffe's GradientChecker): for every layer with parameters and
// every loss, the analytic gradient of a random projection of the top matches central
// differences, for the bottoms and for every parameter.

#include "net/layer.hpp"

#include <dl/backend.hpp>
#include <dl/config.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

namespace dl {
namespace {

struct CheckCase {
    LayerConfig config;
    std::vector<std::vector<int>> bottom_shapes;
    int label_classes = 0; // > 0: the last bottom holds labels in [0, classes)
};

class GradientCheck : public ::testing::Test {
protected:
    // Threads 2: the split-and-reduce paths of the CPU backend are checked too.
    std::unique_ptr<Backend> m_backend = make_backend("cpu", 2);

    void check(CheckCase test_case, float step = 1e-2F, float tolerance = 2e-3F) {
        std::mt19937 rng(1234);
        std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
        std::vector<std::unique_ptr<Tensor>> bottoms;
        Blobs bottom;
        for (std::size_t b = 0; b < test_case.bottom_shapes.size(); ++b) {
            bottoms.push_back(std::make_unique<Tensor>(test_case.bottom_shapes[b]));
            Tensor& t = *bottoms.back();
            const bool labels =
                test_case.label_classes > 0 && b + 1 == test_case.bottom_shapes.size();
            for (std::size_t i = 0; i < t.count(); ++i) {
                // Values kept away from 0 (ReLU's kink) and distinct (max pooling's ties).
                const float v = uniform(rng);
                t.data()[i] = labels ? static_cast<float>(rng() % test_case.label_classes)
                                     : (v > 0 ? v + 0.05F : v - 0.05F);
            }
            bottom.push_back(&t);
        }
        Tensor top_tensor;
        Blobs top = {&top_tensor};
        auto layer = make_layer(test_case.config, *m_backend);
        std::mt19937 layer_rng(99);
        layer->set_rng(&layer_rng);
        layer->setup(bottom, top, std::vector<std::string>(bottom.size(), "input"));
        for (const auto& shape : layer->param_shapes()) {
            auto param = std::make_shared<Tensor>(shape);
            for (std::size_t i = 0; i < param->count(); ++i) {
                param->data()[i] = uniform(rng);
            }
            layer->params().push_back(param);
        }
        std::vector<float> projection(top_tensor.count());
        for (float& p : projection) {
            p = uniform(rng);
        }
        const bool loss = layer->is_loss();
        // The objective: the loss itself, or a fixed random projection of the top.
        const auto objective = [&] {
            layer_rng.seed(99); // Dropout draws the same mask every time
            layer->forward(bottom, top);
            if (loss) {
                return static_cast<double>(top_tensor.data()[0]) * test_case.config.loss_weight;
            }
            double sum = 0.0;
            for (std::size_t i = 0; i < top_tensor.count(); ++i) {
                sum += static_cast<double>(top_tensor.data()[i]) * projection[i];
            }
            return sum;
        };
        objective();
        std::copy(projection.begin(), projection.end(), top_tensor.diff());
        std::vector<bool> propagate(bottom.size(), true);
        if (test_case.label_classes > 0) {
            propagate.back() = false;
        }
        layer->backward(top, propagate, bottom);

        std::vector<std::pair<std::string, Tensor*>> checked;
        for (std::size_t b = 0; b < bottom.size(); ++b) {
            if (propagate[b]) {
                checked.emplace_back("bottom " + std::to_string(b), bottom[b]);
            }
        }
        for (std::size_t p = 0; p < layer->params().size(); ++p) {
            checked.emplace_back("param " + std::to_string(p), layer->params()[p].get());
        }
        // Analytic gradients are copied first: the numeric forwards do not touch diffs, but
        // keep the check independent of that.
        for (auto& [name, tensor] : checked) {
            const std::vector<float> analytic(tensor->diff(), tensor->diff() + tensor->count());
            const std::size_t stride = std::max<std::size_t>(1, tensor->count() / 200);
            for (std::size_t i = 0; i < tensor->count(); i += stride) {
                const float saved = tensor->data()[i];
                tensor->data()[i] = saved + step;
                const double plus = objective();
                tensor->data()[i] = saved - step;
                const double minus = objective();
                tensor->data()[i] = saved;
                const double numeric = (plus - minus) / (2.0 * step);
                const double scale = std::max(
                    {std::fabs(numeric), std::fabs(static_cast<double>(analytic[i])), 1.0});
                EXPECT_NEAR(analytic[i], numeric, tolerance * scale)
                    << test_case.config.type << " " << name << " element " << i;
            }
        }
    }
};

LayerConfig layer(const std::string& type) {
    LayerConfig config;
    config.name = type;
    config.type = type;
    return config;
}

TEST_F(GradientCheck, ConvolutionWithPadAndStrideMatchesNumericGradient) {
    LayerConfig conv = layer("Convolution");
    conv.num_output = 4;
    conv.kernel_size = 3;
    conv.stride = 2;
    conv.pad = 1;
    check({conv, {{3, 2, 7, 7}}});
}

TEST_F(GradientCheck, WinogradConvolutionMatchesNumericGradient) {
    // 5x5, stride 1, 8 channels: the CPU backend's Winograd path; pad 1 and an odd output (7x7).
    LayerConfig conv = layer("Convolution");
    conv.num_output = 3;
    conv.kernel_size = 5;
    conv.pad = 1;
    // The objective sums 200-term products in float: a larger step keeps the difference
    // quotient above that rounding (it is exact otherwise: convolution is linear in each input).
    check({conv, {{3, 8, 9, 9}}}, 0.25F);
}

TEST_F(GradientCheck, GroupedConvolutionMatchesNumericGradient) {
    LayerConfig conv = layer("Convolution");
    conv.num_output = 4;
    conv.kernel_size = 3;
    conv.group = 2;
    check({conv, {{2, 4, 6, 6}}});
}

TEST_F(GradientCheck, ConvolutionWithoutBiasMatchesNumericGradient) {
    LayerConfig conv = layer("Convolution");
    conv.num_output = 3;
    conv.kernel_size = 2;
    conv.bias_term = false;
    check({conv, {{2, 2, 5, 5}}});
}

TEST_F(GradientCheck, InnerProductMatchesNumericGradient) {
    LayerConfig ip = layer("InnerProduct");
    ip.num_output = 5;
    check({ip, {{4, 3, 2, 2}}});
}

TEST_F(GradientCheck, MaxPoolingMatchesNumericGradient) {
    LayerConfig pool = layer("Pooling");
    pool.kernel_size = 3;
    pool.stride = 2;
    check({pool, {{2, 2, 7, 7}}}, 1e-3F);
}

TEST_F(GradientCheck, MaxPooling2x2FastPathMatchesNumericGradient) {
    LayerConfig pool = layer("Pooling");
    pool.kernel_size = 2;
    pool.stride = 2;
    check({pool, {{2, 3, 6, 6}}}, 1e-3F);
}

TEST_F(GradientCheck, AveragePoolingWithPadMatchesNumericGradient) {
    LayerConfig pool = layer("Pooling");
    pool.pool = "ave";
    pool.kernel_size = 3;
    pool.stride = 2;
    pool.pad = 1;
    check({pool, {{2, 2, 6, 6}}});
}

TEST_F(GradientCheck, ActivationsMatchNumericGradient) {
    for (const char* type : {"ReLU", "Sigmoid", "TanH"}) {
        check({layer(type), {{3, 4, 2, 2}}}, 1e-3F);
    }
}

TEST_F(GradientCheck, FlattenMatchesNumericGradient) {
    LayerConfig flat = layer("Flatten");
    flat.axis = 1;
    flat.end_axis = 2;
    check({flat, {{2, 3, 2, 4}}});
}

TEST_F(GradientCheck, SoftmaxMatchesNumericGradient) {
    check({layer("Softmax"), {{4, 10}}});
}

TEST_F(GradientCheck, DropoutMatchesNumericGradientForAFixedMask) {
    LayerConfig drop = layer("Dropout");
    drop.dropout_ratio = 0.4F;
    check({drop, {{4, 10}}});
}

TEST_F(GradientCheck, LrnAcrossChannelsMatchesNumericGradient) {
    LayerConfig lrn = layer("LRN");
    lrn.local_size = 5;
    lrn.alpha = 0.5F; // large enough that the cross-channel term matters
    lrn.k = 2.0F;
    check({lrn, {{2, 7, 3, 3}}}, 1e-2F);
}

TEST_F(GradientCheck, BatchNormWithBatchStatisticsMatchesNumericGradient) {
    // The running statistics are parameters with no gradient: checked to be zero as well.
    check({layer("BatchNorm"), {{4, 3, 3, 3}}}, 1e-2F);
}

TEST_F(GradientCheck, ScaleWithBiasMatchesNumericGradient) {
    LayerConfig scale = layer("Scale");
    scale.bias_term = true;
    check({scale, {{2, 3, 4, 4}}});
}

TEST_F(GradientCheck, ConcatMatchesNumericGradientForEveryBottom) {
    LayerConfig concat = layer("Concat");
    check({concat, {{2, 3, 2, 2}, {2, 2, 2, 2}, {2, 1, 2, 2}}});
}

TEST_F(GradientCheck, EltwiseSumProdAndMaxMatchNumericGradient) {
    LayerConfig sum = layer("Eltwise");
    sum.coeff = {0.5F, -2.0F, 1.5F};
    check({sum, {{2, 3, 3, 3}, {2, 3, 3, 3}, {2, 3, 3, 3}}});
    LayerConfig prod = layer("Eltwise");
    prod.operation = "prod";
    check({prod, {{2, 3, 3, 3}, {2, 3, 3, 3}, {2, 3, 3, 3}}});
    LayerConfig max = layer("Eltwise");
    max.operation = "max";
    // A small step: the winner of a value must not change between the two evaluations.
    check({max, {{2, 3, 3, 3}, {2, 3, 3, 3}, {2, 3, 3, 3}}}, 1e-3F);
}

TEST_F(GradientCheck, SoftmaxWithLossMatchesNumericGradient) {
    LayerConfig loss = layer("SoftmaxWithLoss");
    loss.loss_weight = 2.0F;
    check({loss, {{5, 7}, {5}}, 7});
}

TEST_F(GradientCheck, PReluPerChannelAndSharedMatchesNumericGradient) {
    for (const bool shared : {false, true}) {
        LayerConfig prelu = layer("PReLU");
        prelu.channel_shared = shared;
        check({prelu, {{3, 4, 2, 3}}}, 1e-3F);
    }
}

TEST_F(GradientCheck, DeconvolutionMatchesNumericGradient) {
    // Stride 2 and pad 1 (an FCN's upsampling), grouped; then without bias, stride 1.
    LayerConfig deconv = layer("Deconvolution");
    deconv.num_output = 4;
    deconv.kernel_size = 4;
    deconv.stride = 2;
    deconv.pad = 1;
    deconv.group = 2;
    check({deconv, {{2, 2, 3, 3}}});
    deconv.num_output = 3;
    deconv.kernel_size = 3;
    deconv.stride = 1;
    deconv.pad = 0;
    deconv.group = 1;
    deconv.bias_term = false;
    check({deconv, {{2, 3, 4, 5}}});
}

TEST_F(GradientCheck, CropMatchesNumericGradient) {
    // Height and width from offset (1, 2); then channels, height and width from one offset.
    LayerConfig crop = layer("Crop");
    crop.axis = 2;
    crop.crop_offset = {1, 2};
    check({crop, {{2, 3, 5, 6}, {2, 1, 3, 3}}});
    crop.axis = 1;
    crop.crop_offset = {1};
    check({crop, {{2, 4, 4, 4}, {1, 2, 3, 2}}});
}

TEST_F(GradientCheck, HingeLossL1AndL2MatchNumericGradient) {
    // Scores in [-1.05, 1.05]: a hinge's kink (at -1 or 1 exactly) is at a step of 1e-3 from
    // none of them in this draw; L1's gradient is piecewise constant.
    for (const char* norm : {"l1", "l2"}) {
        LayerConfig loss = layer("HingeLoss");
        loss.norm = norm;
        loss.loss_weight = 1.5F;
        check({loss, {{5, 4}, {5}}, 4}, 1e-3F);
    }
}

TEST_F(GradientCheck, ContrastiveLossMatchesNumericGradient) {
    // Pairs of 4 values in [-1.05, 1.05]: distances around 1.6, so a margin of 2 pushes most
    // dissimilar pairs and 0.5 (legacy: of the squared distance) none; both are checked.
    for (const bool legacy : {false, true}) {
        for (const float margin : {2.0F, 0.5F}) {
            LayerConfig loss = layer("ContrastiveLoss");
            loss.margin = margin;
            loss.legacy_version = legacy;
            loss.loss_weight = 0.7F;
            // Caffe's backward divides by d + 1e-4: 1e-4 of d, within the tolerance.
            check({loss, {{6, 4}, {6, 4}, {6}}, 2}, 1e-3F);
        }
    }
}

} // namespace
} // namespace dl
