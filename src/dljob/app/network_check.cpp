#include <dljob/app/network_check.hpp>

#include <fmt/format.h>

#include <string_view>

namespace dljob::app {

namespace {

std::string_view trimmed(std::string_view text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
        text.remove_suffix(1);
    }
    return text;
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
    ProcessRequest request;
    request.argv = {dltrain.string(), "check", "--config", recipe.train.config.string()};
    // Data read in place from a path this machine has: its headers give the shapes a config
    // without `shape` keys needs. A $VARIABLE or ~ source is the job's to expand.
    const std::string& source = recipe.data.source;
    if (!source.empty() && source.front() == '/' && std::filesystem::is_directory(source, ec)) {
        request.argv.insert(request.argv.end(), {"--data-dir", source});
    }
    request.timeout = std::chrono::seconds(60);
    auto ran = runner.run(request);
    if (!ran) {
        notes.push_back(fmt::format("network config {} not checked here: {}",
                                    recipe.train.config.string(), ran.error().message));
        return notes;
    }
    if (ran->exit_code == 3) {
        std::string_view message = trimmed(ran->err);
        constexpr std::string_view prefix = "dltrain: error: ";
        if (message.substr(0, prefix.size()) == prefix) {
            message.remove_prefix(prefix.size());
        }
        return fail(ErrorCode::config_invalid, std::string(message),
                    "fix the network config (docs/engine.md); `dltrain check --config FILE` "
                    "checks it alone");
    }
    if (ran->exit_code != 0) {
        notes.push_back(fmt::format("network config {} not checked here: {} check exited {}",
                                    recipe.train.config.string(), dltrain.string(),
                                    ran->exit_code));
        return notes;
    }
    constexpr std::string_view unchecked = "dltrain: not checked: ";
    std::string_view out = ran->out;
    while (!out.empty()) {
        const auto end = out.find('\n');
        const std::string_view line = out.substr(0, end);
        if (line.substr(0, unchecked.size()) == unchecked) {
            notes.emplace_back(line.substr(unchecked.size()));
        }
        if (end == std::string_view::npos) {
            break;
        }
        out.remove_prefix(end + 1);
    }
    return notes;
}

} // namespace dljob::app
