#pragma once
// The `train:` keys a recipe may set over its network config's solver, with the values dltrain
// accepts for each: dltrain's own table (`dltrain describe --json`, engine's
// dl::solver_key_rules) copied here, because dljob checks a recipe where no dltrain may be
// installed (a login node, `dljob validate` on a laptop). tests/unit/config/test_solver_rules.cpp
// runs the built dltrain's describe and fails when the two differ.

#include <array>
#include <limits>
#include <string_view>

namespace dljob::config {

struct SolverRule {
    enum class Kind { number, integer, integers, choice };
    std::string_view key;         // in the recipe's train: section
    std::string_view dltrain_key; // dltrain calls the solver's type `type`; in a recipe that
                                  // word would be ambiguous
    Kind kind;
    double min; // no bound: -infinity / +infinity
    bool min_open;
    double max;
    bool max_open;
    std::array<std::string_view, 6> choices; // Kind::choice; the empty ones are unused
};

inline constexpr double k_unbounded = std::numeric_limits<double>::infinity();

/// In the order they are passed to dltrain. `batch_size` is the train-phase Data layers'.
inline constexpr std::array<SolverRule, 11> solver_rules = {{
    {"solver",
     "type",
     SolverRule::Kind::choice,
     -k_unbounded,
     false,
     k_unbounded,
     false,
     {"SGD", "Nesterov", "Adam", "AdaGrad", "RMSProp", "AdaDelta"}},
    {"base_lr", "base_lr", SolverRule::Kind::number, 0, false, k_unbounded, false, {}},
    {"momentum", "momentum", SolverRule::Kind::number, 0, false, 1, true, {}},
    {"weight_decay", "weight_decay", SolverRule::Kind::number, 0, false, k_unbounded, false, {}},
    {"lr_policy",
     "lr_policy",
     SolverRule::Kind::choice,
     -k_unbounded,
     false,
     k_unbounded,
     false,
     {"fixed", "step", "multistep", "exp", "inv", "poly"}},
    {"gamma", "gamma", SolverRule::Kind::number, -k_unbounded, false, k_unbounded, false, {}},
    {"stepsize", "stepsize", SolverRule::Kind::integer, 0, false, 2147483647, false, {}},
    {"stepvalue", "stepvalue", SolverRule::Kind::integers, 0, false, 2147483647, false, {}},
    {"power", "power", SolverRule::Kind::number, -k_unbounded, false, k_unbounded, false, {}},
    {"batch_size", "batch_size", SolverRule::Kind::integer, 1, false, 2147483647, false, {}},
    {"random_seed", "random_seed", SolverRule::Kind::integer, 0, false, 4294967295.0, false, {}},
}};

} // namespace dljob::config
