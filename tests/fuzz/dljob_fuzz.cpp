// libFuzzer targets for what dljob reads from users: a recipe (loaded, its overrides-free
// resolution against two bundled sites, its job script rendered, as `dljob render` does), a
// site profile (loaded, then the bundled MNIST recipe rendered on it) and a run directory's
// metrics.jsonl (as `dljob status` and `plot` read it). dljob's library answers a
// bad file with an error value; any exception out of it is a bug (the CLI would print "this is a
// bug in dljob"), so none is caught here and libFuzzer reports it with the sanitizers' findings.
//
//   DL_FUZZ_TARGET=recipe build-fuzz/tests/fuzz/dljob_fuzz CORPUS_DIR -max_total_time=60

#include <dljob/app/jobs/render_service.hpp>
#include <dljob/app/reports/plot.hpp>
#include <dljob/app/reports/status.hpp>
#include <dljob/config/site_loader.hpp>
#include <dljob/domain/job_state.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace fs = std::filesystem;

fs::path g_dir;
std::string g_target;

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

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    const char* name = std::getenv("DL_FUZZ_TARGET");
    g_target = name == nullptr ? "" : name;
    if (g_target != "recipe" && g_target != "site" && g_target != "metrics") {
        std::fprintf(stderr, "dljob_fuzz: set DL_FUZZ_TARGET to recipe, site or metrics\n");
        std::exit(2);
    }
    g_dir = fs::temp_directory_path() / ("dljob_fuzz." + std::to_string(::getpid()));
    fs::create_directories(g_dir);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (g_target == "recipe") {
        recipe_target(data, size);
    } else if (g_target == "site") {
        site_target(data, size);
    } else {
        metrics_target(data, size);
    }
    return 0;
}
