#include <dljob/app/sites/doctor.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

namespace dljob::cli {

void set_doctor_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "doctor", "Check a site from its login node: scheduler commands, modules, storage tiers "
                  "and dltrain; exit 1 when a job there would fail");
    struct Flags {
        std::string site;
        std::vector<std::filesystem::path> site_files;
    };
    auto flags = std::make_shared<Flags>();
    command->add_option("--site", flags->site,
                        "Site profile name (default: by hostname, else local)");
    command->add_option("--site-file", flags->site_files,
                        "Also read this site profile (repeatable)");
    command->callback([flags, &context] {
        auto report = app::doctor(flags->site, flags->site_files);
        if (!report) {
            throw Failure(report.error());
        }
        context.out << fmt::format("site {}\n", report->site);
        app::print_findings(context.out, report->findings);
        if (app::any_error(report->findings)) {
            context.exit_code = 1;
        }
    });
}

} // namespace dljob::cli
