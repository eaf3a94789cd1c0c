// The CUDA backend against the CPU reference, op by op and for whole LeNet training steps, on
// fresh random inputs; plus checkpoints moving between the two. Suites named Gpu* carry the
// ctest label `gpu` and skip, saying why, when dltrain was built without CUDA or no GPU is
// visible.
//
// Tolerances: cuDNN and cuBLAS sum in other orders than the CPU's sgemm, and nvcc fuses
// multiply-adds, so results agree to float rounding, not bit for bit. Per op:
// |gpu - cpu| <= 1e-4 * max(1, max |cpu|) (2e-4 for convolution gradients, sums of thousands
// of products); whole training steps: losses to 1e-4 relative and weights after five steps to
// 1e-4 * max(1, max |w|).

#include "engine_test_support.hpp"

#include <dl/backend.hpp>
#include <dl/checkpoint.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>
#include <dl/solver.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace dl {
namespace {

namespace fs = std::filesystem;

using dl_test::why_no_gpu;

const std::string& no_gpu_reason() {
    static const std::string reason = why_no_gpu();
    return reason;
}

std::vector<float> random_values(std::size_t n, std::mt19937& rng, float low = -1.0F,
                                 float high = 1.0F) {
    std::uniform_real_distribution<float> uniform(low, high);
    std::vector<float> values(n);
    for (float& v : values) {
        v = uniform(rng);
    }
    return values;
}

std::vector<float> random_labels(std::size_t n, int classes, std::mt19937& rng) {
    std::vector<float> labels(n);
    for (float& label : labels) {
        label = static_cast<float>(rng() % static_cast<unsigned>(classes));
    }
    return labels;
}

void expect_close(const std::vector<float>& cpu, const std::vector<float>& gpu,
                  const std::string& what, float tolerance = 1e-4F) {
    ASSERT_EQ(cpu.size(), gpu.size()) << what;
    float scale = 1.0F;
    for (const float v : cpu) {
        scale = std::max(scale, std::fabs(v));
    }
    int reported = 0;
    for (std::size_t i = 0; i < cpu.size(); ++i) {
        if (!(std::fabs(cpu[i] - gpu[i]) <= tolerance * scale) && reported++ < 5) {
            ADD_FAILURE() << what << "[" << i << "]: cpu " << cpu[i] << ", gpu " << gpu[i]
                          << " (tolerance " << tolerance * scale << ")";
        }
    }
}

class GpuOps : public ::testing::Test {
protected:
    void SetUp() override {
        if (!no_gpu_reason().empty()) {
            GTEST_SKIP() << "no GPU test: " << no_gpu_reason();
        }
        m_cpu = make_backend("cpu", 2);
        m_gpu = make_backend("cuda:0", 1);
    }

    // The same values in a CPU tensor and a GPU tensor.
    struct Both {
        Tensor cpu;
        Tensor gpu;
    };
    Both both(const std::vector<int>& shape, const std::vector<float>& values) {
        Both t{Tensor(shape, m_cpu.get()), Tensor(shape, m_gpu.get())};
        t.cpu.write_data(values.data());
        t.gpu.write_data(values.data());
        return t;
    }
    Both both_random(const std::vector<int>& shape, float low = -1.0F, float high = 1.0F) {
        Tensor probe(shape);
        return both(shape, random_values(probe.count(), m_rng, low, high));
    }
    static void expect_data(const Both& t, const std::string& what, float tolerance = 1e-4F) {
        expect_close(t.cpu.read_data(), t.gpu.read_data(), what, tolerance);
    }
    static void expect_diff(const Both& t, const std::string& what, float tolerance = 1e-4F) {
        expect_close(t.cpu.read_diff(), t.gpu.read_diff(), what, tolerance);
    }
    static void set_diff(Both& t, const std::vector<float>& values) {
        t.cpu.write_diff(values.data());
        t.gpu.write_diff(values.data());
    }

    void check_conv(const ConvGeometry& g, bool bias) {
        auto x = both_random({g.batch, g.channels, g.height, g.width});
        auto w = both_random({g.outputs, g.channels / g.group, g.kernel, g.kernel});
        auto b = both_random({g.outputs});
        auto y = both_random({g.batch, g.outputs, g.out_height(), g.out_width()});
        for (Backend* backend : {m_cpu.get(), m_gpu.get()}) {
            const bool gpu = backend == m_gpu.get();
            auto& xs = gpu ? x.gpu : x.cpu;
            auto& ws = gpu ? w.gpu : w.cpu;
            auto& bs = gpu ? b.gpu : b.cpu;
            auto& ys = gpu ? y.gpu : y.cpu;
            backend->conv_forward(g, xs.data(), ws.data(), bias ? bs.data() : nullptr, ys.data());
        }
        expect_data(y, "conv y");
        set_diff(y, random_values(y.cpu.count(), m_rng));
        for (Backend* backend : {m_cpu.get(), m_gpu.get()}) {
            const bool gpu = backend == m_gpu.get();
            auto& xs = gpu ? x.gpu : x.cpu;
            auto& ws = gpu ? w.gpu : w.cpu;
            auto& bs = gpu ? b.gpu : b.cpu;
            auto& ys = gpu ? y.gpu : y.cpu;
            backend->conv_backward(g, xs.data(), ws.data(), ys.diff(), xs.diff(), ws.diff(),
                                   bias ? bs.diff() : nullptr);
        }
        expect_diff(x, "conv dx", 2e-4F);
        expect_diff(w, "conv dw", 2e-4F);
        if (bias) {
            expect_diff(b, "conv db", 2e-4F);
        }
    }

    void check_pool(const PoolGeometry& g, bool max) {
        auto x = both_random({g.batch, g.channels, g.height, g.width});
        auto y = both_random({g.batch, g.channels, g.out_height(), g.out_width()});
        Buffer arg_cpu(*m_cpu, y.cpu.count() * sizeof(std::int32_t));
        Buffer arg_gpu(*m_gpu, y.cpu.count() * sizeof(std::int32_t));
        if (max) {
            m_cpu->max_pool_forward(g, x.cpu.data(), y.cpu.data(), arg_cpu.as<std::int32_t>());
            m_gpu->max_pool_forward(g, x.gpu.data(), y.gpu.data(), arg_gpu.as<std::int32_t>());
        } else {
            m_cpu->ave_pool_forward(g, x.cpu.data(), y.cpu.data());
            m_gpu->ave_pool_forward(g, x.gpu.data(), y.gpu.data());
        }
        expect_data(y, "pool y");
        set_diff(y, random_values(y.cpu.count(), m_rng));
        if (max) {
            m_cpu->max_pool_backward(g, x.cpu.data(), y.cpu.data(), y.cpu.diff(),
                                     arg_cpu.as<std::int32_t>(), x.cpu.diff());
            m_gpu->max_pool_backward(g, x.gpu.data(), y.gpu.data(), y.gpu.diff(),
                                     arg_gpu.as<std::int32_t>(), x.gpu.diff());
        } else {
            m_cpu->ave_pool_backward(g, y.cpu.diff(), x.cpu.diff());
            m_gpu->ave_pool_backward(g, y.gpu.diff(), x.gpu.diff());
        }
        expect_diff(x, "pool dx");
    }

    std::mt19937 m_rng{20261122};
    std::unique_ptr<Backend> m_cpu;
    std::unique_ptr<Backend> m_gpu;
};

TEST_F(GpuOps, ConvolutionMatchesTheCpu) {
    // LeNet's conv1 and conv2, then padding with stride, groups, and no bias.
    check_conv({4, 1, 28, 28, 20, 5, 1, 0, 1}, true);
    check_conv({4, 20, 12, 12, 50, 5, 1, 0, 1}, true);
    check_conv({3, 2, 7, 7, 4, 3, 2, 1, 1}, true);
    check_conv({2, 4, 6, 6, 4, 3, 1, 0, 2}, true);
    check_conv({2, 2, 5, 5, 3, 2, 1, 0, 1}, false);
}

TEST_F(GpuOps, MaxPoolingMatchesTheCpuOnCudnnAndCaffeShapes) {
    check_pool({4, 20, 24, 24, 2, 2, 0}, true); // LeNet: cuDNN
    check_pool({2, 3, 7, 7, 3, 2, 1}, true);    // padded: own kernel
    check_pool({2, 3, 6, 6, 3, 2, 0}, true);    // Caffe's ceil mode: own kernel
}

TEST_F(GpuOps, AveragePoolingMatchesTheCpu) {
    check_pool({2, 3, 6, 6, 3, 2, 1}, false);
    check_pool({2, 3, 8, 8, 2, 2, 0}, false);
    check_pool({2, 3, 6, 6, 3, 2, 0}, false);
}

TEST_F(GpuOps, InnerProductMatchesTheCpu) {
    for (const auto& [rows, in, out] : {std::array<int, 3>{5, 12, 7}, {64, 800, 500}}) {
        auto x = both_random({rows, in});
        auto w = both_random({out, in});
        auto b = both_random({out});
        auto y = both_random({rows, out});
        m_cpu->inner_product_forward(rows, in, out, x.cpu.data(), w.cpu.data(), b.cpu.data(),
                                     y.cpu.data());
        m_gpu->inner_product_forward(rows, in, out, x.gpu.data(), w.gpu.data(), b.gpu.data(),
                                     y.gpu.data());
        expect_data(y, "ip y");
        set_diff(y, random_values(y.cpu.count(), m_rng));
        m_cpu->inner_product_backward(rows, in, out, x.cpu.data(), w.cpu.data(), y.cpu.diff(),
                                      x.cpu.diff(), w.cpu.diff(), b.cpu.diff());
        m_gpu->inner_product_backward(rows, in, out, x.gpu.data(), w.gpu.data(), y.gpu.diff(),
                                      x.gpu.diff(), w.gpu.diff(), b.gpu.diff());
        expect_diff(x, "ip dx");
        expect_diff(w, "ip dw");
        expect_diff(b, "ip db");
    }
}

TEST_F(GpuOps, ActivationsMatchTheCpuInPlaceAndNot) {
    for (const Activation kind : {Activation::relu, Activation::sigmoid, Activation::tanh}) {
        auto x = both_random({1000}, -3.0F, 3.0F);
        auto y = both_random({1000});
        m_cpu->activation_forward(kind, 1000, x.cpu.data(), y.cpu.data());
        m_gpu->activation_forward(kind, 1000, x.gpu.data(), y.gpu.data());
        expect_data(y, "activation y");
        set_diff(y, random_values(1000, m_rng));
        m_cpu->activation_backward(kind, 1000, y.cpu.data(), y.cpu.diff(), x.cpu.diff());
        m_gpu->activation_backward(kind, 1000, y.gpu.data(), y.gpu.diff(), x.gpu.diff());
        expect_diff(x, "activation dx");
        // In place, as Caffe's ReLU runs: x and y are one blob, and so are dy and dx.
        m_cpu->activation_forward(kind, 1000, x.cpu.data(), x.cpu.data());
        m_gpu->activation_forward(kind, 1000, x.gpu.data(), x.gpu.data());
        expect_data(x, "in-place activation");
        m_cpu->activation_backward(kind, 1000, x.cpu.data(), x.cpu.diff(), x.cpu.diff());
        m_gpu->activation_backward(kind, 1000, x.gpu.data(), x.gpu.diff(), x.gpu.diff());
        expect_diff(x, "in-place activation dx");
    }
}

TEST_F(GpuOps, SoftmaxLossAndAccuracyMatchTheCpu) {
    const int rows = 64;
    const int classes = 10;
    auto logits = both_random({rows, classes}, -4.0F, 4.0F);
    auto labels = both({rows}, random_labels(rows, classes, m_rng));
    auto prob = both_random({rows, classes});
    auto loss = both_random({1});
    m_cpu->softmax_loss_forward(rows, classes, logits.cpu.data(), labels.cpu.data(),
                                prob.cpu.data(), loss.cpu.data());
    m_gpu->softmax_loss_forward(rows, classes, logits.gpu.data(), labels.gpu.data(),
                                prob.gpu.data(), loss.gpu.data());
    expect_data(prob, "softmax");
    expect_data(loss, "loss");
    m_cpu->softmax_loss_backward(rows, classes, prob.cpu.data(), labels.cpu.data(), 0.5F,
                                 logits.cpu.diff());
    m_gpu->softmax_loss_backward(rows, classes, prob.gpu.data(), labels.gpu.data(), 0.5F,
                                 logits.gpu.diff());
    expect_diff(logits, "dlogits");
    for (const int top_k : {1, 3}) {
        auto accuracy = both_random({1});
        m_cpu->accuracy(rows, classes, top_k, logits.cpu.data(), labels.cpu.data(),
                        accuracy.cpu.data());
        m_gpu->accuracy(rows, classes, top_k, logits.gpu.data(), labels.gpu.data(),
                        accuracy.gpu.data());
        // A count over 64 rows: exactly equal.
        EXPECT_EQ(accuracy.cpu.read_scalar(), accuracy.gpu.read_scalar()) << "top " << top_k;
    }
}

TEST_F(GpuOps, DropoutMaskIsFreshEachCallAndKeepsTheRightShare) {
    const std::size_t n = 100000;
    Tensor mask({static_cast<int>(n)}, m_gpu.get());
    std::mt19937 rng(5);
    m_gpu->dropout_mask(n, 0.3F, rng, mask.data());
    const std::vector<float> first = mask.read_data();
    m_gpu->dropout_mask(n, 0.3F, rng, mask.data());
    const std::vector<float> second = mask.read_data();
    double kept = 0.0;
    for (const float v : first) {
        ASSERT_TRUE(v == 0.0F || v == 1.0F) << v;
        kept += v;
    }
    // Binomial(100000, 0.7): the standard deviation of the share is 0.0014; 0.01 is 7 of them.
    EXPECT_NEAR(kept / n, 0.7, 0.01);
    EXPECT_NE(first, second);
    auto x = both_random({static_cast<int>(n)});
    auto y = both_random({static_cast<int>(n)});
    auto m = both({static_cast<int>(n)}, first);
    m_cpu->masked_scale(n, x.cpu.data(), m.cpu.data(), 1.0F / 0.7F, y.cpu.data());
    m_gpu->masked_scale(n, x.gpu.data(), m.gpu.data(), 1.0F / 0.7F, y.gpu.data());
    expect_data(y, "masked_scale");
}

TEST_F(GpuOps, SolverUpdatesMatchTheCpu) {
    const std::size_t n = 1000;
    const int count = static_cast<int>(n);
    for (const std::string rule : {"SGD", "Nesterov", "Adam"}) {
        auto w = both_random({count});
        auto m = both({count}, std::vector<float>(n, 0.0F));
        auto v = both({count}, std::vector<float>(n, 0.0F));
        auto step = both({2}, {0.01F, 1.0F});
        for (int t = 1; t <= 3; ++t) {
            set_diff(w, random_values(n, m_rng));
            const std::vector<float> scalars = {
                0.01F / static_cast<float>(t),
                std::sqrt(1.0F - std::pow(0.999F, static_cast<float>(t))) /
                    (1.0F - std::pow(0.9F, static_cast<float>(t)))};
            step.cpu.write_data(scalars.data());
            step.gpu.write_data(scalars.data());
            if (rule == "Adam") {
                m_cpu->adam_update(n, step.cpu.data(), 2.0F, 0.9F, 0.999F, 1e-8F, 5e-4F,
                                   w.cpu.diff(), m.cpu.data(), v.cpu.data(), w.cpu.data());
                m_gpu->adam_update(n, step.gpu.data(), 2.0F, 0.9F, 0.999F, 1e-8F, 5e-4F,
                                   w.gpu.diff(), m.gpu.data(), v.gpu.data(), w.gpu.data());
            } else {
                m_cpu->sgd_update(n, step.cpu.data(), 2.0F, 0.9F, 5e-4F, rule == "Nesterov",
                                  w.cpu.diff(), m.cpu.data(), w.cpu.data());
                m_gpu->sgd_update(n, step.gpu.data(), 2.0F, 0.9F, 5e-4F, rule == "Nesterov",
                                  w.gpu.diff(), m.gpu.data(), w.gpu.data());
            }
        }
        expect_data(w, rule + " weights", 1e-5F);
        expect_data(m, rule + " history", 1e-5F);
        expect_data(v, rule + " second moment", 1e-5F);
    }
}

TEST_F(GpuOps, SolverUpdatesOverAllParametersInOneLaunchMatchTheCpu) {
    const std::vector<int> sizes = {1000, 7, 300};
    for (const std::string rule : {"SGD", "Nesterov", "Adam"}) {
        std::vector<Both> w;
        std::vector<Both> m;
        std::vector<Both> v;
        for (const int size : sizes) {
            w.push_back(both_random({size}));
            m.push_back(both({size}, std::vector<float>(static_cast<std::size_t>(size), 0.0F)));
            v.push_back(both({size}, std::vector<float>(static_cast<std::size_t>(size), 0.0F)));
        }
        auto step = both({2}, {0.01F, 0.5F});
        std::vector<UpdateTarget> cpu_targets;
        std::vector<UpdateTarget> gpu_targets;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            const float lr_mult = i == 1 ? 2.0F : 1.0F;
            const float decay = i == 1 ? 0.0F : 5e-4F;
            cpu_targets.push_back({w[i].cpu.count(), lr_mult, decay, w[i].cpu.diff(),
                                   m[i].cpu.data(), v[i].cpu.data(), w[i].cpu.data()});
            gpu_targets.push_back({w[i].gpu.count(), lr_mult, decay, w[i].gpu.diff(),
                                   m[i].gpu.data(), v[i].gpu.data(), w[i].gpu.data()});
        }
        for (int t = 0; t < 3; ++t) {
            for (auto& weights : w) {
                set_diff(weights, random_values(weights.cpu.count(), m_rng));
            }
            if (rule == "Adam") {
                m_cpu->adam_update_all(cpu_targets, step.cpu.data(), 0.9F, 0.999F, 1e-8F);
                m_gpu->adam_update_all(gpu_targets, step.gpu.data(), 0.9F, 0.999F, 1e-8F);
            } else {
                m_cpu->sgd_update_all(cpu_targets, step.cpu.data(), 0.9F, rule == "Nesterov");
                m_gpu->sgd_update_all(gpu_targets, step.gpu.data(), 0.9F, rule == "Nesterov");
            }
        }
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            expect_data(w[i], rule + " weights " + std::to_string(i), 1e-5F);
            expect_data(m[i], rule + " history " + std::to_string(i), 1e-5F);
            expect_data(v[i], rule + " second moment " + std::to_string(i), 1e-5F);
        }
    }
}

// Whole LeNet training steps, the GPU's recorded (CUDA graph) and staged like dltrain's loop.
class GpuTraining : public ::testing::Test {
protected:
    void SetUp() override {
        if (!no_gpu_reason().empty()) {
            GTEST_SKIP() << "no GPU test: " << no_gpu_reason();
        }
        m_config = load_config(fs::path(DLJOB_SOURCE_DIR) / "recipes/networks/lenet.yaml");
        m_cpu = make_backend("cpu", 2);
        m_gpu = make_backend("cuda:0", 1);
    }

    struct Trainer {
        Trainer(const NetConfig& config, Backend& backend)
            : net(config, Phase::train, backend, config.solver.random_seed),
              solver(config.solver, net, backend),
              stage(backend.make_input_stage(
                  {net.inputs().front().data->count(), net.inputs().front().labels->count()}, 2)) {}
        // One step on the given batch: staged through slot (step % 2), run directly the first
        // time, then recorded once and replayed, exactly as dltrain's loop does.
        float step(const std::vector<float>& images, const std::vector<float>& labels) {
            const int slot = steps % 2;
            std::copy(images.begin(), images.end(), stage->host(slot, 0));
            std::copy(labels.begin(), labels.end(), stage->host(slot, 1));
            stage->upload(slot);
            NetInput& input = net.inputs().front();
            stage->consume(slot, {input.data->data(), input.labels->data()});
            solver.prepare_update();
            const auto ops = [this] {
                net.enqueue_forward();
                net.backward();
                solver.enqueue_update();
            };
            if (recording) {
                recording->replay();
            } else {
                ops();
                recording = net.backend().record(ops);
            }
            solver.advance();
            ++steps;
            return net.read_loss();
        }
        Net net;
        Solver solver;
        std::unique_ptr<InputStage> stage;
        std::unique_ptr<Recording> recording;
        int steps = 0;
    };

    NetConfig m_config;
    std::unique_ptr<Backend> m_cpu;
    std::unique_ptr<Backend> m_gpu;
};

TEST_F(GpuTraining, LeNetStepsOnFreshRandomBatchesMatchTheCpu) {
    Trainer cpu(m_config, *m_cpu);
    Trainer gpu(m_config, *m_gpu);
    // Same seed, same fillers: the same initial weights on both.
    for (std::size_t p = 0; p < cpu.net.params().size(); ++p) {
        ASSERT_EQ(cpu.net.params()[p].tensor->read_data(), gpu.net.params()[p].tensor->read_data())
            << cpu.net.params()[p].name;
    }
    std::mt19937 rng(77);
    const std::size_t images = cpu.net.inputs().front().data->count();
    const std::size_t rows = cpu.net.inputs().front().labels->count();
    for (int step = 0; step < 5; ++step) {
        const auto batch = random_values(images, rng, 0.0F, 1.0F);
        const auto labels = random_labels(rows, 10, rng);
        const float cpu_loss = cpu.step(batch, labels);
        const float gpu_loss = gpu.step(batch, labels);
        EXPECT_NEAR(gpu_loss, cpu_loss, 1e-4F * std::fabs(cpu_loss)) << "step " << step;
    }
    EXPECT_EQ(gpu.solver.iteration(), 5);
    for (std::size_t p = 0; p < cpu.net.params().size(); ++p) {
        expect_close(cpu.net.params()[p].tensor->read_data(),
                     gpu.net.params()[p].tensor->read_data(), cpu.net.params()[p].name);
    }
    for (std::size_t h = 0; h < cpu.solver.history().size(); ++h) {
        expect_close(cpu.solver.history()[h].read_data(), gpu.solver.history()[h].read_data(),
                     "history " + std::to_string(h));
    }
}

TEST_F(GpuTraining, CheckpointsMoveBetweenGpuAndCpu) {
    dl_test::TempDir dir;
    Trainer gpu(m_config, *m_gpu);
    std::mt19937 rng(3);
    const std::size_t images = gpu.net.inputs().front().data->count();
    const std::size_t rows = gpu.net.inputs().front().labels->count();
    for (int step = 0; step < 3; ++step) {
        gpu.step(random_values(images, rng, 0.0F, 1.0F), random_labels(rows, 10, rng));
    }
    TrainingState state;
    state.iteration = gpu.solver.iteration();
    std::ostringstream rng_text;
    rng_text << gpu.net.rng();
    state.rng_state = rng_text.str(); // as dltrain writes it: a checkpoint without one is refused
    const fs::path written_on_gpu =
        write_checkpoint(dir.path() / "gpu", state, gpu.net, gpu.solver, 2);

    Trainer cpu(m_config, *m_cpu);
    EXPECT_EQ(read_checkpoint(written_on_gpu, cpu.net, &cpu.solver).iteration, 3);
    for (std::size_t p = 0; p < cpu.net.params().size(); ++p) {
        EXPECT_EQ(cpu.net.params()[p].tensor->read_data(), gpu.net.params()[p].tensor->read_data())
            << cpu.net.params()[p].name;
    }
    for (std::size_t h = 0; h < cpu.solver.history().size(); ++h) {
        EXPECT_EQ(cpu.solver.history()[h].read_data(), gpu.solver.history()[h].read_data());
    }

    // And back: a CPU checkpoint loads on the GPU, bit for bit.
    cpu.step(random_values(images, rng, 0.0F, 1.0F), random_labels(rows, 10, rng));
    state.iteration = cpu.solver.iteration();
    const fs::path written_on_cpu =
        write_checkpoint(dir.path() / "cpu", state, cpu.net, cpu.solver, 2);
    Trainer gpu2(m_config, *m_gpu);
    EXPECT_EQ(read_checkpoint(written_on_cpu, gpu2.net, &gpu2.solver).iteration, 4);
    for (std::size_t p = 0; p < cpu.net.params().size(); ++p) {
        EXPECT_EQ(gpu2.net.params()[p].tensor->read_data(), cpu.net.params()[p].tensor->read_data())
            << cpu.net.params()[p].name;
    }
    EXPECT_EQ(gpu2.solver.iteration(), 4);
}

} // namespace
} // namespace dl
