#pragma once
// How many CPUs this process may run on.

namespace dljob::util {

/// The CPUs in the calling thread's affinity mask (what Slurm's cgroup or Torque's cpuset gave
/// the job), not every CPU of the node; at least 1.
unsigned usable_cpus();

} // namespace dljob::util
