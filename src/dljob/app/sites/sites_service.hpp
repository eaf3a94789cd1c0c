#pragma once
// `dljob sites` and `dljob sites show NAME`.

#include <dljob/app/sites/site_catalog.hpp>

#include <string>

namespace dljob::app {

/// One line per site: name, origin, description (or the load error).
std::string format_site_list(const std::vector<SiteEntry>& sites);

/// The resolved profile as YAML-like text, each value followed by where it came from.
Result<std::string> describe_site(const SiteCatalog& catalog, const std::string& name);

} // namespace dljob::app
