#include <dljob/schedulers/support.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>

namespace dljob::schedulers {

Result<ProcessResult> run_command(ProcessRunner& runner, std::vector<std::string> argv,
                                  const SchedulerOptions& options, const std::string& cwd) {
    ProcessRequest request;
    request.argv = std::move(argv);
    request.timeout = options.command_timeout;
    request.cwd = cwd;
    const std::string program = request.argv.empty() ? "" : request.argv.front();
    auto result = runner.run(request);
    if (!result) {
        return fail(result.error());
    }
    if (result->timed_out) {
        return fail(
            ErrorCode::timeout,
            fmt::format(
                "'{}' did not answer within {} s", program,
                std::chrono::duration_cast<std::chrono::seconds>(options.command_timeout).count()),
            "the scheduler may be overloaded; dljob reconciles the job on the next "
            "'dljob status'");
    }
    return result;
}

bool is_transient_error(std::string_view text) {
    static constexpr std::array<std::string_view, 10> transient{
        "Socket timed out",
        "Transport endpoint is not connected",
        "Unable to contact slurm controller",
        "slurm_load_jobs error: Unable",
        "Connection refused",
        "cannot connect to server",
        "End of File",
        "Resource temporarily unavailable",
        "try again",
        "communication error",
    };
    return std::any_of(transient.begin(), transient.end(), [&](std::string_view needle) {
        return text.find(needle) != std::string_view::npos;
    });
}

Result<Submission>
submit_command(ProcessRunner& runner, std::vector<std::string> argv,
               const SchedulerOptions& options, const std::string& cwd,
               const std::function<std::optional<std::string>(const ProcessResult&)>& find_id) {
    const std::string program = argv.empty() ? "" : argv.front();
    auto result = run_command(runner, std::move(argv), options, cwd);
    if (!result) {
        return fail(result.error());
    }
    if (result->exit_code != 0) {
        return fail(command_error(program, *result));
    }
    auto id = find_id(*result);
    if (!id) {
        return fail(ErrorCode::scheduler_unreachable,
                    fmt::format("{} printed no job id: '{}'", program, trim(result->out)),
                    "dljob reconciles the job by its token on the next 'dljob status'");
    }
    return Submission{*id, ""};
}

Error command_error(std::string_view program, const ProcessResult& result) {
    std::string text = std::string(trim(result.err));
    if (text.empty()) {
        text = std::string(trim(result.out));
    }
    // Prefer the lines that say "error" (the Torque wrappers bury sbatch's message under a
    // banner); otherwise the first few lines.
    std::vector<std::string_view> lines;
    for (auto line : split_lines(text)) {
        if (line.find("error") != std::string_view::npos ||
            line.find("ERROR") != std::string_view::npos) {
            lines.push_back(trim(line));
        }
    }
    if (lines.empty()) {
        lines = split_lines(text);
    }
    std::string message;
    for (std::size_t i = 0; i < lines.size() && i < 4; ++i) {
        auto line = trim(lines[i]);
        while (!line.empty() && (line.front() == '\'' || line.front() == ' ')) {
            line.remove_prefix(1);
        }
        message += (message.empty() ? "" : " / ") + std::string(line);
    }
    if (message.empty()) {
        message = fmt::format("exit status {}", result.exit_code);
    }
    if (is_transient_error(text)) {
        return Error{ErrorCode::scheduler_unreachable,
                     fmt::format("{} failed: {}", program, message),
                     "the scheduler is not answering; try again in a few minutes"};
    }
    return Error{ErrorCode::scheduler_rejected, fmt::format("{} refused: {}", program, message),
                 "check the site profile's partition, account and limits"};
}

std::optional<int> read_exit_code_file(const std::string& run_dir) {
    if (run_dir.empty()) {
        return std::nullopt;
    }
    auto text = util::read_file(std::filesystem::path(run_dir) / "exit_code");
    if (!text) {
        return std::nullopt;
    }
    return parse_int(*text);
}

std::optional<Submission> identity_submission(const JobRef& job) {
    if (job.run_dir.empty() || job.token.empty()) {
        return std::nullopt;
    }
    auto text = util::read_file(std::filesystem::path(job.run_dir) / "job_identity");
    if (!text) {
        return std::nullopt;
    }
    std::string token;
    std::string id;
    for (auto line : split_lines(*text)) {
        line = trim(line);
        if (line.rfind("token=", 0) == 0) {
            token = std::string(line.substr(6));
        } else if (line.rfind("job_id=", 0) == 0) {
            id = std::string(line.substr(7));
        }
    }
    // An earlier attempt's identity in the same run directory carries another token.
    if (token != job.token || id.empty()) {
        return std::nullopt;
    }
    return Submission{id, ""};
}

std::string current_user(const SchedulerOptions& options) {
    if (!options.user.empty()) {
        return options.user;
    }
    for (const char* name : {"USER", "LOGNAME"}) {
        const char* value = std::getenv(name); // NOLINT(concurrency-mt-unsafe)
        if (value != nullptr && *value != '\0') {
            return value;
        }
    }
    return "root";
}

std::string token_job_name(const std::string& token) {
    // Torque truncates job names to 15 characters: "dlj-" plus a 10-character token fits.
    return "dlj-" + token;
}

void append_split(std::vector<std::string>& argv, const std::string& option) {
    const auto space = option.find(' ');
    if (space == std::string::npos) {
        argv.push_back(option);
    } else {
        argv.push_back(option.substr(0, space));
        argv.push_back(option.substr(space + 1));
    }
}

} // namespace dljob::schedulers
