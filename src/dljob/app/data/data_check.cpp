#include <dljob/adapters/filesystem_posix.hpp>
#include <dljob/app/data/audit.hpp>
#include <dljob/app/data/data_check.hpp>
#include <dljob/app/data/fetch.hpp>

#include <fmt/format.h>

#include <filesystem>

namespace dljob::app {

std::vector<std::string> data_notes(const DataCheckInput& data, const GetEnv& getenv) {
    std::vector<std::string> notes;
    if (data.source.empty()) {
        return notes;
    }
    std::string text = data.source;
    if (text == "~" || text.rfind("~/", 0) == 0) {
        text = "$HOME" + text.substr(1);
    }
    const auto path = expand_variables(text, getenv);
    if (!path) {
        return notes; // a variable only the job's environment sets: nothing to check here
    }
    if (!adapters::path_exists(*path)) {
        const std::string name = std::filesystem::path(*path).filename().string();
        const CatalogDataset* known = find_catalog_dataset(name);
        notes.push_back(
            known != nullptr
                ? fmt::format("data.source {} does not exist on this host; get it with: dljob "
                              "fetch-data {} --to {}",
                              *path, known->name, *path)
                : fmt::format("data.source {} does not exist on this host; get it with: dljob "
                              "fetch-data URL --to {} (or copy it there)",
                              *path, *path));
        return notes;
    }
    // Staged data is read from node-local storage; a pack is one large file either way.
    if (data.stage_to != "none" || adapters::path_exists(*path + "/index.tsv") ||
        !adapters::is_directory(*path)) {
        return notes;
    }
    const adapters::FilesystemKind kind = adapters::filesystem_kind(*path);
    if (!kind.network) {
        return notes;
    }
    AuditRequest request;
    request.path = *path;
    auto report = audit_data(request);
    if (!report || report->files < 1000 || report->small_files * 2 < report->files) {
        return notes;
    }
    notes.push_back(fmt::format(
        "data.source {} holds {} files, {} of them small, on {} (a network file system): every "
        "job will read them one by one. Pack it once and stage it per node: dljob pack {} -o "
        "{}.dlpack, then set data.source to {}.dlpack and data.stage_to: node-local",
        *path, report->files, report->small_files, kind.name, *path, *path, *path));
    return notes;
}

} // namespace dljob::app
