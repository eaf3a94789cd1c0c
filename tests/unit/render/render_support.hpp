#pragma once
// Shared by the render tests: the built-in sites and recipes, a fixed request, and helpers that
// run rendered scripts with stand-in scheduler, launcher and module commands.

#include <dljob/adapters/template_mustache.hpp>
#include <dljob/config/recipe_loader.hpp>
#include <dljob/config/site_loader.hpp>
#include <dljob/render/job_script.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dljob::test {

inline const std::filesystem::path source_dir{DLJOB_SOURCE_DIR};

inline const std::vector<std::string>& builtin_sites() {
    static const std::vector<std::string> sites{"bigred2",   "sharcnet", "helios",
                                                "graham",    "beluga",   "narval",
                                                "bigred200", "slurm",    "local"};
    return sites;
}

inline const std::vector<std::string>& builtin_recipes() {
    static const std::vector<std::string> recipes{"mnist", "fashion-mnist", "pytorch-mnist"};
    return recipes;
}

/// The machine the `local` site's `auto` values describe in these tests, whatever machine runs
/// them: a workstation of 64 cores, 256G and 8 GPUs, so the golden files do not depend on it.
inline MachineFacts golden_machine() {
    MachineFacts machine;
    machine.cores = 64;
    machine.memory = MemorySize::from_mib(256 * 1024);
    machine.gpus = 8;
    machine.cores_found = "64 CPU(s) (the tests' machine)";
    machine.memory_found = "256G (the tests' machine)";
    machine.gpus_found = "8 GPU(s) (the tests' machine)";
    return machine;
}

inline SiteProfile load_site(const std::string& name) {
    auto site = config::load_site_profile(source_dir / "site-profiles" / (name + ".yaml"));
    if (!site) {
        ADD_FAILURE() << site.error().message;
        return {};
    }
    if (config::describes_machine(*site)) {
        config::describe_machine(*site, golden_machine());
    }
    return *site;
}

inline Recipe load_builtin_recipe(const std::string& name) {
    auto recipe = config::load_recipe(source_dir / "recipes" / (name + ".yaml"));
    if (!recipe) {
        ADD_FAILURE() << recipe.error().message;
        return {};
    }
    return *recipe;
}

/// The request the golden files are rendered from: fixed run dir, token and binaries, and the
/// network config path made independent of where the checkout lives.
inline RenderRequest golden_request(const std::string& site_name, const std::string& recipe_name) {
    RenderRequest request;
    request.site = load_site(site_name);
    request.recipe = load_builtin_recipe(recipe_name);
    if (request.recipe.kind == RecipeKind::train) {
        request.recipe.train.config = "/opt/dljob/recipes/networks/lenet.yaml";
    }
    request.recipe.source_file = "recipes/" + recipe_name + ".yaml";
    request.recipe.origins.clear();
    const Partition* partition = request.site.find_partition("");
    if (partition != nullptr && partition->account_required) {
        request.account = "def-golden";
    }
    request.job_name = request.recipe.name;
    request.job_token = "golden-token";
    request.run_dir = "/scratch/dljob/runs/golden-run";
    request.dltrain_binary = "/opt/dljob/bin/dltrain";
    request.dljob_binary = "/opt/dljob/bin/dljob";
    return request;
}

inline MustacheTemplates builtin_templates() {
    return MustacheTemplates{source_dir / "templates"};
}

inline std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

inline void write_text(const std::filesystem::path& path, const std::string& text,
                       bool executable = false) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    if (executable) {
        std::filesystem::permissions(path, std::filesystem::perms::owner_all |
                                               std::filesystem::perms::group_read |
                                               std::filesystem::perms::others_read);
    }
}

/// Parses `#SBATCH`/`#PBS` lines of the directive block (right after the shebang) back into
/// their text, the way the schedulers read them: they stop at the first line that is not a
/// comment or blank. Lines with the prefix later in the script are returned too, so a test
/// can assert there are none (smuggled directives).
struct ParsedDirectives {
    std::vector<std::string> header; // in the block schedulers read
    std::vector<std::string> stray;  // prefix lines after the first command
};

inline ParsedDirectives parse_directives(const std::string& script, const std::string& prefix) {
    ParsedDirectives out;
    std::istringstream in(script);
    std::string line;
    bool in_header = true;
    while (std::getline(in, line)) {
        const bool is_directive = line.rfind(prefix + " ", 0) == 0;
        if (is_directive) {
            (in_header ? out.header : out.stray).push_back(line.substr(prefix.size() + 1));
            continue;
        }
        if (!line.empty() && line[0] != '#') {
            in_header = false;
        }
    }
    return out;
}

} // namespace dljob::test
