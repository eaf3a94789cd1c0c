#pragma once
// The Gloo communicator is a plugin, libdltrain-gloo.so, that dltrain loads with dlopen only when
// several ranks meet without MPI (parallel/communicator.cpp): DLTRAIN_RANK and DLTRAIN_WORLD_SIZE
// set by whoever started the ranks (a Spark task, a shell loop on a laptop), or DLTRAIN_COMM=gloo
// under an MPI launcher whose MPI does not work. A one-rank run, and a build without libgloo-dev,
// never map it. The ranks find each other through DLTRAIN_RENDEZVOUS (a directory every rank sees,
// or tcp://HOST:PORT of a small store rank 0 serves) and then talk over Gloo's TCP transport.
// Plain C++ only: the core includes this, never a Gloo header.

#include <dl/communicator.hpp>

#include <memory>
#include <string>

namespace dl::gloo_comm {

/// What the core read from the environment (and checked) before loading the plugin.
struct Options {
    int rank = 0;
    int size = 1;
    std::string rendezvous; // DLTRAIN_RENDEZVOUS as given: a directory, or tcp://HOST:PORT
    std::string store_host; // of tcp://HOST:PORT; store_port 0: a directory
    int store_port = 0;
    double timeout_s = 300.0;            // every collective (DLTRAIN_COLLECTIVE_TIMEOUT)
    double rendezvous_timeout_s = 300.0; // meeting the others (DLTRAIN_RENDEZVOUS_TIMEOUT)
    std::string iface; // DLTRAIN_GLOO_IFACE; empty: the address of this host's name
};

struct PluginApi {
    /// Meets the other ranks and returns the world communicator; throws dl::Error(device) when
    /// the rendezvous fails or does not complete within options.rendezvous_timeout_s, naming
    /// the ranks it waited for.
    std::unique_ptr<Communicator> (*make_communicator)(const Options& options);
};

inline constexpr const char* plugin_file_name = "libdltrain-gloo.so";
inline constexpr const char* plugin_entry_name = "dltrain_gloo_plugin";

/// As the CUDA plugin's (cuda/cuda_plugin.hpp): both sides must come from one build.
inline constexpr const char* plugin_abi_stamp = DL_ENGINE_ABI_STAMP " " __VERSION__;

using PluginEntry = const PluginApi* (*)(const char* engine_abi_stamp);

} // namespace dl::gloo_comm
