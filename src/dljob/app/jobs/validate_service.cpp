#include <dljob/adapters/process_boost.hpp>
#include <dljob/adapters/yaml_document.hpp>
#include <dljob/app/jobs/network_check.hpp>
#include <dljob/app/jobs/render_service.hpp>
#include <dljob/app/jobs/validate_service.hpp>
#include <dljob/config/recipe_loader.hpp>
#include <dljob/config/site_loader.hpp>

namespace dljob::app {

std::vector<ValidationResult> validate_files(const std::vector<std::filesystem::path>& files) {
    adapters::BoostProcessRunner runner;
    std::vector<ValidationResult> results;
    for (const auto& file : files) {
        ValidationResult result;
        result.file = file;
        result.kind = "unknown";
        auto document = parse_yaml_file(file);
        if (!document) {
            result.message = document.error().message;
            result.hint = document.error().hint;
            results.push_back(result);
            continue;
        }
        if (config::looks_like_site_profile(*document)) {
            result.kind = "site profile";
            auto site = config::site_profile_from_yaml(*document);
            result.ok = site.has_value();
            if (!site) {
                result.message = site.error().message;
                result.hint = site.error().hint;
            } else if (std::string blocker = gpu_training_blocker(*site); !blocker.empty()) {
                result.notes.push_back(std::move(blocker));
            }
        } else {
            result.kind = "recipe";
            auto recipe = config::load_recipe(file);
            if (recipe) {
                auto network = check_network(runner, *recipe, default_dltrain_binary());
                if (network) {
                    result.notes = *network;
                } else {
                    recipe = fail(network.error());
                }
            }
            result.ok = recipe.has_value();
            if (!recipe) {
                result.message = recipe.error().message;
                result.hint = recipe.error().hint;
            }
        }
        results.push_back(result);
    }
    return results;
}

} // namespace dljob::app
