#include <dljob/app/jobs/job_context.hpp>
#include <dljob/app/reports/plot.hpp>
#include <dljob/cli/commands.hpp>
#include <dljob/domain/error.hpp>

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

namespace dljob::cli {

void set_plot_command(CLI::App& app, Context& context) {
    auto* command = app.add_subcommand(
        "plot", "Plot training loss, test loss and test accuracy of jobs (a chain is one curve)");
    struct Flags {
        std::vector<std::string> ids;
        std::string output;
        std::string axis = "iter";
        std::string format = "image";
    };
    auto flags = std::make_shared<Flags>();
    command->add_option("JOB", flags->ids, "Job ids (any attempt of a continued chain)")
        ->required();
    command->add_option("-o,--output", flags->output,
                        "Image to write, .png or .svg by its extension (default curves.png)");
    command->add_option("--x", flags->axis, "Horizontal axis: iter, or time (training wall time)")
        ->check(CLI::IsMember({"iter", "time"}));
    command
        ->add_option("--format", flags->format,
                     "image (gnuplot), or text: a sparkline per job for a terminal")
        ->check(CLI::IsMember({"image", "text"}));
    command->callback([flags, &context] {
        const bool text = flags->format == "text";
        if (text && !flags->output.empty()) {
            throw Failure(ErrorCode::usage, "--format text prints to the terminal; drop -o",
                          "redirect the output to keep it: dljob plot ... --format text > F");
        }
        app::PlotOptions options;
        options.ids = flags->ids;
        if (!flags->output.empty()) {
            options.output = flags->output;
        }
        options.axis = flags->axis == "time" ? app::PlotAxis::time : app::PlotAxis::iteration;
        options.format = text ? app::PlotFormat::text : app::PlotFormat::image;
        auto jobs = app::JobContext::open();
        auto plotted = app::plot_jobs(jobs, options, context.out, context.err);
        if (!plotted) {
            throw Failure(plotted.error());
        }
    });
}

} // namespace dljob::cli
