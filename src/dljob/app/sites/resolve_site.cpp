#include <dljob/app/sites/resolve_site.hpp>

#include <fnmatch.h>
#include <unistd.h>

#include <array>

namespace dljob::app {

std::string this_hostname() {
    std::array<char, 256> host{};
    if (::gethostname(host.data(), host.size() - 1) != 0) {
        return {};
    }
    return host.data();
}

std::string detect_site(const SiteCatalog& catalog, const std::string& hostname) {
    for (const auto& entry : catalog.list()) {
        if (!entry.error.empty()) {
            continue;
        }
        for (const auto& pattern : entry.hostnames) {
            if (::fnmatch(pattern.c_str(), hostname.c_str(), FNM_CASEFOLD) == 0) {
                return entry.name;
            }
        }
    }
    return default_site_name;
}

Result<SiteProfile> resolve_site(const SiteChoice& choice, const SiteCatalog& catalog) {
    if (!choice.site.empty()) {
        return catalog.load(choice.site);
    }
    return catalog.load(
        detect_site(catalog, choice.hostname.empty() ? this_hostname() : choice.hostname));
}

Result<SiteProfile> resolve_site(const SiteChoice& choice) {
    return resolve_site(choice, SiteCatalog{choice.site_files, choice.machine});
}

} // namespace dljob::app
