#pragma once
// Site-profile files -> SiteProfile values, validated (unknown keys, types, ranges, impossible
// combinations) with file:line:column and key path.

#include <dljob/adapters/yaml_document.hpp>
#include <dljob/domain/machine.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/site_profile.hpp>

#include <filesystem>

namespace dljob::config {

Result<SiteProfile> load_site_profile(const std::filesystem::path& path);
Result<SiteProfile> site_profile_from_yaml(const YamlNode& root);

/// Whether a node of the profile says `auto` (the `local` site): its values are the machine
/// dljob runs on, filled in by describe_machine before the profile is used.
bool describes_machine(const SiteProfile& site);
/// Fills every `auto` node value from `machine`, and says where each came from (origins).
void describe_machine(SiteProfile& site, const MachineFacts& machine);

/// True when the document looks like a site profile (has `partitions:`), for `dljob validate`.
bool looks_like_site_profile(const YamlNode& root);

} // namespace dljob::config
