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

Result<std::string> describe_site(const SiteCatalog& catalog, const std::string& name) {
    auto loaded = catalog.load(name);
    if (!loaded) {
        return fail(loaded.error());
    }
    const SiteProfile& site = *loaded;
    std::string out;
    const auto line = [&](int indent, const std::string& key, const std::string& value,
                          const std::string& origin_key) {
        out +=
            fmt::format("{:{}}{}: {}  # {}\n", "", indent, key, value, origin_of(site, origin_key));
    };
    out += fmt::format("# from {}\n", site.source_file.string());
    line(0, "name", site.name, "name");
    out += fmt::format("description: {}\n", site.description);
    out += fmt::format("hostnames: {}\n", join(site.hostnames));
    line(0, "account", site.account.empty() ? "(none)" : site.account, "account");
    out += "modules:\n";
    line(2, "system", to_string(site.modules.flavor), "modules.system");
    line(2, "init", site.modules.init_script.empty() ? "(none)" : site.modules.init_script,
         "modules.init");
    line(2, "preload", join(site.modules.preload), "modules.preload");
    for (const auto& sw : site.modules.switches) {
        line(2, "switch", sw.from + " -> " + sw.to, "modules.switch");
    }
    for (const auto& [need, modules] : site.modules.needs) {
        line(2, "need " + need, join(modules), "modules.needs." + need);
    }
    out += "scheduler:\n";
    line(2, "job_name_max", std::to_string(site.behaviour.job_name_max), "scheduler.job_name_max");
    line(2, "job_name_pattern", site.behaviour.job_name_pattern, "scheduler.job_name_pattern");
    line(2, "warning_signal", site.behaviour.warning_signal, "scheduler.warning_signal");
    line(2, "grace_seconds", std::to_string(site.behaviour.grace_seconds),
         "scheduler.grace_seconds");
    line(2, "script_on_service_node", site.behaviour.script_on_service_node ? "true" : "false",
         "scheduler.script_on_service_node");
    line(0, "default_partition", site.default_partition, "default_partition");
    out += "partitions:\n";
    for (const auto& p : site.partitions) {
        const std::string k = "partitions." + p.name;
        out += fmt::format("  {}:\n", p.name);
        line(4, "queue", p.queue.empty() ? "(scheduler routes)" : p.queue, k + ".queue");
        line(4, "scheduler", to_string(p.scheduler), k + ".scheduler");
        line(4, "launcher", to_string(p.launcher), k + ".launcher");
        line(4, "node.cores", std::to_string(p.node.cores), k + ".node.cores");
        line(4, "node.memory", p.node.memory.slurm(), k + ".node.memory");
        line(4, "node.gpus", std::to_string(p.node.gpus), k + ".node.gpus");
        if (!p.node.gpu_model.empty()) {
            line(4, "node.gpu_model", p.node.gpu_model, k + ".node.gpu_model");
        }
        if (p.node.cores_per_gpu > 0) {
            line(4, "node.cores_per_gpu", fmt::format("{}", p.node.cores_per_gpu),
                 k + ".node.cores_per_gpu");
        }
        line(4, "max_nodes", std::to_string(p.max_nodes), k + ".max_nodes");
        line(4, "walltime.default", p.default_walltime.slurm(), k + ".walltime.default");
        line(4, "walltime.max", p.max_walltime.slurm(), k + ".walltime.max");
        line(4, "features", join(p.features), k + ".features");
        line(4, "account_required", p.account_required ? "true" : "false", k + ".account_required");
        line(4, "forbids_ppn", p.forbids_ppn ? "true" : "false", k + ".forbids_ppn");
        line(4, "extra_directives", join(p.extra_directives), k + ".extra_directives");
    }
    out += "storage:\n";
    for (const auto& tier : site.storage) {
        const std::string k = "storage." + tier.name;
        out += fmt::format("  {}:\n", tier.name);
        line(4, "path", tier.path, k + ".path");
        line(4, "per_node", tier.per_node ? "true" : "false", k + ".per_node");
        line(4, "network", tier.network ? "true" : "false", k + ".network");
        if (tier.capacity) {
            line(4, "capacity", tier.capacity->slurm(), k + ".capacity");
        }
        if (tier.purge_days) {
            line(4, "purge_days", std::to_string(*tier.purge_days), k + ".purge_days");
        }
        if (tier.file_quota) {
            line(4, "file_quota", std::to_string(*tier.file_quota), k + ".file_quota");
        }
    }
    return out;
}

} // namespace dljob::app
