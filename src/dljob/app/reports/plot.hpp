#pragma once
// `dljob plot JOB... [-o FILE.png|FILE.svg] [--x iter|time] [--format image|text]`: training
// loss, test loss and test accuracy of one or several jobs, drawn by gnuplot (plot_gnuplot.hpp),
// or summarised as one sparkline per job for a terminal without a display.
//
// A continued chain (attempts linked by `continues`, one run directory) is one curve: its
// metrics.jsonl holds every attempt's lines. metrics.jsonl is untrusted input: it is read with a
// size bound, and a malformed line is skipped and reported by file:line.

#include <dljob/app/jobs/job_context.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace dljob::app {

/// Bounds on what plot reads from a run directory.
struct PlotLimits {
    /// metrics.jsonl larger than this is refused. A train line is about 250 bytes, so this is
    /// some 250,000 lines: `display: 1` for a quarter of a million iterations.
    static constexpr std::size_t max_metrics_bytes = 64UL * 1024 * 1024;
    /// A longer line is malformed (dltrain's are under 400 bytes); it is skipped unparsed.
    static constexpr std::size_t max_line_bytes = 16UL * 1024;
    /// Malformed lines reported one by one per file; the rest are counted in one message.
    static constexpr std::size_t max_reported_lines = 5;
};

/// One value of a curve: at iteration `iter`, `time_s` seconds of training into the run.
struct CurvePoint {
    std::int64_t iter = 0;
    double time_s = 0;
    double value = 0;
};

/// The three curves of one run directory, each sorted by iteration with one point per
/// iteration.
struct RunCurves {
    std::vector<CurvePoint> train_loss;
    std::vector<CurvePoint> test_loss;
    std::vector<CurvePoint> test_accuracy;
    int processes = 0; // `start` lines: the training processes that wrote the file
};

/// Parses metrics.jsonl text (`file` names it in warnings). Rules:
/// - a `start` line at iteration S begins a new process; points at S or later from earlier
///   processes are dropped, because that process resumed from the checkpoint at S and redoes
///   them (so the later value of an iteration wins);
/// - time is continuous across processes: a process's points are offset by the summed length
///   of the processes before it, each its `final` line's wall_s, or its last train line's
///   elapsed_s when it ended without one (killed). Queue time between attempts is not counted.
///   A test line has no elapsed_s: dltrain tests at iteration N right before step N, so it
///   takes the time of its process's train line at N, or, when there is none, of the latest one;
/// - lines that are not JSON objects, or a train/test line without a numeric iter and value,
///   are skipped and reported in `warnings` as "file:line: why"; unknown types are ignored.
RunCurves parse_metrics(std::string_view text, const std::string& file,
                        std::vector<std::string>& warnings);

/// Reads and parses <run_dir>/metrics.jsonl within PlotLimits. Missing: not_found; a FIFO,
/// directory or device, or a file over max_metrics_bytes: config_invalid; unreadable: io.
Result<RunCurves> read_run_curves(const std::filesystem::path& run_dir,
                                  std::vector<std::string>& warnings);

/// `width` Unicode block characters (▁..█) of the values, bucketed by iteration over the
/// curve's iteration range: each column is the mean of its points, an empty column repeats the
/// one before. The lowest value is ▁, the highest █; a constant curve is all ▁.
std::string sparkline(const std::vector<CurvePoint>& curve, std::size_t width);

enum class PlotAxis { iteration, time };
enum class PlotFormat { image, text };

/// One curve set as drawn: its legend label and curves.
struct PlotSeries {
    std::string label;
    std::vector<std::int64_t> job_ids; // the attempts, first to last
    RunCurves curves;
};

struct PlotOptions {
    std::vector<std::string> ids;
    std::filesystem::path output = "curves.png"; // image: .png or .svg
    PlotAxis axis = PlotAxis::iteration;
    PlotFormat format = PlotFormat::image;
    /// The gnuplot program: $DLJOB_GNUPLOT, else `gnuplot` on PATH (default_gnuplot()).
    std::string gnuplot;
    std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

/// $DLJOB_GNUPLOT when set, else "gnuplot".
std::string default_gnuplot();

/// Resolves the ids (each to its whole chain, one series per run directory), reads their
/// metrics and writes the image atomically (nothing is written on any error) or prints the text
/// summary. Warnings (malformed metrics lines) go to `err`.
Result<void> plot_jobs(JobContext& context, const PlotOptions& options, std::ostream& out,
                       std::ostream& err);

/// The series plot_jobs would draw, labels included (for tests and the text format).
Result<std::vector<PlotSeries>> plot_series(JobContext& context,
                                            const std::vector<std::string>& ids,
                                            std::vector<std::string>& warnings);

/// The `--format text` summary of the series.
std::string text_summary(const std::vector<PlotSeries>& series);

} // namespace dljob::app
