#pragma once
// `dljob validate FILE...`: checks recipes and site profiles without rendering anything.

#include <filesystem>
#include <string>
#include <vector>

namespace dljob::app {

struct ValidationResult {
    std::filesystem::path file;
    std::string kind; // "recipe", "site profile", "unknown"
    bool ok = false;
    std::string message; // the error (file:line:column: key: ...), empty when ok
    std::string hint;
    std::vector<std::string> notes; // what could not be checked here (a recipe's network config)
};

/// Validates each file; a file is a site profile when it has `partitions:`, else a recipe,
/// whose network config (train recipes) the dltrain next to dljob checks too.
std::vector<ValidationResult> validate_files(const std::vector<std::filesystem::path>& files);

} // namespace dljob::app
