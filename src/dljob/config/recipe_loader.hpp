#pragma once
// Recipe files -> Recipe values, validated before anything else happens.

#include <dljob/adapters/yaml_document.hpp>
#include <dljob/domain/recipe.hpp>
#include <dljob/domain/result.hpp>

#include <array>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace dljob::config {

/// Loads and validates a recipe file. `train.config` is resolved relative to the recipe's folder.
/// `overrides` (`--set KEY=VALUE`, recipe_overrides.hpp) are applied to the document first, so
/// they are validated like the file's own values.
Result<Recipe> load_recipe(const std::filesystem::path& path,
                           const std::vector<std::string>& overrides = {});

/// Validates an already parsed document; `base_dir` resolves relative paths.
Result<Recipe> recipe_from_yaml(const YamlNode& root, const std::filesystem::path& base_dir);

/// True when the document looks like a recipe (has `train:` or `command:`), for `dljob validate`.
bool looks_like_recipe(const YamlNode& root);

} // namespace dljob::config
