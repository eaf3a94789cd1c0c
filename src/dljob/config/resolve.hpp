#pragma once
// Checks a recipe's request against a partition's node geometry and limits, and decides every
// number the scheduler is asked for. Errors spell out the reason and the fix.

#include <dljob/domain/recipe.hpp>
#include <dljob/domain/resources.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/site_profile.hpp>

namespace dljob::config {

/// Rules:
/// - GPUs per node never exceed the node's: Big Red II XK7 nodes hold 1 GPU, so 4 GPUs need 4
///   nodes; without `nodes` a request of more GPUs than a node has gets the fewest whole nodes
///   that hold them (one rank per GPU; render notes it), as `dljob shell --gpus N` does, and one
///   that does not fill whole nodes is refused with the counts that would.
/// - GPUs must divide evenly over the nodes; nodes stay within max_nodes.
/// - Where cores are tied to GPUs (Hélios), cores are derived and a larger cores_per_gpu is
///   refused naming the ratio.
/// - Memory within the node's; walltime (or the partition default) within the maximum, which the
///   message names.
/// - A node of `auto` values is the machine dljob runs on (the `local` site): a request over
///   what it has is refused naming what was found and how, and GPUs on a machine without any
///   with the fix, `--set resources.gpus=0`.
Result<ResolvedResources> resolve_resources(const Recipe& recipe, const SiteProfile& site,
                                            const Partition& partition);

} // namespace dljob::config
