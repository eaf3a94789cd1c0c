#include <dljob/app/jobs/render_service.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/cli/site_options.hpp>
#include <dljob/domain/error.hpp>

#include <CLI/CLI.hpp>

#include <memory>
#include <ostream>

namespace dljob::cli {

void set_render_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "render", "Print the job script (and submit command) that submit would run for a recipe "
                  "on a site, without submitting");
    auto options = std::make_shared<app::RenderOptions>();
    auto output = std::make_shared<std::filesystem::path>();
    command->add_option("RECIPE", options->recipe, "Recipe file (YAML)")->required();
    add_site_options(*command, *options, SiteOptionSet::with_partition);
    command
        ->add_option("--set", options->overrides,
                     "Override a recipe value, KEY=VALUE with a dotted key (as submit --set); "
                     "repeatable")
        ->allow_extra_args(false);
    command->add_option("--run-dir", options->run_dir,
                        "Run directory to render for (default: <runs dir>/<recipe>-preview)");
    command->add_option("-o,--output", *output,
                        "Write the script to this file (atomically; nothing on error)");
    command->callback([options, output, &context] {
        auto rendered = app::render_recipe(*options);
        if (!rendered) {
            throw Failure(rendered.error());
        }
        for (const auto& note : rendered->notes) {
            context.err << "dljob: note: " << note << '\n';
        }
        if (output->empty()) {
            context.out << rendered->script;
            return;
        }
        auto written = app::write_rendered(*output, rendered->script);
        if (!written) {
            throw Failure(written.error());
        }
    });
}

} // namespace dljob::cli
