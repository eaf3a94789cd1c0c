#pragma once
// Where site profiles and templates come from, and loading a site by name. Shared by render,
// validate, sites and submit.
//
// Search order for a site NAME (a later source overrides an earlier one of the same name):
//   1. built-in profiles: $DLJOB_SITE_PROFILES_DIR, else <prefix>/share/dljob/site-profiles next
//      to the installed binary, else <source tree>/site-profiles (compiled in as DLJOB_SOURCE_DIR);
//   2. the user's profiles: $XDG_CONFIG_HOME/dljob/sites/*.yaml, else ~/.config/dljob/sites;
//   3. files given with --site-file (the profile's own `name:` is its name).
// Templates: $DLJOB_TEMPLATES_DIR, else <prefix>/share/dljob/templates, else <source>/templates.

#include <dljob/domain/machine.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/site_profile.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace dljob::app {

std::filesystem::path builtin_site_profiles_dir();
std::filesystem::path user_site_profiles_dir();
std::filesystem::path templates_dir();

/// The site used when none is named.
inline constexpr const char* default_site_name = "local";

struct SiteEntry {
    std::string name;
    std::filesystem::path file;
    std::string origin; // "built-in", "user", "--site-file"
    std::string description;
    std::vector<std::string> hostnames; // the profile's host name globs (site detection)
    std::string error;                  // not empty when the file does not load
};

class SiteCatalog {
public:
    /// `site_files`: profiles given with --site-file. `machine`: the machine a profile's `auto`
    /// values describe (the `local` site); nullptr: this one (adapters/machine_linux).
    explicit SiteCatalog(std::vector<std::filesystem::path> site_files = {},
                         const MachineProbe* machine = nullptr);

    /// Every known site, sorted by name, the winning source for each name.
    [[nodiscard]] std::vector<SiteEntry> list() const;
    /// Loads and validates the named site; not_found lists the known names. A --site-file
    /// that does not load fails with its own error, whichever site is named. Only the profiles
    /// that can carry the name are read: the --site-file ones, then NAME.yaml in the user's and
    /// the built-in folders. A profile's `auto` node values are filled from the machine.
    [[nodiscard]] Result<SiteProfile> load(const std::string& name) const;

private:
    // Each file is parsed at most once per catalog: a command that detects its site by host
    // name (which reads every profile) and then loads it reads no file twice.
    [[nodiscard]] const Result<SiteProfile>& parse(const std::filesystem::path& file) const;
    [[nodiscard]] std::vector<std::string> known_names() const;

    std::vector<std::filesystem::path> m_site_files;
    const MachineProbe* m_machine;
    mutable std::map<std::filesystem::path, Result<SiteProfile>> m_parsed;
};

} // namespace dljob::app
