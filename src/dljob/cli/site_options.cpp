#include <dljob/cli/site_options.hpp>

#include <CLI/CLI.hpp>

namespace dljob::cli {

void add_site_options(CLI::App& command, app::SiteChoice& choice, SiteOptionSet set,
                      const char* site_help) {
    command.add_option("--site", choice.site, site_help);
    command.add_option("--site-file", choice.site_files,
                       "Also read this site profile (repeatable)");
    if (set == SiteOptionSet::with_partition) {
        command.add_option("--partition", choice.partition,
                           "Partition of the site (default: the site's default)");
        command.add_option("--account", choice.account, "Scheduler account");
    }
}

} // namespace dljob::cli
