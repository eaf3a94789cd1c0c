#include <dljob/app/data/fetch.hpp>
#include <dljob/app/data/stage.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <memory>
#include <ostream>

namespace dljob::cli {

void set_fetch_data_command(CLI::App& app, Context& context) {
    std::string names;
    for (const auto& dataset : app::dataset_catalog()) {
        names += (names.empty() ? "" : ", ") + dataset.name;
    }
    auto* command = app.add_subcommand(
        "fetch-data",
        fmt::format("Download a dataset ({}) or any URL: resumable, retried, verified, renamed "
                    "into place only when complete. Run it on a login or transfer node",
                    names));
    auto request = std::make_shared<app::FetchRequest>();
    command->add_option("NAME|URL", request->what, "A dataset name, or an http(s)/ftp URL")
        ->required();
    command->add_option("--to", request->to,
                        "Directory to put the files in (default: $HOME/data/NAME, or . for a "
                        "URL)");
    command->add_option("--sha256", request->sha256, "For a URL: the file's expected SHA-256");
    command->add_flag("--no-debian", request->no_debian,
                      "Download even when a Debian package ships the dataset");
    command->callback([request, &context] {
        const GetEnv env = app::process_environment();
        // Progress only on a terminal: batch logs and pipes get the summary lines.
        const bool show_progress = isatty(STDERR_FILENO) == 1;
        auto last = std::chrono::steady_clock::now();
        app::FetchCallbacks callbacks;
        callbacks.notice = [&](const std::string& line) {
            context.err << (show_progress ? "\r\033[K" : "") << line << '\n' << std::flush;
        };
        if (show_progress) {
            callbacks.progress = [&](const std::string& name, std::uint64_t bytes,
                                     std::optional<std::uint64_t> total) {
                const auto now = std::chrono::steady_clock::now();
                if (now - last < std::chrono::milliseconds(200)) {
                    return;
                }
                last = now;
                context.err << "\r\033[K"
                            << (total && *total > 0
                                    ? fmt::format("{}: {} of {} ({:.0f}%)", name,
                                                  human_bytes(bytes), human_bytes(*total),
                                                  100.0 * static_cast<double>(bytes) /
                                                      static_cast<double>(*total))
                                    : fmt::format("{}: {}", name, human_bytes(bytes)))
                            << std::flush;
            };
        }
        auto result = app::fetch_data(*request, app::fetch_settings(env), env, callbacks);
        if (show_progress) {
            context.err << "\r\033[K" << std::flush;
        }
        if (!result) {
            throw Failure(result.error());
        }
        for (const auto& file : result->files) {
            context.err << fmt::format(
                "{} {} ({}{})\n", file.already_present ? "present" : "fetched", file.path,
                human_bytes(file.bytes),
                file.verified ? ", verified"
                              : fmt::format(", not verified: sha256 {}", file.sha256));
        }
        // Only the directory on stdout: DATA=$(dljob fetch-data mnist).
        context.out << result->directory << '\n';
    });
}

} // namespace dljob::cli
