#pragma once
// How the ranks of the Gloo plugin meet: each writes its TCP addresses under its rank into a
// store every rank reaches, reads the others', and connects a pair to each (Gloo's full mesh).
// The store is a directory on a shared file system (Gloo's FileStore) or rank 0's TcpStore.
// Every wait is bounded by one deadline for the whole rendezvous, and its expiry names the
// ranks that never wrote their addresses.

#include "gloo/gloo_plugin.hpp"

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dl::gloo_comm {

using Clock = std::chrono::steady_clock;

/// The rendezvous's one deadline, and what its messages say.
struct Deadline {
    Clock::time_point at;
    double seconds = 0.0;
    int rank = 0;
    int size = 1;
    std::string where; // "tcp://node1:29500", "directory /shared/run7/meet"

    [[nodiscard]] bool passed() const { return Clock::now() >= at; }
    /// The error of a rendezvous that did not complete: `missing` names what was waited for.
    [[noreturn]] void expire(const std::string& missing) const;
};

/// Polls `present` for every key every 10 ms until all are there or the deadline passes, then
/// names the rank of the first key still missing (Gloo's keys end with the rank's number).
void wait_for_keys(const std::vector<std::string>& keys,
                   const std::function<bool(const std::string&)>& present,
                   const Deadline& deadline);

/// A met set of ranks: the Gloo context, and the store, which must live until every rank is
/// known to have connected (rank 0 serves the TCP store). Destroying the store releases it: a
/// directory store removes this rank's files, so that the directory serves the next run, and
/// a TCP store stops serving.
struct Meeting {
    std::shared_ptr<::gloo::Context> context;
    std::unique_ptr<::gloo::rendezvous::Store> store;
    std::string transport; // "tcp, file rendezvous", for the communicator's name
};

/// Meets the other ranks through options.rendezvous; throws dl::Error(device) naming the ranks
/// that did not come within options.rendezvous_timeout_s.
Meeting meet(const Options& options);

} // namespace dl::gloo_comm
