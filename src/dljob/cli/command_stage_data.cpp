#include <dljob/app/data/stage.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/cli/site_options.hpp>
#include <dljob/domain/error.hpp>
#include <dljob/domain/stage.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <memory>
#include <ostream>

namespace dljob::cli {

std::uint64_t parse_bytes(const std::string& text, const std::string& flag) {
    std::uint64_t value = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc{} || ptr == text.data()) {
        throw Failure(ErrorCode::usage, fmt::format("{} {}: not a size", flag, text),
                      "give bytes, or a number with K, M, G or T (e.g. 2G)");
    }
    const std::string suffix(ptr, end);
    const std::string units = "KMGT";
    if (suffix.empty()) {
        return value;
    }
    const auto unit = units.find(static_cast<char>(std::toupper(suffix.front())));
    if (unit == std::string::npos || (suffix.size() > 1 && suffix.substr(1) != "iB" &&
                                      suffix.substr(1) != "B" && suffix.substr(1) != "i")) {
        throw Failure(ErrorCode::usage, fmt::format("{} {}: unknown unit", flag, text),
                      "use K, M, G or T (powers of 1024)");
    }
    const unsigned shift = 10U * static_cast<unsigned>(unit + 1);
    if (value > (UINT64_MAX >> shift)) {
        throw Failure(ErrorCode::usage, fmt::format("{} {}: too large", flag, text));
    }
    return value << shift;
}

void set_stage_data_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "stage-data", "Copy a packed dataset to node-local storage (verified, cached per node) "
                      "and print where it is");
    auto request = std::make_shared<app::StageRequest>();
    auto reserve = std::make_shared<std::string>();
    auto cleanup = std::make_shared<bool>(false);
    command->add_option("DATASET", request->dataset, "Directory made by `dljob pack`")->required();
    command
        ->add_option("--to", request->to,
                     "tmp ($SLURM_TMPDIR, $TMPDIR, $LSCRATCH, /tmp), ramdisk ($RAMDISK, "
                     "/dev/shm) or a directory")
        ->capture_default_str();
    add_site_options(*command, request->where, SiteOptionSet::site_only,
                     "Site profile whose storage tiers (node-local, ramdisk) to use first "
                     "(default: none, only the environment)");
    command->add_flag("--extract", request->extract,
                      "Also unpack the files (safely) and print the tree's path");
    command->add_flag("--keep", request->keep, "Leave the staged copy in place on --cleanup");
    command->add_flag("--cleanup", *cleanup,
                      "Remove this dataset's staged copy from the target (unless staged with "
                      "--keep), e.g. from the job's exit trap");
    command
        ->add_option("--user-pid", request->user_pid,
                     "A process (the job's shell) using the copy: registered when staging; "
                     "--cleanup unregisters it and removes the copy only when no live user "
                     "is left")
        ->check(CLI::Range(1L, 4194304L));
    command->add_option("--threads", request->threads, "File writers for --extract")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
    command->add_option("--reserve", *reserve,
                        "Space to leave free on the target (default: 0, on RAM disks "
                        "max(256M, 5%))");
    command->add_flag("--skip-space-check", request->skip_space_check,
                      "Do not check free space and inodes first (for file systems that "
                      "misreport them)");
    command->callback([request, reserve, cleanup, &context] {
        if (!reserve->empty()) {
            request->reserve = parse_bytes(*reserve, "--reserve");
        }
        const GetEnv env = app::process_environment();
        if (*cleanup) {
            auto cleaned = app::cleanup_staged_dataset(*request, env);
            if (!cleaned) {
                throw Failure(cleaned.error());
            }
            if (cleaned->removed) {
                context.err << "removed the staged copy\n";
            } else if (!cleaned->found) {
                context.err << "nothing removed (not staged on this target)\n";
            } else if (cleaned->kept) {
                context.err << "kept the staged copy (staged with --keep)\n";
            } else {
                context.err << fmt::format("kept the staged copy: {} other job(s) on this node "
                                           "still use it\n",
                                           cleaned->users_left);
            }
            return;
        }
        auto staged = app::stage_dataset(*request, env, [&](const std::string& line) {
            context.err << line << '\n' << std::flush;
        });
        if (!staged) {
            throw Failure(staged.error());
        }
        context.err << (staged->cache_hit
                            ? fmt::format("already staged (cache hit, {})\n", staged->target_note)
                            : fmt::format("staged {} ({})\n", human_bytes(staged->bytes_copied),
                                          staged->target_note));
        // Only the path on stdout: DATA=$(dljob stage-data ...) in a job script.
        context.out << staged->path << '\n';
    });
}

} // namespace dljob::cli
