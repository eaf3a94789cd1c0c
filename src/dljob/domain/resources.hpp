#pragma once
// What a recipe asks for (Resources) and what a partition's nodes offer (NodeGeometry), as plain
// values. Feasibility checks live in config/ (they need file positions for their messages).

#include <dljob/domain/result.hpp>
#include <dljob/domain/walltime.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dljob {

/// An amount of memory in MiB, parsed from "16G", "16GB", "512M", "1.5g", "2T" (binary units, as
/// schedulers use them) and printed in the units each scheduler takes.
class MemorySize {
public:
    MemorySize() = default;
    static MemorySize from_mib(std::int64_t mib) noexcept { return MemorySize{mib}; }
    static Result<MemorySize> parse(std::string_view text);

    [[nodiscard]] std::int64_t mib() const noexcept { return m_mib; }
    /// "16G" when a whole number of GiB, else "1500M" (Slurm's `--mem=` and how dljob shows
    /// memory).
    [[nodiscard]] std::string text() const { return with_units("G", "M"); }
    /// The same with a scheduler's own units ("gb" and "mb" for PBS's `mem=`): each family
    /// spells its own (schedulers/<family>.cpp).
    [[nodiscard]] std::string with_units(const char* gib_unit, const char* mib_unit) const;

    friend bool operator==(MemorySize a, MemorySize b) noexcept { return a.m_mib == b.m_mib; }
    friend auto operator<=>(MemorySize a, MemorySize b) noexcept { return a.m_mib <=> b.m_mib; }

private:
    explicit MemorySize(std::int64_t mib) noexcept : m_mib(mib) {}
    std::int64_t m_mib = 0;
};

/// What one node of a partition offers.
struct NodeGeometry {
    int cores = 1;         // CPU cores per node
    MemorySize memory;     // memory per node
    int gpus = 0;          // GPUs per node (Big Red II XK7: 1)
    std::string gpu_model; // e.g. "k20", "k80", "v100", "a100"; empty when gpus == 0
    /// Cores that come with each GPU when the site ties them (Hélios: cores follow GPUs and ppn
    /// is forbidden). 0 = not tied, the job asks for cores itself.
    double cores_per_gpu = 0.0;
    /// Values the profile leaves to the machine dljob runs on (`auto`, the `local` site): no
    /// scheduler hands out its cores, memory and GPUs, so they are found when a command loads
    /// the profile (config::describe_machine, domain/machine.hpp).
    struct FromMachine {
        bool cores = false;
        bool memory = false;
        bool gpus = false;
    } from_machine;
    /// Once found: how each machine value was (for the messages that refuse a request).
    std::string cores_found;
    std::string memory_found;
    std::string gpus_found;

    [[nodiscard]] bool describes_machine() const noexcept {
        return from_machine.cores || from_machine.memory || from_machine.gpus;
    }
};

/// What a recipe requests. Unset optionals are filled from the partition when rendering.
struct Resources {
    int gpus = 0;                     // total GPUs for the job
    std::optional<int> nodes;         // unset: the fewest nodes that hold `gpus`
    std::optional<int> cores_per_gpu; // CPU cores (threads) per GPU
    std::optional<int> cores;         // CPU cores per node for CPU-only jobs
    /// CPU-only training ranks over all nodes (data-parallel dltrain); with gpus, every GPU of a
    /// `train:` recipe is a rank instead. Unset: one process per node.
    std::optional<int> ranks;
    std::optional<MemorySize> memory; // per node
    std::optional<Walltime> walltime; // unset: the partition's default
};

/// The request after checking it against a partition: every value decided, what the scheduler
/// is asked for. Produced by config::resolve_resources; used by renderers and submit.
struct ResolvedResources {
    int nodes = 1;
    int gpus_per_node = 0;
    /// Training processes (ranks) per node: a `train:` recipe runs one per GPU, or
    /// resources.ranks / nodes CPU ranks; anything else one per node.
    int tasks_per_node = 1;
    int cores_per_node = 1; // cores requested on each node (ppn / --cpus-per-task)
    MemorySize memory;      // per node; 0 = not requested (scheduler default)
    Walltime walltime;
};

} // namespace dljob
