#include <dljob/app/pack.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>
#include <dljob/domain/stage.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <memory>
#include <ostream>

namespace dljob::cli {

void set_pack_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "pack", "Pack a directory tree, or an image list of 'path label' lines, into one tar "
                "archive with an index and a manifest (docs/data.md)");
    auto request = std::make_shared<app::PackRequest>();
    command->add_option("SOURCE", request->source, "Directory, or image list file (train.txt)")
        ->required();
    command->add_option("-o,--output", request->output, "Dataset directory to create")->required();
    command->add_option("--root", request->list_root,
                        "For an image list: the directory its paths start from (default: the "
                        "list's directory)");
    command->callback([request, &context] {
        // Progress only on a terminal: batch logs get the one summary line.
        const bool show_progress = isatty(STDERR_FILENO) == 1;
        auto last = std::chrono::steady_clock::now();
        std::function<void(const app::PackProgress&)> progress;
        if (show_progress) {
            progress = [&](const app::PackProgress& p) {
                const auto now = std::chrono::steady_clock::now();
                if (now - last >= std::chrono::milliseconds(200)) {
                    last = now;
                    context.err << fmt::format("\rpacking: {} files, {}   ", p.files,
                                               human_bytes(p.bytes))
                                << std::flush;
                }
            };
        }
        auto summary = app::pack_dataset(*request, progress);
        if (show_progress) {
            context.err << "\r\033[K" << std::flush;
        }
        if (!summary) {
            throw Failure(summary.error());
        }
        if (!summary->striping.empty()) {
            context.err << summary->striping << '\n';
        }
        const auto& m = summary->manifest;
        context.out << fmt::format("packed {} files and {} directories ({}) into {} ({}, "
                                   "xxh3-128 {})\n",
                                   m.files, m.directories, human_bytes(m.payload_bytes),
                                   summary->output, human_bytes(m.archive_bytes), m.content_hash);
    });
}

} // namespace dljob::cli
