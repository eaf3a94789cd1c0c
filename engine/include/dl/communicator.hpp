#pragma once
// Synchronous data parallelism: N dltrain processes (ranks), one device each, sum their
// gradients every step through a Communicator (docs/data-parallel.md). Ranks come from the
// launcher's environment (srun, mpirun, mpiexec, aprun), never from flags. A run of one rank
// uses `single`, which does nothing and loads nothing; N > 1 loads an MPI plugin
// (libdltrain-mpi-<flavour>.so, parallel/communicator.cpp) built against the site's MPI.

#include <dl/memory.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace dl {

/// Where this process sits among the ranks, as the launcher told it before MPI starts.
struct RankEnv {
    int rank = 0;
    std::optional<int> size = 1; // unknown under aprun (ALPS gives the rank only): MPI says
    int local_rank = 0;          // the rank among those on this node: picks the GPU
    /// "dltrain" (DLTRAIN_RANK), "openmpi", "mpich", "slurm", "alps"; empty: not ranks.
    std::string launcher;
    /// The variables read, for messages ("OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2").
    std::string evidence;
    /// Whether this process is one of several, or may be (ALPS): MPI must start.
    [[nodiscard]] bool distributed() const { return !size || *size > 1; }
};

using EnvLookup = std::function<const char*(const char*)>;

/// Reads, first match wins: DLTRAIN_RANK/WORLD_SIZE/LOCAL_RANK (ranks started without an MPI
/// launcher, which meet through Gloo; the local rank defaults to the rank),
/// OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK (Open MPI's mpirun),
/// PMI_RANK/PMI_SIZE with MPI_LOCALRANKID (MPICH's Hydra), SLURM_PROCID with
/// SLURM_STEP_NUM_TASKS and SLURM_LOCALID (srun; SLURM_NTASKS alone is also set in a batch
/// script, where the script is one process), ALPS_APP_PE (aprun). Throws dl::Error(usage) for a
/// value that is not a number or a rank outside 0..size-1, naming the variable.
RankEnv detect_rank_env(const EnvLookup& lookup);
RankEnv detect_rank_env();

/// Sums gradients across ranks, and the little agreements around them. Every rank calls the same
/// methods in the same order with the same counts. A collective that gets no answer within the
/// timeout ends every rank (MPI_Abort; Gloo: this rank exits and the others see its connections
/// close), after naming the ranks it waited for.
class Communicator {
public:
    virtual ~Communicator() = default;
    Communicator() = default;
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;
    Communicator(Communicator&&) = delete;
    Communicator& operator=(Communicator&&) = delete;

    /// "single", "mpi-host (Open MPI v4.1.4)", "nccl (2.28.9)".
    [[nodiscard]] virtual std::string name() const = 0;
    [[nodiscard]] virtual int rank() const = 0;
    [[nodiscard]] virtual int size() const = 0;
    /// Whether allreduce_sum takes pointers into `memory` (a GPU's with CUDA-aware MPI or NCCL);
    /// otherwise the caller stages through host memory.
    [[nodiscard]] virtual bool accepts(const Memory& memory) const {
        return memory.host_accessible();
    }
    /// Whether a sum of backend memory is ordered after the backend's earlier work by the
    /// communicator itself (NCCL, on the device's streams); otherwise the caller waits for the
    /// device before handing its pointer over (a CUDA-aware MPI reads it from the host's side).
    [[nodiscard]] virtual bool orders_device_work() const { return false; }
    /// In-place sum of `count` floats across ranks. Deterministic by default: element i is
    /// summed in rank order, ((x0 + x1) + x2) + ..., whatever the MPI library's algorithm, so
    /// two runs with the same N give the same bits. `what` names the call in a timeout message.
    virtual void allreduce_sum(float* data, std::size_t count, const std::string& what) = 0;
    /// The same sum, started and not waited for (the gradient buckets of a backward pass still
    /// running): `data` is the communicator's until wait_all() returns. Every rank starts the
    /// same sums in the same order; the result is the blocking sum's, bit for bit. By default
    /// the sum is done at once (nothing to overlap).
    virtual void start_allreduce_sum(float* data, std::size_t count, const std::string& what) {
        allreduce_sum(data, count, what);
    }
    /// Lets the started sums advance without waiting (MPI moves a message only inside MPI
    /// calls): called between layers of the backward pass. True when every started sum is
    /// done (as far as this rank can tell).
    virtual bool progress() { return true; }
    /// Waits for every started sum, bounded like every collective: a rank that does not answer
    /// within the timeout ends every rank, named.
    virtual void wait_all() {}
    /// Element-wise maximum of host values (agreements: stop flags, iterations, hashes).
    virtual void allreduce_max(std::int64_t* values, std::size_t count,
                               const std::string& what) = 0;
    /// `bytes` of host memory from `root` to every rank.
    virtual void broadcast(void* data, std::size_t bytes, int root, const std::string& what) = 0;
    /// Seconds a collective may wait for the slowest rank before every rank is ended.
    virtual void set_timeout(double seconds) = 0;
    /// Ends every rank at once (MPI_Abort) after an error on this one that the others cannot
    /// learn of through a collective; `single` exits the process, and so does Gloo's (the
    /// others' next message to or from it fails, naming it).
    [[noreturn]] virtual void abort(int exit_code) = 0;
};

/// One rank alone: every collective returns its input.
std::unique_ptr<Communicator> make_single_communicator();

/// The communicator for this process: `single` when the launcher started one rank (nothing is
/// loaded); the Gloo plugin (libdltrain-gloo.so) when DLTRAIN_COMM=gloo, or when DLTRAIN_RANK
/// started the ranks and DLTRAIN_COMM is not mpi, meeting through DLTRAIN_RENDEZVOUS (a
/// directory, or tcp://HOST:PORT of rank 0) within DLTRAIN_RENDEZVOUS_TIMEOUT seconds (default:
/// the collective timeout); else the MPI plugin matching the launcher (DLTRAIN_MPI=openmpi|
/// mpich|mpi picks one, DLTRAIN_MPI_PLUGIN=FILE names the file). Throws dl::Error(usage) when
/// ranks were asked for and no plugin loads, naming what is missing, when Gloo is asked for
/// without DLTRAIN_RENDEZVOUS, and when MPI's rank count differs from the launcher's (a plugin
/// for another MPI than the launcher's starts N separate runs of 1); dl::Error(device) when the
/// ranks do not meet within the rendezvous timeout, naming the ranks that did not come.
std::unique_ptr<Communicator> make_communicator(const RankEnv& env);

/// The collective timeout: DLTRAIN_COLLECTIVE_TIMEOUT (seconds) when set, else 300.
double collective_timeout_seconds();

/// One rank's chunk of a sum over ranks: `out[i]` = the ranks' `chunks[r * count + i]` added in
/// rank order, r = 0 first. Every communicator (MPI, Gloo) sums with this one loop, so their
/// results are bit-for-bit the same, whatever order the chunks arrived in.
inline void sum_in_rank_order(const float* chunks, std::size_t ranks, std::size_t count,
                              float* out) {
    for (std::size_t i = 0; i < count; ++i) {
        float total = chunks[i];
        for (std::size_t r = 1; r < ranks; ++r) {
            total += chunks[r * count + i];
        }
        out[i] = total;
    }
}

} // namespace dl
