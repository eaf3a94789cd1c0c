// `dljob plot`: jobs in a real SQLite store, run directories with metrics.jsonl written here,
// the real gnuplot (scripts/setup.sh installs gnuplot-nox). The SVG is read back and its curves
// compared with the metrics: point counts, and every point where one affine map of the data
// puts it (gnuplot's axis ranges are its own, so the test fits the map from two points).

#include "support/run_process.hpp"

#include <dljob/adapters/process_boost.hpp>
#include <dljob/adapters/sqlite_job_store.hpp>
#include <dljob/app/reports/plot.hpp>
#include <dljob/app/reports/plot_gnuplot.hpp>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

namespace dljob::app {
namespace {

// ---- reading gnuplot's SVG back ------------------------------------------------------------

struct SvgPoint {
    double x = 0;
    double y = 0;
};

/// One `<g id="gnuplot_plot_N[a|b]">`: one plot item, in the order of the plot command.
struct SvgItem {
    std::string id;
    std::vector<SvgPoint> path;  // every M/L vertex of its paths
    std::vector<SvgPoint> marks; // the point symbols (<use ... translate(x,y)>)
    std::string text;            // its legend text, empty for a notitle curve
};

std::string unescape_xml(std::string text) {
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}}) {
        for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + 1)) {
            text.replace(at, from.size(), to);
        }
    }
    return text;
}

std::vector<SvgItem> svg_items(const std::string& svg) {
    std::vector<SvgItem> items;
    const std::string open = "<g id=\"gnuplot_plot_";
    for (auto at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1)) {
        SvgItem item;
        const auto id_end = svg.find('"', at + 7);
        item.id = svg.substr(at + 7, id_end - at - 7);
        // The item's own content: up to the </g> that closes its <g>.
        std::size_t position = svg.find('>', at) + 1;
        int depth = 1;
        std::size_t end = position;
        while (depth > 0) {
            const auto next_open = svg.find("<g", position);
            const auto next_close = svg.find("</g>", position);
            if (next_close == std::string::npos) {
                break;
            }
            if (next_open != std::string::npos && next_open < next_close) {
                ++depth;
                position = next_open + 2;
            } else {
                --depth;
                position = next_close + 4;
                end = next_close;
            }
        }
        const std::string body = svg.substr(at, end - at);
        static const std::regex path_re(R"(<path[^>]* d='([^']*)')");
        static const std::regex vertex_re(R"([ML](-?[0-9.]+),(-?[0-9.]+))");
        static const std::regex use_re(R"(<use[^>]*translate\((-?[0-9.]+),(-?[0-9.]+)\))");
        static const std::regex text_re(R"(<text>([^<]*)</text>)");
        for (std::sregex_iterator p(body.begin(), body.end(), path_re), e; p != e; ++p) {
            const std::string d = (*p)[1];
            for (std::sregex_iterator v(d.begin(), d.end(), vertex_re); v != e; ++v) {
                item.path.push_back({std::stod((*v)[1]), std::stod((*v)[2])});
            }
        }
        for (std::sregex_iterator u(body.begin(), body.end(), use_re), e; u != e; ++u) {
            item.marks.push_back({std::stod((*u)[1]), std::stod((*u)[2])});
        }
        std::smatch text;
        if (std::regex_search(body, text, text_re)) {
            item.text = unescape_xml(text[1]);
        }
        items.push_back(std::move(item));
    }
    return items;
}

const SvgItem* find_item(const std::vector<SvgItem>& items, const std::string& id) {
    const auto it =
        std::find_if(items.begin(), items.end(), [&](const SvgItem& i) { return i.id == id; });
    return it == items.end() ? nullptr : &*it;
}

/// Data (x, value) pairs and where the SVG drew them, all in one panel.
struct Placed {
    std::vector<std::pair<double, double>> data;
    std::vector<SvgPoint> drawn;
};

/// Every drawn point lies where one map x' = a x + b, y' = c y + d of its data puts it, with
/// a > 0 and c < 0 (larger values higher up). The map is fitted on the extreme points.
void expect_affine(const Placed& placed) {
    ASSERT_EQ(placed.data.size(), placed.drawn.size());
    ASSERT_GE(placed.data.size(), 2U);
    const auto fit = [&](auto get_data, auto get_drawn) -> std::pair<double, double> {
        std::size_t lo = 0;
        std::size_t hi = 0;
        for (std::size_t i = 0; i < placed.data.size(); ++i) {
            lo = get_data(placed.data[i]) < get_data(placed.data[lo]) ? i : lo;
            hi = get_data(placed.data[i]) > get_data(placed.data[hi]) ? i : hi;
        }
        const double scale = (get_drawn(placed.drawn[hi]) - get_drawn(placed.drawn[lo])) /
                             (get_data(placed.data[hi]) - get_data(placed.data[lo]));
        return {scale, get_drawn(placed.drawn[lo]) - scale * get_data(placed.data[lo])};
    };
    const auto [ax, bx] =
        fit([](const auto& d) { return d.first; }, [](const SvgPoint& p) { return p.x; });
    const auto [ay, by] =
        fit([](const auto& d) { return d.second; }, [](const SvgPoint& p) { return p.y; });
    EXPECT_GT(ax, 0);
    EXPECT_LT(ay, 0);
    for (std::size_t i = 0; i < placed.data.size(); ++i) {
        EXPECT_NEAR(placed.drawn[i].x, ax * placed.data[i].first + bx, 0.05) << "point " << i;
        EXPECT_NEAR(placed.drawn[i].y, ay * placed.data[i].second + by, 0.05) << "point " << i;
    }
}

// ---- fixture -------------------------------------------------------------------------------

std::string train_line(std::int64_t iter, double loss, double elapsed) {
    return fmt::format(R"({{"type":"train","iter":{},"max_iter":1000,"loss":{},"lr":0.01,)"
                       R"("images_per_s":500,"data_wait_fraction":0,"elapsed_s":{}}})"
                       "\n",
                       iter, loss, elapsed);
}
std::string test_line(std::int64_t iter, double accuracy, double loss) {
    return fmt::format(R"({{"type":"test","iter":{},"max_iter":1000,"accuracy":{},"loss":{}}})"
                       "\n",
                       iter, accuracy, loss);
}
std::string start_line(std::int64_t iter) {
    return fmt::format(R"({{"type":"start","iter":{},"max_iter":1000,"resumed_from":"",)"
                       R"("threads":2,"backend":"cpu","batch_size":64}})"
                       "\n",
                       iter);
}
std::string final_line(std::int64_t iter, double wall) {
    return fmt::format(R"({{"type":"final","iter":{},"max_iter":1000,"status":"completed",)"
                       R"("test_accuracy":0.9,"test_loss":0.3,"wall_s":{}}})"
                       "\n",
                       iter, wall);
}

// A resumed chain: the first process got to iteration 200 and was killed without a final line
// (its last elapsed_s, 20 s, is its length); the second resumed from the checkpoint at 100,
// redid 100 and 200 with other values and finished at 300 after 25 s.
const std::string chain_metrics =
    start_line(0) + train_line(0, 2.0, 1) + test_line(0, 0.1, 2.1) + train_line(100, 1.5, 10) +
    test_line(100, 0.5, 1.4) + train_line(200, 1.2, 20) + start_line(100) +
    test_line(100, 0.55, 1.35) + train_line(100, 1.45, 2) + train_line(200, 1.1, 12) +
    train_line(300, 0.9, 22) + test_line(300, 0.8, 0.95) + final_line(300, 25);

class Plot : public ::testing::Test {
protected:
    void SetUp() override {
        dir = std::filesystem::temp_directory_path() /
              ("dljob-plot-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
        auto store = adapters::SqliteJobStore::open(dir / "jobs.db");
        ASSERT_TRUE(store) << store.error().message;
        context.emplace(std::move(store.value()), std::make_unique<adapters::BoostProcessRunner>());
    }
    void TearDown() override { std::filesystem::remove_all(dir); }

    /// A job row whose run directory is dir/<run> (created), continuing `continues`.
    std::int64_t add_job(const std::string& name, const std::string& run,
                         std::int64_t continues = 0, int attempt = 1) {
        std::filesystem::create_directories(dir / run);
        Job job;
        job.token = fmt::format("tok{}{}", run, attempt);
        job.name = name;
        job.site = "local";
        job.scheduler = "local";
        job.run_dir = (dir / run).string();
        job.continues = continues;
        job.attempt = attempt;
        job.created_at = 1'700'000'000;
        auto created = context->store().create(job);
        EXPECT_TRUE(created) << created.error().message;
        return created ? created->id : 0;
    }

    void write(const std::string& relative, const std::string& content) {
        std::ofstream(dir / relative, std::ios::binary) << content;
    }

    /// Runs plot; the error when it fails.
    std::optional<Error> plot(PlotOptions options) {
        auto done = plot_jobs(*context, options, out, err);
        return done ? std::nullopt : std::optional<Error>(done.error());
    }

    std::string read(const std::filesystem::path& path) {
        std::ifstream in(path, std::ios::binary);
        return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    }

    /// Files in dir other than the store and the run directories: a plot's output or leftovers.
    std::vector<std::string> loose_files() {
        std::vector<std::string> names;
        for (const auto& entry : std::filesystem::directory_iterator(dir)) {
            const auto name = entry.path().filename().string();
            if (entry.is_regular_file() && name.rfind("jobs.db", 0) != 0) {
                names.push_back(name);
            }
        }
        return names;
    }

    std::filesystem::path dir;
    std::optional<JobContext> context;
    std::ostringstream out;
    std::ostringstream err;
};

// ---- parsing metrics.jsonl -----------------------------------------------------------------

TEST(PlotMetrics, AResumeReplacesTheIterationsItRedoesAndTimeContinues) {
    std::vector<std::string> warnings;
    const auto curves = parse_metrics(chain_metrics, "m", warnings);
    EXPECT_TRUE(warnings.empty()) << warnings.front();
    EXPECT_EQ(curves.processes, 2);
    ASSERT_EQ(curves.train_loss.size(), 4U);
    const std::vector<std::tuple<std::int64_t, double, double>> expected{
        {0, 1, 2.0}, {100, 22, 1.45}, {200, 32, 1.1}, {300, 42, 0.9}};
    for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(curves.train_loss[i].iter, std::get<0>(expected[i]));
        EXPECT_DOUBLE_EQ(curves.train_loss[i].time_s, std::get<1>(expected[i])) << i;
        EXPECT_DOUBLE_EQ(curves.train_loss[i].value, std::get<2>(expected[i])) << i;
    }
    // The test at 100 is the resumed process's (it dropped the first one's from 100 on).
    ASSERT_EQ(curves.test_accuracy.size(), 3U);
    EXPECT_DOUBLE_EQ(curves.test_accuracy[1].value, 0.55);
    // A test takes the time of the train line of its iteration in its process (100: 20 + 2),
    // else of the latest one (300: the test came after the train line of 300).
    EXPECT_DOUBLE_EQ(curves.test_accuracy[0].time_s, 1);
    EXPECT_DOUBLE_EQ(curves.test_accuracy[1].time_s, 22);
    EXPECT_DOUBLE_EQ(curves.test_accuracy[2].time_s, 42);
    EXPECT_DOUBLE_EQ(curves.test_loss[2].value, 0.95);
}

TEST(PlotMetrics, AResumedProcessStillBehindTheOldOneDropsWhatItWillRedo) {
    // The first process got to 300, the checkpoint it resumed from was at 100, and the second
    // is now at 100: the old 200 and 300 belong to a history that was rolled back.
    const std::string text = start_line(0) + train_line(0, 2.0, 1) + train_line(100, 1.5, 2) +
                             train_line(200, 1.2, 3) + test_line(200, 0.6, 1.1) +
                             train_line(300, 1.0, 4) + start_line(100) + train_line(100, 1.4, 1);
    std::vector<std::string> warnings;
    const auto curves = parse_metrics(text, "m", warnings);
    ASSERT_EQ(curves.train_loss.size(), 2U);
    EXPECT_EQ(curves.train_loss.back().iter, 100);
    EXPECT_DOUBLE_EQ(curves.train_loss.back().value, 1.4);
    EXPECT_DOUBLE_EQ(curves.train_loss.back().time_s, 5); // 4 s of the first process, then 1
    EXPECT_TRUE(curves.test_loss.empty());
    EXPECT_TRUE(curves.test_accuracy.empty());
}

TEST(PlotMetrics, MalformedLinesAreSkippedAndNamedByLine) {
    // Line by line; the malformed are 2-9.
    const std::vector<std::string> lines{
        train_line(0, 2.0, 1),
        "not json at all\n",
        R"({"type":"train","loss":1.0})"
        "\n", // no iter
        "[1,2,3]\n",
        std::string("\xff\xfe\x00garbage\n", 11),
        R"({"type":"train","iter":-5,"loss":1})"
        "\n",
        std::string(PlotLimits::max_line_bytes + 1, '{') + "\n",
        R"({"type":"train","iter":100,"loss":{"a":[[[[1]]]]}})"
        "\n", // nested: dropped while parsing, so no loss
        R"({"no":"type"})"
        "\n",
        R"({"type":"checkpointed","iter":100})"
        "\n", // a type with nothing to draw
        train_line(200, 1.0, 9),
        R"({"type":"train","iter":300,"lo)", // unterminated: still being written
    };
    std::string text;
    for (const auto& line : lines) {
        text += line;
    }
    std::vector<std::string> warnings;
    const auto curves = parse_metrics(text, "run/metrics.jsonl", warnings);
    ASSERT_EQ(curves.train_loss.size(), 2U);
    EXPECT_EQ(curves.train_loss[1].iter, 200);
    ASSERT_EQ(warnings.size(), PlotLimits::max_reported_lines + 1);
    EXPECT_EQ(warnings[0], "run/metrics.jsonl:2: not a JSON object");
    EXPECT_EQ(warnings[1], "run/metrics.jsonl:3: train line without a valid \"iter\" and \"loss\"");
    EXPECT_EQ(warnings[2], "run/metrics.jsonl:4: not a JSON object");
    EXPECT_EQ(warnings[4], "run/metrics.jsonl:6: train line without a valid \"iter\" and \"loss\"");
    EXPECT_EQ(warnings.back(), "run/metrics.jsonl: 3 more malformed lines skipped");
}

// ---- the text format -----------------------------------------------------------------------

std::vector<CurvePoint> points(const std::vector<double>& values, std::int64_t step = 1) {
    std::vector<CurvePoint> curve;
    for (std::size_t i = 0; i < values.size(); ++i) {
        curve.push_back({static_cast<std::int64_t>(i) * step, 0, values[i]});
    }
    return curve;
}

TEST(PlotSparkline, EightLevelsFromLowestToHighest) {
    EXPECT_EQ(sparkline(points({0, 1, 2, 3, 4, 5, 6, 7}), 8), "▁▂▃▄▅▆▇█");
    EXPECT_EQ(sparkline(points({7, 6, 5, 4, 3, 2, 1, 0}), 8), "█▇▆▅▄▃▂▁");
    EXPECT_EQ(sparkline(points({3, 3, 3}), 4), "▁▁▁▁");
}

TEST(PlotSparkline, ColumnsAreBucketedByIterationAndGapsRepeat) {
    // 16 points into 8 columns: each column the mean of two (0.5, 2.5, ...).
    std::vector<double> values;
    for (int i = 0; i < 16; ++i) {
        values.push_back(i);
    }
    EXPECT_EQ(sparkline(points(values), 8), "▁▂▃▄▅▆▇█");
    // Iterations 0, 100, 700 over 8 columns: 0 in column 0, 100 in column 1, 700 in column 7;
    // columns 2-6 repeat column 1.
    std::vector<CurvePoint> sparse{{0, 0, 7}, {100, 0, 0}, {700, 0, 7}};
    EXPECT_EQ(sparkline(sparse, 8), "█▁▁▁▁▁▁█");
}

TEST_F(Plot, TextFormatSummarisesEachJob) {
    const auto a = add_job("alpha", "a");
    std::string metrics;
    for (int i = 0; i < 40; ++i) {
        metrics += train_line(i * 10, 40 - i, i);
    }
    metrics += test_line(100, 0.7, 1) + test_line(200, 0.9, 1) + test_line(390, 0.9, 1);
    write("a/metrics.jsonl", metrics);
    PlotOptions options;
    options.ids = {std::to_string(a)};
    options.format = PlotFormat::text;
    options.gnuplot = (dir / "no-gnuplot").string(); // text needs none
    ASSERT_FALSE(plot(options)) << plot(options)->message;
    // 40 points, one per column, 40 down to 1.
    EXPECT_EQ(out.str(), fmt::format("job {} alpha\n"
                                     "  ███▇▇▇▇▇▇▆▆▆▆▆▅▅▅▅▅▅▄▄▄▄▄▄▃▃▃▃▃▂▂▂▂▂▂▁▁▁ training loss, "
                                     "iter 0..390, last 1, best test accuracy 0.9000 at iter 200\n",
                                     a));
    EXPECT_TRUE(err.str().empty()) << err.str();
}

// ---- images --------------------------------------------------------------------------------

TEST_F(Plot, TwoJobsAreTwoCurvesWhereTheirMetricsPutThem) {
    const auto a = add_job("alpha", "a");
    const auto b = add_job("beta", "b");
    std::string ma;
    std::string mb;
    for (int i = 0; i <= 10; ++i) {
        ma += train_line(i * 50, 2.3 - 0.2 * i, i);
        mb += train_line(i * 40, 2.0 - 0.1 * i + (i % 2) * 0.05, i);
    }
    ma += test_line(0, 0.1, 2.2) + test_line(250, 0.6, 1.2) + test_line(500, 0.85, 0.5);
    mb += test_line(200, 0.5, 1.6) + test_line(400, 0.7, 1.1);
    write("a/metrics.jsonl", start_line(0) + ma + final_line(500, 11));
    write("b/metrics.jsonl", start_line(0) + mb);
    write("a/recipe.yaml", "name: alpha\ntrain:\n  lr: 0.1\n  max_iter: 500\n");
    write("b/recipe.yaml",
          "name: beta\ntrain:\n  lr: 0.1\n  max_iter: 500\n"
          "# ---- dljob submit --set, applied in this order over the values above:\n"
          "# --set train.lr=0.05\n");
    PlotOptions options;
    options.ids = {std::to_string(a), std::to_string(b)};
    options.output = dir / "curves.svg";
    ASSERT_FALSE(plot(options)) << plot(options)->message;
    EXPECT_EQ(out.str(), fmt::format("wrote {} (2 curves)\n", options.output.string()));

    const auto items = svg_items(read(options.output));
    // Top panel: train a, test a, train b, test b, legend a, legend b, two style entries.
    // Bottom panel: accuracy a, accuracy b.
    ASSERT_EQ(items.size(), 10U);
    std::vector<std::string> parsed_warnings;
    const auto ca = parse_metrics(ma, "a", parsed_warnings);
    const auto cb = parse_metrics(mb, "b", parsed_warnings);
    Placed loss;
    Placed accuracy;
    const auto place = [](Placed& placed, const std::vector<CurvePoint>& curve,
                          const std::vector<SvgPoint>& drawn) {
        ASSERT_EQ(curve.size(), drawn.size());
        for (std::size_t i = 0; i < curve.size(); ++i) {
            placed.data.emplace_back(static_cast<double>(curve[i].iter), curve[i].value);
            placed.drawn.push_back(drawn[i]);
        }
    };
    const auto* train_a = find_item(items, "gnuplot_plot_1a");
    const auto* test_a = find_item(items, "gnuplot_plot_2a");
    const auto* train_b = find_item(items, "gnuplot_plot_3a");
    const auto* test_b = find_item(items, "gnuplot_plot_4a");
    ASSERT_TRUE(train_a && test_a && train_b && test_b);
    EXPECT_EQ(train_a->path.size(), 11U);
    EXPECT_EQ(test_a->marks.size(), 3U);
    place(loss, ca.train_loss, train_a->path);
    place(loss, ca.test_loss, test_a->marks);
    place(loss, cb.train_loss, train_b->path);
    place(loss, cb.test_loss, test_b->marks);
    expect_affine(loss);
    place(accuracy, ca.test_accuracy, find_item(items, "gnuplot_plot_1b")->marks);
    place(accuracy, cb.test_accuracy, find_item(items, "gnuplot_plot_2b")->marks);
    expect_affine(accuracy);

    // The legend names each job and the recipe value that differs.
    EXPECT_EQ(find_item(items, "gnuplot_plot_5a")->text,
              fmt::format("job {} alpha train.lr=0.1", a));
    EXPECT_EQ(find_item(items, "gnuplot_plot_6a")->text,
              fmt::format("job {} beta train.lr=0.05", b));
    EXPECT_EQ(find_item(items, "gnuplot_plot_7a")->text, "training loss");
    EXPECT_EQ(find_item(items, "gnuplot_plot_8a")->text, "test loss");
    EXPECT_EQ(loose_files(), std::vector<std::string>{"curves.svg"});
}

TEST_F(Plot, LabelsNameTheRecipeValuesThatDiffer) {
    const auto a = add_job("alpha", "a");
    const auto b = add_job("beta", "b");
    const auto c = add_job("gamma", "c");
    for (const auto* run : {"a", "b", "c"}) {
        write(std::string(run) + "/metrics.jsonl", train_line(0, 2, 1));
    }
    write("a/recipe.yaml", "name: alpha\ntrain:\n  lr: 0.1\n  batch: 64\nseed: 1\n");
    write("b/recipe.yaml", "name: beta\ntrain:\n  lr: 0.1\nseed: 2\n");
    // c has none: it neither shows values nor makes every value look different.
    std::vector<std::string> warnings;
    auto series =
        plot_series(*context, {std::to_string(a), std::to_string(b), std::to_string(c)}, warnings);
    ASSERT_TRUE(series) << series.error().message;
    ASSERT_EQ(series->size(), 3U);
    EXPECT_EQ((*series)[0].label, fmt::format("job {} alpha seed=1 train.batch=64", a));
    EXPECT_EQ((*series)[1].label, fmt::format("job {} beta seed=2 train.batch=(unset)", b));
    EXPECT_EQ((*series)[2].label, fmt::format("job {} gamma", c));
}

TEST_F(Plot, AContinuedChainIsOneCurveAgainstIterationOrTime) {
    const auto first = add_job("chain", "c");
    const auto second = add_job("chain", "c", first, 2);
    const auto third = add_job("chain", "c", second, 3); // pending: nothing written yet
    write("c/metrics.jsonl", chain_metrics);
    std::vector<std::string> warnings;
    const auto curves = parse_metrics(chain_metrics, "c", warnings);

    for (const auto axis : {PlotAxis::iteration, PlotAxis::time}) {
        SCOPED_TRACE(axis == PlotAxis::time ? "time" : "iteration");
        out.str("");
        PlotOptions options;
        // Any attempt names the whole chain (the middle one: both directions), and the
        // others add nothing.
        options.ids = {std::to_string(second), std::to_string(first), std::to_string(third)};
        options.output = dir / "chain.svg";
        options.axis = axis;
        ASSERT_FALSE(plot(options)) << plot(options)->message;
        EXPECT_EQ(out.str(), fmt::format("wrote {} (1 curve)\n", options.output.string()));
        const auto items = svg_items(read(options.output));
        // train, test, one legend entry, two style entries; accuracy.
        ASSERT_EQ(items.size(), 6U);
        EXPECT_EQ(items[2].text, fmt::format("job {}+{}+{} chain", first, second, third));
        Placed loss;
        const auto& train = items[0].path;
        ASSERT_EQ(train.size(), curves.train_loss.size());
        for (std::size_t i = 0; i < train.size(); ++i) {
            const auto& p = curves.train_loss[i];
            loss.data.emplace_back(axis == PlotAxis::time ? p.time_s : static_cast<double>(p.iter),
                                   p.value);
            loss.drawn.push_back(train[i]);
        }
        expect_affine(loss);
    }
}

TEST_F(Plot, PngByItsExtension) {
    const auto a = add_job("alpha", "a");
    write("a/metrics.jsonl", train_line(0, 2, 1) + train_line(100, 1, 2));
    PlotOptions options;
    options.ids = {std::to_string(a)};
    options.output = dir / "curves.PNG";
    ASSERT_FALSE(plot(options)) << plot(options)->message;
    const auto png = read(options.output);
    ASSERT_GT(png.size(), 24U);
    EXPECT_EQ(png.substr(0, 8), "\x89PNG\r\n\x1a\n");
    // IHDR: big-endian width and height at bytes 16 and 20.
    const auto be32 = [&](std::size_t at) {
        return (static_cast<unsigned char>(png[at]) << 24U) |
               (static_cast<unsigned char>(png[at + 1]) << 16U) |
               (static_cast<unsigned char>(png[at + 2]) << 8U) |
               static_cast<unsigned char>(png[at + 3]);
    };
    EXPECT_EQ(be32(16), 1000U);
    EXPECT_EQ(be32(20), 760U);
}

TEST_F(Plot, AHostileJobNameIsOnlyText) {
    const std::string name = "a'b\"c\n<x>&`touch PWNED` @m \\ ";
    const auto a = add_job(name, "a");
    write("a/metrics.jsonl", train_line(0, 2, 1) + train_line(100, 1, 2));
    PlotOptions options;
    options.ids = {std::to_string(a)};
    options.output = dir / "curves.svg";
    ASSERT_FALSE(plot(options)) << plot(options)->message;
    const auto items = svg_items(read(options.output));
    ASSERT_GE(items.size(), 2U);
    EXPECT_EQ(items[1].text, fmt::format("job {} a'b\"c <x>&`touch PWNED` @m \\ ", a));
    EXPECT_FALSE(std::filesystem::exists("PWNED"));
    EXPECT_FALSE(std::filesystem::exists(dir / "PWNED"));
}

TEST_F(Plot, TextLabelsCarryNoControlCharacters) {
    const auto a = add_job("evil\x1b]0;title\x07\nname", "a");
    write("a/metrics.jsonl", train_line(0, 2, 1));
    PlotOptions options;
    options.ids = {std::to_string(a)};
    options.format = PlotFormat::text;
    ASSERT_FALSE(plot(options));
    EXPECT_EQ(out.str().substr(0, out.str().find('\n') + 1),
              fmt::format("job {} evil ]0;title  name\n", a));
}

TEST(PlotGnuplot, StringsAreSingleQuotedLiterals) {
    EXPECT_EQ(gnuplot_string("it's"), "'it''s'");
    EXPECT_EQ(gnuplot_string("a\nb\rc\td"), "'a b c d'");
    EXPECT_EQ(gnuplot_string("`x` @y $z \\n"), "'`x` @y $z \\n'");
    EXPECT_EQ(gnuplot_string("caf\xc3\xa9 \xff"), "'caf\xc3\xa9 ?'");
    EXPECT_EQ(gnuplot_string("\xe2\x82"), "'?"
                                          "?'"); // a cut sequence
}

// ---- refusals: a clear error, and no file ---------------------------------------------------

TEST_F(Plot, AnUnknownJobIsNotFound) {
    PlotOptions options;
    options.ids = {"999"};
    options.output = dir / "curves.svg";
    const auto error = plot(options);
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, ErrorCode::not_found);
    EXPECT_EQ(error->message, "no job 999 in the job store");
    EXPECT_TRUE(loose_files().empty());
}

TEST_F(Plot, AJobWithoutMetricsIsNotFound) {
    const auto a = add_job("alpha", "a");
    const auto b = add_job("beta", "b");
    write("b/metrics.jsonl", start_line(0));
    PlotOptions options;
    options.output = dir / "curves.svg";
    options.ids = {std::to_string(a)};
    auto error = plot(options);
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, ErrorCode::not_found);
    EXPECT_NE(error->message.find("metrics.jsonl does not exist"), std::string::npos);
    options.ids = {std::to_string(b)};
    error = plot(options);
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, ErrorCode::not_found);
    EXPECT_NE(error->message.find("no train or test metrics yet"), std::string::npos);
    EXPECT_TRUE(loose_files().empty());
}

TEST_F(Plot, AnUnknownExtensionIsAUsageError) {
    const auto a = add_job("alpha", "a");
    write("a/metrics.jsonl", train_line(0, 2, 1));
    PlotOptions options;
    options.ids = {std::to_string(a)};
    options.output = dir / "curves.jpg";
    const auto error = plot(options);
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, ErrorCode::usage);
    EXPECT_NE(error->message.find("unknown image format '.jpg' (known: .png, .svg)"),
              std::string::npos);
    EXPECT_TRUE(loose_files().empty());
}

TEST_F(Plot, MissingGnuplotSaysWhatToInstall) {
    const auto a = add_job("alpha", "a");
    write("a/metrics.jsonl", train_line(0, 2, 1));
    PlotOptions options;
    options.ids = {std::to_string(a)};
    options.output = dir / "curves.svg";
    options.gnuplot = (dir / "no-gnuplot").string();
    const auto error = plot(options);
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, ErrorCode::not_found);
    EXPECT_NE(error->hint.find("gnuplot-nox"), std::string::npos);
    EXPECT_TRUE(loose_files().empty());
}

TEST_F(Plot, AFailingGnuplotLeavesTheOldImage) {
    const auto a = add_job("alpha", "a");
    write("a/metrics.jsonl", train_line(0, 2, 1));
    // Half an image, then a failure: none of it may reach curves.svg.
    write("fake-gnuplot", "#!/bin/sh\ncat >/dev/null\nprintf '<svg>'\n"
                          "printf 'plot $x\\n     ^\\n  line 3: boom\\n' >&2\n"
                          "exit 1\n");
    std::filesystem::permissions(dir / "fake-gnuplot", std::filesystem::perms::owner_all);
    write("curves.svg", "old");
    PlotOptions options;
    options.ids = {std::to_string(a)};
    options.output = dir / "curves.svg";
    options.gnuplot = (dir / "fake-gnuplot").string();
    const auto error = plot(options);
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, ErrorCode::internal);
    // The error is gnuplot's last line, not the command it echoes first.
    EXPECT_EQ(error->message, "gnuplot exited 1 without an image: line 3: boom");
    EXPECT_EQ(read(dir / "curves.svg"), "old");
    auto files = loose_files();
    std::sort(files.begin(), files.end());
    EXPECT_EQ(files, (std::vector<std::string>{"curves.svg", "fake-gnuplot"}));
}

TEST_F(Plot, GnuplotOutputThatIsNoImageOrTooLateIsNotWritten) {
    const auto a = add_job("alpha", "a");
    write("a/metrics.jsonl", train_line(0, 2, 1));
    write("cut-gnuplot", "#!/bin/sh\ncat >/dev/null\nprintf '<svg width=1>'\nexit 0\n");
    write("slow-gnuplot", "#!/bin/sh\ncat >/dev/null\nexec sleep 30\n");
    for (const auto* fake : {"cut-gnuplot", "slow-gnuplot"}) {
        std::filesystem::permissions(dir / fake, std::filesystem::perms::owner_all);
    }
    PlotOptions options;
    options.ids = {std::to_string(a)};
    options.output = dir / "curves.svg";
    options.gnuplot = (dir / "cut-gnuplot").string();
    auto error = plot(options);
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, ErrorCode::internal);
    options.gnuplot = (dir / "slow-gnuplot").string();
    options.timeout = std::chrono::milliseconds(300);
    error = plot(options);
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, ErrorCode::timeout);
    EXPECT_FALSE(std::filesystem::exists(options.output));
}

TEST_F(Plot, AHugeMetricsFileIsRefusedUnread) {
    const auto a = add_job("alpha", "a");
    write("a/metrics.jsonl", "");
    // Sparse: costs no disk, and would cost the size in memory if it were read.
    std::filesystem::resize_file(dir / "a" / "metrics.jsonl", PlotLimits::max_metrics_bytes + 1);
    PlotOptions options;
    options.ids = {std::to_string(a)};
    options.output = dir / "curves.svg";
    const auto error = plot(options);
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, ErrorCode::config_invalid);
    EXPECT_NE(error->message.find("larger than the 64 MiB plot reads"), std::string::npos)
        << error->message;
    EXPECT_TRUE(loose_files().empty());
}

TEST_F(Plot, AFifoInsteadOfMetricsIsRefusedWithoutWaiting) {
    const auto a = add_job("alpha", "a");
    ASSERT_EQ(::mkfifo((dir / "a" / "metrics.jsonl").c_str(), 0600), 0);
    PlotOptions options;
    options.ids = {std::to_string(a)};
    options.format = PlotFormat::text;
    const auto error = plot(options);
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, ErrorCode::config_invalid);
    EXPECT_NE(error->message.find("is a FIFO (named pipe), not a file"), std::string::npos)
        << error->message;
}

TEST_F(Plot, MalformedLinesAreReportedAndTheRestIsDrawn) {
    const auto a = add_job("alpha", "a");
    write("a/metrics.jsonl", train_line(0, 2, 1) + "garbage\n" + train_line(100, 1, 2));
    PlotOptions options;
    options.ids = {std::to_string(a)};
    options.format = PlotFormat::text;
    ASSERT_FALSE(plot(options));
    EXPECT_EQ(err.str(), fmt::format("dljob: warning: {}:2: not a JSON object\n",
                                     (dir / "a" / "metrics.jsonl").string()));
    EXPECT_NE(out.str().find("iter 0..100, last 1"), std::string::npos) << out.str();
}

// ---- through the binary ---------------------------------------------------------------------

TEST_F(Plot, TheVerbMapsErrorsToExitCodes) {
    const auto a = add_job("alpha", "a");
    write("a/metrics.jsonl", train_line(0, 2, 1) + train_line(100, 1, 2));
    const std::string env = fmt::format("cd {} && XDG_CONFIG_HOME=/nonexistent-dljob-test "
                                        "DLJOB_STORE={}/jobs.db ",
                                        dir.string(), dir.string());
    const auto text =
        test::run_shell(env + DLJOB_BINARY + " plot " + std::to_string(a) + " --format text");
    EXPECT_EQ(text.exit_code, 0) << text.output;
    EXPECT_NE(text.output.find("job 1 alpha\n"), std::string::npos) << text.output;

    const auto unknown = test::run_shell(env + DLJOB_BINARY + " plot 42");
    EXPECT_EQ(unknown.exit_code, 7) << unknown.output;
    EXPECT_NE(unknown.output.find("dljob: error: no job 42 in the job store"), std::string::npos);

    const auto extension = test::run_shell(env + DLJOB_BINARY + " plot 1 -o x.gif");
    EXPECT_EQ(extension.exit_code, 2) << extension.output;

    for (const std::string flags :
         {"--x epochs", "--x 1", "--format 0", "--format text -o x.svg"}) {
        const auto usage = test::run_shell(env + DLJOB_BINARY + " plot 1 " + flags);
        EXPECT_EQ(usage.exit_code, 2) << flags << ": " << usage.output;
    }

    const auto missing =
        test::run_shell(env + "DLJOB_GNUPLOT=/nonexistent/gnuplot " + DLJOB_BINARY + " plot 1");
    EXPECT_EQ(missing.exit_code, 7) << missing.output;
    EXPECT_NE(missing.output.find("hint: install it (Debian: apt-get install gnuplot-nox"),
              std::string::npos)
        << missing.output;

    const auto drawn = test::run_shell(env + DLJOB_BINARY + " plot 1");
    EXPECT_EQ(drawn.exit_code, 0) << drawn.output;
    EXPECT_EQ(drawn.output, "wrote curves.png (1 curve)\n");
    EXPECT_TRUE(std::filesystem::is_regular_file(dir / "curves.png"));
}

} // namespace
} // namespace dljob::app
