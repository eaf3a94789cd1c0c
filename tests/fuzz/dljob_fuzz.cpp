// libFuzzer targets for what dljob reads from users: a recipe (loaded, its overrides-free
// resolution against two bundled sites, its job script rendered, as `dljob render` does), its
// `--set` overrides, a
// site profile (loaded, then the bundled MNIST recipe rendered on it) and a run directory's
// metrics.jsonl (as `dljob status` and `plot` read it), a packed dataset's metadata, and what
// the schedulers' commands print (each adapter's submit, poll, find and cancel). dljob's
// library answers a bad file with an error value; any exception out of it is a bug (the CLI would
// print "this is a bug in dljob"), so none is caught here and libFuzzer reports it with the
// sanitizers' findings.
//
//   DL_FUZZ_TARGET=recipe build-fuzz/tests/fuzz/dljob_fuzz CORPUS_DIR -max_total_time=60
//   DL_FUZZ_SEEDS=DIR build-fuzz/tests/fuzz/dljob_fuzz   (writes packs' metadata as seeds)

#include "fuzz_support.hpp"

#include <dljob/app/data/pack.hpp>
#include <dljob/app/jobs/render_service.hpp>
#include <dljob/app/reports/plot.hpp>
#include <dljob/app/reports/status.hpp>
#include <dljob/config/site_loader.hpp>
#include <dljob/domain/dataset.hpp>
#include <dljob/domain/job_state.hpp>
#include <dljob/domain/process_runner.hpp>
#include <dljob/domain/scheduler.hpp>
#include <dljob/schedulers/scheduler_table.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;

fs::path g_dir;
std::string g_target;

std::string read_text(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string shard_name(int shard) {
    std::string digits = std::to_string(shard);
    return "data-" + std::string(5 - std::min<std::size_t>(digits.size(), 5), '0') + digits +
           ".tar.zst";
}

std::string fmt_class(int i) {
    return "class" + std::to_string(i % 3);
}

fs::path write_input(const char* name, const std::uint8_t* data, std::size_t size) {
    const fs::path file = g_dir / name;
    std::ofstream(file, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    return file;
}

dljob::app::RenderOptions options_for(const fs::path& recipe) {
    dljob::app::RenderOptions options;
    options.recipe = recipe;
    options.run_dir = g_dir / "run";
    options.dltrain = "dltrain";
    options.dljob = "dljob";
    options.hostname = "fuzz-host";
    return options;
}

void recipe_target(const std::uint8_t* data, std::size_t size) {
    auto options = options_for(write_input("recipe.yaml", data, size));
    for (const char* site : {"bigred2", "slurm"}) {
        options.site = site;
        (void)dljob::app::render_recipe(options);
    }
}

// Lines of `--set KEY=VALUE` (submit, render, sweep) applied to the bundled MNIST recipe.
void overrides_target(const std::uint8_t* data, std::size_t size) {
    auto options = options_for(fs::path(DLJOB_SOURCE_DIR) / "recipes" / "mnist.yaml");
    options.overrides = fuzz::lines_of(data, size, 64);
    options.site = "bigred2";
    (void)dljob::app::render_recipe(options);
}

void site_target(const std::uint8_t* data, std::size_t size) {
    const fs::path file = write_input("site.yaml", data, size);
    const auto profile = dljob::config::load_site_profile(file);
    if (!profile) {
        return;
    }
    auto options = options_for(fs::path(DLJOB_SOURCE_DIR) / "recipes" / "mnist.yaml");
    options.site_files = {file};
    options.site = profile->name;
    (void)dljob::app::render_recipe(options);
}

// A run directory's metrics.jsonl (dltrain's, or what a full disk or a killed job left of it) as
// `dljob status` and `dljob plot` read it.
void metrics_target(const std::uint8_t* data, std::size_t size) {
    const fs::path run = g_dir / "run";
    fs::create_directories(run);
    write_input("run/metrics.jsonl", data, size);
    if (const auto metrics = dljob::app::read_metrics(run.string())) {
        for (const auto state : {dljob::JobState::running, dljob::JobState::completed}) {
            (void)dljob::app::progress_text(*metrics, state);
        }
    }
    if (size > 0) {
        (void)dljob::app::read_metrics(run.string(), static_cast<std::int64_t>(size / 2));
    }
    std::vector<std::string> warnings;
    const auto curves = dljob::app::parse_metrics(
        std::string_view(reinterpret_cast<const char*>(data), size), "metrics.jsonl", warnings);
    for (const auto* curve : {&curves.train_loss, &curves.test_loss, &curves.test_accuracy}) {
        (void)dljob::app::sparkline(*curve, 30);
    }
}

// A packed dataset's metadata (`dljob pack`'s manifest.json, index.tsv and chunks.tsv lines,
// member paths and link targets), as stage-data and audit-data read a dataset someone copied.
void dataset_target(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    (void)dljob::parse_manifest(text, "manifest.json");
    std::uint64_t number = 0;
    for (const std::string& line : fuzz::lines_of(data, size, 256)) {
        ++number;
        (void)dljob::parse_index_line(line, "index.tsv", number, 1);
        (void)dljob::parse_index_line(line, "index.tsv", number, 2);
        (void)dljob::parse_chunk_line(line, "chunks.tsv", number);
        (void)dljob::normalize_member_path(line);
        const std::size_t tab = line.find('\t');
        if (tab != std::string::npos) {
            (void)dljob::check_symlink_target(std::string_view(line).substr(0, tab),
                                              std::string_view(line).substr(tab + 1));
        }
    }
}

// Every command a scheduler adapter runs answers with the fuzzer's bytes (byte 0 its exit
// status): what a site's sbatch, qstat -f, showq --xml, sqjobs or yarn may print.
class ReplayRunner final : public dljob::ProcessRunner {
public:
    ReplayRunner(int exit_code, std::string out) : m_exit_code(exit_code), m_out(std::move(out)) {}
    dljob::Result<dljob::ProcessResult> run(const dljob::ProcessRequest& /*request*/) override {
        dljob::ProcessResult result;
        result.exit_code = m_exit_code;
        result.out = m_out;
        return result;
    }
    dljob::Result<int> spawn_detached(const dljob::DetachedRequest& /*request*/) override {
        return dljob::fail(dljob::ErrorCode::internal, "the fuzz runner starts nothing");
    }
    bool group_alive(int /*pgid*/) override { return false; }
    bool signal_group(int /*pgid*/, int /*signal*/) override { return false; }

private:
    int m_exit_code;
    std::string m_out;
};

// Each family but local (which starts real processes): submit, poll, find, cancel.
void scheduler_target(const std::uint8_t* data, std::size_t size) {
    if (size == 0) {
        return;
    }
    ReplayRunner runner(data[0] % 4 == 3 ? 1 : 0,
                        std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
    const fs::path run = g_dir / "run";
    fs::create_directories(run);
    for (const std::string& family : dljob::schedulers::scheduler_families()) {
        if (family == "local") {
            continue;
        }
        auto scheduler = dljob::schedulers::make_scheduler(family, runner);
        if (!scheduler) {
            continue;
        }
        dljob::SubmitRequest request;
        request.script_path = (run / "job.sh").string();
        request.run_dir = run.string();
        request.name = "fuzz";
        request.token = "dljob-0123456789abcdef";
        request.submit_argv = {"submit", request.script_path};
        (void)(*scheduler)->submit(request);
        std::vector<dljob::JobRef> jobs;
        for (const char* id : {"42", "179.server", "881196", "application_1500000000000_0007"}) {
            jobs.push_back(dljob::JobRef{id, "", run.string(), request.token});
        }
        (void)(*scheduler)->poll(jobs);
        (void)(*scheduler)->find_by_token(jobs.front());
        (void)(*scheduler)->cancel(jobs.front());
    }
}

// Seeds for the dataset target (and dl_fuzz's pack target): two packs of a small tree, one
// plain, one zstd-compressed in shards.
void write_seeds(const fs::path& out) {
    const fs::path source = g_dir / "tree";
    for (int i = 0; i < 6; ++i) {
        fs::create_directories(source / fmt_class(i));
        std::ofstream(source / fmt_class(i) / ("image" + std::to_string(i) + ".png"))
            << std::string(static_cast<std::size_t>(3000 + i), static_cast<char>('a' + i));
    }
    fs::create_directories(out / "dataset");
    fs::create_directories(out / "pack");
    int seed = 0;
    for (const char* compression : {"none", "zstd"}) {
        dljob::app::PackRequest request;
        request.source = source.string();
        request.output = (g_dir / compression).string();
        request.compression = compression;
        request.shard_bytes = std::string(compression) == "zstd" ? 10000 : 0;
        if (!dljob::app::pack_dataset(request, {})) {
            std::fprintf(stderr, "dljob_fuzz: packing the seed tree failed\n");
            std::exit(1);
        }
        // The dataset target's: each metadata file. dl_fuzz's pack target's: the whole pack,
        // its files in the order that target splits them.
        std::string whole;
        const fs::path pack = g_dir / compression;
        for (const char* file : {"manifest.json", "index.tsv", "chunks.tsv"}) {
            std::string text;
            if (fs::exists(pack / file)) {
                fs::copy_file(pack / file, out / "dataset" / (std::to_string(seed++) + "-" + file));
                text = read_text(pack / file);
            }
            whole += text + "\n@@@@\n";
        }
        if (fs::exists(pack / "data.tar")) {
            whole += read_text(pack / "data.tar");
        }
        for (int shard = 0; fs::exists(pack / shard_name(shard)); ++shard) {
            whole += (shard > 0 ? "\n@@@@\n" : "") + read_text(pack / shard_name(shard));
        }
        std::ofstream(out / "pack" / compression, std::ios::binary) << whole;
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    fuzz::start("dljob_fuzz", g_dir, write_seeds);
    const char* name = std::getenv("DL_FUZZ_TARGET");
    g_target = name == nullptr ? "" : name;
    if (g_target != "recipe" && g_target != "site" && g_target != "metrics" &&
        g_target != "dataset" && g_target != "scheduler" && g_target != "overrides") {
        std::fprintf(stderr, "dljob_fuzz: set DL_FUZZ_TARGET to recipe, site, metrics, dataset, "
                             "scheduler or overrides\n");
        std::exit(2);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (g_target == "recipe") {
        recipe_target(data, size);
    } else if (g_target == "site") {
        site_target(data, size);
    } else if (g_target == "metrics") {
        metrics_target(data, size);
    } else if (g_target == "overrides") {
        overrides_target(data, size);
    } else if (g_target == "dataset") {
        dataset_target(data, size);
    } else {
        scheduler_target(data, size);
    }
    return 0;
}
