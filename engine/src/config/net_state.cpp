// Which layers a net of a given state holds: Caffe's NetStateRule and Net::FilterNet.

#include <dl/config.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace dl {

bool NetStateRule::matches(const NetState& state) const {
    const auto has = [&state](const std::string& stage) {
        return std::find(state.stages.begin(), state.stages.end(), stage) != state.stages.end();
    };
    return (!phase || *phase == state.phase) && (!min_level || state.level >= *min_level) &&
           (!max_level || state.level <= *max_level) &&
           std::all_of(stages.begin(), stages.end(), has) &&
           std::none_of(not_stages.begin(), not_stages.end(), has);
}

bool in_net(const LayerConfig& layer, const NetState& state) {
    if (layer.phase && *layer.phase != state.phase) {
        return false;
    }
    const auto matches = [&state](const NetStateRule& rule) { return rule.matches(state); };
    if (!layer.include.empty()) {
        return std::any_of(layer.include.begin(), layer.include.end(), matches);
    }
    return std::none_of(layer.exclude.begin(), layer.exclude.end(), matches);
}

std::vector<SolverConfig::TestNet> test_nets_of(const SolverConfig& solver) {
    if (!solver.test_nets.empty()) {
        return solver.test_nets;
    }
    return {SolverConfig::TestNet{NetState{Phase::test}, solver.test_iter}};
}

std::string net_state_text(const NetState& state) {
    return fmt::format("{} level {} stages [{}]", state.phase == Phase::train ? "train" : "test",
                       state.level, fmt::join(state.stages, ", "));
}

std::vector<NetState> net_states(const SolverConfig& solver) {
    std::vector<NetState> states{solver.train_state};
    for (const auto& net : test_nets_of(solver)) {
        states.push_back(net.state);
    }
    return states;
}

} // namespace dl
