#include <dljob/app/job_context.hpp>
#include <dljob/app/plot.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>

#include <CLI/CLI.hpp>

#include <map>
#include <memory>

namespace dljob::cli {

void set_plot_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "plot", "Plot training loss, test loss and test accuracy of jobs (a chain is one curve)");
    struct Flags {
        std::vector<std::string> ids;
        std::string output;
        app::PlotAxis axis = app::PlotAxis::iteration;
        app::PlotFormat format = app::PlotFormat::image;
    };
    auto flags = std::make_shared<Flags>();
    command->add_option("JOB", flags->ids, "Job ids (any attempt of a continued chain)")
        ->required();
    command->add_option("-o,--output", flags->output,
                        "Image to write, .png or .svg by its extension (default curves.png)");
    command->add_option("--x", flags->axis, "Horizontal axis: iter, or time (training wall time)")
        ->transform(CLI::CheckedTransformer(std::map<std::string, app::PlotAxis>{
            {"iter", app::PlotAxis::iteration}, {"time", app::PlotAxis::time}}));
    command
        ->add_option("--format", flags->format,
                     "image (gnuplot), or text: a sparkline per job for a terminal")
        ->transform(CLI::CheckedTransformer(std::map<std::string, app::PlotFormat>{
            {"image", app::PlotFormat::image}, {"text", app::PlotFormat::text}}));
    command->callback([flags, &context] {
        if (flags->format == app::PlotFormat::text && !flags->output.empty()) {
            throw Failure(ErrorCode::usage, "--format text prints to the terminal; drop -o",
                          "redirect the output to keep it: dljob plot ... --format text > F");
        }
        app::PlotOptions options;
        options.ids = flags->ids;
        if (!flags->output.empty()) {
            options.output = flags->output;
        }
        options.axis = flags->axis;
        options.format = flags->format;
        auto jobs = app::JobContext::open();
        auto plotted = app::plot_jobs(jobs, options, context.out, context.err);
        if (!plotted) {
            throw Failure(plotted.error());
        }
    });
}

} // namespace dljob::cli
