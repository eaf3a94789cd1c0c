#include <dljob/adapters/yaml_document.hpp>
#include <dljob/app/reports/plot.hpp>
#include <dljob/app/reports/plot_gnuplot.hpp>
#include <dljob/config/recipe_overrides.hpp>
#include <dljob/util/files.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <ostream>
#include <set>

namespace dljob::app {
namespace {

constexpr std::string_view metrics_name = "metrics.jsonl";

// 2^53: beyond it a JSON number no longer holds every integer, and no training runs that long.
constexpr double max_iteration = 9007199254740992.0;

/// Keeps, per iteration, the point that came last (a resumed process redid it).
void sort_and_dedupe(std::vector<CurvePoint>& curve) {
    std::stable_sort(curve.begin(), curve.end(),
                     [](const CurvePoint& a, const CurvePoint& b) { return a.iter < b.iter; });
    std::vector<CurvePoint> kept;
    kept.reserve(curve.size());
    for (const auto& point : curve) {
        if (!kept.empty() && kept.back().iter == point.iter) {
            kept.back() = point;
        } else {
            kept.push_back(point);
        }
    }
    curve = std::move(kept);
}

void drop_from(std::vector<CurvePoint>& curve, std::int64_t iter) {
    std::erase_if(curve, [iter](const CurvePoint& point) { return point.iter >= iter; });
}

bool blank(std::string_view line) {
    return std::all_of(line.begin(), line.end(),
                       [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
}

/// A finite number under `key`; nullopt when absent, null or not a number.
std::optional<double> number(const nlohmann::json& json, const char* key) {
    const auto it = json.find(key);
    if (it == json.end() || !it->is_number()) {
        return std::nullopt;
    }
    const auto value = it->get<double>();
    return std::isfinite(value) ? std::optional<double>(value) : std::nullopt;
}

bool is_null(const nlohmann::json& json, const char* key) {
    const auto it = json.find(key);
    return it != json.end() && it->is_null();
}

/// The iteration under "iter", or why there is none.
std::optional<std::int64_t> iteration(const nlohmann::json& json) {
    const auto value = number(json, "iter");
    if (!value || *value < 0 || *value > max_iteration || std::floor(*value) != *value) {
        return std::nullopt;
    }
    return static_cast<std::int64_t>(*value);
}

// ---- recipe values that tell several jobs apart ------------------------------------------

std::string compact(const YamlNode& node) {
    switch (node.kind) {
    case YamlNode::Kind::null:
        return "null";
    case YamlNode::Kind::scalar:
        return node.scalar;
    case YamlNode::Kind::sequence: {
        std::string text = "[";
        for (const auto& item : node.items) {
            text += text.size() > 1 ? ", " : "";
            text += compact(item);
        }
        return text + "]";
    }
    case YamlNode::Kind::mapping: {
        std::string text = "{";
        for (const auto& entry : node.entries) {
            text += text.size() > 1 ? ", " : "";
            text += entry.key + ": " + compact(entry.value);
        }
        return text + "}";
    }
    }
    return {};
}

void flatten(const YamlNode& node, const std::string& prefix,
             std::map<std::string, std::string>& values) {
    if (node.is_mapping()) {
        for (const auto& entry : node.entries) {
            flatten(entry.value, prefix.empty() ? entry.key : prefix + "." + entry.key, values);
        }
    } else if (!prefix.empty()) {
        values[prefix] = compact(node);
    }
}

/// The recipe a job was submitted with (<run_dir>/recipe.yaml, with its recorded `--set`
/// lines applied), as dotted key = value; empty when it cannot be read.
std::map<std::string, std::string> recipe_values(const std::filesystem::path& run_dir) {
    std::map<std::string, std::string> values;
    const auto path = run_dir / "recipe.yaml";
    const auto read = util::read_regular_file(path, YamlLimits::max_bytes);
    if (read.status != util::BoundedRead::Status::ok) {
        return values;
    }
    auto root = parse_yaml(read.content, path.string());
    if (!root) {
        return values;
    }
    // submit appends the overrides as comments "# --set KEY=VALUE" (app/jobs/submit.cpp).
    constexpr std::string_view marker = "# --set ";
    std::vector<std::string> assignments;
    std::string_view rest = read.content;
    while (!rest.empty()) {
        const auto end = rest.find('\n');
        const auto line = rest.substr(0, end);
        if (line.substr(0, marker.size()) == marker) {
            assignments.emplace_back(line.substr(marker.size()));
        }
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    }
    if (!assignments.empty() && !config::apply_recipe_overrides(*root, assignments)) {
        return values; // the recorded overrides no longer apply: the file's values would mislead
    }
    flatten(*root, "", values);
    return values;
}

std::string shorten(const std::string& text, std::size_t max_chars) {
    if (text.size() <= max_chars) {
        return text;
    }
    std::size_t cut = max_chars;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80) {
        --cut; // not inside a UTF-8 sequence
    }
    return text.substr(0, cut) + "...";
}

/// Appends to each label the recipe values that differ between the series (at most a few, so
/// the legend stays readable; the name is in the label already).
void add_differences(std::vector<PlotSeries>& series,
                     const std::vector<std::filesystem::path>& run_dirs) {
    constexpr std::size_t max_keys = 4;
    constexpr std::size_t max_value_chars = 24;
    if (series.size() < 2) {
        return;
    }
    std::vector<std::map<std::string, std::string>> values;
    std::set<std::string> keys;
    for (const auto& dir : run_dirs) {
        values.push_back(recipe_values(dir));
        for (const auto& [key, value] : values.back()) {
            keys.insert(key);
        }
    }
    // A run directory without a readable recipe.yaml says nothing about any value.
    std::vector<const std::map<std::string, std::string>*> known;
    for (const auto& v : values) {
        if (!v.empty()) {
            known.push_back(&v);
        }
    }
    const auto value_of = [](const std::map<std::string, std::string>& v, const std::string& key) {
        const auto it = v.find(key);
        return it == v.end() ? std::string("(unset)") : it->second;
    };
    std::vector<std::string> differing;
    for (const auto& key : keys) {
        if (key == "name" || known.size() < 2) {
            continue;
        }
        const auto first = value_of(*known.front(), key);
        if (std::any_of(known.begin() + 1, known.end(),
                        [&](const auto* v) { return value_of(*v, key) != first; })) {
            differing.push_back(key);
        }
    }
    if (differing.size() > max_keys) {
        differing.resize(max_keys);
    }
    for (std::size_t i = 0; i < series.size(); ++i) {
        if (values[i].empty()) {
            continue;
        }
        for (const auto& key : differing) {
            series[i].label +=
                fmt::format(" {}={}", key, shorten(value_of(values[i], key), max_value_chars));
        }
    }
}

// ---- jobs and chains ----------------------------------------------------------------------

/// Every attempt of the chain `job` belongs to, first to last.
Result<std::vector<Job>> chain_of(JobContext& context, const Job& job) {
    std::set<std::int64_t> seen{job.id};
    Job first = job;
    while (first.continues != 0) {
        auto previous = context.store().find(first.continues);
        if (!previous) {
            return fail(previous.error());
        }
        if (!previous->has_value() || !seen.insert((*previous)->id).second) {
            break; // a removed row, or a loop in a damaged store: start the chain here
        }
        first = **previous;
    }
    std::vector<Job> chain{first};
    seen = {first.id};
    while (true) {
        auto next = context.store().continuation_of(chain.back().id);
        if (!next) {
            return fail(next.error());
        }
        // A loop cannot come from submit (one continuation per job), only from a damaged store.
        if (!next->has_value() || !seen.insert((*next)->id).second) {
            break;
        }
        chain.push_back(**next);
    }
    return chain;
}

std::string chain_label(const std::vector<Job>& chain) {
    std::string ids;
    for (const auto& job : chain) {
        ids += ids.empty() ? "" : "+";
        ids += std::to_string(job.id);
    }
    return fmt::format("job {} {}", ids, chain.front().name);
}

/// argv[0] as ProcessRunner will find it: a path with a slash as given, else on PATH.
bool program_exists(const std::string& program) {
    if (program.find('/') != std::string::npos) {
        return ::access(program.c_str(), X_OK) == 0;
    }
    const char* path = std::getenv("PATH"); // NOLINT(concurrency-mt-unsafe): read before threads
    std::string_view rest = path != nullptr ? path : "";
    while (true) {
        const auto end = rest.find(':');
        auto dir = std::string(rest.substr(0, end));
        if (dir.empty()) {
            dir = ".";
        }
        if (::access((std::filesystem::path(dir) / program).c_str(), X_OK) == 0) {
            return true;
        }
        if (end == std::string_view::npos) {
            return false;
        }
        rest.remove_prefix(end + 1);
    }
}

Result<ImageKind> image_kind(const std::filesystem::path& output) {
    std::string extension = output.extension().string();
    std::transform(extension.begin(), extension.end(), extension.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (extension == ".png") {
        return ImageKind::png;
    }
    if (extension == ".svg") {
        return ImageKind::svg;
    }
    return fail(ErrorCode::usage,
                fmt::format("-o {}: unknown image format '{}' (known: .png, .svg)", output.string(),
                            extension.empty() ? "(none)" : extension),
                "name the output curves.png or curves.svg, or use --format text");
}

bool looks_like(ImageKind kind, const std::string& bytes) {
    if (kind == ImageKind::png) {
        constexpr std::string_view signature = "\x89PNG\r\n\x1a\n";
        return bytes.compare(0, signature.size(), signature) == 0;
    }
    return bytes.find("<svg") != std::string::npos && bytes.find("</svg>") != std::string::npos;
}

} // namespace

namespace {

// The curves of one metrics.jsonl as its lines come, and where the current process's points
// fall in time across the attempts (each process's points offset by the summed length of the
// ones before).
class CurveBuilder {
public:
    /// Takes one line of `type`; returns why it was skipped, or empty.
    std::string add(const std::string& type, const nlohmann::json& json) {
        if (type == "start") {
            return start(json);
        }
        if (type == "train") {
            return train(json);
        }
        if (type == "test") {
            return test(json);
        }
        if (type == "final") {
            if (const auto wall = number(json, "wall_s"); wall && *wall >= 0) {
                m_process_wall_s = std::max(*wall, m_process_elapsed_s);
            }
        }
        // Other types (and new ones a later dltrain writes) carry nothing to draw.
        return {};
    }

    RunCurves finish() {
        sort_and_dedupe(m_curves.train_loss);
        sort_and_dedupe(m_curves.test_loss);
        sort_and_dedupe(m_curves.test_accuracy);
        return std::move(m_curves);
    }

private:
    std::string start(const nlohmann::json& json) {
        m_pending.clear();
        m_offset_s += m_process_wall_s >= 0 ? m_process_wall_s : m_process_elapsed_s;
        m_process_elapsed_s = 0;
        m_process_wall_s = -1;
        ++m_curves.processes;
        const auto iter = json.contains("iter") ? iteration(json) : std::int64_t{0};
        if (!iter) {
            return "start line without a valid \"iter\"";
        }
        drop_from(m_curves.train_loss, *iter);
        drop_from(m_curves.test_loss, *iter);
        drop_from(m_curves.test_accuracy, *iter);
        return {};
    }

    std::string train(const nlohmann::json& json) {
        const auto iter = iteration(json);
        const auto loss = number(json, "loss");
        if (!iter || (!loss && !is_null(json, "loss"))) {
            return "train line without a valid \"iter\" and \"loss\"";
        }
        if (const auto elapsed = number(json, "elapsed_s")) {
            m_process_elapsed_s = std::max(m_process_elapsed_s, *elapsed);
        }
        const double time_s = m_offset_s + m_process_elapsed_s;
        if (*iter == m_pending_iter) {
            for (const auto& [curve, index] : m_pending) {
                (*curve)[index].time_s = time_s;
            }
        }
        m_pending.clear();
        if (loss) { // null: the loss was NaN, nothing to draw
            m_curves.train_loss.push_back({*iter, time_s, *loss});
        }
        return {};
    }

    std::string test(const nlohmann::json& json) {
        const auto iter = iteration(json);
        const auto loss = number(json, "loss");
        const auto accuracy = number(json, "accuracy");
        if (!iter || (!loss && !accuracy && !is_null(json, "loss"))) {
            return "test line without a valid \"iter\", \"loss\" or \"accuracy\"";
        }
        const double time_s = m_offset_s + m_process_elapsed_s;
        m_pending.clear();
        m_pending_iter = *iter;
        if (loss) {
            m_pending.emplace_back(&m_curves.test_loss, m_curves.test_loss.size());
            m_curves.test_loss.push_back({*iter, time_s, *loss});
        }
        if (accuracy) {
            m_pending.emplace_back(&m_curves.test_accuracy, m_curves.test_accuracy.size());
            m_curves.test_accuracy.push_back({*iter, time_s, *accuracy});
        }
        return {};
    }

    RunCurves m_curves;
    double m_offset_s = 0;          // the summed length of the processes before this one
    double m_process_elapsed_s = 0; // the latest train elapsed_s of this process
    double m_process_wall_s = -1;   // its final line's wall_s; negative: none yet
    // The points of this process's latest test, as (curve, index): dltrain tests at iteration
    // N right before step N, so the train line of N, when it comes, gives their time.
    std::int64_t m_pending_iter = -1;
    std::vector<std::pair<std::vector<CurvePoint>*, std::size_t>> m_pending;
};

} // namespace

RunCurves parse_metrics(std::string_view text, const std::string& file,
                        std::vector<std::string>& warnings) {
    CurveBuilder curves;
    std::size_t malformed = 0;
    std::size_t line_number = 0;
    const auto report = [&](const std::string& why) {
        if (++malformed <= PlotLimits::max_reported_lines) {
            warnings.push_back(fmt::format("{}:{}: {}", file, line_number, why));
        }
    };
    // dltrain's lines are flat objects: anything nested deeper is dropped while parsing, so a
    // hostile line cannot build a deep tree.
    const nlohmann::json::parser_callback_t flat = [](int depth, nlohmann::json::parse_event_t,
                                                      nlohmann::json&) { return depth <= 2; };

    std::size_t position = 0;
    while (position < text.size()) {
        const auto end = text.find('\n', position);
        const bool terminated = end != std::string_view::npos;
        std::string_view line =
            text.substr(position, terminated ? end - position : std::string_view::npos);
        position = terminated ? end + 1 : text.size();
        ++line_number;
        if (blank(line)) {
            continue;
        }
        if (line.size() > PlotLimits::max_line_bytes) {
            report(fmt::format("line longer than {} bytes skipped", PlotLimits::max_line_bytes));
            continue;
        }
        const auto json = nlohmann::json::parse(line, flat, false);
        if (json.is_discarded() || !json.is_object()) {
            if (terminated) { // else the last line, still being written by a running job
                report("not a JSON object");
            }
            continue;
        }
        const auto type = json.find("type");
        if (type == json.end() || !type->is_string()) {
            report("no \"type\" string");
            continue;
        }
        if (auto skipped = curves.add(type->get_ref<const std::string&>(), json);
            !skipped.empty()) {
            report(skipped);
        }
    }
    if (malformed > PlotLimits::max_reported_lines) {
        warnings.push_back(fmt::format("{}: {} more malformed lines skipped", file,
                                       malformed - PlotLimits::max_reported_lines));
    }
    return curves.finish();
}

Result<RunCurves> read_run_curves(const std::filesystem::path& run_dir,
                                  std::vector<std::string>& warnings) {
    const auto path = run_dir / metrics_name;
    auto read = util::read_regular_file(path, PlotLimits::max_metrics_bytes);
    using Status = util::BoundedRead::Status;
    switch (read.status) {
    case Status::ok:
        break;
    case Status::missing:
        return fail(ErrorCode::not_found, fmt::format("{} does not exist", path.string()),
                    "the job has written no metrics yet; 'dljob status' shows its state");
    case Status::not_regular:
        return fail(ErrorCode::config_invalid,
                    fmt::format("{} is {}, not a file", path.string(), read.what),
                    "dltrain writes metrics.jsonl as a plain file; remove what is there");
    case Status::too_large:
        return fail(ErrorCode::config_invalid,
                    fmt::format("{} is larger than the {} MiB plot reads", path.string(),
                                PlotLimits::max_metrics_bytes / (1024 * 1024)),
                    "a larger `display` interval in the network config writes fewer train lines");
    case Status::unreadable:
        return fail(ErrorCode::io, fmt::format("cannot read {}: {}", path.string(), read.what));
    }
    return parse_metrics(read.content, path.string(), warnings);
}

std::string sparkline(const std::vector<CurvePoint>& curve, std::size_t width) {
    static constexpr std::array<std::string_view, 8> blocks{"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    if (curve.empty() || width == 0) {
        return {};
    }
    const auto first = curve.front().iter;
    const auto span = static_cast<double>(curve.back().iter - first);
    std::vector<double> sums(width, 0);
    std::vector<std::size_t> counts(width, 0);
    for (const auto& point : curve) {
        std::size_t column = 0;
        if (span > 0) {
            column = static_cast<std::size_t>(static_cast<double>(point.iter - first) / span *
                                              static_cast<double>(width));
        }
        column = std::min(column, width - 1);
        sums[column] += point.value;
        ++counts[column];
    }
    std::vector<double> columns(width, 0);
    for (std::size_t i = 0; i < width; ++i) {
        columns[i] = counts[i] > 0 ? sums[i] / static_cast<double>(counts[i])
                     : i > 0       ? columns[i - 1]
                                   : 0;
    }
    const auto [low, high] = std::minmax_element(columns.begin(), columns.end());
    const double range = *high - *low;
    std::string line;
    for (const double value : columns) {
        std::size_t level = 0;
        if (range > 0) {
            level = static_cast<std::size_t>(std::lround((value - *low) / range * 7));
        }
        line += blocks[std::min<std::size_t>(level, 7)];
    }
    return line;
}

std::string default_gnuplot() {
    const char* program = std::getenv("DLJOB_GNUPLOT"); // NOLINT(concurrency-mt-unsafe)
    return program != nullptr && *program != '\0' ? program : "gnuplot";
}

Result<std::vector<PlotSeries>> plot_series(JobContext& context,
                                            const std::vector<std::string>& ids,
                                            std::vector<std::string>& warnings) {
    std::vector<PlotSeries> series;
    std::vector<std::filesystem::path> run_dirs;
    for (const auto& id : ids) {
        auto job = context.find_job(id);
        if (!job) {
            return fail(job.error());
        }
        auto chain = chain_of(context, *job);
        if (!chain) {
            return fail(chain.error());
        }
        if (chain->front().run_dir.empty()) {
            // Not the current directory's metrics.jsonl, which an empty path would name.
            return fail(ErrorCode::not_found, fmt::format("job {} has no run directory", id));
        }
        const auto run_dir = std::filesystem::path(chain->front().run_dir).lexically_normal();
        if (std::find(run_dirs.begin(), run_dirs.end(), run_dir) != run_dirs.end()) {
            continue; // another attempt of a chain already drawn
        }
        auto curves = read_run_curves(run_dir, warnings);
        if (!curves) {
            Error error = curves.error();
            error.message = fmt::format("job {}: {}", id, error.message);
            return fail(error);
        }
        if (curves->train_loss.empty() && curves->test_loss.empty()) {
            return fail(ErrorCode::not_found,
                        fmt::format("job {} has no train or test metrics yet in {}", id,
                                    (run_dir / metrics_name).string()),
                        "the training writes them every `display` iterations; "
                        "'dljob status' shows its state");
        }
        PlotSeries one;
        one.label = chain_label(*chain);
        for (const auto& attempt : *chain) {
            one.job_ids.push_back(attempt.id);
        }
        one.curves = std::move(*curves);
        series.push_back(std::move(one));
        run_dirs.push_back(run_dir);
    }
    add_differences(series, run_dirs);
    return series;
}

std::string text_summary(const std::vector<PlotSeries>& series) {
    constexpr std::size_t width = 40;
    std::string text;
    for (const auto& s : series) {
        // A name is the submitter's text: no escape sequence of it reaches the terminal.
        std::string label = s.label;
        std::replace_if(
            label.begin(), label.end(),
            [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; }, ' ');
        text += label + "\n";
        const auto& train = s.curves.train_loss;
        const auto& loss_curve = train.empty() ? s.curves.test_loss : train;
        text += fmt::format("  {} {} loss, iter {}..{}, last {:.4g}", sparkline(loss_curve, width),
                            train.empty() ? "test" : "training", loss_curve.front().iter,
                            loss_curve.back().iter, loss_curve.back().value);
        const auto& accuracy = s.curves.test_accuracy;
        if (!accuracy.empty()) {
            // The first of equal bests: when the training got there.
            const auto best = std::max_element(
                accuracy.begin(), accuracy.end(),
                [](const CurvePoint& a, const CurvePoint& b) { return a.value < b.value; });
            text += fmt::format(", best test accuracy {:.4f} at iter {}", best->value, best->iter);
        }
        text += "\n";
    }
    return text;
}

Result<void> plot_jobs(JobContext& context, const PlotOptions& options, std::ostream& out,
                       std::ostream& err) {
    if (options.ids.empty()) {
        return fail(ErrorCode::usage, "plot needs at least one job id");
    }
    std::optional<ImageKind> kind;
    std::string gnuplot = options.gnuplot.empty() ? default_gnuplot() : options.gnuplot;
    if (options.format == PlotFormat::image) {
        // Checked before any job is read, so a typo costs nothing.
        auto chosen = image_kind(options.output);
        if (!chosen) {
            return fail(chosen.error());
        }
        kind = *chosen;
        if (!program_exists(gnuplot)) {
            return fail(
                ErrorCode::not_found,
                fmt::format("gnuplot not found ('{}'): dljob plot draws images with it", gnuplot),
                "install it (Debian: apt-get install gnuplot-nox; on a cluster: module "
                "load gnuplot), set DLJOB_GNUPLOT to its path, or use --format text");
        }
    }
    std::vector<std::string> warnings;
    auto series = plot_series(context, options.ids, warnings);
    for (const auto& warning : warnings) {
        err << "dljob: warning: " << warning << '\n';
    }
    if (!series) {
        return fail(series.error());
    }
    if (options.format == PlotFormat::text) {
        out << text_summary(*series);
        return {};
    }

    ProcessRequest request;
    // --default-settings: no ~/.gnuplot or system gnuplotrc, so every user gets the same image.
    request.argv = {gnuplot, "--default-settings"};
    request.stdin_data = gnuplot_script(*series, options.axis, *kind);
    request.timeout = options.timeout;
    auto ran = context.runner().run(request);
    if (!ran) {
        return fail(ErrorCode::not_found,
                    fmt::format("cannot run gnuplot: {}", ran.error().message),
                    "install gnuplot-nox or set DLJOB_GNUPLOT to its path");
    }
    if (ran->timed_out) {
        return fail(
            ErrorCode::timeout,
            fmt::format("gnuplot took longer than {} s",
                        std::chrono::duration_cast<std::chrono::seconds>(options.timeout).count()));
    }
    if (ran->exit_code != 0 || !looks_like(*kind, ran->out)) {
        // gnuplot echoes the offending command first and ends with the error itself.
        std::string_view last_line = ran->err;
        while (!last_line.empty() && std::isspace(static_cast<unsigned char>(last_line.back()))) {
            last_line.remove_suffix(1);
        }
        if (const auto newline = last_line.rfind('\n'); newline != std::string_view::npos) {
            last_line.remove_prefix(newline + 1);
        }
        while (!last_line.empty() && std::isspace(static_cast<unsigned char>(last_line.front()))) {
            last_line.remove_prefix(1);
        }
        return fail(ErrorCode::internal,
                    fmt::format("gnuplot exited {} without an image{}{}", ran->exit_code,
                                last_line.empty() ? "" : ": ",
                                shorten(std::string(last_line), 300)),
                    "this is a bug in dljob plot: please report it with the message; "
                    "--format text still works");
    }
    if (auto error = util::write_file_atomic(options.output, ran->out); !error.empty()) {
        return fail(ErrorCode::io, error);
    }
    out << fmt::format("wrote {} ({} curve{})\n", options.output.string(), series->size(),
                       series->size() == 1 ? "" : "s");
    return {};
}

} // namespace dljob::app
