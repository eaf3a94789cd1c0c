#include <dljob/app/jobs/network_check.hpp>
#include <dljob/util/text.hpp>

#include <fmt/format.h>

#include <string_view>

namespace dljob::app {

namespace {

constexpr int check_timeout_s = 60;

// The names a crash of dltrain is likely to carry; any other is its number.
std::string signal_name(int signal) {
    switch (signal) {
    case 4:
        return "SIGILL";
    case 6:
        return "SIGABRT";
    case 7:
        return "SIGBUS";
    case 8:
        return "SIGFPE";
    case 9:
        return "SIGKILL";
    case 11:
        return "SIGSEGV";
    default:
        return fmt::format("signal {}", signal);
    }
}

// `dltrain check` with what the job will give dltrain: its data, its memory, its solver values.
ProcessRequest check_request(const Recipe& recipe, const std::filesystem::path& dltrain) {
    std::error_code ec;
    ProcessRequest request;
    request.argv = {dltrain.string(), "check", "--config", recipe.train.config.string()};
    // Data read in place from a path this machine has: its headers give the shapes a config
    // without `shape` keys needs. A $VARIABLE or ~ source is the job's to expand.
    const std::string& source = recipe.data.source;
    if (!source.empty() && source.front() == '/' && std::filesystem::is_directory(source, ec)) {
        request.argv.insert(request.argv.end(), {"--data-dir", source});
    }
    // dltrain refuses a net whose tensors need more memory than its limit (exit 3, naming the
    // layer). Its default is this machine's memory; the job gets what the recipe asks for.
    if (recipe.resources.memory && recipe.resources.memory->mib() > 0) {
        request.argv.insert(request.argv.end(),
                            {"--max-memory", fmt::format("{}M", recipe.resources.memory->mib())});
    }
    // The recipe's solver values are checked together with the config's (a step policy
    // needs a stepsize from one or the other).
    for (const auto& [key, value] : recipe.train.solver) {
        request.argv.insert(request.argv.end(), {"--solver", fmt::format("{}={}", key, value)});
    }
    request.timeout = std::chrono::seconds(check_timeout_s);
    return request;
}

} // namespace

Result<std::vector<std::string>> check_network(ProcessRunner& runner, const Recipe& recipe,
                                               const std::filesystem::path& dltrain) {
    std::vector<std::string> notes;
    if (recipe.kind != RecipeKind::train) {
        return notes;
    }
    std::error_code ec;
    if (!std::filesystem::exists(dltrain, ec)) {
        notes.push_back(fmt::format("network config {} not checked here: no dltrain at {}",
                                    recipe.train.config.string(), dltrain.string()));
        return notes;
    }
    auto ran = runner.run(check_request(recipe, dltrain));
    if (!ran) {
        notes.push_back(fmt::format("network config {} not checked here: {}",
                                    recipe.train.config.string(), ran.error().message));
        return notes;
    }
    if (ran->exit_code == 3) {
        std::string_view message = util::trim(ran->err);
        constexpr std::string_view prefix = "dltrain: error: ";
        if (message.substr(0, prefix.size()) == prefix) {
            message.remove_prefix(prefix.size());
        }
        // dltrain names the network file and line; the recipe key that chose that file leads.
        const auto origin = recipe.origins.find("train.config");
        return fail(ErrorCode::config_invalid,
                    origin == recipe.origins.end()
                        ? std::string(message)
                        : fmt::format("{}: train.config: {}", origin->second, message),
                    "fix the network config (docs/engine.md); `dltrain check --config FILE` "
                    "checks it alone");
    }
    // A check that crashes or never ends would do the same in the job, on its allocation: the
    // recipe is refused, never passed as "not checked".
    const auto origin = recipe.origins.find("train.config");
    const std::string config =
        origin == recipe.origins.end()
            ? fmt::format("train.config {}", recipe.train.config.string())
            : fmt::format("{}: train.config {}", origin->second, recipe.train.config.string());
    if (ran->timed_out) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}: `dltrain check` did not finish in {} s and was stopped; "
                                "training would hang the same way",
                                config, check_timeout_s),
                    "run `dltrain check --config FILE` alone to see where it stops");
    }
    if (ran->exit_code > 128) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}: `dltrain check` crashed ({}); training would crash the same "
                                "way",
                                config, signal_name(ran->exit_code - 128)),
                    "`dltrain check --config FILE` shows it alone; report it with the file");
    }
    if (ran->exit_code != 0) {
        notes.push_back(fmt::format("network config {} not checked here: {} check exited {}",
                                    recipe.train.config.string(), dltrain.string(),
                                    ran->exit_code));
        return notes;
    }
    constexpr std::string_view unchecked = "dltrain: not checked: ";
    for (const auto line : util::split_lines(ran->out)) {
        if (line.substr(0, unchecked.size()) == unchecked) {
            notes.emplace_back(line.substr(unchecked.size()));
        }
    }
    return notes;
}

} // namespace dljob::app
