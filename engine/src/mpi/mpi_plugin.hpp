#pragma once
// The MPI communicator is a plugin, libdltrain-mpi-<flavour>.so, that dltrain loads with dlopen
// only when the launcher started several ranks (parallel/communicator.cpp): a one-rank run, and a
// node without MPI, never map an MPI library. There is one plugin per MPI flavour because MPI has
// no common binary interface: MPI_Comm is a pointer in Open MPI and an int in MPICH (Cray MPICH and
// Intel MPI share MPICH's), and so are every handle and constant; an object compiled against one
// mpi.h cannot call the other library. Plain C++ only: the core includes this, never <mpi.h>.

#include <dl/communicator.hpp>

#include <memory>

namespace dl::mpi {

struct PluginApi {
    /// Initialises MPI (MPI_THREAD_FUNNELED: only the training thread calls it; SERIALIZED with
    /// DLTRAIN_MPI_PROGRESS=thread) and returns the world communicator; throws
    /// dl::Error(device) when MPI does not start.
    std::unique_ptr<Communicator> (*make_communicator)(double timeout_s);
    const char* flavour; // "openmpi", "mpich" or "mpi" (the site's own, whatever it is)
};

inline constexpr const char* plugin_entry_name = "dltrain_mpi_plugin";

/// As the CUDA plugin's (cuda/cuda_plugin.hpp): both sides must come from one build.
inline constexpr const char* plugin_abi_stamp = DL_ENGINE_ABI_STAMP " " __VERSION__;

using PluginEntry = const PluginApi* (*)(const char* engine_abi_stamp);

} // namespace dl::mpi
