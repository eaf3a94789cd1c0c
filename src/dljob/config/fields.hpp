#pragma once
// Typed reads from a YamlNode with errors that name file:line:column, the key path, what was
// expected and the valid choices. Shared by the recipe and site-profile loaders.

#include <dljob/adapters/yaml_document.hpp>
#include <dljob/domain/resources.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/walltime.hpp>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dljob::config {

/// "file:line:column: key: message", ErrorCode::config_invalid.
Unexpected invalid(const SourceMark& mark, std::string_view key_path, std::string_view message,
                   std::string hint = {});

/// "a.b" from "a" and "b" ("b" alone when `parent` is empty).
std::string join_key(std::string_view parent, std::string_view key);

/// The node must be a mapping whose keys are all in `allowed`; an unknown key is an error that
/// lists the valid ones (and suggests the closest).
Result<void> check_mapping(const YamlNode& node, std::string_view key_path,
                           std::initializer_list<std::string_view> allowed);
Result<void> check_mapping(const YamlNode& node, std::string_view key_path,
                           const std::vector<std::string>& allowed);

Result<std::string> read_string(const YamlNode& node, std::string_view key_path);
/// A string matching `pattern` (ECMAScript, whole match); `describe` says what is allowed.
Result<std::string> read_word(const YamlNode& node, std::string_view key_path,
                              std::string_view pattern, std::string_view describe);
Result<int> read_int(const YamlNode& node, std::string_view key_path, int min, int max);
/// The same for whole numbers past an int's range (a random seed up to 2^32 - 1).
Result<long long> read_whole(const YamlNode& node, std::string_view key_path, long long min,
                             long long max);
Result<double> read_number(const YamlNode& node, std::string_view key_path, double min, double max);
/// A finite number within bounds that may be open or absent (std::nullopt: none that way).
struct NumberBounds {
    std::optional<double> min;
    bool min_open = false;
    std::optional<double> max;
    bool max_open = false;
};
Result<double> read_number(const YamlNode& node, std::string_view key_path,
                           const NumberBounds& bounds);
Result<bool> read_bool(const YamlNode& node, std::string_view key_path);
Result<std::string> read_choice(const YamlNode& node, std::string_view key_path,
                                const std::vector<std::string>& choices);
Result<Walltime> read_walltime(const YamlNode& node, std::string_view key_path);
Result<MemorySize> read_memory(const YamlNode& node, std::string_view key_path);
/// A list of strings; a single scalar is not accepted (say `[x]`).
Result<std::vector<std::string>> read_string_list(const YamlNode& node, std::string_view key_path);
/// Same, each item matching `pattern`.
Result<std::vector<std::string>> read_word_list(const YamlNode& node, std::string_view key_path,
                                                std::string_view pattern,
                                                std::string_view describe);

/// Patterns shared by loaders.
inline constexpr std::string_view name_pattern = "[A-Za-z0-9][A-Za-z0-9._-]{0,63}";
inline constexpr std::string_view name_describe =
    "1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit";
inline constexpr std::string_view module_pattern = "[A-Za-z0-9][A-Za-z0-9._/+-]{0,127}";
inline constexpr std::string_view module_describe =
    "a module name of A-Z a-z 0-9 . _ / + -, like cudatoolkit/5.5.51-1.0402.9594.3.1";
inline constexpr std::string_view option_value_pattern = "[A-Za-z0-9._,:=+-]{1,128}";
inline constexpr std::string_view option_value_describe = "1 to 128 of A-Z a-z 0-9 . _ , : = + -";

} // namespace dljob::config
