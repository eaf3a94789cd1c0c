#pragma once
// The config readers without the value check (validate_config): load_config reads a prototxt,
// applies --solver overrides to it as YAML, and only then checks the result, once.

#include <dl/config.hpp>

#include <filesystem>
#include <string>
#include <variant>
#include <vector>

namespace dl {

/// "a, b, c", for messages that list the valid choices.
inline std::string join_list(const std::vector<std::string>& items) {
    std::string text;
    for (const auto& item : items) {
        text += (text.empty() ? "" : ", ") + item;
    }
    return text;
}

/// A YAML config as written (types and known keys checked).
NetConfig read_yaml_config(const std::string& text, const std::filesystem::path& file_for_messages);
/// A Caffe net or solver prototxt (fields dltrain supports checked), as written.
NetConfig read_prototxt(const std::filesystem::path& file);

/// The SolverConfig member a solver key (solver_key_rules) is read into; monostate for
/// batch_size, which is the train-phase Data layers'.
using SolverMember = std::variant<std::monostate, float SolverConfig::*, int SolverConfig::*,
                                  unsigned SolverConfig::*, bool SolverConfig::*,
                                  std::string SolverConfig::*, std::vector<int> SolverConfig::*>;
SolverMember solver_member(const std::string& key);

/// `dltrain train --solver KEY=VALUE`, applied to a config as read, whatever its format: the value
/// is read by the key's rule into the solver (or, for batch_size, into every train-phase Data
/// layer) and marked as the command line's, so validate_config's messages name the assignment.
/// An unknown key is dl::Error(usage) listing the valid ones; a value of the wrong type is
/// dl::Error(config).
void apply_overrides(NetConfig& config, const std::vector<std::string>& overrides);

} // namespace dl
