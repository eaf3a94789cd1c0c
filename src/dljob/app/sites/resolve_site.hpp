#pragma once
// Which site a command runs for, decided one way for every verb (submit, render, shell,
// stage-data, doctor): --site, else the profile whose host-name globs match this host, else
// `local`. Each profile file is parsed at most once per command.

#include <dljob/app/sites/site_catalog.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/site_profile.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace dljob::app {

/// The site options every site-using verb takes (cli/site_options declares them once).
struct SiteChoice {
    std::string site;     // --site; empty: detected by host name, else local
    std::string hostname; // the host `site` is detected for; empty: this machine's (tests set it)
    std::vector<std::filesystem::path> site_files; // --site-file, repeatable
    std::string partition;                         // --partition; empty: the site's default
    std::string account;                           // --account
    /// The machine the `local` site's `auto` values describe; nullptr: this one (tests give
    /// another).
    const MachineProbe* machine = nullptr;
};

/// This machine's host name.
std::string this_hostname();

/// The site to use when none is named: the first (by name) whose hostname globs match
/// `hostname` (case-insensitive, as host names are), else "local". Profiles that do not load
/// are skipped here; naming one with --site shows its error.
std::string detect_site(const SiteCatalog& catalog, const std::string& hostname);

/// The profile `choice` names, or detects; its errors name the file, line and key.
Result<SiteProfile> resolve_site(const SiteChoice& choice);
Result<SiteProfile> resolve_site(const SiteChoice& choice, const SiteCatalog& catalog);

} // namespace dljob::app
