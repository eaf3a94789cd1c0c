#include <dljob/adapters/machine_linux.hpp>
#include <dljob/app/sites/site_catalog.hpp>
#include <dljob/config/site_loader.hpp>
#include <dljob/schedulers/scheduler_table.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>

namespace dljob::app {
namespace {

std::filesystem::path env_path(const char* name) {
    const char* value = std::getenv(name); // NOLINT(concurrency-mt-unsafe): read at startup
    return value != nullptr && *value != '\0' ? std::filesystem::path(value)
                                              : std::filesystem::path();
}

// <prefix>/share/dljob/<what> when dljob runs from <prefix>/bin, else the source tree.
std::filesystem::path data_dir(const char* env_name, const char* what) {
    if (auto from_env = env_path(env_name); !from_env.empty()) {
        return from_env;
    }
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        auto installed = exe.parent_path().parent_path() / "share" / "dljob" / what;
        if (std::filesystem::is_directory(installed, ec)) {
            return installed;
        }
    }
    return std::filesystem::path(DLJOB_SOURCE_DIR) / what;
}

std::vector<std::filesystem::path> yaml_files(const std::filesystem::path& dir) {
    std::vector<std::filesystem::path> files;
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
        return files;
    }
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const auto ext = entry.path().extension();
        if (entry.is_regular_file(ec) && (ext == ".yaml" || ext == ".yml")) {
            files.push_back(entry.path());
        }
    }
    std::sort(files.begin(), files.end());
    return files;
}

} // namespace

std::filesystem::path builtin_site_profiles_dir() {
    return data_dir("DLJOB_SITE_PROFILES_DIR", "site-profiles");
}

std::filesystem::path templates_dir() {
    return data_dir("DLJOB_TEMPLATES_DIR", "templates");
}

std::filesystem::path user_site_profiles_dir() {
    auto xdg = env_path("XDG_CONFIG_HOME");
    if (!xdg.empty() && xdg.is_absolute()) {
        return xdg / "dljob" / "sites";
    }
    auto home = env_path("HOME");
    return (home.empty() ? std::filesystem::path(".") : home) / ".config" / "dljob" / "sites";
}

SiteCatalog::SiteCatalog(std::vector<std::filesystem::path> site_files, const MachineProbe* machine)
    : m_site_files(std::move(site_files)), m_machine(machine) {}

const Result<SiteProfile>& SiteCatalog::parse(const std::filesystem::path& file) const {
    auto found = m_parsed.find(file);
    if (found == m_parsed.end()) {
        // The loader reads the document; whether each partition's family accepts it is the
        // families' to say.
        Result<SiteProfile> site = config::load_site_profile(file);
        if (site) {
            if (auto accepted = schedulers::check_site(*site); !accepted) {
                site = fail(accepted.error());
            }
        }
        found = m_parsed.emplace(file, std::move(site)).first;
    }
    return found->second;
}

std::vector<SiteEntry> SiteCatalog::list() const {
    std::map<std::string, SiteEntry> by_name;
    const auto add = [&](const std::filesystem::path& file, const char* origin, bool by_content) {
        SiteEntry entry;
        entry.file = file;
        entry.origin = origin;
        entry.name = file.stem().string();
        const auto& site = parse(file);
        if (site) {
            entry.description = site->description;
            entry.hostnames = site->hostnames;
            if (by_content) {
                entry.name = site->name;
            }
        } else {
            entry.error = site.error().message;
        }
        by_name[entry.name] = entry;
    };
    for (const auto& file : yaml_files(builtin_site_profiles_dir())) {
        add(file, "built-in", false);
    }
    for (const auto& file : yaml_files(user_site_profiles_dir())) {
        add(file, "user", false);
    }
    for (const auto& file : m_site_files) {
        add(file, "--site-file", true);
    }
    std::vector<SiteEntry> out;
    out.reserve(by_name.size());
    for (auto& [name, entry] : by_name) {
        out.push_back(std::move(entry));
    }
    return out;
}

std::vector<std::string> SiteCatalog::known_names() const {
    std::vector<std::string> names;
    for (const auto& dir : {builtin_site_profiles_dir(), user_site_profiles_dir()}) {
        for (const auto& file : yaml_files(dir)) {
            names.push_back(file.stem().string());
        }
    }
    for (const auto& file : m_site_files) {
        if (const auto& site = parse(file)) {
            names.push_back(site->name);
        }
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
}

Result<SiteProfile> SiteCatalog::load(const std::string& name) const {
    // A file given with --site-file is one the user asked for, so its error is the answer,
    // whichever site is named: looking up the name elsewhere would end in "no site profile
    // named" with the file's real error (line, column, key) hidden. The last one naming the
    // site wins, as in list().
    const std::filesystem::path* chosen = nullptr;
    bool from_site_file = false;
    for (const auto& file : m_site_files) {
        const auto& site = parse(file);
        if (!site) {
            return fail(site.error());
        }
        if (site->name == name) {
            chosen = &file;
            from_site_file = true;
        }
    }
    std::filesystem::path by_stem;
    if (chosen == nullptr && !name.empty() && name.find('/') == std::string::npos && name != "." &&
        name != "..") {
        // The user's profiles override the built-in ones of the same name.
        for (const auto& dir : {user_site_profiles_dir(), builtin_site_profiles_dir()}) {
            // As in list(), where the later of NAME.yaml and NAME.yml wins.
            for (const char* ext : {".yml", ".yaml"}) {
                std::error_code ec;
                if (auto file = dir / (name + ext); std::filesystem::is_regular_file(file, ec)) {
                    by_stem = file;
                    break;
                }
            }
            if (!by_stem.empty()) {
                break;
            }
        }
        if (!by_stem.empty()) {
            chosen = &by_stem;
        }
    }
    if (chosen == nullptr) {
        std::string names;
        for (const auto& known : known_names()) {
            names += (names.empty() ? "" : ", ") + known;
        }
        return fail(ErrorCode::not_found, fmt::format("no site profile named '{}'", name),
                    fmt::format("known sites: {} (dljob sites; add yours under {} or pass "
                                "--site-file)",
                                names.empty() ? "none" : names, user_site_profiles_dir().string()));
    }
    const auto& site = parse(*chosen);
    if (!site) {
        return fail(site.error());
    }
    if (!from_site_file && site->name != name) {
        return fail(ErrorCode::config_invalid,
                    fmt::format("{}: the profile calls itself '{}' but its file name says '{}'",
                                chosen->string(), site->name, name),
                    "make name: match the file name");
    }
    SiteProfile profile = *site;
    if (config::describes_machine(profile)) {
        // Found now, each time a command needs the site: one profile serves every machine that
        // reads it (a home directory shared by a cluster's nodes, a copied config folder).
        static const adapters::LinuxMachine this_machine;
        config::describe_machine(profile,
                                 (m_machine != nullptr ? *m_machine : this_machine).describe());
    }
    return profile;
}

} // namespace dljob::app
