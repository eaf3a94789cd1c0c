#pragma once
// `dljob submit RECIPE --set train.max_iter=200`: dotted keys into the recipe document, applied
// before validation, so an override is checked exactly like the same value written in the file
// (unknown keys with the closest valid one, types, ranges). Errors point at `--set:N:COLUMN`:
// the N-th --set argument and the column in it.

#include <dljob/adapters/yaml_document.hpp>
#include <dljob/domain/result.hpp>

#include <string>
#include <vector>

namespace dljob::config {

/// Applies `KEY=VALUE` assignments in order (a later one wins). KEY is a dotted path of mapping
/// keys (`resources.memory`, `train.max_iter`); missing mappings on the way are created. VALUE is
/// read as YAML, so `[cuda, cudnn]` is a list and `"4"` a string; an empty VALUE is null.
Result<void> apply_recipe_overrides(YamlNode& root, const std::vector<std::string>& assignments);

/// Puts `value` (with its own marks) at the dotted `key` of the document, as an override would;
/// mappings created on the way, and errors about the key, are marked `mark`.
Result<void> set_recipe_value(YamlNode& root, const std::string& key, YamlNode value,
                              const SourceMark& mark);

} // namespace dljob::config
