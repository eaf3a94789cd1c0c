// The CPU backend's per-channel and multi-input layers (cpu/channel_ops.hpp), written for
// reading; BatchNorm's and Scale's sums (ResNet-20 has 19 of each) take 8 double lanes and the
// backend runs each over ranges of channels in parallel.

#include "cpu/channel_ops.hpp"

#include "cpu/clones.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

namespace dl::cpu {
namespace {

std::ptrdiff_t at(const ChannelGeometry& g, int n, int c) {
    return (static_cast<std::ptrdiff_t>(n) * g.channels + c) * g.spatial;
}

// Caffe's window: pre_pad = (size - 1) / 2 channels before c and size - 1 - pre_pad after.
int window_before(const LrnParams& p) {
    return (p.size - 1) / 2;
}

} // namespace

void lrn_forward(const ChannelGeometry& g, const LrnParams& p, const float* x, float* scale,
                 float* y) {
    const int before = window_before(p);
    const int after = p.size - 1 - before;
    const float alpha_over_size = p.alpha / static_cast<float>(p.size);
    for (int n = 0; n < g.batch; ++n) {
        for (int c = 0; c < g.channels; ++c) {
            float* s = scale + at(g, n, c);
            std::fill(s, s + g.spatial, 0.0F);
            for (int other = std::max(0, c - before); other <= std::min(g.channels - 1, c + after);
                 ++other) {
                const float* xo = x + at(g, n, other);
                for (int i = 0; i < g.spatial; ++i) {
                    s[i] += xo[i] * xo[i];
                }
            }
            const float* xc = x + at(g, n, c);
            float* yc = y + at(g, n, c);
            for (int i = 0; i < g.spatial; ++i) {
                s[i] = p.k + alpha_over_size * s[i];
                yc[i] = xc[i] * std::pow(s[i], -p.beta);
            }
        }
    }
}

// dx[c] = dy[c] * scale[c]^-beta - 2 alpha beta / size * x[c] * sum of dy * y / scale over the
// channels whose window holds c.
void lrn_backward(const ChannelGeometry& g, const LrnParams& p, const float* x, const float* y,
                  const float* scale, const float* dy, float* dx) {
    const int before = window_before(p);
    const int after = p.size - 1 - before;
    const float coefficient = 2.0F * p.alpha * p.beta / static_cast<float>(p.size);
    std::vector<float> sum(static_cast<std::size_t>(g.spatial));
    for (int n = 0; n < g.batch; ++n) {
        for (int c = 0; c < g.channels; ++c) {
            std::fill(sum.begin(), sum.end(), 0.0F);
            for (int other = std::max(0, c - after); other <= std::min(g.channels - 1, c + before);
                 ++other) {
                const std::ptrdiff_t o = at(g, n, other);
                for (int i = 0; i < g.spatial; ++i) {
                    sum[i] += dy[o + i] * y[o + i] / scale[o + i];
                }
            }
            const std::ptrdiff_t o = at(g, n, c);
            for (int i = 0; i < g.spatial; ++i) {
                dx[o + i] =
                    dy[o + i] * std::pow(scale[o + i], -p.beta) - coefficient * x[o + i] * sum[i];
            }
        }
    }
}

namespace {

/// The sum of v over the size x size square centred on (h, w) of one plane, clipped to it:
/// the padding holds zeros.
float square_sum(const PoolGeometry& g, const float* plane, int h, int w) {
    float sum = 0.0F;
    for (int hh = std::max(0, h - g.pad); hh <= std::min(g.height - 1, h + g.pad); ++hh) {
        for (int ww = std::max(0, w - g.pad); ww <= std::min(g.width - 1, w + g.pad); ++ww) {
            sum += plane[static_cast<std::ptrdiff_t>(hh) * g.width + ww];
        }
    }
    return sum;
}

} // namespace

void lrn_within_forward(const PoolGeometry& g, const LrnParams& p, const float* x, float* scale,
                        float* y) {
    const auto plane = static_cast<std::ptrdiff_t>(g.height) * g.width;
    const float alpha_over_area = p.alpha / static_cast<float>(p.size * p.size);
    std::vector<float> squares(static_cast<std::size_t>(plane));
    for (std::ptrdiff_t image = 0; image < static_cast<std::ptrdiff_t>(g.batch) * g.channels;
         ++image) {
        const float* xp = x + image * plane;
        for (std::ptrdiff_t i = 0; i < plane; ++i) {
            squares[static_cast<std::size_t>(i)] = xp[i] * xp[i];
        }
        for (int h = 0; h < g.height; ++h) {
            for (int w = 0; w < g.width; ++w) {
                const std::ptrdiff_t i =
                    image * plane + static_cast<std::ptrdiff_t>(h) * g.width + w;
                scale[i] = 1.0F + alpha_over_area * square_sum(g, squares.data(), h, w);
                y[i] = x[i] * std::pow(scale[i], -p.beta);
            }
        }
    }
}

// dx = dy * scale^-beta - 2 alpha beta / size^2 * x * (sum of dy * y / scale over the squares
// that hold the pixel: for a centred odd square, the square around it).
void lrn_within_backward(const PoolGeometry& g, const LrnParams& p, const float* x, const float* y,
                         const float* scale, const float* dy, float* dx) {
    const auto plane = static_cast<std::ptrdiff_t>(g.height) * g.width;
    const float coefficient = 2.0F * p.alpha * p.beta / static_cast<float>(p.size * p.size);
    std::vector<float> ratio(static_cast<std::size_t>(plane));
    for (std::ptrdiff_t image = 0; image < static_cast<std::ptrdiff_t>(g.batch) * g.channels;
         ++image) {
        const std::ptrdiff_t o = image * plane;
        for (std::ptrdiff_t i = 0; i < plane; ++i) {
            ratio[static_cast<std::size_t>(i)] = dy[o + i] * y[o + i] / scale[o + i];
        }
        for (int h = 0; h < g.height; ++h) {
            for (int w = 0; w < g.width; ++w) {
                const std::ptrdiff_t i = o + static_cast<std::ptrdiff_t>(h) * g.width + w;
                dx[i] = dy[i] * std::pow(scale[i], -p.beta) -
                        coefficient * x[i] * square_sum(g, ratio.data(), h, w);
            }
        }
    }
}

namespace {

// Caffe's kBNLL_THRESHOLD: e^x past it is not taken.
constexpr float k_bnll_threshold = 50.0F;

} // namespace

void pointwise_forward(Pointwise f, const PointwiseParams& p, std::size_t n, const float* x,
                       float* y) {
    for (std::size_t i = 0; i < n; ++i) {
        const float v = x[i];
        switch (f) {
        case Pointwise::absval:
            y[i] = std::fabs(v);
            break;
        case Pointwise::bnll: // in a form that neither overflows nor loses small values
            y[i] = v > 0.0F ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
            break;
        case Pointwise::elu:
            y[i] = v > 0.0F ? v : p.alpha * std::expm1(v);
            break;
        case Pointwise::power:
            y[i] = std::pow(p.shift + p.scale * v, p.power);
            break;
        }
    }
}

void pointwise_backward(Pointwise f, const PointwiseParams& p, std::size_t n, const float* x,
                        const float* y, const float* dy, float* dx) {
    for (std::size_t i = 0; i < n; ++i) {
        const float v = x[i];
        switch (f) {
        case Pointwise::absval:
            dx[i] = v > 0.0F ? dy[i] : v < 0.0F ? -dy[i] : 0.0F;
            break;
        case Pointwise::bnll: {
            const float e = std::exp(std::min(v, k_bnll_threshold));
            dx[i] = dy[i] * e / (e + 1.0F);
            break;
        }
        case Pointwise::elu:
            dx[i] = v > 0.0F ? dy[i] : dy[i] * (y[i] + p.alpha);
            break;
        case Pointwise::power:
            // Caffe's cases: a constant (power or scale 0) has no gradient; power 1 is linear.
            dx[i] = p.power == 0.0F || p.scale == 0.0F ? 0.0F
                    : p.power == 1.0F                  ? dy[i] * p.scale
                                                       : dy[i] * p.power * p.scale *
                                            std::pow(p.shift + p.scale * v, p.power - 1.0F);
            break;
        }
    }
}

// The sums in double, in index order: one loss value whatever the thread count.
void euclidean_loss_forward(int rows, std::size_t n, const float* a, const float* b, float* diff,
                            float* loss) {
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        diff[i] = a[i] - b[i];
        sum += static_cast<double>(diff[i]) * diff[i];
    }
    loss[0] = static_cast<float>(sum / rows / 2.0);
}

// Caffe's HingeLossLayer: every score is pushed below -1, the label's above 1.
void hinge_loss_forward(int rows, int classes, bool l2, const float* scores, const float* labels,
                        float* diff, float* loss) {
    double sum = 0.0;
    for (int r = 0; r < rows; ++r) {
        const auto label = static_cast<int>(labels[r]);
        for (int j = 0; j < classes; ++j) {
            const std::size_t i = static_cast<std::size_t>(r) * classes + j;
            diff[i] = std::max(0.0F, 1.0F + (j == label ? -scores[i] : scores[i]));
            sum += l2 ? static_cast<double>(diff[i]) * diff[i] : diff[i];
        }
    }
    loss[0] = static_cast<float>(sum / rows);
}

void hinge_loss_backward(int rows, int classes, bool l2, float scale, const float* labels,
                         const float* diff, float* dx) {
    for (int r = 0; r < rows; ++r) {
        const auto label = static_cast<int>(labels[r]);
        for (int j = 0; j < classes; ++j) {
            const std::size_t i = static_cast<std::size_t>(r) * classes + j;
            const float g = l2 ? 2.0F * diff[i] : (diff[i] > 0.0F ? 1.0F : 0.0F);
            dx[i] = scale * (j == label ? -g : g);
        }
    }
}

// Caffe's ContrastiveLossLayer: a similar pair is pulled together by its squared distance, a
// dissimilar one pushed apart until `margin` (of the distance; legacy: of its square).
void contrastive_loss_forward(int rows, int dim, float margin, bool legacy, const float* a,
                              const float* b, const float* y, float* diff, float* dist_sq,
                              float* loss) {
    double sum = 0.0;
    for (int r = 0; r < rows; ++r) {
        double squares = 0.0;
        for (int j = 0; j < dim; ++j) {
            const std::size_t i = static_cast<std::size_t>(r) * dim + j;
            diff[i] = a[i] - b[i];
            squares += static_cast<double>(diff[i]) * diff[i];
        }
        dist_sq[r] = static_cast<float>(squares);
        if (static_cast<int>(y[r]) != 0) {
            sum += dist_sq[r];
        } else if (legacy) {
            sum += std::max(margin - dist_sq[r], 0.0F);
        } else {
            const float gap = std::max(margin - std::sqrt(dist_sq[r]), 0.0F);
            sum += static_cast<double>(gap) * gap;
        }
    }
    loss[0] = static_cast<float>(sum / rows / 2.0);
}

void contrastive_loss_backward(int rows, int dim, float margin, bool legacy, float scale,
                               const float* y, const float* diff, const float* dist_sq, float* dx) {
    for (int r = 0; r < rows; ++r) {
        float factor = scale;
        if (static_cast<int>(y[r]) == 0) {
            // Caffe adds 1e-4 to the distance: a pair at distance 0 gets a finite push.
            const float dist = std::sqrt(dist_sq[r]);
            const float gap = legacy ? margin - dist_sq[r] : margin - dist;
            factor = gap <= 0.0F ? 0.0F : legacy ? -scale : -scale * gap / (dist + 1e-4F);
        }
        for (int j = 0; j < dim; ++j) {
            const std::size_t i = static_cast<std::size_t>(r) * dim + j;
            dx[i] = factor * diff[i];
        }
    }
}

// -(t log s(x) + (1 - t) log(1 - s(x))) = -(x (t - [x >= 0]) - log(1 + e^(x - 2 x [x >= 0]))),
// which never takes the exponential of a positive number (Caffe's form).
void sigmoid_cross_entropy_forward(int rows, std::size_t n, const float* x, const float* t,
                                   float* loss) {
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        const float positive = x[i] >= 0.0F ? 1.0F : 0.0F;
        sum -= x[i] * (t[i] - positive) - std::log1p(std::exp(x[i] - 2.0F * x[i] * positive));
    }
    loss[0] = static_cast<float>(sum / rows);
}

void sigmoid_cross_entropy_backward(std::size_t n, float scale, const float* x, const float* t,
                                    float* dx) {
    for (std::size_t i = 0; i < n; ++i) {
        dx[i] = scale * (1.0F / (1.0F + std::exp(-x[i])) - t[i]);
    }
}

namespace {

// Sums in 8 double lanes, element i of a block into lane i % 8, the lanes then added in order:
// 8 independent chains the compiler keeps in vector registers (one double chain waits 4 cycles
// an add: ResNet-20's BatchNorm spent most of its time there), in an order that depends on the
// data's alone, never on the threads.
constexpr int k_lanes = 8;
using Lanes = std::array<double, k_lanes>;

DL_CPU_CLONES
void add_lanes(const float* v, int n, double* lanes) {
    int i = 0;
    for (; i + k_lanes <= n; i += k_lanes) {
        for (int k = 0; k < k_lanes; ++k) {
            lanes[k] += v[i + k];
        }
    }
    for (; i < n; ++i) {
        lanes[i % k_lanes] += v[i];
    }
}

DL_CPU_CLONES
void add_square_lanes(const float* v, float mean, int n, double* lanes) {
    int i = 0;
    for (; i + k_lanes <= n; i += k_lanes) {
        for (int k = 0; k < k_lanes; ++k) {
            const double d = static_cast<double>(v[i + k]) - mean;
            lanes[k] += d * d;
        }
    }
    for (; i < n; ++i) {
        const double d = static_cast<double>(v[i]) - mean;
        lanes[i % k_lanes] += d * d;
    }
}

DL_CPU_CLONES
void add_product_lanes(const float* a, const float* b, int n, double* lanes) {
    int i = 0;
    for (; i + k_lanes <= n; i += k_lanes) {
        for (int k = 0; k < k_lanes; ++k) {
            lanes[k] += static_cast<double>(a[i + k]) * b[i + k];
        }
    }
    for (; i < n; ++i) {
        lanes[i % k_lanes] += static_cast<double>(a[i]) * b[i];
    }
}

double total(const Lanes& lanes) {
    double sum = 0.0;
    for (const double lane : lanes) {
        sum += lane;
    }
    return sum;
}

} // namespace

void batch_norm_forward(const ChannelGeometry& g, Channels range, bool use_global, float eps,
                        float moving_average_fraction, const float* x, float* running_mean,
                        float* running_var, float running_factor, float* inv_std, float* y) {
    const double m = static_cast<double>(g.batch) * g.spatial;
    const float factor = running_factor == 0.0F ? 0.0F : 1.0F / running_factor;
    for (int c = range.first; c < range.last; ++c) {
        float mean = 0.0F;
        float var = 0.0F;
        if (use_global) {
            mean = running_mean[c] * factor;
            var = running_var[c] * factor;
        } else {
            Lanes sum{};
            for (int n = 0; n < g.batch; ++n) {
                add_lanes(x + at(g, n, c), g.spatial, sum.data());
            }
            mean = static_cast<float>(total(sum) / m);
            Lanes squares{};
            for (int n = 0; n < g.batch; ++n) {
                add_square_lanes(x + at(g, n, c), mean, g.spatial, squares.data());
            }
            var = static_cast<float>(total(squares) / m);
            // Caffe stores the unbiased variance in the running sum.
            const float correction = m > 1.0 ? static_cast<float>(m / (m - 1.0)) : 1.0F;
            running_mean[c] = mean + moving_average_fraction * running_mean[c];
            running_var[c] = var * correction + moving_average_fraction * running_var[c];
        }
        inv_std[c] = 1.0F / std::sqrt(var + eps);
        for (int n = 0; n < g.batch; ++n) {
            const std::ptrdiff_t o = at(g, n, c);
            for (int i = 0; i < g.spatial; ++i) {
                y[o + i] = (x[o + i] - mean) * inv_std[c];
            }
        }
    }
}

// With batch statistics: dx = inv_std * (dy - mean(dy) - y * mean(dy * y)) per channel; with
// global statistics the mean and variance are constants: dx = dy * inv_std.
void batch_norm_backward(const ChannelGeometry& g, Channels range, bool use_global, const float* y,
                         const float* inv_std, const float* dy, float* dx) {
    const double m = static_cast<double>(g.batch) * g.spatial;
    for (int c = range.first; c < range.last; ++c) {
        float mean_dy = 0.0F;
        float mean_dy_y = 0.0F;
        if (!use_global) {
            Lanes sum{};
            Lanes sum_y{};
            for (int n = 0; n < g.batch; ++n) {
                add_lanes(dy + at(g, n, c), g.spatial, sum.data());
                add_product_lanes(dy + at(g, n, c), y + at(g, n, c), g.spatial, sum_y.data());
            }
            mean_dy = static_cast<float>(total(sum) / m);
            mean_dy_y = static_cast<float>(total(sum_y) / m);
        }
        for (int n = 0; n < g.batch; ++n) {
            const std::ptrdiff_t o = at(g, n, c);
            for (int i = 0; i < g.spatial; ++i) {
                dx[o + i] = (dy[o + i] - mean_dy - y[o + i] * mean_dy_y) * inv_std[c];
            }
        }
    }
}

void prelu_forward(const ChannelGeometry& g, bool shared, const float* x, const float* slope,
                   float* y) {
    for (int n = 0; n < g.batch; ++n) {
        for (int c = 0; c < g.channels; ++c) {
            const std::ptrdiff_t o = at(g, n, c);
            const float a = slope[shared ? 0 : c];
            for (int i = 0; i < g.spatial; ++i) {
                const float v = x[o + i];
                y[o + i] = v > 0.0F ? v : a * v;
            }
        }
    }
}

void prelu_backward(const ChannelGeometry& g, bool shared, const float* x, const float* slope,
                    const float* dy, float* dx, float* dslope) {
    // The slopes' gradient first: dx may overwrite dy (in place, x is the layer's saved copy).
    double total = 0.0;
    for (int c = 0; c < g.channels; ++c) {
        double sum = 0.0;
        for (int n = 0; n < g.batch; ++n) {
            const std::ptrdiff_t o = at(g, n, c);
            for (int i = 0; i < g.spatial; ++i) {
                if (x[o + i] <= 0.0F) {
                    sum += static_cast<double>(dy[o + i]) * x[o + i];
                }
            }
        }
        if (shared) {
            total += sum;
        } else {
            dslope[c] = static_cast<float>(sum);
        }
    }
    if (shared) {
        dslope[0] = static_cast<float>(total);
    }
    if (dx != nullptr) {
        for (int n = 0; n < g.batch; ++n) {
            for (int c = 0; c < g.channels; ++c) {
                const std::ptrdiff_t o = at(g, n, c);
                const float a = slope[shared ? 0 : c];
                for (int i = 0; i < g.spatial; ++i) {
                    dx[o + i] = x[o + i] > 0.0F ? dy[o + i] : dy[o + i] * a;
                }
            }
        }
    }
}

void scale_forward(const ChannelGeometry& g, Channels range, const float* x, const float* gamma,
                   const float* beta, float* y) {
    for (int n = 0; n < g.batch; ++n) {
        for (int c = range.first; c < range.last; ++c) {
            const std::ptrdiff_t o = at(g, n, c);
            const float shift = beta != nullptr ? beta[c] : 0.0F;
            for (int i = 0; i < g.spatial; ++i) {
                y[o + i] = x[o + i] * gamma[c] + shift;
            }
        }
    }
}

void scale_backward(const ChannelGeometry& g, Channels range, const float* x, const float* gamma,
                    const float* dy, float* dx, float* dgamma, float* dbeta) {
    // Per block of one image's channel: its sums first, then dx, which may overwrite dy (the
    // block is still in cache: one pass over memory).
    for (int c = range.first; c < range.last; ++c) {
        Lanes sum_x{};
        Lanes sum{};
        for (int n = 0; n < g.batch; ++n) {
            const std::ptrdiff_t o = at(g, n, c);
            add_product_lanes(dy + o, x + o, g.spatial, sum_x.data());
            add_lanes(dy + o, g.spatial, sum.data());
            if (dx != nullptr) {
                for (int i = 0; i < g.spatial; ++i) {
                    dx[o + i] = dy[o + i] * gamma[c];
                }
            }
        }
        dgamma[c] = static_cast<float>(total(sum_x));
        if (dbeta != nullptr) {
            dbeta[c] = static_cast<float>(total(sum));
        }
    }
}

void copy_blocks(int rows, std::size_t block, const float* src, std::size_t src_stride, float* dst,
                 std::size_t dst_stride) {
    for (int r = 0; r < rows; ++r) {
        std::memcpy(dst + r * dst_stride, src + r * src_stride, block * sizeof(float));
    }
}

void eltwise_forward(EltwiseOp op, std::size_t n, const std::vector<const float*>& x,
                     const std::vector<float>& coeffs, float* y, std::int32_t* mask) {
    switch (op) {
    case EltwiseOp::sum:
        for (std::size_t i = 0; i < n; ++i) {
            float sum = 0.0F;
            for (std::size_t b = 0; b < x.size(); ++b) {
                sum += coeffs[b] * x[b][i];
            }
            y[i] = sum;
        }
        break;
    case EltwiseOp::prod:
        for (std::size_t i = 0; i < n; ++i) {
            float product = x[0][i];
            for (std::size_t b = 1; b < x.size(); ++b) {
                product *= x[b][i];
            }
            y[i] = product;
        }
        break;
    case EltwiseOp::max:
        // Caffe: the second input wins a tie with the first; later inputs must be larger.
        for (std::size_t i = 0; i < n; ++i) {
            float best = x[0][i] > x[1][i] ? x[0][i] : x[1][i];
            std::int32_t winner = x[0][i] > x[1][i] ? 0 : 1;
            for (std::size_t b = 2; b < x.size(); ++b) {
                if (x[b][i] > best) {
                    best = x[b][i];
                    winner = static_cast<std::int32_t>(b);
                }
            }
            y[i] = best;
            mask[i] = winner;
        }
        break;
    }
}

void eltwise_backward(EltwiseOp op, std::size_t n, int index, const std::vector<const float*>& x,
                      float coeff, const float* dy, const std::int32_t* mask, float* dx) {
    switch (op) {
    case EltwiseOp::sum:
        for (std::size_t i = 0; i < n; ++i) {
            dx[i] = coeff * dy[i];
        }
        break;
    case EltwiseOp::prod:
        // The product of the other inputs (Caffe's stable_prod_grad), not y / x[index].
        for (std::size_t i = 0; i < n; ++i) {
            float others = 1.0F;
            for (std::size_t b = 0; b < x.size(); ++b) {
                if (static_cast<int>(b) != index) {
                    others *= x[b][i];
                }
            }
            dx[i] = dy[i] * others;
        }
        break;
    case EltwiseOp::max:
        for (std::size_t i = 0; i < n; ++i) {
            dx[i] = mask[i] == index ? dy[i] : 0.0F;
        }
        break;
    }
}

} // namespace dl::cpu
