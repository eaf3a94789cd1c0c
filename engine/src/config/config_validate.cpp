// The one check of a config's values, whatever its format: the YAML and prototxt readers only
// turn text into a NetConfig (types, known keys and fields), then both come here. Before, the
// prototxt path skipped the YAML reader's checks, and a stride or group of 0 was a SIGFPE, a
// uniform filler with min > max hung `check`, and NaN ratios trained.

#include "config/config_readers.hpp"
#include "net/layer_kind.hpp"

#include <dl/config.hpp>
#include <dl/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dl {
namespace {

/// Where the first byte of `text` is that starts no UTF-8 sequence or breaks one (overlong forms
/// and surrogates included), or nothing when it is all UTF-8.
std::optional<std::size_t> invalid_utf8_at(std::string_view text) {
    for (std::size_t i = 0; i < text.size();) {
        const auto lead = static_cast<unsigned char>(text[i]);
        if (lead < 0x80) {
            ++i;
            continue;
        }
        const std::size_t length = lead >= 0xC2 && lead <= 0xDF   ? 2
                                   : lead >= 0xE0 && lead <= 0xEF ? 3
                                   : lead >= 0xF0 && lead <= 0xF4 ? 4
                                                                  : 0;
        if (length == 0 || i + length > text.size()) {
            return i;
        }
        std::uint32_t code = lead & (0x7FU >> length);
        for (std::size_t k = 1; k < length; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            if ((next & 0xC0U) != 0x80U) {
                return i;
            }
            code = (code << 6U) | (next & 0x3FU);
        }
        if ((length == 3 && (code < 0x800 || (code >= 0xD800 && code <= 0xDFFF))) ||
            (length == 4 && (code < 0x10000 || code > 0x10FFFF))) {
            return i;
        }
        i += length;
    }
    return std::nullopt;
}

/// `text` with every byte outside printable ASCII as \xNN, for a message about it.
std::string shown_bytes(std::string_view text) {
    std::string shown;
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        shown += byte >= 0x20 && byte < 0x7F ? std::string(1, c) : fmt::format("\\x{:02X}", byte);
    }
    return shown;
}

// Kernel, stride and pad bound: the layers' geometry (H + 2 pad - kernel) is int arithmetic,
// and a window a million pixels wide is a typo, not a net (Caffe's largest are 11 wide).
constexpr int k_max_window = 1 << 20;

class Validator {
public:
    explicit Validator(const NetConfig& config) : m_config(config) {}

    void run() const {
        check_net_text();
        for (const LayerConfig& layer : m_config.layers) {
            check_layer(layer);
        }
        check_names();
        check_solver(m_config.solver);
    }

private:
    // "file:line:column: " of a key, else of what holds it.
    [[nodiscard]] static std::string at(const std::filesystem::path& file, const SourceMarks& marks,
                                        const std::string& key, int fallback_line) {
        const auto found = marks.find(key);
        if (found != marks.end() && !found->second.override_text.empty()) {
            return fmt::format("{}: --solver {}: ", file.string(), found->second.override_text);
        }
        if (found != marks.end() && found->second.line > 0) {
            return found->second.column > 0
                       ? fmt::format("{}:{}:{}: ", file.string(), found->second.line,
                                     found->second.column)
                       : fmt::format("{}:{}: ", file.string(), found->second.line);
        }
        return fallback_line > 0 ? fmt::format("{}:{}: ", file.string(), fallback_line)
                                 : fmt::format("{}: ", file.string());
    }

    [[noreturn]] void fail(const LayerConfig& layer, const std::string& key,
                           const std::string& message) const {
        throw Error(ErrorKind::config, at(m_config.file, layer.marks, key, layer.line) + message);
    }

    [[noreturn]] void fail_solver(const std::string& key, const std::string& message) const {
        const std::filesystem::path& file =
            m_config.solver_file.empty() ? m_config.file : m_config.solver_file;
        throw Error(ErrorKind::config,
                    at(file, m_config.solver_marks, key, m_config.solver_line) + message);
    }

    static std::string where(const LayerConfig& layer) {
        return fmt::format("layer '{}'", layer.name);
    }

    // A size that the layer needs: absent is "needs key", present but below `minimum` is out
    // of range.
    void required_at_least(const LayerConfig& layer, const std::string& key, int value,
                           int minimum) const {
        if (value >= minimum) {
            return;
        }
        if (layer.marks.count(key) == 0) {
            fail(layer, key,
                 fmt::format("{} of type {} needs key '{}'", where(layer), layer.type, key));
        }
        at_least(layer, key, value, minimum);
    }

    void at_least(const LayerConfig& layer, const std::string& key, int value, int minimum) const {
        if (value < minimum) {
            fail(layer, key,
                 fmt::format("key '{}' in {} must be at least {} (got {})", key, where(layer),
                             minimum, value));
        }
    }

    void at_most(const LayerConfig& layer, const std::string& key, int value, int maximum) const {
        if (value > maximum) {
            fail(layer, key,
                 fmt::format("key '{}' in {} must be at most {} (got {})", key, where(layer),
                             maximum, value));
        }
    }

    void finite(const LayerConfig& layer, const std::string& key, float value) const {
        if (!std::isfinite(value)) {
            fail(layer, key,
                 fmt::format("key '{}' in {} must be a finite number (got {})", key, where(layer),
                             value));
        }
    }

    void choice(const LayerConfig& layer, const std::string& key, const std::string& value,
                const std::vector<std::string>& choices) const {
        if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
            fail(layer, key,
                 fmt::format("key '{}' in {}: unknown value '{}' (valid: {})", key, where(layer),
                             value, join_list(choices)));
        }
    }

    void check_filler(const LayerConfig& layer, const std::string& key,
                      const FillerConfig& filler) const {
        const std::string here = fmt::format("{} of {}", key, where(layer));
        const auto sub = [&](const char* name) { return key + "." + name; };
        const auto in_filler = [&](const char* name, const std::string& message) {
            fail(layer, layer.marks.count(sub(name)) != 0 ? sub(name) : key,
                 fmt::format("key '{}' in {}: {}", name, here, message));
        };
        const std::vector<std::string> types = {"constant", "uniform", "gaussian", "xavier",
                                                "msra"};
        if (std::find(types.begin(), types.end(), filler.type) == types.end()) {
            in_filler("type",
                      fmt::format("unknown value '{}' (valid: {})", filler.type, join_list(types)));
        }
        const std::vector<std::string> norms = {"fan_in", "fan_out", "average"};
        if (std::find(norms.begin(), norms.end(), filler.variance_norm) == norms.end()) {
            in_filler("variance_norm", fmt::format("unknown value '{}' (valid: {})",
                                                   filler.variance_norm, join_list(norms)));
        }
        for (const auto& [name, value] :
             {std::pair{"value", filler.value}, std::pair{"min", filler.min},
              std::pair{"max", filler.max}, std::pair{"mean", filler.mean},
              std::pair{"std", filler.std}}) {
            if (!std::isfinite(value)) {
                in_filler(name, fmt::format("must be a finite number (got {})", value));
            }
        }
        // Caffe refuses these too (CHECK_LE(a, b), CHECK_GT(sigma, 0)), at the first draw;
        // Boost's uniform_real loops forever on min > max.
        if (filler.sparse < -1 || (filler.sparse != -1 && filler.type != "gaussian")) {
            in_filler("sparse", fmt::format("expected -1 (dense) or, for a gaussian filler, a "
                                            "number of inputs kept per output >= 0 (got {}, "
                                            "type {})",
                                            filler.sparse, filler.type));
        }
        if (filler.type == "uniform" && !(filler.min <= filler.max)) {
            in_filler("max", fmt::format("expected max >= min (got min {}, max {})", filler.min,
                                         filler.max));
        }
        if (filler.type == "gaussian" && !(filler.std > 0.0F)) {
            in_filler("std", fmt::format("expected a standard deviation > 0 (got {}; type: "
                                         "constant gives every weight one value)",
                                         filler.std));
        }
    }

    void check_window(const LayerConfig& layer) const {
        required_at_least(layer, "kernel_size", layer.kernel_size, 1);
        at_most(layer, "kernel_size", layer.kernel_size, k_max_window);
        at_least(layer, "stride", layer.stride, 1);
        at_most(layer, "stride", layer.stride, k_max_window);
        at_least(layer, "pad", layer.pad, 0);
        at_most(layer, "pad", layer.pad, k_max_window);
    }

    void check_params(const LayerConfig& layer) const {
        for (const ParamSpec& spec : layer.params) {
            for (const auto& [name, value] :
                 {std::pair{"lr_mult", spec.lr_mult}, std::pair{"decay_mult", spec.decay_mult}}) {
                if (!(std::isfinite(value) && value >= 0.0F)) {
                    fail(layer, "param",
                         fmt::format("key 'param' in {}: {} must be a finite number >= 0 (got {})",
                                     where(layer), name, value));
                }
            }
        }
    }

    // A layer's checks as its kind's `check` function calls them.
    class Checks final : public LayerChecks {
    public:
        Checks(const Validator& validator, const LayerConfig& layer)
            : m_validator(validator), m_layer(layer) {}
        [[noreturn]] void fail(const std::string& key, const std::string& message) const override {
            m_validator.fail(m_layer, key, message);
        }
        [[nodiscard]] std::string where() const override { return Validator::where(m_layer); }
        void required_at_least(const std::string& key, int value, int minimum) const override {
            m_validator.required_at_least(m_layer, key, value, minimum);
        }
        void at_least(const std::string& key, int value, int minimum) const override {
            m_validator.at_least(m_layer, key, value, minimum);
        }
        void at_most(const std::string& key, int value, int maximum) const override {
            m_validator.at_most(m_layer, key, value, maximum);
        }
        void finite(const std::string& key, float value) const override {
            m_validator.finite(m_layer, key, value);
        }
        void choice(const std::string& key, const std::string& value,
                    const std::vector<std::string>& choices) const override {
            m_validator.choice(m_layer, key, value, choices);
        }
        void filler(const std::string& key, const FillerConfig& value) const override {
            m_validator.check_filler(m_layer, key, value);
        }
        void window() const override { m_validator.check_window(m_layer); }

    private:
        const Validator& m_validator;
        const LayerConfig& m_layer;
    };

    void check_layer(const LayerConfig& layer) const {
        check_text(layer);
        check_params(layer);
        const LayerKind* kind = find_layer_kind(layer.type);
        if (kind == nullptr) {
            fail(layer, "type",
                 fmt::format("key 'type' in {}: unknown layer type '{}' (valid types: {})",
                             where(layer), layer.type, join_list(layer_type_names())));
        }
        if (kind->check != nullptr) {
            kind->check(layer, Checks(*this, layer));
        }
    }

    // Why `value` cannot be written as YAML, or nothing.
    static std::optional<std::string> not_utf8(const std::string& value) {
        const auto at = invalid_utf8_at(value);
        if (!at) {
            return std::nullopt;
        }
        return fmt::format("'{}' is not UTF-8 text (byte {} of it is 0x{:02X}): dltrain writes "
                           "configs as YAML, which holds UTF-8 only; save the file as UTF-8",
                           shown_bytes(value), *at + 1, static_cast<unsigned char>(value[*at]));
    }

    // The net's name and the solver's stages, as the layers' strings below.
    void check_net_text() const {
        if (const auto problem = not_utf8(m_config.name)) {
            throw Error(ErrorKind::config,
                        fmt::format("{}: the net's name {}", m_config.file.string(), *problem));
        }
        for (const NetState& state : net_states(m_config.solver)) {
            for (const auto& stage : state.stages) {
                if (const auto problem = not_utf8(stage)) {
                    fail_solver(state.phase == Phase::train ? "train_state" : "test_state",
                                fmt::format("a stage of the {} net: {}",
                                            state.phase == Phase::train ? "train" : "test",
                                            *problem));
                }
            }
        }
    }

    // Every string of a layer is UTF-8: dltrain writes configs as YAML (the run directory's
    // config.resolved.yaml, `dltrain convert`), which holds nothing else; yaml-cpp stopped
    // writing at the first other byte and left a config that read back as another.
    void check_text(const LayerConfig& layer) const {
        const auto utf8 = [&](const std::string& key, const std::string& value) {
            if (const auto problem = not_utf8(value)) {
                fail(layer, key,
                     fmt::format("key '{}' in layer '{}': {}", key, shown_bytes(layer.name),
                                 *problem));
            }
        };
        utf8("name", layer.name);
        utf8("type", layer.type);
        for (const auto& blob : layer.bottoms) {
            utf8("bottom", blob);
        }
        for (const auto& blob : layer.tops) {
            utf8("top", blob);
        }
        for (const auto& param : layer.params) {
            utf8("param", param.name);
        }
        for (const auto* rules : {&layer.include, &layer.exclude}) {
            for (const NetStateRule& rule : *rules) {
                for (const auto* stages : {&rule.stages, &rule.not_stages}) {
                    for (const auto& stage : *stages) {
                        utf8(rules == &layer.include ? "include" : "exclude", stage);
                    }
                }
            }
        }
        // The type's own keys, each through the same visitor the readers and writers use.
        class Texts final : public FieldVisitor {
        public:
            explicit Texts(const std::function<void(const std::string&, const std::string&)>& check)
                : m_check(check) {}
            void integer(const Field& /*f*/, int& /*value*/) override {}
            void number(const Field& /*f*/, float& /*value*/) override {}
            void flag(const Field& /*f*/, bool& /*value*/) override {}
            void flag(const Field& /*f*/, std::optional<bool>& /*value*/) override {}
            void text(const Field& f, std::string& value) override { m_check(f.key, value); }
            void numbers(const Field& /*f*/, std::vector<float>& /*value*/) override {}
            void integers(const Field& /*f*/, std::vector<int>& /*value*/) override {}
            void filler(const Field& f, FillerConfig& value) override {
                m_check(f.key, value.type);
                m_check(f.key, value.variance_norm);
            }

        private:
            const std::function<void(const std::string&, const std::string&)>& m_check;
        };
        if (const LayerKind* kind = find_layer_kind(layer.type); kind != nullptr) {
            const std::function<void(const std::string&, const std::string&)> check = utf8;
            Texts texts(check);
            LayerConfig copy = layer; // the fields are visited through a mutable config
            kind->fields(texts, copy);
        }
    }

    // A name may repeat only across nets (Caffe's train and test Data layers), or among layers
    // without parameters (the autoencoder's two losses): the test nets borrow the train net's
    // parameters, and checkpoints store them, by layer name.
    void check_names() const {
        const auto holds_params = [](const LayerConfig& layer) {
            const LayerKind* kind = find_layer_kind(layer.type);
            return kind != nullptr && kind->has_params;
        };
        for (const NetState& state : net_states(m_config.solver)) {
            std::map<std::string, const LayerConfig*> first;
            for (const LayerConfig& layer : m_config.layers) {
                if (!in_net(layer, state)) {
                    continue;
                }
                const auto [seen, added] = first.emplace(layer.name, &layer);
                if (!added && (holds_params(layer) || holds_params(*seen->second))) {
                    fail(layer, "name",
                         fmt::format("key 'name': layer name '{}' is used twice in the {} net "
                                     "(a name may repeat only across nets, or among layers "
                                     "without parameters)",
                                     layer.name, describe(state)));
                }
            }
        }
    }

    static std::string describe(const NetState& state) {
        std::string text = state.phase == Phase::train ? "train" : "test";
        if (!state.stages.empty()) {
            text += fmt::format(" (stage {})", join_list(state.stages));
        }
        return text;
    }

    // An integer key: at least its rule's minimum (the types bound the maximum).
    void solver_integer(const std::string& key, long long value) const {
        const SolverKeyRule& rule = solver_key_rule(key);
        if (static_cast<double>(value) < rule.min) {
            fail_solver(key, fmt::format("key '{}' in solver must be at least {} (got {})", key,
                                         rule.min, value));
        }
    }

    // A number key: finite, and within its rule's bounds.
    void solver_number(const std::string& key, double value) const {
        const SolverKeyRule& rule = solver_key_rule(key);
        const bool bounded_below = rule.min > -1e308;
        const bool bounded_above = rule.max < 1e308;
        const bool above = !bounded_below || (rule.min_open ? value > rule.min : value >= rule.min);
        const bool below = !bounded_above || (rule.max_open ? value < rule.max : value <= rule.max);
        if (std::isfinite(value) && above && below) {
            return;
        }
        std::string range;
        if (bounded_above) {
            range = fmt::format(" in {}{}, {}{}", rule.min_open ? "(" : "[", rule.min, rule.max,
                                rule.max_open ? ")" : "]");
        } else if (bounded_below) {
            range = fmt::format(" {} {}", rule.min_open ? ">" : ">=", rule.min);
        }
        fail_solver(key, fmt::format("key '{}' in solver must be a finite number{} (got {})", key,
                                     range, value));
    }

    void solver_choice(const std::string& key, const std::string& value) const {
        const SolverKeyRule& rule = solver_key_rule(key);
        if (std::find(rule.choices.begin(), rule.choices.end(), value) == rule.choices.end()) {
            fail_solver(key, fmt::format("key '{}' in solver: unknown value '{}' (valid: {})", key,
                                         value, join_list(rule.choices)));
        }
    }

    void check_solver(const SolverConfig& solver) const {
        solver_choice("type", solver.type);
        solver_choice("lr_policy", solver.lr_policy);
        for (const auto& [key, value] : {std::pair{"base_lr", solver.base_lr},
                                         {"momentum", solver.momentum},
                                         {"momentum2", solver.momentum2},
                                         {"delta", solver.delta},
                                         {"rms_decay", solver.rms_decay},
                                         {"weight_decay", solver.weight_decay},
                                         {"gamma", solver.gamma},
                                         {"power", solver.power}}) {
            solver_number(key, value);
        }
        for (const auto& [key, value] : {std::pair{"stepsize", solver.stepsize},
                                         {"max_iter", solver.max_iter},
                                         {"test_interval", solver.test_interval},
                                         {"test_iter", solver.test_iter},
                                         {"display", solver.display},
                                         {"snapshot", solver.snapshot},
                                         {"keep_checkpoints", solver.keep_checkpoints}}) {
            solver_integer(key, value);
        }
        for (const int step : solver.stepvalues) {
            solver_integer("stepvalue", step);
        }
        for (const auto& net : solver.test_nets) {
            if (net.test_iter < 0) {
                fail_solver("test_iter", fmt::format("solver: a test net's test_iter must be at "
                                                     "least 0 (got {})",
                                                     net.test_iter));
            }
        }
        // Caffe's own checks (AdaGradSolver, RMSPropSolver): their steps have no momentum.
        if ((solver.type == "AdaGrad" || solver.type == "RMSProp") && solver.momentum != 0.0F) {
            fail_solver("momentum",
                        fmt::format("solver: momentum {} cannot be used with {} (Caffe's rule: "
                                    "set it to 0)",
                                    solver.momentum, solver.type));
        }
        if (solver.lr_policy == "step" && solver.stepsize == 0) {
            fail_solver("lr_policy", "solver: lr_policy 'step' needs key 'stepsize'");
        }
        if (solver.lr_policy == "multistep" && solver.stepvalues.empty()) {
            fail_solver("lr_policy", "solver: lr_policy 'multistep' needs key 'stepvalue'");
        }
    }

    const NetConfig& m_config;
};

} // namespace

const std::vector<SolverKeyRule>& solver_key_rules() {
    constexpr double none = 1e308;
    static const std::vector<SolverKeyRule> rules = {
        {"type",
         "choice",
         -none,
         false,
         none,
         false,
         {"SGD", "Nesterov", "Adam", "AdaGrad", "RMSProp", "AdaDelta"}},
        {"base_lr", "number", 0, false, none, false, {}},
        {"momentum", "number", 0, false, 1, true, {}},
        {"momentum2", "number", 0, false, 1, true, {}},
        {"delta", "number", 0, true, none, false, {}},
        {"rms_decay", "number", 0, false, 1, true, {}},
        {"weight_decay", "number", 0, false, none, false, {}},
        {"lr_policy",
         "choice",
         -none,
         false,
         none,
         false,
         {"fixed", "step", "multistep", "exp", "inv", "poly"}},
        {"gamma", "number", -none, false, none, false, {}},
        {"power", "number", -none, false, none, false, {}},
        {"stepsize", "integer", 0, false, 2147483647, false, {}},
        {"stepvalue", "integers", 0, false, 2147483647, false, {}},
        {"max_iter", "integer", 0, false, 2147483647, false, {}},
        {"test_interval", "integer", 0, false, 2147483647, false, {}},
        {"test_iter", "integer", 0, false, 2147483647, false, {}},
        {"test_initialization", "boolean", -none, false, none, false, {}},
        {"display", "integer", 0, false, 2147483647, false, {}},
        {"snapshot", "integer", 0, false, 2147483647, false, {}},
        {"keep_checkpoints", "integer", 1, false, 2147483647, false, {}},
        {"random_seed", "integer", 0, false, 4294967295.0, false, {}},
        // Not a solver key: --solver batch_size sets the train-phase Data layers'.
        {"batch_size", "integer", 1, false, 2147483647, false, {}},
    };
    return rules;
}

SolverMember solver_member(const std::string& key) {
    static const std::map<std::string, SolverMember> members = {
        {"type", &SolverConfig::type},
        {"base_lr", &SolverConfig::base_lr},
        {"momentum", &SolverConfig::momentum},
        {"momentum2", &SolverConfig::momentum2},
        {"delta", &SolverConfig::delta},
        {"rms_decay", &SolverConfig::rms_decay},
        {"weight_decay", &SolverConfig::weight_decay},
        {"lr_policy", &SolverConfig::lr_policy},
        {"gamma", &SolverConfig::gamma},
        {"power", &SolverConfig::power},
        {"stepsize", &SolverConfig::stepsize},
        {"stepvalue", &SolverConfig::stepvalues},
        {"max_iter", &SolverConfig::max_iter},
        {"test_interval", &SolverConfig::test_interval},
        {"test_iter", &SolverConfig::test_iter},
        {"test_initialization", &SolverConfig::test_initialization},
        {"display", &SolverConfig::display},
        {"snapshot", &SolverConfig::snapshot},
        {"keep_checkpoints", &SolverConfig::keep_checkpoints},
        {"random_seed", &SolverConfig::random_seed},
        {"batch_size", std::monostate{}},
    };
    return members.at(key);
}

const SolverKeyRule& solver_key_rule(const std::string& key) {
    for (const auto& rule : solver_key_rules()) {
        if (rule.key == key) {
            return rule;
        }
    }
    throw std::out_of_range("no solver key rule for " + key);
}

void validate_config(const NetConfig& config) {
    Validator(config).run();
}

} // namespace dl
