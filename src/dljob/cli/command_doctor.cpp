#include <dljob/app/doctor/doctor.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/cli/site_options.hpp>
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
    auto choice = std::make_shared<app::SiteChoice>();
    add_site_options(*command, *choice, SiteOptionSet::site_only);
    command->callback([choice, &context] {
        auto report = app::doctor(*choice);
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
