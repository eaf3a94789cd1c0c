#include <dljob/app/sites/sites_service.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace dljob::app {
namespace {

std::string origin_of(const SiteProfile& site, const std::string& key) {
    const auto it = site.origins.find(key);
    if (it == site.origins.end()) {
        return "default";
    }
    // Keep "line:column", the file is printed once at the top.
    const std::string& where = it->second;
    const std::string file = site.source_file.string();
    if (where.rfind(file + ":", 0) == 0) {
        return "line " + where.substr(file.size() + 1);
    }
    return where;
}

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) {
        out += (out.empty() ? "" : ", ") + item;
    }
    return "[" + out + "]";
}

} // namespace

std::string format_site_list(const std::vector<SiteEntry>& sites) {
    std::size_t width = 4;
    for (const auto& site : sites) {
        width = std::max(width, site.name.size());
    }
    std::string out;
    for (const auto& site : sites) {
        out += fmt::format("{:<{}}  {:<11}  {}\n", site.name, width, site.origin,
                           site.error.empty() ? site.description : "INVALID: " + site.error);
    }
    return out;
}

namespace {

// `sites show`'s lines: each value with where it came from (file:line, or "default").
class SiteDescription {
public:
    explicit SiteDescription(const SiteProfile& site) : m_site(site) {}

    void line(int indent, const std::string& key, const std::string& value,
              const std::string& origin_key) {
        m_out += fmt::format("{:{}}{}: {}  # {}\n", "", indent, key, value,
                             origin_of(m_site, origin_key));
    }
    void text(const std::string& text) { m_out += text; }
    [[nodiscard]] std::string take() { return std::move(m_out); }

private:
    const SiteProfile& m_site;
    std::string m_out;
};

void describe_modules_and_scheduler(const SiteProfile& site, SiteDescription& d) {
    d.text("modules:\n");
    d.line(2, "system", to_string(site.modules.flavor), "modules.system");
    d.line(2, "init", site.modules.init_script.empty() ? "(none)" : site.modules.init_script,
           "modules.init");
    d.line(2, "preload", join(site.modules.preload), "modules.preload");
    for (const auto& sw : site.modules.switches) {
        d.line(2, "switch", sw.from + " -> " + sw.to, "modules.switch");
    }
    for (const auto& [need, modules] : site.modules.needs) {
        d.line(2, "need " + need, join(modules), "modules.needs." + need);
    }
    d.text("scheduler:\n");
    d.line(2, "job_name_max", std::to_string(site.behaviour.job_name_max),
           "scheduler.job_name_max");
    d.line(2, "job_name_pattern", site.behaviour.job_name_pattern, "scheduler.job_name_pattern");
    d.line(2, "warning_signal", site.behaviour.warning_signal, "scheduler.warning_signal");
    d.line(2, "grace_seconds", std::to_string(site.behaviour.grace_seconds),
           "scheduler.grace_seconds");
    d.line(2, "script_on_service_node", site.behaviour.script_on_service_node ? "true" : "false",
           "scheduler.script_on_service_node");
}

void describe_partition(const Partition& p, SiteDescription& d) {
    const std::string k = "partitions." + p.name;
    d.text(fmt::format("  {}:\n", p.name));
    d.line(4, "queue", p.queue.empty() ? "(scheduler routes)" : p.queue, k + ".queue");
    d.line(4, "scheduler", p.scheduler, k + ".scheduler");
    d.line(4, "launcher", to_string(p.launcher), k + ".launcher");
    d.line(4, "node.cores", std::to_string(p.node.cores), k + ".node.cores");
    d.line(4, "node.memory", p.node.memory.text(), k + ".node.memory");
    d.line(4, "node.gpus", std::to_string(p.node.gpus), k + ".node.gpus");
    if (!p.node.gpu_model.empty()) {
        d.line(4, "node.gpu_model", p.node.gpu_model, k + ".node.gpu_model");
    }
    if (p.node.cores_per_gpu > 0) {
        d.line(4, "node.cores_per_gpu", fmt::format("{}", p.node.cores_per_gpu),
               k + ".node.cores_per_gpu");
    }
    d.line(4, "max_nodes", std::to_string(p.max_nodes), k + ".max_nodes");
    d.line(4, "walltime.default", p.default_walltime.days_hms(), k + ".walltime.default");
    d.line(4, "walltime.max", p.max_walltime.days_hms(), k + ".walltime.max");
    d.line(4, "features", join(p.features), k + ".features");
    d.line(4, "account_required", p.account_required ? "true" : "false", k + ".account_required");
    d.line(4, "forbids_ppn", p.forbids_ppn ? "true" : "false", k + ".forbids_ppn");
    d.line(4, "extra_directives", join(p.extra_directives), k + ".extra_directives");
    // Several ranks (docs/schedulers.md): the MPI module and launcher a multi-rank job uses.
    d.line(4, "mpi.module", p.mpi.module.empty() ? "(none)" : p.mpi.module, k + ".mpi");
    d.line(4, "mpi.launcher", p.mpi.launcher.empty() ? "mpirun" : p.mpi.launcher, k + ".mpi");
    d.line(4, "mpi.flags", join(p.mpi.flags), k + ".mpi");
    d.line(4, "mpi.flavor",
           p.mpi.flavor == MpiFlavor::openmpi ? "openmpi"
           : p.mpi.flavor == MpiFlavor::mpich ? "mpich"
                                              : "unknown (output untagged, default placement)",
           k + ".mpi");
}

void describe_storage(const StorageTier& tier, SiteDescription& d) {
    const std::string k = "storage." + tier.name;
    d.text(fmt::format("  {}:\n", tier.name));
    d.line(4, "path", tier.path, k + ".path");
    d.line(4, "per_node", tier.per_node ? "true" : "false", k + ".per_node");
    d.line(4, "network", tier.network ? "true" : "false", k + ".network");
    if (tier.capacity) {
        d.line(4, "capacity", tier.capacity->text(), k + ".capacity");
    }
    if (tier.purge_days) {
        d.line(4, "purge_days", std::to_string(*tier.purge_days), k + ".purge_days");
    }
    if (tier.file_quota) {
        d.line(4, "file_quota", std::to_string(*tier.file_quota), k + ".file_quota");
    }
}

} // namespace

Result<std::string> describe_site(const SiteCatalog& catalog, const std::string& name) {
    auto loaded = catalog.load(name);
    if (!loaded) {
        return fail(loaded.error());
    }
    const SiteProfile& site = *loaded;
    SiteDescription d(site);
    d.text(fmt::format("# from {}\n", site.source_file.string()));
    d.line(0, "name", site.name, "name");
    d.text(fmt::format("description: {}\n", site.description));
    d.text(fmt::format("hostnames: {}\n", join(site.hostnames)));
    d.line(0, "account", site.account.empty() ? "(none)" : site.account, "account");
    describe_modules_and_scheduler(site, d);
    d.line(0, "default_partition", site.default_partition, "default_partition");
    d.text("partitions:\n");
    for (const auto& p : site.partitions) {
        describe_partition(p, d);
    }
    d.text("storage:\n");
    for (const auto& tier : site.storage) {
        describe_storage(tier, d);
    }
    return d.take();
}

} // namespace dljob::app
