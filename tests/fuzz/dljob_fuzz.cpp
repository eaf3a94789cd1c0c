// libFuzzer targets for what dljob reads from users: a recipe (loaded, its overrides-free
// resolution against two bundled sites, its job script rendered, as `dljob render` does) and a
// site profile (loaded, then the bundled MNIST recipe rendered on it). dljob's library answers a
// bad file with an error value; any exception out of it is a bug (the CLI would print "this is a
// bug in dljob"), so none is caught here and libFuzzer reports it with the sanitizers' findings.
//
//   DL_FUZZ_TARGET=recipe build-fuzz/tests/fuzz/dljob_fuzz CORPUS_DIR -max_total_time=60

#include <dljob/app/jobs/render_service.hpp>
#include <dljob/config/site_loader.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;

fs::path g_dir;
bool g_recipe = false;

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

} // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
    const char* name = std::getenv("DL_FUZZ_TARGET");
    const std::string target = name == nullptr ? "" : name;
    if (target != "recipe" && target != "site") {
        std::fprintf(stderr, "dljob_fuzz: set DL_FUZZ_TARGET to recipe or site\n");
        std::exit(2);
    }
    g_recipe = target == "recipe";
    g_dir = fs::temp_directory_path() / ("dljob_fuzz." + std::to_string(::getpid()));
    fs::create_directories(g_dir);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (g_recipe) {
        recipe_target(data, size);
    } else {
        site_target(data, size);
    }
    return 0;
}
