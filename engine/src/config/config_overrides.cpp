// `--solver KEY=VALUE` on a config as read: the value goes into the member its key names, typed
// by the key's rule, with no document re-read. Before, an override was spliced into the YAML
// text, and a prototxt config was written out as YAML and read again only to apply it.

#include "config/config_readers.hpp"
#include "net/layer_kind.hpp"

#include <dl/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <type_traits>
#include <variant>

namespace dl {
namespace {

// The assignment's value as its key's type; nothing when it is not one.
template <typename T> std::optional<T> integral(std::string_view text) {
    T value{};
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) {
        return std::nullopt;
    }
    return value;
}

std::optional<float> number(const std::string& text) {
    if (text.empty()) {
        return std::nullopt;
    }
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) {
        return std::nullopt;
    }
    return static_cast<float>(value); // NaN and inf pass here; the validator names them
}

std::optional<std::vector<int>> integers(std::string text) {
    // "[1000, 2000]", "1000,2000" or "1000".
    if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
        text = text.substr(1, text.size() - 2);
    }
    std::vector<int> values;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        std::string item = text.substr(start, comma - start);
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        const auto value = integral<int>(item);
        if (!value) {
            return std::nullopt;
        }
        values.push_back(*value);
        start = comma + 1;
    }
    return values;
}

[[noreturn]] void not_a(const NetConfig& config, const std::string& assignment,
                        const std::string& key, const std::string& value, const char* what) {
    throw Error(ErrorKind::config,
                fmt::format("{}: --solver {}: key '{}' in solver: '{}' is not a valid {}",
                            config.file.string(), assignment, key, value, what));
}

void set_solver_key(NetConfig& config, const std::string& assignment, const std::string& key,
                    const std::string& value) {
    const auto need = [&](auto parsed, const char* what) {
        if (!parsed) {
            not_a(config, assignment, key, value, what);
        }
        return *parsed;
    };
    SolverConfig& solver = config.solver;
    std::visit(
        [&](auto member) {
            using Member = decltype(member);
            if constexpr (std::is_same_v<Member, float SolverConfig::*>) {
                solver.*member = need(number(value), "number");
            } else if constexpr (std::is_same_v<Member, int SolverConfig::*>) {
                solver.*member = need(integral<int>(value), "integer (-2^31 to 2^31 - 1)");
            } else if constexpr (std::is_same_v<Member, unsigned SolverConfig::*>) {
                solver.*member = need(integral<unsigned>(value), "integer (0 to 2^32 - 1)");
            } else if constexpr (std::is_same_v<Member, bool SolverConfig::*>) {
                const bool boolean = value == "true" || value == "false";
                solver.*member = need(boolean ? std::optional(value == "true") : std::nullopt,
                                      "boolean (true or false)");
            } else if constexpr (std::is_same_v<Member, std::string SolverConfig::*>) {
                solver.*member = value;
            } else if constexpr (std::is_same_v<Member, std::vector<int> SolverConfig::*>) {
                solver.*member = need(integers(value), "list of integers ([1000, 2000])");
            }
        },
        solver_member(key));
    config.solver_marks[key] = SourceMark{0, 0, assignment};
}

void set_batch_size(NetConfig& config, const std::string& assignment, const std::string& value) {
    const auto parsed = integral<int>(value);
    if (!parsed) {
        not_a(config, assignment, "batch_size", value, "integer (-2^31 to 2^31 - 1)");
    }
    bool found = false;
    for (LayerConfig& layer : config.layers) {
        if (has_role(layer, LayerRole::input) && in_net(layer, config.solver.train_state)) {
            layer.batch_size = *parsed;
            layer.marks["batch_size"] = SourceMark{0, 0, assignment};
            found = true;
        }
    }
    if (!found) {
        throw Error(ErrorKind::config,
                    fmt::format("{}: --solver batch_size: the config has no train-phase Data "
                                "layer to give it to",
                                config.file.string()));
    }
}

} // namespace

void apply_overrides(NetConfig& config, const std::vector<std::string>& overrides) {
    for (const auto& assignment : overrides) {
        const auto equals = assignment.find('=');
        const std::string key = assignment.substr(0, equals);
        const auto& rules = solver_key_rules();
        const bool known = std::any_of(rules.begin(), rules.end(),
                                       [&](const SolverKeyRule& rule) { return rule.key == key; });
        if (equals == std::string::npos || !known) {
            std::string valid;
            for (const auto& rule : rules) {
                valid += (valid.empty() ? "" : ", ") + rule.key;
            }
            throw Error(ErrorKind::usage,
                        fmt::format("--solver '{}': expected KEY=VALUE with KEY one of {}",
                                    assignment, valid));
        }
        const std::string value = assignment.substr(equals + 1);
        if (key == "batch_size") {
            set_batch_size(config, assignment, value);
        } else {
            set_solver_key(config, assignment, key, value);
        }
        // One test_iter on the command line is every test net's (Caffe's test_state nets).
        if (key == "test_iter") {
            for (auto& net : config.solver.test_nets) {
                net.test_iter = config.solver.test_iter;
            }
        }
    }
}

} // namespace dl
