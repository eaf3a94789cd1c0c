#include <dljob/config/fields.hpp>
#include <dljob/config/recipe_loader.hpp>
#include <dljob/config/recipe_overrides.hpp>
#include <dljob/config/solver_rules.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <regex>
#include <utility>

namespace dljob::config {
namespace {

// The data source is quoted when rendered; only a leading variable is left to the job's shell.
constexpr std::string_view data_source_pattern =
    R"((~|\$[A-Za-z_][A-Za-z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*\}|/)[^\x00-\x1f\x7f]{0,4000})";
constexpr std::string_view env_name_pattern = "[A-Za-z_][A-Za-z0-9_]{0,63}";
// A venv's folder (a path as data.source may be) or a conda environment's name.
constexpr std::string_view activate_pattern =
    R"((~|\$[A-Za-z_][A-Za-z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*\}|/)[^\x00-\x1f\x7f]{0,4000}|[A-Za-z0-9._-]{1,255})";
constexpr std::string_view mail_pattern = R"([A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,190})";

void record(Recipe& recipe, const std::string& key, const SourceMark& mark) {
    recipe.origins[key] = mark.str();
}

Result<void> read_resources(const YamlNode& node, Recipe& recipe) {
    DLJOB_TRY(
        check_mapping(node, "resources",
                      {"gpus", "nodes", "cores_per_gpu", "cores", "ranks", "memory", "walltime"}));
    Resources& res = recipe.resources;
    for (const auto& entry : node.entries) {
        const std::string key = join_key("resources", entry.key);
        record(recipe, key, entry.value.mark);
        if (entry.key == "gpus") {
            auto v = read_int(entry.value, key, 0, 1024);
            if (!v) {
                return fail(v.error());
            }
            res.gpus = *v;
        } else if (entry.key == "nodes") {
            auto v = read_int(entry.value, key, 1, 10000);
            if (!v) {
                return fail(v.error());
            }
            res.nodes = *v;
        } else if (entry.key == "cores_per_gpu") {
            auto v = read_int(entry.value, key, 1, 256);
            if (!v) {
                return fail(v.error());
            }
            res.cores_per_gpu = *v;
        } else if (entry.key == "cores") {
            auto v = read_int(entry.value, key, 1, 1024);
            if (!v) {
                return fail(v.error());
            }
            res.cores = *v;
        } else if (entry.key == "ranks") {
            auto v = read_int(entry.value, key, 1, 4096);
            if (!v) {
                return fail(v.error());
            }
            res.ranks = *v;
        } else if (entry.key == "memory") {
            auto v = read_memory(entry.value, key);
            if (!v) {
                return fail(v.error());
            }
            res.memory = *v;
        } else if (entry.key == "walltime") {
            auto v = read_walltime(entry.value, key);
            if (!v) {
                return fail(v.error());
            }
            res.walltime = *v;
        }
    }
    if (res.gpus > 0 && res.cores.has_value()) {
        return invalid(node.find("cores") != nullptr ? node.find("cores")->mark : node.mark,
                       "resources.cores",
                       "cores is for CPU-only jobs; with gpus, say cores_per_gpu instead");
    }
    if (res.gpus > 0 && res.ranks.has_value()) {
        return invalid(node.find("ranks")->mark, "resources.ranks",
                       "ranks is for CPU-only training; with gpus, every GPU is a rank");
    }
    if (res.gpus == 0 && res.cores_per_gpu.has_value()) {
        return invalid(node.find("cores_per_gpu")->mark, "resources.cores_per_gpu",
                       "cores_per_gpu needs gpus of 1 or more; for CPU-only jobs say cores");
    }
    return {};
}

Result<void> read_environment(const YamlNode& node, Recipe& recipe) {
    DLJOB_TRY(
        check_mapping(node, "environment", {"needs", "modules", "unload", "purge", "activate"}));
    if (const auto* unload = node.find("unload"); unload != nullptr) {
        auto v = read_word_list(*unload, "environment.unload", module_pattern, module_describe);
        if (!v) {
            return fail(v.error());
        }
        recipe.unload = *v;
        record(recipe, "environment.unload", unload->mark);
    }
    if (const auto* purge = node.find("purge"); purge != nullptr) {
        auto v = read_bool(*purge, "environment.purge");
        if (!v) {
            return fail(v.error());
        }
        recipe.purge = *v;
        record(recipe, "environment.purge", purge->mark);
    }
    if (const auto* activate = node.find("activate"); activate != nullptr) {
        auto v = read_word(*activate, "environment.activate", activate_pattern,
                           "a venv's folder (absolute, or starting with ~ or $VARIABLE) or a "
                           "conda environment's name of A-Z a-z 0-9 . _ -");
        if (!v) {
            return fail(v.error());
        }
        recipe.activate = *v;
        record(recipe, "environment.activate", activate->mark);
    }
    if (const auto* needs = node.find("needs"); needs != nullptr) {
        auto v = read_word_list(*needs, "environment.needs", name_pattern, name_describe);
        if (!v) {
            return fail(v.error());
        }
        recipe.needs = *v;
        record(recipe, "environment.needs", needs->mark);
    }
    if (const auto* modules = node.find("modules"); modules != nullptr) {
        auto v = read_word_list(*modules, "environment.modules", module_pattern, module_describe);
        if (!v) {
            return fail(v.error());
        }
        recipe.modules = *v;
        record(recipe, "environment.modules", modules->mark);
    }
    return {};
}

Result<void> read_data(const YamlNode& node, Recipe& recipe) {
    DLJOB_TRY(check_mapping(node, "data", {"source", "format", "stage_to", "keep_staged"}));
    if (const auto* source = node.find("source"); source != nullptr) {
        auto v = read_word(*source, "data.source", data_source_pattern,
                           "an absolute path, or one starting with ~ or $VARIABLE, without "
                           "control characters");
        if (!v) {
            return fail(v.error());
        }
        recipe.data.source = *v;
        record(recipe, "data.source", source->mark);
    }
    if (const auto* format = node.find("format"); format != nullptr) {
        auto v = read_choice(*format, "data.format", {"idx", "directory", "archive"});
        if (!v) {
            return fail(v.error());
        }
        recipe.data.format = *v;
    }
    if (const auto* stage = node.find("stage_to"); stage != nullptr) {
        auto v = read_choice(*stage, "data.stage_to", {"none", "node-local", "ramdisk"});
        if (!v) {
            return fail(v.error());
        }
        recipe.data.stage_to = *v;
        record(recipe, "data.stage_to", stage->mark);
    }
    if (recipe.data.stage_to != "none" && recipe.data.source.empty()) {
        return invalid(node.mark, "data.stage_to", "staging needs data.source");
    }
    if (recipe.data.stage_to == "none" && !recipe.data.source.empty() &&
        is_tar_archive(recipe.data)) {
        const auto* stage = node.find("stage_to");
        return invalid(
            stage != nullptr ? stage->mark : node.mark, "data.stage_to",
            fmt::format("data.source {} is a tar archive, which is extracted on the node "
                        "before the job runs: expected node-local or ramdisk",
                        recipe.data.source));
    }
    if (const auto* keep = node.find("keep_staged"); keep != nullptr) {
        auto v = read_bool(*keep, "data.keep_staged");
        if (!v) {
            return fail(v.error());
        }
        recipe.data.keep_staged = *v;
        record(recipe, "data.keep_staged", keep->mark);
    }
    return {};
}

std::string number_text(double value) {
    return fmt::format("{}", value);
}

// One recipe key over the config's solver: checked here by dltrain's rule for it
// (config/solver_rules.hpp), with the file:line:column of the recipe, so a bad value never
// waits in a queue to be refused by dltrain.
Result<std::string> read_solver_value(const YamlNode& node, const SolverRule& rule,
                                      const std::string& key_path) {
    const auto bound = [](double value) {
        return std::isinf(value) ? std::nullopt : std::optional<double>(value);
    };
    switch (rule.kind) {
    case SolverRule::Kind::number: {
        auto v = read_number(
            node, key_path,
            NumberBounds{bound(rule.min), rule.min_open, bound(rule.max), rule.max_open});
        return v ? Result<std::string>{number_text(*v)} : fail(v.error());
    }
    case SolverRule::Kind::integer: {
        auto v = read_whole(node, key_path, static_cast<long long>(rule.min),
                            static_cast<long long>(rule.max));
        return v ? Result<std::string>{std::to_string(*v)} : fail(v.error());
    }
    case SolverRule::Kind::choice: {
        std::vector<std::string> choices;
        for (const auto choice : rule.choices) {
            if (!choice.empty()) {
                choices.emplace_back(choice);
            }
        }
        return read_choice(node, key_path, choices);
    }
    case SolverRule::Kind::integers:
        break;
    }
    // stepvalue: multistep's iterations, increasing (Caffe moves to the next step only past
    // the one before).
    if (!node.is_sequence() || node.items.empty()) {
        return invalid(node.mark, key_path,
                       "expected a list of increasing iterations, like [5000, 8000]");
    }
    std::string text;
    long long previous = -1;
    for (std::size_t i = 0; i < node.items.size(); ++i) {
        const std::string item_path = fmt::format("{}[{}]", key_path, i);
        auto v = read_whole(node.items[i], item_path, static_cast<long long>(rule.min),
                            static_cast<long long>(rule.max));
        if (!v) {
            return fail(v.error());
        }
        if (*v <= previous) {
            return invalid(node.items[i].mark, item_path,
                           fmt::format("expected an iteration above {}, the one before", previous));
        }
        previous = *v;
        text += (text.empty() ? "[" : ",") + std::to_string(*v);
    }
    return text + "]";
}

// train.config: the dltrain network and solver file, relative to the recipe.
Result<void> read_train_config(const YamlNode& node, const YamlNode* config, Recipe& recipe,
                               const std::filesystem::path& base_dir) {
    if (config == nullptr) {
        return invalid(node.mark, "train.config",
                       "missing: the dltrain network and solver config file",
                       "e.g. config: networks/lenet.yaml (relative to the recipe)");
    }
    auto path = read_word(*config, "train.config", R"([^\x00-\x1f\x7f]{1,4000})",
                          "a file path without control characters");
    if (!path) {
        return fail(path.error());
    }
    std::filesystem::path resolved{*path};
    if (resolved.is_relative()) {
        resolved = base_dir / resolved;
    }
    recipe.train.config = resolved.lexically_normal();
    // `dltrain check` (validate, submit) and the job read this file: a FIFO there blocks them
    // until a writer comes, a device never ends. A path that does not exist here may exist on
    // the cluster, so only what stat sees is judged.
    if (auto kind = util::non_regular_kind(recipe.train.config); !kind.empty()) {
        return invalid(
            config->mark, "train.config",
            fmt::format("{} is {}, not a network config file", recipe.train.config.string(), kind),
            "give the path of the dltrain network and solver config (a YAML file)");
    }
    record(recipe, "train.config", config->mark);
    return {};
}

// train.weights: a checkpoint or .caffemodel to start from, or "@ID", the one job ID ends with.
Result<void> read_train_weights(const YamlNode& weights_node, Recipe& recipe,
                                const std::filesystem::path& base_dir) {
    const YamlNode* weights = &weights_node;
    auto v = read_word(*weights, "train.weights", R"([^\x00-\x1f\x7f]{1,4000})",
                       "a dltrain checkpoint path without control characters");
    if (!v) {
        return fail(v.error());
    }
    // "@ID": the checkpoint of the dljob job this one waits for (submit --after ID).
    if (v->front() == '@' && !std::regex_match(*v, std::regex{"@[1-9][0-9]{0,17}"})) {
        return invalid(weights->mark, "train.weights",
                       fmt::format("'{}': expected @ and a dljob job id, like @12", *v));
    }
    // ~ and $VARIABLE are the job's to expand (the cluster's home, $SCRATCH); a relative
    // path is the recipe's neighbour, like train.config.
    const bool for_the_job = v->front() == '~' || v->front() == '$' || v->front() == '@';
    std::filesystem::path file{*v};
    if (!for_the_job && file.is_relative()) {
        file = base_dir / file;
    }
    recipe.train.weights = for_the_job ? *v : file.lexically_normal().string();
    record(recipe, "train.weights", weights->mark);
    return {};
}

Result<void> read_train(const YamlNode& node, Recipe& recipe,
                        const std::filesystem::path& base_dir) {
    std::vector<std::string> allowed = {"config", "threads", "max_iter", "weights"};
    for (const auto& rule : solver_rules) {
        allowed.emplace_back(rule.key);
    }
    DLJOB_TRY(check_mapping(node, "train", allowed));
    for (const auto& rule : solver_rules) {
        const auto* value = node.find(rule.key);
        if (value == nullptr) {
            continue;
        }
        const std::string key_path = join_key("train", rule.key);
        auto text = read_solver_value(*value, rule, key_path);
        if (!text) {
            return fail(text.error());
        }
        recipe.train.solver.emplace_back(rule.dltrain_key, *text);
        record(recipe, key_path, value->mark);
    }
    DLJOB_TRY(read_train_config(node, node.find("config"), recipe, base_dir));
    if (const auto* threads = node.find("threads"); threads != nullptr) {
        auto v = read_int(*threads, "train.threads", 1, 1024);
        if (!v) {
            return fail(v.error());
        }
        recipe.train.threads = *v;
    }
    if (const auto* max_iter = node.find("max_iter"); max_iter != nullptr) {
        auto v = read_int(*max_iter, "train.max_iter", 1, 1'000'000'000);
        if (!v) {
            return fail(v.error());
        }
        recipe.train.max_iter = *v;
        record(recipe, "train.max_iter", max_iter->mark);
    }
    if (const auto* weights = node.find("weights"); weights != nullptr) {
        DLJOB_TRY(read_train_weights(*weights, recipe, base_dir));
    }
    return {};
}

// NAME: value, or NAME: {prepend: ENTRIES} / {append: ENTRIES}, ENTRIES one string or a list.
Result<EnvironmentSetting> read_environment_setting(const YamlNode& node, const std::string& key) {
    EnvironmentSetting setting;
    const YamlNode* values = &node;
    std::string values_key = key;
    if (node.is_mapping()) {
        DLJOB_TRY(check_mapping(node, key, {"prepend", "append"}));
        if (node.entries.size() != 1) {
            return invalid(node.mark, key, "expected one of prepend: or append:",
                           "e.g. LD_LIBRARY_PATH: {prepend: /opt/lib}");
        }
        const auto& only = node.entries.front();
        setting.mode = only.key == "prepend" ? EnvironmentSetting::Mode::prepend
                                             : EnvironmentSetting::Mode::append;
        values = &only.value;
        values_key = join_key(key, only.key);
    }
    if (values->is_scalar()) {
        auto value = read_string(*values, values_key);
        if (!value) {
            return fail(value.error());
        }
        setting.values = {*value};
    } else if (setting.mode != EnvironmentSetting::Mode::set) {
        auto list = read_string_list(*values, values_key);
        if (!list) {
            return fail(list.error());
        }
        setting.values = *list;
    } else {
        return invalid(values->mark, key,
                       "expected a value, or {prepend: ...} / {append: ...} for a path list");
    }
    if (setting.mode != EnvironmentSetting::Mode::set && setting.values.empty()) {
        return invalid(values->mark, values_key, "expected at least one entry");
    }
    for (const auto& value : setting.values) {
        if (value.find('\0') != std::string::npos) {
            return invalid(values->mark, values_key, "NUL bytes cannot be exported");
        }
        if (setting.mode != EnvironmentSetting::Mode::set &&
            (value.empty() || value.find(':') != std::string::npos)) {
            return invalid(
                values->mark, values_key,
                fmt::format("'{}': a path list entry must be non-empty and hold no ':'", value));
        }
    }
    return setting;
}

Result<void> read_command(const YamlNode& node, Recipe& recipe) {
    DLJOB_TRY(check_mapping(node, "command", {"argv", "environment"}));
    const auto* argv = node.find("argv");
    if (argv == nullptr) {
        return invalid(node.mark, "command.argv", "missing: the program and its arguments",
                       "e.g. argv: [python3, train.py, --epochs, \"10\"]");
    }
    auto v = read_string_list(*argv, "command.argv");
    if (!v) {
        return fail(v.error());
    }
    if (v->empty() || v->front().empty()) {
        return invalid(argv->mark, "command.argv", "expected a program name first");
    }
    for (std::size_t i = 0; i < v->size(); ++i) {
        if ((*v)[i].find('\0') != std::string::npos) {
            return invalid(argv->items[i].mark, fmt::format("command.argv[{}]", i),
                           "NUL bytes cannot be passed to a program");
        }
    }
    recipe.command.argv = *v;
    record(recipe, "command.argv", argv->mark);
    if (const auto* env = node.find("environment"); env != nullptr) {
        if (!env->is_mapping()) {
            return invalid(env->mark, "command.environment", "expected a mapping of NAME: value");
        }
        const std::regex name_re{std::string(env_name_pattern)};
        for (const auto& entry : env->entries) {
            const std::string key = join_key("command.environment", entry.key);
            if (!std::regex_match(entry.key, name_re) || entry.key.rfind("DLJOB_", 0) == 0) {
                return invalid(entry.key_mark, key,
                               "expected a variable name of A-Z a-z 0-9 _ not starting with a "
                               "digit or DLJOB_");
            }
            auto setting = read_environment_setting(entry.value, key);
            if (!setting) {
                return fail(setting.error());
            }
            setting->name = entry.key;
            recipe.command.environment.push_back(*setting);
        }
    }
    return {};
}

Result<void> read_checkpoint(const YamlNode& node, Recipe& recipe) {
    DLJOB_TRY(check_mapping(node, "checkpoint", {"resume", "max_continuations", "signal_margin"}));
    if (const auto* n = node.find("resume"); n != nullptr) {
        auto v = read_bool(*n, "checkpoint.resume");
        if (!v) {
            return fail(v.error());
        }
        recipe.checkpoint.resume = *v;
    }
    if (const auto* n = node.find("max_continuations"); n != nullptr) {
        auto v = read_int(*n, "checkpoint.max_continuations", 0, 1000);
        if (!v) {
            return fail(v.error());
        }
        recipe.checkpoint.max_continuations = *v;
    }
    if (const auto* n = node.find("signal_margin"); n != nullptr) {
        auto v = read_int(*n, "checkpoint.signal_margin", 30, 3600);
        if (!v) {
            return fail(v.error());
        }
        recipe.checkpoint.signal_margin_seconds = *v;
        record(recipe, "checkpoint.signal_margin", n->mark);
    }
    return {};
}

Result<void> read_mail(const YamlNode& node, Recipe& recipe) {
    DLJOB_TRY(check_mapping(node, "mail", {"address", "on"}));
    if (const auto* n = node.find("address"); n != nullptr) {
        auto v =
            read_word(*n, "mail.address", mail_pattern, "an e-mail address like you@example.org");
        if (!v) {
            return fail(v.error());
        }
        recipe.mail.address = *v;
    }
    if (const auto* n = node.find("on"); n != nullptr) {
        auto events = read_string_list(*n, "mail.on");
        if (!events) {
            return fail(events.error());
        }
        for (std::size_t i = 0; i < events->size(); ++i) {
            const std::string& event = (*events)[i];
            if (event == "begin") {
                recipe.mail.on_begin = true;
            } else if (event == "end") {
                recipe.mail.on_end = true;
            } else if (event == "fail") {
                recipe.mail.on_fail = true;
            } else {
                return invalid(n->items[i].mark, fmt::format("mail.on[{}]", i),
                               fmt::format("expected one of begin, end, fail, got '{}'", event));
            }
        }
    }
    if (recipe.mail.address.empty() &&
        (recipe.mail.on_begin || recipe.mail.on_end || recipe.mail.on_fail)) {
        return invalid(node.mark, "mail.address", "mail.on needs an address");
    }
    return {};
}

// ---- sweep: ------------------------------------------------------------------------------

constexpr std::string_view sweep_key_pattern =
    R"([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*)";

struct SweepLeaf {
    std::string key; // dotted
    const YamlNode::Entry* entry = nullptr;
};

// `sweep:` may spell a key dotted (`train.base_lr: [...]`) or nested (`train: {base_lr: [...]}`)
// as `--set sweep.train.base_lr=[...]` makes it: a mapping is never a sweep's values.
Result<void> sweep_leaves(const YamlNode& node, const std::string& prefix,
                          std::vector<SweepLeaf>& leaves) {
    const std::regex key_re{std::string(sweep_key_pattern)};
    for (const auto& entry : node.entries) {
        const std::string key = prefix.empty() ? entry.key : prefix + "." + entry.key;
        if (!std::regex_match(entry.key, key_re)) {
            return invalid(entry.key_mark, join_key("sweep", key),
                           "expected a dotted recipe key, like train.base_lr");
        }
        if (entry.value.is_mapping()) {
            DLJOB_TRY(sweep_leaves(entry.value, key, leaves));
            continue;
        }
        if (key == "sweep" || key.rfind("sweep.", 0) == 0) {
            return invalid(entry.key_mark, join_key("sweep", key), "a sweep cannot sweep itself");
        }
        for (const auto& other : leaves) {
            const auto& [shorter, longer] = other.key.size() <= key.size()
                                                ? std::pair{other.key, key}
                                                : std::pair{key, other.key};
            if (other.key == key || longer.rfind(shorter + ".", 0) == 0) {
                return invalid(entry.key_mark, join_key("sweep", key),
                               fmt::format("{} is swept already at {}", other.key,
                                           other.entry->key_mark.str()));
            }
        }
        leaves.push_back(SweepLeaf{key, &entry});
    }
    return {};
}

// A value as the text `--set KEY=TEXT` reads back into the same scalar: a quoted one stays a
// string ("4" is not 4).
Result<std::string> sweep_value_text(const YamlNode& item, const std::string& key_path) {
    if (!item.is_scalar()) {
        return invalid(
            item.mark, key_path,
            fmt::format("expected a value (a number or a word), got {}", to_string(item.kind)));
    }
    std::string text = item.scalar;
    if (item.quoted) {
        text = "\"";
        for (const char c : item.scalar) {
            const auto byte = static_cast<unsigned char>(c);
            if (c == '"' || c == '\\') {
                text += '\\';
                text += c;
            } else if (byte < 0x20 || byte == 0x7f) {
                text += fmt::format("\\x{:02x}", byte);
            } else {
                text += c;
            }
        }
        text += '"';
    }
    auto again = parse_yaml(text, "sweep");
    if (!again || !again->is_scalar() || again->scalar != item.scalar ||
        again->quoted != item.quoted) {
        return invalid(item.mark, key_path, "this value does not read back the same on its own",
                       "write it in quotes");
    }
    return text;
}

std::optional<long long> whole_number(std::string_view text) {
    long long value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
        return std::nullopt;
    }
    return value;
}

// The error of one swept value, told at the value (or the swept key) with the sweep's key path.
Error sweep_value_error(Error error, const SourceMark& at, const std::string& key_path,
                        const std::string& assignment) {
    const std::string prefix = at.str() + ": ";
    if (error.message.rfind(prefix, 0) == 0) {
        const auto key_end = error.message.find(": ", prefix.size());
        if (key_end != std::string::npos) {
            error.message = prefix + key_path + error.message.substr(key_end);
            return error;
        }
    }
    error.message = fmt::format("{}{}: with {}: {}", prefix, key_path, assignment, error.message);
    return error;
}

// A sweep's whole-number range A..B, at most max_sweep_points values.
Result<std::pair<long long, long long>> sweep_range(const YamlNode& values,
                                                    const std::string& key_path) {
    const std::string spec = values.is_scalar() ? values.scalar : std::string();
    const auto dots = spec.find("..");
    const auto from = dots == std::string::npos
                          ? std::nullopt
                          : whole_number(std::string_view(spec).substr(0, dots));
    const auto to = dots == std::string::npos
                        ? std::nullopt
                        : whole_number(std::string_view(spec).substr(dots + 2));
    if (!from || !to || *from > *to) {
        return invalid(values.mark, key_path,
                       "expected a list of values like [0.1, 0.01], or a range of whole "
                       "numbers A..B with A <= B like 1..5");
    }
    // In unsigned arithmetic: -9e18..9e18 overflows a signed difference.
    if (static_cast<unsigned long long>(*to) - static_cast<unsigned long long>(*from) >=
        max_sweep_points) {
        return invalid(values.mark, key_path, fmt::format("more than {} values", max_sweep_points));
    }
    return std::pair{*from, *to};
}

Result<void> read_sweep(const YamlNode& node, const YamlNode& root, Recipe& recipe,
                        const std::filesystem::path& base_dir) {
    if (node.is_null()) {
        return {}; // `--set sweep=`: the recipe once, without its sweep
    }
    if (!node.is_mapping() || node.entries.empty()) {
        return invalid(node.mark, "sweep",
                       "expected a mapping of recipe keys to their values, like "
                       "train.base_lr: [0.1, 0.01] or train.random_seed: 1..5");
    }
    std::vector<SweepLeaf> leaves;
    DLJOB_TRY(sweep_leaves(node, "", leaves));
    // Each value is checked as its key's, in the recipe without its sweep, so that an error
    // points into the sweep: block instead of waiting for the point that has it.
    YamlNode unswept = root;
    std::erase_if(unswept.entries, [](const YamlNode::Entry& e) { return e.key == "sweep"; });
    // One copy per key: each value placed there replaces the one before.
    YamlNode document;
    const auto check = [&](const SweepLeaf& leaf, const YamlNode& value, const SourceMark& at,
                           const std::string& key_path, const std::string& text) -> Result<void> {
        auto placed = set_recipe_value(document, leaf.key, value, leaf.entry->key_mark);
        auto checked = placed ? recipe_from_yaml(document, base_dir) : fail(placed.error());
        if (!checked) {
            const bool at_key =
                checked.error().message.rfind(leaf.entry->key_mark.str() + ": ", 0) == 0;
            return fail(sweep_value_error(checked.error(), at_key ? leaf.entry->key_mark : at,
                                          at_key ? join_key("sweep", leaf.key) : key_path,
                                          fmt::format("{}={}", leaf.key, text)));
        }
        return {};
    };
    std::size_t points = 1;
    for (const auto& leaf : leaves) {
        const YamlNode& values = leaf.entry->value;
        const std::string key_path = join_key("sweep", leaf.key);
        SweepAxis axis{leaf.key, {}, leaf.entry->key_mark.str()};
        document = unswept;
        if (values.is_sequence()) {
            if (values.items.empty()) {
                return invalid(values.mark, key_path, "expected at least one value");
            }
            for (std::size_t i = 0; i < values.items.size(); ++i) {
                const std::string item_path = fmt::format("{}[{}]", key_path, i);
                auto text = sweep_value_text(values.items[i], item_path);
                if (!text) {
                    return fail(text.error());
                }
                DLJOB_TRY(check(leaf, values.items[i], values.items[i].mark, item_path, *text));
                axis.values.push_back(*text);
            }
        } else {
            auto range = sweep_range(values, key_path);
            if (!range) {
                return fail(range.error());
            }
            const auto [from, to] = *range;
            // A range's values differ only in size: its two ends stand for it.
            for (const long long end : {from, to}) {
                YamlNode number = values;
                number.scalar = std::to_string(end);
                number.quoted = false;
                DLJOB_TRY(check(leaf, number, values.mark, key_path, number.scalar));
            }
            for (long long v = from; v <= to; ++v) {
                axis.values.push_back(std::to_string(v));
            }
        }
        points *= axis.values.size();
        if (points > max_sweep_points) {
            return invalid(leaf.entry->key_mark, key_path,
                           fmt::format("{} points so far, more than the {} a sweep may have",
                                       points, max_sweep_points));
        }
        recipe.sweep.push_back(std::move(axis));
    }
    return {};
}

} // namespace

bool looks_like_recipe(const YamlNode& root) {
    return root.is_mapping() && (root.find("train") != nullptr || root.find("command") != nullptr ||
                                 root.find("resources") != nullptr);
}

Result<Recipe> recipe_from_yaml(const YamlNode& root, const std::filesystem::path& base_dir) {
    DLJOB_TRY(check_mapping(root, "",
                            {"name", "description", "resources", "environment", "data", "train",
                             "command", "checkpoint", "mail", "sweep"}));
    Recipe recipe;
    const auto* name = root.find("name");
    if (name == nullptr) {
        return invalid(root.mark, "name", fmt::format("missing: expected {}", name_describe));
    }
    auto name_value = read_word(*name, "name", name_pattern, name_describe);
    if (!name_value) {
        return fail(name_value.error());
    }
    recipe.name = *name_value;
    record(recipe, "name", name->mark);
    if (const auto* n = root.find("description"); n != nullptr) {
        auto v = read_string(*n, "description");
        if (!v) {
            return fail(v.error());
        }
        recipe.description = *v;
    }
    const auto* train = root.find("train");
    const auto* command = root.find("command");
    if ((train == nullptr) == (command == nullptr)) {
        return invalid(train != nullptr ? train->mark : root.mark, "train",
                       "a recipe needs exactly one of train: (the bundled dltrain engine) or "
                       "command: (any program)");
    }
    if (const auto* n = root.find("resources"); n != nullptr) {
        DLJOB_TRY(read_resources(*n, recipe));
    }
    if (const auto* n = root.find("environment"); n != nullptr) {
        DLJOB_TRY(read_environment(*n, recipe));
    }
    if (const auto* n = root.find("data"); n != nullptr) {
        DLJOB_TRY(read_data(*n, recipe));
    }
    if (train != nullptr) {
        recipe.kind = RecipeKind::train;
        DLJOB_TRY(read_train(*train, recipe, base_dir));
        if (recipe.data.source.empty()) {
            return invalid(root.mark, "data.source",
                           "a train: recipe needs data.source (the dataset directory)");
        }
    } else {
        recipe.kind = RecipeKind::command;
        DLJOB_TRY(read_command(*command, recipe));
    }
    if (const auto* n = root.find("checkpoint"); n != nullptr) {
        DLJOB_TRY(read_checkpoint(*n, recipe));
    }
    if (const auto* n = root.find("mail"); n != nullptr) {
        DLJOB_TRY(read_mail(*n, recipe));
    }
    if (const auto* n = root.find("sweep"); n != nullptr) {
        DLJOB_TRY(read_sweep(*n, root, recipe, base_dir));
    }
    return recipe;
}

Result<Recipe> load_recipe(const std::filesystem::path& path,
                           const std::vector<std::string>& overrides) {
    auto document = parse_yaml_file(path);
    if (!document) {
        return fail(document.error());
    }
    DLJOB_TRY(apply_recipe_overrides(*document, overrides));
    std::error_code ec;
    const auto absolute = std::filesystem::absolute(path, ec).lexically_normal();
    auto recipe = recipe_from_yaml(*document, absolute.parent_path());
    if (!recipe) {
        return fail(recipe.error());
    }
    recipe->source_file = absolute;
    return recipe;
}

} // namespace dljob::config
