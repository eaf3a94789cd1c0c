#include <dljob/config/resolve.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace dljob::config {
namespace {

std::string where(const Recipe& recipe, const std::string& key) {
    const auto it = recipe.origins.find(key);
    if (it != recipe.origins.end()) {
        return fmt::format("{}: {}", it->second, key);
    }
    return recipe.source_file.empty() ? key
                                      : fmt::format("{}: {}", recipe.source_file.string(), key);
}

Unexpected refuse(const Recipe& recipe, const std::string& key, const std::string& message,
                  std::string hint) {
    return fail(ErrorCode::config_invalid, fmt::format("{}: {}", where(recipe, key), message),
                std::move(hint));
}

// resources.ranks: CPU ranks spread evenly over the nodes, each with at least one core.
Result<void> resolve_cpu_ranks(const Recipe& recipe, ResolvedResources& out) {
    const Resources& want = recipe.resources;
    if (!want.ranks) {
        out.cores_per_node = want.cores.value_or(1);
        return {};
    }
    if (recipe.kind != RecipeKind::train) {
        return refuse(recipe, "resources.ranks",
                      "ranks are dltrain's data-parallel processes; a command: recipe starts its "
                      "own processes",
                      "drop resources.ranks, or make the recipe a train: recipe");
    }
    if (*want.ranks % out.nodes != 0) {
        return refuse(
            recipe, "resources.ranks",
            fmt::format("{} ranks do not divide evenly over {} nodes", *want.ranks, out.nodes),
            "ask for a multiple of the node count");
    }
    out.tasks_per_node = *want.ranks / out.nodes;
    out.cores_per_node = want.cores.value_or(out.tasks_per_node);
    if (out.cores_per_node < out.tasks_per_node) {
        return refuse(recipe, "resources.cores",
                      fmt::format("{} cores per node cannot hold {} ranks per node",
                                  out.cores_per_node, out.tasks_per_node),
                      fmt::format("ask for at least {} cores, or drop cores", out.tasks_per_node));
    }
    return {};
}

// What to ask for instead of `gpus` GPUs that do not fill whole nodes of `per_node`: the whole
// nodes just below and above, or one GPU on each of `gpus` nodes, where the partition has them.
std::string whole_node_choices(int gpus, int per_node, int max_nodes) {
    std::vector<std::string> choices;
    const auto whole = [&](int count) {
        const int nodes = count / per_node;
        return nodes == 1 ? fmt::format("gpus: {}", count)
                          : fmt::format("gpus: {} ({} nodes)", count, nodes);
    };
    const int below = gpus / per_node * per_node;
    if (below > 0 && below / per_node <= max_nodes) {
        choices.push_back(whole(below));
    }
    if (below / per_node + 1 <= max_nodes) {
        choices.push_back(whole(below + per_node));
    }
    if (gpus <= max_nodes && per_node > 1) {
        choices.push_back(fmt::format("nodes: {} (one GPU on each)", gpus));
    }
    std::string text;
    for (const auto& choice : choices) {
        text += (text.empty() ? "" : ", or ") + choice;
    }
    return fmt::format("ask for {}; a job gets at most {} node(s) here",
                       text.empty() ? fmt::format("at most {} GPU(s)", per_node * max_nodes) : text,
                       max_nodes);
}

// GPUs over nodes: as many per node as asked, on one node or, where a node has fewer than asked
// (Big Red II's XK7 nodes have one each) and nodes: does not say, on the fewest whole nodes that
// hold them (one training rank per GPU), as `dljob shell --gpus N` gets them; each node's cores
// with them (tied where the site ties cores to GPUs).
Result<void> resolve_gpus(const Recipe& recipe, const Partition& partition,
                          const std::string& place, ResolvedResources& out) {
    const Resources& want = recipe.resources;
    const NodeGeometry& node = partition.node;
    if (node.gpus == 0) {
        return refuse(recipe, "resources.gpus",
                      fmt::format("{} GPU(s) requested, but {} has no GPUs", want.gpus, place),
                      "choose a GPU partition with --partition, or set gpus: 0");
    }
    int nodes = want.nodes.value_or(1);
    if (!want.nodes && want.gpus > node.gpus) {
        // Whole nodes: every node of a job gets the same GPUs, and a node's GPUs are all its.
        if (want.gpus % node.gpus != 0) {
            return refuse(recipe, "resources.gpus",
                          fmt::format("{} GPUs do not fill whole nodes of {}, which have {} "
                                      "GPU(s) each",
                                      want.gpus, place, node.gpus),
                          whole_node_choices(want.gpus, node.gpus, partition.max_nodes));
        }
        nodes = want.gpus / node.gpus;
    }
    if (want.gpus % nodes != 0) {
        const int below = want.gpus / nodes * nodes;
        return refuse(recipe, "resources.gpus",
                      fmt::format("{} GPUs do not divide evenly over {} nodes", want.gpus, nodes),
                      below > 0
                          ? fmt::format("ask for a multiple of the node count: gpus: {} or "
                                        "{}",
                                        below, below + nodes)
                          : fmt::format("ask for a multiple of the node count: gpus: {}", nodes));
    }
    const int per_node = want.gpus / nodes;
    if (per_node > node.gpus) {
        return refuse(recipe, "resources.gpus",
                      fmt::format("{} GPUs on {} node(s) is {} per node, but nodes of {} have "
                                  "{} GPU(s) each",
                                  want.gpus, nodes, per_node, place, node.gpus),
                      want.gpus % node.gpus == 0
                          ? fmt::format("ask for nodes: {}, or leave nodes: out (the fewest whole "
                                        "nodes that hold them)",
                                        want.gpus / node.gpus)
                          : whole_node_choices(want.gpus, node.gpus, partition.max_nodes));
    }
    out.nodes = nodes;
    out.gpus_per_node = per_node;
    if (node.cores_per_gpu > 0) {
        const int tied = std::max(1, static_cast<int>(std::floor(node.cores_per_gpu * per_node)));
        if (want.cores_per_gpu && *want.cores_per_gpu * per_node > tied) {
            return refuse(recipe, "resources.cores_per_gpu",
                          fmt::format("{} ties cores to GPUs: {} GPU(s) per node come with {} "
                                      "core(s) ({} per GPU), fewer than the {} asked for",
                                      place, per_node, tied, node.cores_per_gpu,
                                      *want.cores_per_gpu * per_node),
                          "drop cores_per_gpu, or ask for more GPUs");
        }
        out.cores_per_node = tied;
    } else {
        const int default_per_gpu = std::max(1, node.cores / node.gpus);
        out.cores_per_node = want.cores_per_gpu.value_or(default_per_gpu) * per_node;
    }
    return {};
}

// The `local` site's node is the machine dljob runs on (node values of `auto`): a request it
// cannot hold is refused naming what was found there, not a cluster's node.
std::string on_this_machine(const SiteProfile& site, const std::string& found) {
    return fmt::format("site {} runs its jobs here; {}", site.name, found);
}

Result<void> check_machine_gpus(const Recipe& recipe, const SiteProfile& site,
                                const NodeGeometry& node) {
    const int want = recipe.resources.gpus;
    if (!node.from_machine.gpus || want <= node.gpus) {
        return {};
    }
    if (node.gpus == 0) {
        return refuse(recipe, "resources.gpus",
                      fmt::format("{} GPU(s) requested, but this machine has none ({})", want,
                                  on_this_machine(site, node.gpus_found)),
                      "train on its CPUs with --set resources.gpus=0 (dljob shell: without "
                      "--gpus), or submit to a site with GPUs (--site NAME; dljob sites lists "
                      "them)");
    }
    return refuse(
        recipe, "resources.gpus",
        fmt::format("{} GPUs requested, but this machine has {} ({})", want, node.gpus,
                    on_this_machine(site, node.gpus_found)),
        fmt::format("ask for at most {} (--set resources.gpus={})", node.gpus, node.gpus));
}

} // namespace

Result<ResolvedResources> resolve_resources(const Recipe& recipe, const SiteProfile& site,
                                            const Partition& partition) {
    const Resources& want = recipe.resources;
    const NodeGeometry& node = partition.node;
    const std::string place = fmt::format("partition '{}' of site '{}'", partition.name, site.name);
    ResolvedResources out;

    if (want.gpus > 0) {
        DLJOB_TRY(check_machine_gpus(recipe, site, node));
        DLJOB_TRY(resolve_gpus(recipe, partition, place, out));
    } else {
        out.nodes = want.nodes.value_or(1);
        out.gpus_per_node = 0;
        DLJOB_TRY(resolve_cpu_ranks(recipe, out));
    }
    if (out.nodes > partition.max_nodes) {
        if (!want.nodes && want.gpus > 0) {
            // The nodes the GPUs need (nodes: left out) are more than a job may have.
            return refuse(
                recipe, "resources.gpus",
                fmt::format("{} GPUs need {} nodes of {} GPU(s) each, but {} allows at most {}",
                            want.gpus, out.nodes, node.gpus, place, partition.max_nodes),
                fmt::format("ask for at most {} GPUs", partition.max_nodes * node.gpus));
        }
        return refuse(recipe, want.nodes ? "resources.nodes" : "resources.gpus",
                      fmt::format("{} node(s) requested, but {} allows at most {}", out.nodes,
                                  place, partition.max_nodes),
                      "ask for fewer nodes");
    }
    if (out.cores_per_node > node.cores && node.from_machine.cores) {
        return refuse(recipe, want.gpus > 0 ? "resources.cores_per_gpu" : "resources.cores",
                      fmt::format("{} cores requested, but this machine has {} ({})",
                                  out.cores_per_node, node.cores,
                                  on_this_machine(site, node.cores_found)),
                      fmt::format("ask for at most {} cores", node.cores));
    }
    if (out.cores_per_node > node.cores) {
        return refuse(recipe, want.gpus > 0 ? "resources.cores_per_gpu" : "resources.cores",
                      fmt::format("{} cores per node requested, but nodes of {} have {}",
                                  out.cores_per_node, place, node.cores),
                      fmt::format("ask for at most {} cores per node", node.cores));
    }
    if (want.memory) {
        if (*want.memory > node.memory && node.from_machine.memory) {
            return refuse(recipe, "resources.memory",
                          fmt::format("{} requested, but this machine has {} ({})",
                                      want.memory->text(), node.memory.text(),
                                      on_this_machine(site, node.memory_found)),
                          fmt::format("ask for at most {} (--set resources.memory={})",
                                      node.memory.text(), node.memory.text()));
        }
        if (*want.memory > node.memory) {
            return refuse(recipe, "resources.memory",
                          fmt::format("{} per node requested, but nodes of {} have {}",
                                      want.memory->text(), place, node.memory.text()),
                          fmt::format("ask for at most {}", node.memory.text()));
        }
        out.memory = *want.memory;
    }
    out.walltime = want.walltime.value_or(partition.default_walltime);
    if (out.walltime > partition.max_walltime) {
        return refuse(recipe, "resources.walltime",
                      fmt::format("walltime {} is over the maximum {} of {}", out.walltime.hms(),
                                  partition.max_walltime.hms(), place),
                      fmt::format("ask for at most {}; dltrain checkpoints and dljob resubmits "
                                  "to go longer",
                                  partition.max_walltime.hms()));
    }
    if (recipe.kind == RecipeKind::train && out.gpus_per_node > 0) {
        out.tasks_per_node = out.gpus_per_node; // one rank per GPU
    }
    return out;
}

} // namespace dljob::config
