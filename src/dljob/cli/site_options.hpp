#pragma once
// The site options, declared once for every verb that takes them.

#include <dljob/app/sites/resolve_site.hpp>

#include <CLI/App.hpp>

namespace dljob::cli {

enum class SiteOptionSet {
    site_only,      // --site, --site-file
    with_partition, // and --partition, --account
};

/// `site_help`: what --site means for this verb when not given.
void add_site_options(CLI::App& command, app::SiteChoice& choice, SiteOptionSet set,
                      const char* site_help = "Site profile name (default: by hostname, else "
                                              "local)");

} // namespace dljob::cli
