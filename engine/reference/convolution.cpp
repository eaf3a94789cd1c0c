// Convolution, pooling and inner product by their definitions (reference.hpp has the formulas).

#include "reference/reference.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>

namespace dl::ref {
namespace {

std::size_t index4(int n, int c, int h, int w, int channels, int height, int width) {
    return ((static_cast<std::size_t>(n) * channels + c) * height + h) * width + w;
}

// Calls tap(x_at, w_at, y_at) for every product x[x_at] * w[w_at] that output y[y_at] sums, i.e.
// every (image, output, output pixel, channel of the output's group, kernel tap) whose input
// pixel is inside the image. Forward and backward walk the same terms.
template <typename Tap> void for_each_tap(const ConvGeometry& g, Tap tap) {
    const int oh_size = g.out_height();
    const int ow_size = g.out_width();
    const int group_channels = g.channels / g.group;
    const int group_outputs = g.outputs / g.group;
    for (int n = 0; n < g.batch; ++n) {
        for (int m = 0; m < g.outputs; ++m) {
            const int first_channel = m / group_outputs * group_channels;
            for (int oh = 0; oh < oh_size; ++oh) {
                for (int ow = 0; ow < ow_size; ++ow) {
                    const std::size_t y_at = index4(n, m, oh, ow, g.outputs, oh_size, ow_size);
                    for (int cg = 0; cg < group_channels; ++cg) {
                        for (int ki = 0; ki < g.kernel; ++ki) {
                            for (int kj = 0; kj < g.kernel; ++kj) {
                                const int h = oh * g.stride - g.pad + ki;
                                const int w = ow * g.stride - g.pad + kj;
                                if (h < 0 || h >= g.height || w < 0 || w >= g.width) {
                                    continue; // zero padding
                                }
                                tap(index4(n, first_channel + cg, h, w, g.channels, g.height,
                                           g.width),
                                    index4(m, cg, ki, kj, group_channels, g.kernel, g.kernel),
                                    y_at);
                            }
                        }
                    }
                }
            }
        }
    }
}

std::size_t conv_output_count(const ConvGeometry& g) {
    return static_cast<std::size_t>(g.batch) * g.outputs * g.out_height() * g.out_width();
}

// One window of Caffe's pooling: rows [h0, h1) and columns [w0, w1) clipped to the image, and
// the average's divisor, the window clipped to the image plus its padding (PoolingLayer).
struct Window {
    int h0, h1, w0, w1;
    int divisor;
};

Window window(const PoolGeometry& g, int oh, int ow) {
    const int h_start = oh * g.stride - g.pad;
    const int w_start = ow * g.stride - g.pad;
    const int h_end = std::min(h_start + g.kernel, g.height + g.pad);
    const int w_end = std::min(w_start + g.kernel, g.width + g.pad);
    return {std::max(h_start, 0), std::min(h_end, g.height), std::max(w_start, 0),
            std::min(w_end, g.width), (h_end - h_start) * (w_end - w_start)};
}

// Calls visit(plane, out_at, window) for every output, plane = n * C + c.
template <typename Visit> void for_each_window(const PoolGeometry& g, Visit visit) {
    const int out_h = g.out_height();
    const int out_w = g.out_width();
    for (int plane = 0; plane < g.batch * g.channels; ++plane) {
        for (int oh = 0; oh < out_h; ++oh) {
            for (int ow = 0; ow < out_w; ++ow) {
                const std::size_t out_at =
                    (static_cast<std::size_t>(plane) * out_h + oh) * out_w + ow;
                visit(plane, out_at, window(g, oh, ow));
            }
        }
    }
}

std::size_t plane_size(const PoolGeometry& g) {
    return static_cast<std::size_t>(g.height) * g.width;
}

std::size_t pool_output_count(const PoolGeometry& g) {
    return static_cast<std::size_t>(g.batch) * g.channels * g.out_height() * g.out_width();
}

} // namespace

Values conv_forward(const ConvGeometry& g, Floats x, Floats w, Floats b) {
    Values y(conv_output_count(g), 0.0);
    for_each_tap(g, [&](std::size_t xi, std::size_t wi, std::size_t yi) {
        y[yi] += static_cast<double>(x[xi]) * w[wi];
    });
    const std::size_t spatial = static_cast<std::size_t>(g.out_height()) * g.out_width();
    for (std::size_t i = 0; !b.empty() && i < y.size(); ++i) {
        y[i] += b[i / spatial % static_cast<std::size_t>(g.outputs)];
    }
    return y;
}

ConvGradients conv_backward(const ConvGeometry& g, Floats x, Floats w, Floats dy) {
    ConvGradients r{Values(x.size(), 0.0), Values(w.size(), 0.0),
                    Values(static_cast<std::size_t>(g.outputs), 0.0)};
    for_each_tap(g, [&](std::size_t xi, std::size_t wi, std::size_t yi) {
        r.dx[xi] += static_cast<double>(w[wi]) * dy[yi];
        r.dw[wi] += static_cast<double>(x[xi]) * dy[yi];
    });
    const std::size_t spatial = static_cast<std::size_t>(g.out_height()) * g.out_width();
    for (std::size_t i = 0; i < dy.size(); ++i) {
        r.db[i / spatial % static_cast<std::size_t>(g.outputs)] += dy[i];
    }
    return r;
}

MaxPool max_pool_forward(const PoolGeometry& g, Floats x) {
    MaxPool r{Values(pool_output_count(g)), std::vector<std::int32_t>(pool_output_count(g))};
    for_each_window(g, [&](int plane, std::size_t out_at, const Window& win) {
        const float* in = x.data() + static_cast<std::size_t>(plane) * plane_size(g);
        // Caffe starts below every number, so the first pixel of the window wins only by
        // being larger (a NaN never wins).
        float best = -std::numeric_limits<float>::max();
        int best_at = win.h0 * g.width + win.w0;
        for (int h = win.h0; h < win.h1; ++h) {
            for (int w = win.w0; w < win.w1; ++w) {
                if (in[h * g.width + w] > best) {
                    best = in[h * g.width + w];
                    best_at = h * g.width + w;
                }
            }
        }
        r.y[out_at] = best;
        r.argmax[out_at] = best_at;
    });
    return r;
}

Values max_pool_backward(const PoolGeometry& g, Floats x, Floats dy) {
    const MaxPool forward = max_pool_forward(g, x);
    Values dx(x.size(), 0.0);
    for_each_window(g, [&](int plane, std::size_t out_at, const Window& /*win*/) {
        dx[static_cast<std::size_t>(plane) * plane_size(g) +
           static_cast<std::size_t>(forward.argmax[out_at])] += dy[out_at];
    });
    return dx;
}

Values ave_pool_forward(const PoolGeometry& g, Floats x) {
    Values y(pool_output_count(g));
    for_each_window(g, [&](int plane, std::size_t out_at, const Window& win) {
        const float* in = x.data() + static_cast<std::size_t>(plane) * plane_size(g);
        double sum = 0.0;
        for (int h = win.h0; h < win.h1; ++h) {
            for (int w = win.w0; w < win.w1; ++w) {
                sum += in[h * g.width + w];
            }
        }
        y[out_at] = sum / win.divisor;
    });
    return y;
}

Values ave_pool_backward(const PoolGeometry& g, Floats dy) {
    Values dx(static_cast<std::size_t>(g.batch) * g.channels * plane_size(g), 0.0);
    for_each_window(g, [&](int plane, std::size_t out_at, const Window& win) {
        double* out = dx.data() + static_cast<std::size_t>(plane) * plane_size(g);
        for (int h = win.h0; h < win.h1; ++h) {
            for (int w = win.w0; w < win.w1; ++w) {
                out[h * g.width + w] += static_cast<double>(dy[out_at]) / win.divisor;
            }
        }
    });
    return dx;
}

Values inner_product_forward(int rows, int in, int out, Floats x, Floats w, Floats b) {
    Values y(static_cast<std::size_t>(rows) * out);
    for (int r = 0; r < rows; ++r) {
        for (int o = 0; o < out; ++o) {
            double sum = b.empty() ? 0.0 : b[o];
            for (int i = 0; i < in; ++i) {
                sum += static_cast<double>(x[r * in + i]) * w[o * in + i];
            }
            y[r * out + o] = sum;
        }
    }
    return y;
}

InnerProductGradients inner_product_backward(int rows, int in, int out, Floats x, Floats w,
                                             Floats dy) {
    InnerProductGradients r{Values(static_cast<std::size_t>(rows) * in, 0.0),
                            Values(static_cast<std::size_t>(out) * in, 0.0),
                            Values(static_cast<std::size_t>(out), 0.0)};
    for (int row = 0; row < rows; ++row) {
        for (int o = 0; o < out; ++o) {
            const double d = dy[row * out + o];
            r.db[o] += d;
            for (int i = 0; i < in; ++i) {
                r.dx[row * in + i] += d * w[o * in + i];
                r.dw[o * in + i] += d * x[row * in + i];
            }
        }
    }
    return r;
}

} // namespace dl::ref
