// Caffe's SGD, Nesterov, Adam, AdaGrad, RMSProp and AdaDelta updates (caffe/solvers/*.cpp) and
// its learning-rate policies.

#include <dl/solver.hpp>

#include <cmath>

namespace dl {

float learning_rate(const SolverConfig& c, int iter) {
    const double base = c.base_lr;
    const double it = iter;
    if (c.lr_policy == "step") {
        return static_cast<float>(base * std::pow(c.gamma, std::floor(it / c.stepsize)));
    }
    if (c.lr_policy == "multistep") {
        int step = 0;
        while (step < static_cast<int>(c.stepvalues.size()) &&
               iter >= c.stepvalues[static_cast<std::size_t>(step)]) {
            ++step;
        }
        return static_cast<float>(base * std::pow(c.gamma, step));
    }
    if (c.lr_policy == "exp") {
        return static_cast<float>(base * std::pow(c.gamma, it));
    }
    if (c.lr_policy == "inv") {
        return static_cast<float>(base * std::pow(1.0 + c.gamma * it, -c.power));
    }
    if (c.lr_policy == "poly") {
        return static_cast<float>(base * std::pow(1.0 - it / c.max_iter, c.power));
    }
    return c.base_lr; // fixed
}

Solver::Solver(const SolverConfig& config, Net& net, Backend& backend)
    : m_config(config), m_backend(backend), m_step({2}, &backend) {
    const int slots = config.type == "Adam" || config.type == "AdaDelta" ? 2 : 1;
    for (const auto& param : net.params()) {
        for (int s = 0; s < slots; ++s) {
            m_history.emplace_back(param.tensor->shape(), &backend);
        }
    }
    const auto& params = net.params();
    for (std::size_t i = 0; i < params.size(); ++i) {
        Tensor& w = *params[i].tensor;
        UpdateTarget target;
        target.count = w.count();
        target.lr_mult = params[i].spec.lr_mult;
        target.decay = config.weight_decay * params[i].spec.decay_mult;
        target.grad = w.diff();
        target.weights = w.data();
        const std::size_t first = static_cast<std::size_t>(slots) * i;
        target.history = m_history[first].data();
        target.history2 = slots == 2 ? m_history[first + 1].data() : nullptr;
        m_targets.push_back(target);
    }
}

void Solver::apply_update() {
    prepare_update();
    enqueue_update();
    advance();
}

void Solver::prepare_update() {
    const float rate = learning_rate(m_config, m_iter);
    // Adam's bias correction with t = iter + 1 (Caffe computes it in double-free float math).
    const int t = m_iter + 1;
    const float correction =
        m_config.type == "Adam"
            ? std::sqrt(1.0F - std::pow(m_config.momentum2, static_cast<float>(t))) /
                  (1.0F - std::pow(m_config.momentum, static_cast<float>(t)))
            : 1.0F;
    const float step[2] = {rate, correction};
    m_step.write_data(step);
}

void Solver::enqueue_update() {
    if (m_config.type == "AdaGrad" || m_config.type == "RMSProp" || m_config.type == "AdaDelta") {
        const AdaptiveRule rule = m_config.type == "AdaGrad"   ? AdaptiveRule::adagrad
                                  : m_config.type == "RMSProp" ? AdaptiveRule::rmsprop
                                                               : AdaptiveRule::adadelta;
        const float rate = rule == AdaptiveRule::rmsprop ? m_config.rms_decay : m_config.momentum;
        m_backend.adaptive_update_all(rule, m_targets, m_step.data(), rate, m_config.delta);
    } else if (m_config.type == "Adam") {
        m_backend.adam_update_all(m_targets, m_step.data(), m_config.momentum, m_config.momentum2,
                                  m_config.delta);
    } else {
        m_backend.sgd_update_all(m_targets, m_step.data(), m_config.momentum,
                                 m_config.type == "Nesterov");
    }
}

} // namespace dl
