// The element- and row-wise ops by their definitions: activations, dropout, softmax loss,
// accuracy, Concat, Eltwise and the solvers' updates.

#include "reference/reference.hpp"

#include <cfloat>
#include <cmath>
#include <cstddef>

namespace dl::ref {
namespace {

double sigmoid(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}

// A label's class, or -1 when it names none (reference.hpp: such a row counts nothing).
int label_class(float label, int classes) {
    return label >= 0.0F && label < static_cast<float>(classes) ? static_cast<int>(label) : -1;
}

// e^(z - max z) / sum e^(z - max z) per row: the softmax, shifted so that no exp overflows.
Values softmax(int rows, int classes, Floats logits) {
    Values prob(logits.size());
    for (int r = 0; r < rows; ++r) {
        const std::size_t row = static_cast<std::size_t>(r) * classes;
        double top = logits[row];
        for (int c = 1; c < classes; ++c) {
            top = std::fmax(top, logits[row + c]);
        }
        double sum = 0.0;
        for (int c = 0; c < classes; ++c) {
            sum += std::exp(logits[row + c] - top);
        }
        for (int c = 0; c < classes; ++c) {
            prob[row + c] = std::exp(logits[row + c] - top) / sum;
        }
    }
    return prob;
}

} // namespace

Values activation_forward(Activation kind, Floats x) {
    Values y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        switch (kind) {
        case Activation::relu:
            y[i] = x[i] > 0.0F ? x[i] : 0.0;
            break;
        case Activation::sigmoid:
            y[i] = sigmoid(x[i]);
            break;
        case Activation::tanh:
            y[i] = std::tanh(static_cast<double>(x[i]));
            break;
        }
    }
    return y;
}

// sigmoid' = y (1 - y), tanh' = 1 - y^2, with y the forward output at x.
Values activation_backward(Activation kind, Floats x, Floats dy) {
    const Values y = activation_forward(kind, x);
    Values dx(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        switch (kind) {
        case Activation::relu:
            dx[i] = x[i] > 0.0F ? dy[i] : 0.0; // a select: an infinite dy where x <= 0 gives 0
            break;
        case Activation::sigmoid:
            dx[i] = dy[i] * y[i] * (1.0 - y[i]);
            break;
        case Activation::tanh:
            dx[i] = dy[i] * (1.0 - y[i] * y[i]);
            break;
        }
    }
    return dx;
}

// By the definitions (dl/backend.hpp: Pointwise), in double: the derivative of each function,
// not the CPU's rearranged forms.
Values pointwise_forward(Pointwise f, const PointwiseParams& p, Floats x) {
    Values y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double v = x[i];
        switch (f) {
        case Pointwise::absval:
            y[i] = std::fabs(v);
            break;
        case Pointwise::bnll:
            y[i] = std::log(1.0 + std::exp(v));
            break;
        case Pointwise::elu:
            y[i] = v > 0.0 ? v : p.alpha * (std::exp(v) - 1.0);
            break;
        case Pointwise::power:
            y[i] = std::pow(p.shift + static_cast<double>(p.scale) * v, p.power);
            break;
        }
    }
    return y;
}

Values pointwise_backward(Pointwise f, const PointwiseParams& p, Floats x, Floats dy) {
    Values dx(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double v = x[i];
        switch (f) {
        case Pointwise::absval:
            dx[i] = v > 0.0 ? dy[i] : v < 0.0 ? -dy[i] : 0.0;
            break;
        case Pointwise::bnll:
            dx[i] = dy[i] / (1.0 + std::exp(-v));
            break;
        case Pointwise::elu:
            dx[i] = v > 0.0 ? dy[i] : dy[i] * p.alpha * std::exp(v);
            break;
        case Pointwise::power:
            dx[i] = dy[i] * p.power * p.scale *
                    std::pow(p.shift + static_cast<double>(p.scale) * v, p.power - 1.0);
            break;
        }
    }
    return dx;
}

double euclidean_loss(int rows, Floats a, Floats b) {
    double sum = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double d = static_cast<double>(a[i]) - b[i];
        sum += d * d;
    }
    return sum / rows / 2.0;
}

namespace {
double hinge(std::size_t i, int classes, Floats scores, Floats labels) {
    const bool own = static_cast<int>(i % static_cast<std::size_t>(classes)) ==
                     static_cast<int>(labels[i / static_cast<std::size_t>(classes)]);
    return std::max(0.0, 1.0 + (own ? -1.0 : 1.0) * scores[i]);
}
} // namespace

double hinge_loss(int rows, int classes, bool l2, Floats scores, Floats labels) {
    double sum = 0.0;
    for (std::size_t i = 0; i < scores.size(); ++i) {
        const double h = hinge(i, classes, scores, labels);
        sum += l2 ? h * h : h;
    }
    return sum / rows;
}

Values hinge_loss_backward(int rows, int classes, bool l2, double scale, Floats scores,
                           Floats labels) {
    (void)rows;
    Values dx(scores.size());
    for (std::size_t i = 0; i < scores.size(); ++i) {
        const double h = hinge(i, classes, scores, labels);
        const bool own = static_cast<int>(i % static_cast<std::size_t>(classes)) ==
                         static_cast<int>(labels[i / static_cast<std::size_t>(classes)]);
        const double g = l2 ? 2.0 * h : (h > 0.0 ? 1.0 : 0.0);
        dx[i] = scale * (own ? -g : g);
    }
    return dx;
}

namespace {
double squared_distance(std::size_t row, std::size_t dim, Floats a, Floats b) {
    double sum = 0.0;
    for (std::size_t j = 0; j < dim; ++j) {
        const double d = static_cast<double>(a[row * dim + j]) - b[row * dim + j];
        sum += d * d;
    }
    return sum;
}
} // namespace

double contrastive_loss(int rows, double margin, bool legacy, Floats a, Floats b, Floats y) {
    const std::size_t dim = a.size() / static_cast<std::size_t>(rows);
    double sum = 0.0;
    for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
        const double squared = squared_distance(r, dim, a, b);
        if (static_cast<int>(y[r]) != 0) {
            sum += squared;
        } else if (legacy) {
            sum += std::max(margin - squared, 0.0);
        } else {
            const double gap = std::max(margin - std::sqrt(squared), 0.0);
            sum += gap * gap;
        }
    }
    return sum / rows / 2.0;
}

Values contrastive_loss_backward(int rows, double margin, bool legacy, double scale, Floats a,
                                 Floats b, Floats y) {
    const std::size_t dim = a.size() / static_cast<std::size_t>(rows);
    Values dx(a.size());
    for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
        const double squared = squared_distance(r, dim, a, b);
        const double distance = std::sqrt(squared);
        const double gap = legacy ? margin - squared : margin - distance;
        double factor = scale;
        if (static_cast<int>(y[r]) == 0) {
            factor = gap <= 0.0 ? 0.0 : legacy ? -scale : -scale * gap / (distance + 1e-4);
        }
        for (std::size_t j = 0; j < dim; ++j) {
            dx[r * dim + j] = factor * (static_cast<double>(a[r * dim + j]) - b[r * dim + j]);
        }
    }
    return dx;
}

double sigmoid_cross_entropy(int rows, Floats x, Floats t) {
    double sum = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double s = 1.0 / (1.0 + std::exp(-static_cast<double>(x[i])));
        sum -= t[i] * std::log(s) + (1.0 - t[i]) * std::log(1.0 - s);
    }
    return sum / rows;
}

Values sigmoid_cross_entropy_backward(double scale, Floats x, Floats t) {
    Values dx(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        dx[i] = scale * (1.0 / (1.0 + std::exp(-static_cast<double>(x[i]))) - t[i]);
    }
    return dx;
}

Values dropout(Floats x, Floats mask, double scale) {
    Values y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        y[i] = x[i] * (mask.empty() ? 1.0 : mask[i]) * scale;
    }
    return y;
}

SoftmaxLoss softmax_loss_forward(int rows, int classes, Floats logits, Floats labels) {
    SoftmaxLoss r{softmax(rows, classes, logits), 0.0};
    for (int row = 0; row < rows; ++row) {
        const int label = label_class(labels[row], classes);
        if (label >= 0) {
            const double p = r.prob[static_cast<std::size_t>(row) * classes + label];
            r.loss -= std::log(std::fmax(p, FLT_MIN)) / rows;
        }
    }
    return r;
}

Values softmax_loss_backward(int rows, int classes, Floats logits, Floats labels, double scale) {
    Values d = softmax(rows, classes, logits);
    for (int row = 0; row < rows; ++row) {
        const int label = label_class(labels[row], classes);
        if (label >= 0) {
            d[static_cast<std::size_t>(row) * classes + label] -= 1.0;
        }
    }
    for (double& v : d) {
        v *= scale;
    }
    return d;
}

double accuracy(int rows, int classes, int top_k, Floats scores, Floats labels) {
    int correct = 0;
    for (int row = 0; row < rows; ++row) {
        const int label = label_class(labels[row], classes);
        if (label < 0) {
            continue;
        }
        const float* s = scores.data() + static_cast<std::size_t>(row) * classes;
        int above = 0;
        for (int c = 0; c < classes; ++c) {
            above += s[c] > s[label] ? 1 : 0;
        }
        correct += above < top_k ? 1 : 0;
    }
    return static_cast<double>(correct) / rows;
}

Values concat_forward(int rows, const std::vector<Floats>& inputs) {
    Values y;
    for (int r = 0; r < rows; ++r) {
        for (const Floats& input : inputs) {
            const std::size_t length = input.size() / static_cast<std::size_t>(rows);
            const Floats row = input.subspan(r * length, length);
            y.insert(y.end(), row.begin(), row.end());
        }
    }
    return y;
}

std::vector<Values> concat_backward(int rows, const std::vector<std::size_t>& row_lengths,
                                    Floats dy) {
    std::vector<Values> dx(row_lengths.size());
    std::size_t next = 0;
    for (int r = 0; r < rows; ++r) {
        for (std::size_t i = 0; i < row_lengths.size(); ++i) {
            const Floats part = dy.subspan(next, row_lengths[i]);
            dx[i].insert(dx[i].end(), part.begin(), part.end());
            next += row_lengths[i];
        }
    }
    return dx;
}

Eltwise eltwise_forward(EltwiseOp op, const std::vector<Floats>& x,
                        const std::vector<float>& coeffs) {
    const std::size_t n = x[0].size();
    Eltwise r{Values(n), std::vector<std::int32_t>(op == EltwiseOp::max ? n : 0)};
    for (std::size_t j = 0; j < n; ++j) {
        double value = op == EltwiseOp::sum ? coeffs[0] * static_cast<double>(x[0][j]) : x[0][j];
        std::int32_t winner = 0;
        for (std::size_t i = 1; i < x.size(); ++i) {
            if (op == EltwiseOp::sum) {
                value += coeffs[i] * static_cast<double>(x[i][j]);
            } else if (op == EltwiseOp::prod) {
                value *= x[i][j];
            } else if (i == 1 ? !(value > x[1][j]) : x[i][j] > value) {
                // Caffe's EltwiseLayer: input 1 wins unless input 0 is larger (a tie, or a NaN
                // on either side, goes to input 1); a later input only when it is larger.
                value = x[i][j];
                winner = static_cast<std::int32_t>(i);
            }
        }
        r.y[j] = value;
        if (op == EltwiseOp::max) {
            r.mask[j] = winner;
        }
    }
    return r;
}

Values eltwise_backward(EltwiseOp op, int index, const std::vector<Floats>& x, double coeff,
                        Floats dy) {
    const Eltwise forward = eltwise_forward(op, x, std::vector<float>(x.size(), 1.0F));
    Values dx(dy.size());
    for (std::size_t j = 0; j < dx.size(); ++j) {
        if (op == EltwiseOp::sum) {
            dx[j] = coeff * dy[j];
        } else if (op == EltwiseOp::max) {
            dx[j] = forward.mask[j] == index ? dy[j] : 0.0;
        } else {
            double others = 1.0;
            for (std::size_t i = 0; i < x.size(); ++i) {
                others *= static_cast<int>(i) == index ? 1.0 : x[i][j];
            }
            dx[j] = dy[j] * others;
        }
    }
    return dx;
}

void sgd_update(double lr, double momentum, double decay, bool nesterov, Floats g, Values& history,
                Values& w) {
    for (std::size_t i = 0; i < w.size(); ++i) {
        const double previous = history[i];
        history[i] = momentum * history[i] + lr * (g[i] + decay * w[i]);
        w[i] -= nesterov ? (1.0 + momentum) * history[i] - momentum * previous : history[i];
    }
}

void adaptive_update(AdaptiveRule rule, double lr, double rate, double delta, double decay,
                     Floats g, Values& h, Values& h2, Values& w) {
    for (std::size_t i = 0; i < w.size(); ++i) {
        const double grad = g[i] + decay * w[i];
        switch (rule) {
        case AdaptiveRule::adagrad:
            h[i] += grad * grad;
            w[i] -= lr * grad / (std::sqrt(h[i]) + delta);
            break;
        case AdaptiveRule::rmsprop:
            h[i] = rate * h[i] + (1.0 - rate) * grad * grad;
            w[i] -= lr * grad / (std::sqrt(h[i]) + delta);
            break;
        case AdaptiveRule::adadelta: {
            h[i] = rate * h[i] + (1.0 - rate) * grad * grad;
            const double update = grad * std::sqrt((h2[i] + delta) / (h[i] + delta));
            h2[i] = rate * h2[i] + (1.0 - rate) * update * update;
            w[i] -= lr * update;
            break;
        }
        }
    }
}

void adam_update(double lr, double correction, double beta1, double beta2, double epsilon,
                 double decay, Floats g, Values& m, Values& v, Values& w) {
    for (std::size_t i = 0; i < w.size(); ++i) {
        const double grad = g[i] + decay * w[i];
        m[i] = beta1 * m[i] + (1.0 - beta1) * grad;
        v[i] = beta2 * v[i] + (1.0 - beta2) * grad * grad;
        w[i] -= lr * correction * m[i] / (std::sqrt(v[i]) + epsilon);
    }
}

} // namespace dl::ref
