#pragma once
// The machine dljob runs on, as the `local` site offers it to a job: no scheduler hands out its
// cores, memory and GPUs, so they are found when a command needs them (a profile's node values
// of `auto`, site-profiles/local.yaml), not written into a profile that travels between
// machines. Behind an interface so tests describe any machine (ninja's DiskInterface idea);
// adapters/machine_linux reads the real one.

#include <dljob/domain/resources.hpp>

#include <string>
#include <utility>

namespace dljob {

struct MachineFacts {
    int cores = 1;     // CPUs a job started from here may use
    MemorySize memory; // memory a job started from here may use
    int gpus = 0;      // NVIDIA GPUs a job started from here may use
    /// How each value was found, for `dljob sites show` and for the messages that refuse a
    /// request ("no /dev/nvidia[0-9]* device: no NVIDIA driver").
    std::string cores_found;
    std::string memory_found;
    std::string gpus_found;
};

class MachineProbe {
public:
    MachineProbe() = default;
    virtual ~MachineProbe() = default;
    MachineProbe(const MachineProbe&) = delete;
    MachineProbe& operator=(const MachineProbe&) = delete;
    MachineProbe(MachineProbe&&) = delete;
    MachineProbe& operator=(MachineProbe&&) = delete;

    /// Cheap and bounded: reads a few files under /proc, /sys and /dev, runs no program.
    [[nodiscard]] virtual MachineFacts describe() const = 0;
};

/// A machine given by its values (tests; anything that knows the machine already).
class FixedMachine final : public MachineProbe {
public:
    explicit FixedMachine(MachineFacts facts) : m_facts(std::move(facts)) {}
    [[nodiscard]] MachineFacts describe() const override { return m_facts; }

private:
    MachineFacts m_facts;
};

} // namespace dljob
