#pragma once
// Checkpoints: weights plus the full solver state, written so that a kill at any moment leaves
// the previous checkpoint usable (docs/engine.md, "Checkpoint format").

#include <dl/net.hpp>
#include <dl/solver.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dl {

struct TrainingState {
    int iteration = 0;
    // Stream positions (over all epochs, not wrapped: a shuffled epoch's order follows from it)
    // of the next image each net will see.
    std::uint64_t train_cursor = 0;
    std::vector<std::uint64_t> test_cursors; // one per test net, in the solver's order
    // Each test net's state (net_state_text), beside its cursor; empty from a version 1 or 2
    // file, whose cursors go by position.
    std::vector<std::string> test_nets;
    std::string rng_state; // the net's std::mt19937, as its stream operator writes it
};

/// The cursors of a run's test nets (`nets`: their net_state_text, in the solver's order) from a
/// checkpoint: each net takes the cursor the checkpoint saved for the same state (the k-th of
/// several nets of one state the k-th saved for it), so a config that dropped or reordered
/// test nets between runs hands no net another's position; a net the checkpoint has none for
/// starts at 0. A checkpoint without states (version 1 or 2) gives its cursors by position.
std::vector<std::uint64_t> test_cursors_for(const TrainingState& saved,
                                            const std::vector<std::string>& nets);

/// checkpoints/iter_<N>.ckpt and its marker iter_<N>.done; keeps the newest `keep`.
std::filesystem::path write_checkpoint(const std::filesystem::path& dir, const TrainingState& state,
                                       const Net& net, const Solver& solver, int keep);

/// Checks the marker, size and checksum; returns why not when invalid.
std::optional<std::string> checkpoint_problem(const std::filesystem::path& file);

/// The newest complete, valid checkpoint in dir; each skipped one is passed to `warn`.
std::optional<std::filesystem::path>
find_latest_checkpoint(const std::filesystem::path& dir,
                       const std::function<void(const std::string&)>& warn);

/// Loads weights (and, when solver is given, solver history) into the net; throws dl::Error.
TrainingState read_checkpoint(const std::filesystem::path& file, Net& net, Solver* solver);

/// What copy_weights did, by parameter name ("conv1.0").
struct WeightsCopy {
    std::vector<std::string> copied; // in the file's order
    std::vector<std::string> kept;   // the net's parameters the file lacks: still their fillers'
    std::vector<std::string> unused; // the file's parameters the net lacks
    // A .caffemodel's parameters whose shape differs from the net's ("fc8.0: 1000x4096 in the
    // file, 10x4096 here"): the net keeps its fillers' values for them, as for `kept`.
    std::vector<std::string> reshaped;
};

/// Fine-tuning (Caffe's `--weights`): copies every parameter of a checkpoint whose name the net
/// has, shapes checked; the rest of the net keeps its fillers' values, and nothing of the
/// checkpoint's iteration, data position or solver state is used. Throws dl::Error(config) for
/// an unusable file, a shape that differs (naming both), or a file that shares no name.
WeightsCopy copy_weights(const std::filesystem::path& file, Net& net);

} // namespace dl
