#pragma once
// Caffe's solvers: SGD with momentum (v = m*v + lr*lr_mult*(g + wd*decay_mult*w); w -= v),
// Nesterov, Adam, AdaGrad, RMSProp and AdaDelta (dl/backend.hpp: AdaptiveRule), and the
// learning-rate policies fixed, step, multistep, exp, inv, poly.

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/net.hpp>
#include <dl/tensor.hpp>

#include <vector>

namespace dl {

/// The learning rate at `iter` (Caffe's SGDSolver::GetLearningRate).
float learning_rate(const SolverConfig& config, int iter);

class Solver {
public:
    Solver(const SolverConfig& config, Net& net, Backend& backend);

    /// Updates every parameter from its diff at the current iteration, then advances it:
    /// prepare_update(), enqueue_update(), advance().
    void apply_update();
    /// Uploads this iteration's learning rate (and Adam's correction) to backend memory.
    void prepare_update();
    /// Issues the update ops, reading the uploaded values (recordable).
    void enqueue_update();
    void advance() { ++m_iter; }

    [[nodiscard]] int iteration() const { return m_iter; }
    void set_iteration(int iter) { m_iter = iter; }
    [[nodiscard]] float current_lr() const { return learning_rate(m_config, m_iter); }
    /// Momentum or the adaptive rules' h (one per parameter), or Adam's m and v and AdaDelta's h
    /// and h2 (two per parameter), in parameter order.
    [[nodiscard]] std::vector<Tensor>& history() { return m_history; }
    [[nodiscard]] const std::vector<Tensor>& history() const { return m_history; }

private:
    SolverConfig m_config;
    Backend& m_backend;
    std::vector<Tensor> m_history;
    Tensor m_step; // [learning rate, Adam's bias correction] in backend memory
    std::vector<UpdateTarget> m_targets; // every parameter with its history, built once
    int m_iter = 0;
};

} // namespace dl
