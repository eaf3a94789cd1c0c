#pragma once
// A network built from a NetConfig for one phase: layers in file order, blobs by name,
// parameters shared between the train and test nets.

#include <dl/backend.hpp>
#include <dl/config.hpp>
#include <dl/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace dl {

class Layer;

struct Param {
    std::string name; // "<layer>.<index>", e.g. "conv1.0" for the weights
    std::shared_ptr<Tensor> tensor;
    ParamSpec spec;
    /// The index of the layer that owns it, in the net's layer order: its diff is final once
    /// that layer's backward has run (each parameter is used once).
    std::size_t layer = 0;
};

/// A Data layer's tops: the trainer fills them from a reader; the net never reads files.
struct NetInput {
    const LayerConfig* layer = nullptr;
    Tensor* data = nullptr;
    Tensor* labels = nullptr; // may be null when the layer has one top
    // The fewest scores per row among the layers that index scores by these labels (loss,
    // accuracy): every label must be below it. 0 when no layer reads them.
    int label_classes = 0;
    std::string label_reader; // the layer of those scores, for messages
};

struct LayerTiming {
    std::string name;
    std::string type;
    double forward_ms = 0.0;
    double backward_ms = 0.0;
    // The process's CPU time (all threads, spinning included): on a machine shared with other
    // work, wall-clock per layer measures the load as much as the layer.
    double forward_cpu_ms = 0.0;
    double backward_cpu_ms = 0.0;
};

/// How a net's own parameters start: drawn from their fillers, or left at zero where only
/// shapes matter (`dltrain check`: AlexNet's 61 million Gaussian draws were most of its time).
enum class ParamValues { drawn, zero };

class Net {
public:
    /// Builds and shapes every layer; throws dl::Error(config) naming both layers when shapes
    /// do not fit. `shared` (the train net) lends its parameters to a test net.
    Net(const NetConfig& config, const NetState& state, Backend& backend, std::uint32_t seed,
        const Net* shared = nullptr, ParamValues values = ParamValues::drawn);
    Net(const NetConfig& config, Phase phase, Backend& backend, std::uint32_t seed,
        const Net* shared = nullptr)
        : Net(config, NetState{phase}, backend, seed, shared) {}
    ~Net();
    Net(const Net&) = delete;
    Net& operator=(const Net&) = delete;
    Net(Net&&) = delete;
    Net& operator=(Net&&) = delete;

    /// Runs every layer; returns the weighted sum of the losses (waits for a device).
    float forward();
    /// Issues every layer's forward op and returns at once (no host read: recordable).
    void enqueue_forward();
    /// The weighted sum of the losses of the last forward (waits for a device).
    [[nodiscard]] float read_loss() const;
    /// Fills every parameter's diff (issues the ops; recordable), last layer first.
    /// `after_layer(i)`, when given, is called after layer i's backward ops were issued: the
    /// diffs of its parameters are then final (the data-parallel sum starts on them while the
    /// layers below compute).
    void backward(const std::function<void(std::size_t layer)>& after_layer = {});
    [[nodiscard]] Backend& backend() const { return m_backend; }

    /// forward/backward with per-layer wall times accumulated into `timings` (same order as
    /// layers).
    float forward_timed(std::vector<LayerTiming>& timings);
    void backward_timed(std::vector<LayerTiming>& timings);

    [[nodiscard]] const std::vector<Param>& params() const { return m_params; }
    [[nodiscard]] std::vector<NetInput>& inputs() { return m_inputs; }
    [[nodiscard]] Tensor* blob(const std::string& name);
    [[nodiscard]] std::vector<std::string> output_names() const; // loss and accuracy tops
    [[nodiscard]] std::vector<std::string> layer_names() const;
    [[nodiscard]] Phase phase() const { return m_phase; }
    [[nodiscard]] int batch_size() const;
    std::mt19937& rng() { return m_rng; }

private:
    struct Entry;
    // While the net is built: which layer last wrote each blob, which blobs carry a gradient,
    // how many layers backpropagate into each, and the train net's layers to borrow from.
    struct Wiring;
    void add_layer(const NetConfig& config, const LayerConfig& layer_config, Wiring& wiring);
    // The layer's bottoms: the producers of each, and whether any gradient flows back.
    std::pair<std::vector<std::string>, bool> wire_bottoms(const NetConfig& config,
                                                           const LayerConfig& layer_config,
                                                           Entry& entry, Wiring& wiring);
    void wire_tops(const NetConfig& config, const LayerConfig& layer_config, Entry& entry,
                   Wiring& wiring);
    void add_input(const NetConfig& config, const LayerConfig& layer_config, Entry& entry);
    void note_label_classes(const LayerConfig& layer_config, const Entry& entry,
                            const std::vector<std::string>& producers);
    // Returns how many parameters the layer has.
    std::size_t add_params(const NetConfig& config, const LayerConfig& layer_config, Entry& entry,
                           Wiring& wiring);
    // Adds the gradients of the layers sharing `entry`'s parameters by name into them.
    void add_shared_gradients(const Entry& entry);
    void mark_gradients(const NetConfig& config, const LayerConfig& layer_config, Entry& entry,
                        Wiring& wiring);
    Phase m_phase;
    ParamValues m_values;
    Backend& m_backend;
    std::mt19937 m_rng;
    std::deque<LayerConfig>
        m_made; // layers the net rewired or added (Splits); layers refer to them
    std::vector<std::unique_ptr<Entry>> m_layers;
    std::vector<std::string> m_blob_names;
    std::vector<std::unique_ptr<Tensor>> m_blobs;
    std::vector<Param> m_params;
    std::vector<NetInput> m_inputs;
    std::vector<std::string> m_outputs;
};

} // namespace dl
