#pragma once
// The config readers without the value check (validate_config): load_config reads a prototxt,
// applies --solver overrides to it as YAML, and only then checks the result, once.

#include <dl/config.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace dl {

/// A YAML config as written (types and known keys checked), with `overrides` applied.
NetConfig read_yaml_config(const std::string& text, const std::filesystem::path& file_for_messages,
                           const std::vector<std::string>& overrides);
/// A Caffe net or solver prototxt (fields dltrain supports checked), as written.
NetConfig read_prototxt(const std::filesystem::path& file);

} // namespace dl
