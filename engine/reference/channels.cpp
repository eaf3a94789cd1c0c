// LRN, BatchNorm and Scale by their definitions: per channel c of N x C x spatial.

#include "reference/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>

namespace dl::ref {
namespace {

std::size_t at(const ChannelGeometry& g, int n, int c, int i) {
    return (static_cast<std::size_t>(n) * g.channels + c) * g.spatial + i;
}

// Caffe's LRN window around channel c: pre_pad = (size - 1) / 2 channels before, the rest after.
int first_in_window(const LrnParams& p, int c) {
    return std::max(0, c - (p.size - 1) / 2);
}
int last_in_window(const ChannelGeometry& g, const LrnParams& p, int c) {
    return std::min(g.channels - 1, c + p.size - 1 - (p.size - 1) / 2);
}

// k + alpha / size * the sum of x^2 over c's window, at pixel i of image n.
double lrn_scale(const ChannelGeometry& g, const LrnParams& p, Floats x, int n, int c, int i) {
    double sum = 0.0;
    for (int o = first_in_window(p, c); o <= last_in_window(g, p, c); ++o) {
        sum += static_cast<double>(x[at(g, n, o, i)]) * x[at(g, n, o, i)];
    }
    return p.k + static_cast<double>(p.alpha) / p.size * sum;
}

struct ChannelStatistics {
    Values mean;
    Values var; // biased: over m = N x spatial
};

ChannelStatistics batch_statistics(const ChannelGeometry& g, Floats x) {
    const double m = static_cast<double>(g.batch) * g.spatial;
    ChannelStatistics s{Values(static_cast<std::size_t>(g.channels), 0.0),
                        Values(static_cast<std::size_t>(g.channels), 0.0)};
    for (int c = 0; c < g.channels; ++c) {
        for (int n = 0; n < g.batch; ++n) {
            for (int i = 0; i < g.spatial; ++i) {
                s.mean[c] += x[at(g, n, c, i)] / m;
            }
        }
        for (int n = 0; n < g.batch; ++n) {
            for (int i = 0; i < g.spatial; ++i) {
                const double d = x[at(g, n, c, i)] - s.mean[c];
                s.var[c] += d * d / m;
            }
        }
    }
    return s;
}

// The statistics batch_norm_forward and _backward normalise with.
ChannelStatistics used_statistics(const ChannelGeometry& g, bool use_global, Floats x,
                                  Floats mean_sum, Floats var_sum, double factor) {
    if (!use_global) {
        return batch_statistics(g, x);
    }
    const double scale = factor == 0.0 ? 0.0 : 1.0 / factor;
    ChannelStatistics s;
    for (int c = 0; c < g.channels; ++c) {
        s.mean.push_back(mean_sum[c] * scale);
        s.var.push_back(var_sum[c] * scale);
    }
    return s;
}

} // namespace

Values lrn_forward(const ChannelGeometry& g, const LrnParams& p, Floats x) {
    Values y(g.count());
    for (int n = 0; n < g.batch; ++n) {
        for (int c = 0; c < g.channels; ++c) {
            for (int i = 0; i < g.spatial; ++i) {
                y[at(g, n, c, i)] =
                    x[at(g, n, c, i)] * std::pow(lrn_scale(g, p, x, n, c, i), -p.beta);
            }
        }
    }
    return y;
}

// The chain rule through y_c = x_c * s_c^-beta, s_c = k + alpha / size * sum over c's window of
// x^2: dx_j = dy_j * s_j^-beta - 2 alpha beta / size * x_j * sum over the channels c whose
// window holds j of dy_c * x_c * s_c^(-beta - 1) (Caffe's LRNLayer::CrossChannelBackward_cpu).
Values lrn_backward(const ChannelGeometry& g, const LrnParams& p, Floats x, Floats dy) {
    Values dx(g.count());
    const double coefficient = 2.0 * p.alpha * p.beta / p.size;
    for (int n = 0; n < g.batch; ++n) {
        for (int j = 0; j < g.channels; ++j) {
            for (int i = 0; i < g.spatial; ++i) {
                double through_others = 0.0;
                for (int c = 0; c < g.channels; ++c) {
                    if (first_in_window(p, c) <= j && j <= last_in_window(g, p, c)) {
                        through_others += static_cast<double>(dy[at(g, n, c, i)]) *
                                          x[at(g, n, c, i)] *
                                          std::pow(lrn_scale(g, p, x, n, c, i), -p.beta - 1.0);
                    }
                }
                dx[at(g, n, j, i)] =
                    dy[at(g, n, j, i)] * std::pow(lrn_scale(g, p, x, n, j, i), -p.beta) -
                    coefficient * x[at(g, n, j, i)] * through_others;
            }
        }
    }
    return dx;
}

namespace {

// 1 + alpha / size^2 * the sum of x^2 over the square of side size centred on (h, w) of plane
// `image` (Caffe's WITHIN_CHANNEL: an average pooling with zero padding, then power).
double within_scale(const PoolGeometry& g, const LrnParams& p, Floats x, int image, int h, int w) {
    double sum = 0.0;
    for (int hh = h - g.pad; hh <= h + g.pad; ++hh) {
        for (int ww = w - g.pad; ww <= w + g.pad; ++ww) {
            if (hh >= 0 && hh < g.height && ww >= 0 && ww < g.width) {
                const double v =
                    x[(static_cast<std::size_t>(image) * g.height + hh) * g.width + ww];
                sum += v * v;
            }
        }
    }
    return 1.0 + static_cast<double>(p.alpha) / (p.size * p.size) * sum;
}

} // namespace

Values lrn_within_forward(const PoolGeometry& g, const LrnParams& p, Floats x) {
    Values y(static_cast<std::size_t>(g.batch) * g.channels * g.height * g.width);
    for (int image = 0; image < g.batch * g.channels; ++image) {
        for (int h = 0; h < g.height; ++h) {
            for (int w = 0; w < g.width; ++w) {
                const std::size_t i =
                    (static_cast<std::size_t>(image) * g.height + h) * g.width + w;
                y[i] = x[i] * std::pow(within_scale(g, p, x, image, h, w), -p.beta);
            }
        }
    }
    return y;
}

// The chain rule through y_c = x_c * s_c^-beta for every pixel c, s_c = 1 + alpha / size^2 *
// sum over c's square of x^2: dx_j = dy_j * s_j^-beta - 2 alpha beta / size^2 * x_j * sum over
// the pixels c whose square holds j of dy_c * x_c * s_c^(-beta - 1).
Values lrn_within_backward(const PoolGeometry& g, const LrnParams& p, Floats x, Floats dy) {
    Values dx(x.size());
    const double coefficient = 2.0 * p.alpha * p.beta / (p.size * p.size);
    const auto index = [&g](int image, int h, int w) {
        return (static_cast<std::size_t>(image) * g.height + h) * g.width + w;
    };
    for (int image = 0; image < g.batch * g.channels; ++image) {
        for (int h = 0; h < g.height; ++h) {
            for (int w = 0; w < g.width; ++w) {
                double through_others = 0.0;
                for (int ch = 0; ch < g.height; ++ch) {
                    for (int cw = 0; cw < g.width; ++cw) {
                        if (std::abs(ch - h) <= g.pad && std::abs(cw - w) <= g.pad) {
                            const std::size_t c = index(image, ch, cw);
                            through_others +=
                                static_cast<double>(dy[c]) * x[c] *
                                std::pow(within_scale(g, p, x, image, ch, cw), -p.beta - 1.0);
                        }
                    }
                }
                const std::size_t j = index(image, h, w);
                dx[j] = dy[j] * std::pow(within_scale(g, p, x, image, h, w), -p.beta) -
                        coefficient * x[j] * through_others;
            }
        }
    }
    return dx;
}

BatchNorm batch_norm_forward(const ChannelGeometry& g, bool use_global, double eps,
                             double moving_average_fraction, Floats x, Floats mean_sum,
                             Floats var_sum, double factor) {
    const ChannelStatistics s = used_statistics(g, use_global, x, mean_sum, var_sum, factor);
    BatchNorm r{
        Values(g.count()),
        Values(),
        {Values(mean_sum.begin(), mean_sum.end()), Values(var_sum.begin(), var_sum.end()), factor}};
    for (int c = 0; c < g.channels; ++c) {
        r.inv_std.push_back(1.0 / std::sqrt(s.var[c] + eps));
        for (int n = 0; n < g.batch; ++n) {
            for (int i = 0; i < g.spatial; ++i) {
                r.y[at(g, n, c, i)] = (x[at(g, n, c, i)] - s.mean[c]) * r.inv_std[c];
            }
        }
    }
    if (!use_global) {
        const double m = static_cast<double>(g.batch) * g.spatial;
        const double unbiased = m > 1.0 ? m / (m - 1.0) : 1.0;
        const double maf = moving_average_fraction;
        r.running.factor = factor * maf + 1.0;
        for (int c = 0; c < g.channels; ++c) {
            r.running.mean_sum[c] = s.mean[c] + maf * mean_sum[c];
            r.running.var_sum[c] = s.var[c] * unbiased + maf * var_sum[c];
        }
    }
    return r;
}

// With batch statistics y = (x - mean) * inv_std depends on x through the mean and variance
// too: dx = inv_std * (dy - mean(dy) - y * mean(dy * y)), means over N x spatial per channel
// (Caffe's BatchNormLayer::Backward_cpu). With global statistics they are constants.
Values batch_norm_backward(const ChannelGeometry& g, bool use_global, double eps, Floats x,
                           Floats mean_sum, Floats var_sum, double factor, Floats dy) {
    const BatchNorm forward =
        batch_norm_forward(g, use_global, eps, 0.0, x, mean_sum, var_sum, factor);
    const double m = static_cast<double>(g.batch) * g.spatial;
    Values dx(g.count());
    for (int c = 0; c < g.channels; ++c) {
        double mean_dy = 0.0;
        double mean_dy_y = 0.0;
        for (int n = 0; !use_global && n < g.batch; ++n) {
            for (int i = 0; i < g.spatial; ++i) {
                mean_dy += dy[at(g, n, c, i)] / m;
                mean_dy_y += dy[at(g, n, c, i)] * forward.y[at(g, n, c, i)] / m;
            }
        }
        for (int n = 0; n < g.batch; ++n) {
            for (int i = 0; i < g.spatial; ++i) {
                const std::size_t k = at(g, n, c, i);
                dx[k] = (dy[k] - mean_dy - forward.y[k] * mean_dy_y) * forward.inv_std[c];
            }
        }
    }
    return dx;
}

Values scale_forward(const ChannelGeometry& g, Floats x, Floats gamma, Floats beta) {
    Values y(g.count());
    for (std::size_t k = 0; k < y.size(); ++k) {
        const std::size_t c = k / static_cast<std::size_t>(g.spatial) % g.channels;
        y[k] = static_cast<double>(x[k]) * gamma[c] + (beta.empty() ? 0.0 : beta[c]);
    }
    return y;
}

ScaleGradients scale_backward(const ChannelGeometry& g, Floats x, Floats gamma, Floats dy) {
    ScaleGradients r{Values(g.count()), Values(static_cast<std::size_t>(g.channels), 0.0),
                     Values(static_cast<std::size_t>(g.channels), 0.0)};
    for (std::size_t k = 0; k < r.dx.size(); ++k) {
        const std::size_t c = k / static_cast<std::size_t>(g.spatial) % g.channels;
        r.dx[k] = static_cast<double>(dy[k]) * gamma[c];
        r.dgamma[c] += static_cast<double>(dy[k]) * x[k];
        r.dbeta[c] += dy[k];
    }
    return r;
}

Values prelu_forward(const ChannelGeometry& g, bool shared, Floats x, Floats slope) {
    Values y(g.count());
    for (std::size_t k = 0; k < y.size(); ++k) {
        const std::size_t c = shared ? 0 : k / static_cast<std::size_t>(g.spatial) % g.channels;
        y[k] = x[k] > 0.0F ? static_cast<double>(x[k]) : static_cast<double>(slope[c]) * x[k];
    }
    return y;
}

PReluGradients prelu_backward(const ChannelGeometry& g, bool shared, Floats x, Floats slope,
                              Floats dy) {
    PReluGradients r{Values(g.count()), Values(shared ? 1 : static_cast<std::size_t>(g.channels))};
    for (std::size_t k = 0; k < r.dx.size(); ++k) {
        const std::size_t c = shared ? 0 : k / static_cast<std::size_t>(g.spatial) % g.channels;
        r.dx[k] = x[k] > 0.0F ? static_cast<double>(dy[k]) : static_cast<double>(dy[k]) * slope[c];
        if (x[k] <= 0.0F) {
            r.dslope[c] += static_cast<double>(dy[k]) * x[k];
        }
    }
    return r;
}

} // namespace dl::ref
