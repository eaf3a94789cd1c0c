// Builds the layer graph of one phase, checks shapes, shares parameters with the train net,
// and runs forward and backward in file order.

#include "net/layer.hpp"
#include "net/splits.hpp"

#include <dl/error.hpp>
#include <dl/net.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>

namespace dl {

struct Net::Entry {
    std::unique_ptr<Layer> layer;
    Blobs bottoms;
    Blobs tops;
    std::vector<bool> propagate_down;
    bool backward = false;
    // Parameters of this layer that later layers share by name: after this layer's backward,
    // each sharer's gradient is added into the owner's (Caffe accumulates them in one diff).
    std::vector<std::pair<Tensor*, const Tensor*>> shared_gradients;
};

struct Net::Wiring {
    std::map<std::string, std::size_t> blob_index;
    std::vector<std::string> producer; // per blob: the layer that last wrote it
    std::vector<bool> needs_grad;
    std::vector<int> grad_consumers;
    std::map<std::string, const Net::Entry*> shared_layers;
    // Parameters named in a ParamSpec: the first layer's tensor, that layer's index and name.
    struct Named {
        std::shared_ptr<Tensor> tensor;
        std::size_t layer = 0;
        std::string layer_name;
    };
    std::map<std::string, Named> named_params;
};

namespace {

std::string where(const NetConfig& config, const LayerConfig& layer) {
    return fmt::format("{}:{}: ", config.file.string(), layer.line);
}

[[noreturn]] void fail_layer(const NetConfig& config, const LayerConfig& layer,
                             const std::string& message) {
    throw Error(ErrorKind::config, fmt::format("{}layer '{}' ({}): {}", where(config, layer),
                                               layer.name, layer.type, message));
}

} // namespace

Net::Net(const NetConfig& config, const NetState& state, Backend& backend, std::uint32_t seed,
         const Net* shared, ParamValues values)
    : m_phase(state.phase), m_values(values), m_backend(backend), m_rng(seed) {
    Wiring wiring;
    if (shared != nullptr) {
        for (const auto& entry : shared->m_layers) {
            if (!entry->layer->params().empty()) {
                wiring.shared_layers[entry->layer->config().name] = entry.get();
            }
        }
    }
    for (const LayerConfig* layer_config : phase_layers(config, state, m_made)) {
        add_layer(config, *layer_config, wiring);
    }
}

void Net::add_layer(const NetConfig& config, const LayerConfig& layer_config, Wiring& wiring) {
    auto entry = std::make_unique<Entry>();
    entry->layer = make_layer(layer_config, m_backend);
    Layer& layer = *entry->layer;
    layer.set_phase(m_phase);
    layer.set_rng(&m_rng);
    if (layer_config.bottoms.size() < layer.min_bottoms() ||
        layer_config.bottoms.size() > layer.max_bottoms()) {
        fail_layer(config, layer_config,
                   fmt::format("needs {} bottom(s), got {}", layer.min_bottoms(),
                               layer_config.bottoms.size()));
    }
    if (layer_config.tops.size() != layer.top_count()) {
        fail_layer(
            config, layer_config,
            fmt::format("needs {} top(s), got {}", layer.top_count(), layer_config.tops.size()));
    }
    const auto [producers, any_grad] = wire_bottoms(config, layer_config, *entry, wiring);
    wire_tops(config, layer_config, *entry, wiring);
    if (has_role(layer_config, LayerRole::input)) {
        add_input(config, layer_config, *entry);
    }
    try {
        layer.setup(entry->bottoms, entry->tops, producers);
    } catch (const Error& e) {
        throw Error(e.kind(), where(config, layer_config) + e.what());
    }
    note_label_classes(layer_config, *entry, producers);
    const std::size_t params = add_params(config, layer_config, *entry, wiring);
    entry->backward = layer.can_backward() && (any_grad || params > 0);
    if (entry->backward) {
        mark_gradients(config, layer_config, *entry, wiring);
    }
    if (layer.is_loss() || has_role(layer_config, LayerRole::metric)) {
        m_outputs.push_back(layer_config.tops[0]);
    }
    m_layers.push_back(std::move(entry));
}

std::pair<std::vector<std::string>, bool> Net::wire_bottoms(const NetConfig& config,
                                                            const LayerConfig& layer_config,
                                                            Entry& entry, Wiring& wiring) {
    const Layer& layer = *entry.layer;
    std::vector<std::string> producers;
    bool any_grad = false;
    for (const auto& name : layer_config.bottoms) {
        const auto found = wiring.blob_index.find(name);
        if (found == wiring.blob_index.end()) {
            fail_layer(config, layer_config,
                       fmt::format("bottom '{}' is not a top of any earlier layer (known blobs: "
                                   "{})",
                                   name,
                                   m_blob_names.empty()
                                       ? "none"
                                       : fmt::format("{}", fmt::join(m_blob_names, ", "))));
        }
        entry.bottoms.push_back(m_blobs[found->second].get());
        producers.push_back(wiring.producer[found->second]);
        const bool grad = wiring.needs_grad[found->second] && layer.can_backward() &&
                          layer.backpropagates_to(entry.bottoms.size() - 1);
        entry.propagate_down.push_back(grad);
        any_grad = any_grad || grad;
    }
    return {producers, any_grad};
}

void Net::wire_tops(const NetConfig& config, const LayerConfig& layer_config, Entry& entry,
                    Wiring& wiring) {
    for (const auto& name : layer_config.tops) {
        auto found = wiring.blob_index.find(name);
        const bool in_place = found != wiring.blob_index.end() &&
                              std::find(layer_config.bottoms.begin(), layer_config.bottoms.end(),
                                        name) != layer_config.bottoms.end();
        if (found != wiring.blob_index.end() && !in_place) {
            fail_layer(config, layer_config,
                       fmt::format("top '{}' is already written by layer '{}'", name,
                                   wiring.producer[found->second]));
        }
        if (in_place && !may_run_in_place(layer_config.type)) {
            fail_layer(config, layer_config,
                       fmt::format("top '{}' is also its bottom, and layer type {} cannot run in "
                                   "place: give its top a name of its own (layers that may run "
                                   "in place: {})",
                                   name, layer_config.type, fmt::join(in_place_types(), ", ")));
        }
        if (!in_place) {
            wiring.blob_index[name] = m_blobs.size();
            m_blob_names.push_back(name);
            m_blobs.push_back(std::make_unique<Tensor>(&m_backend));
            if (m_phase == Phase::test) {
                m_blobs.back()->drop_gradient(); // a test net never runs backward
            }
            wiring.producer.push_back(layer_config.name);
            wiring.needs_grad.push_back(false);
            wiring.grad_consumers.push_back(0);
            found = wiring.blob_index.find(name);
        } else {
            wiring.producer[found->second] = layer_config.name;
        }
        entry.tops.push_back(m_blobs[found->second].get());
    }
}

void Net::add_input(const NetConfig& config, const LayerConfig& layer_config, Entry& entry) {
    // Caffe's prefetching data layer seeds its thread with one draw from the stream the fillers
    // use (InternalThread::StartInternalThread): skipping that draw here keeps the weights of
    // the layers after it equal to Caffe's for the same random_seed.
    m_rng.discard(1);
    NetInput input;
    input.layer = &layer_config;
    input.data = entry.tops[0];
    input.labels = entry.tops.size() > 1 ? entry.tops[1] : nullptr;
    m_inputs.push_back(input);
    if (layer_config.shape.empty()) {
        fail_layer(config, layer_config,
                   "the image shape is unknown (no data file read and no 'shape' key)");
    }
    if (layer_config.crop_size > std::min(layer_config.shape[1], layer_config.shape[2])) {
        fail_layer(config, layer_config,
                   fmt::format("key 'crop_size' {} is larger than its {}x{} images",
                               layer_config.crop_size, layer_config.shape[1],
                               layer_config.shape[2]));
    }
    const std::vector<int> image = input_shape(layer_config);
    entry.tops[0]->reshape({layer_config.batch_size, image[0], image[1], image[2]});
}

// The fewest outputs of any layer whose scores a loss or accuracy reads against an input's
// labels: every label must be below it (the data readers check).
void Net::note_label_classes(const LayerConfig& layer_config, const Entry& entry,
                             const std::vector<std::string>& producers) {
    const int classes = entry.layer->label_classes();
    if (classes <= 0) {
        return;
    }
    for (NetInput& input : m_inputs) {
        if (input.labels == entry.bottoms[1] &&
            (input.label_classes == 0 || classes < input.label_classes)) {
            input.label_classes = classes;
            input.label_reader = fmt::format("layer '{}' (whose scores layer '{}', {}, reads)",
                                             producers[0], layer_config.name, layer_config.type);
        }
    }
}

// Parameters: borrowed from the train net, or created and filled.
std::size_t Net::add_params(const NetConfig& config, const LayerConfig& layer_config, Entry& entry,
                            Wiring& wiring) {
    Layer& layer = *entry.layer;
    const auto shapes = layer.param_shapes();
    if (layer_config.params.size() > shapes.size()) {
        fail_layer(config, layer_config,
                   fmt::format("has {} 'param' entries but only {} parameters",
                               layer_config.params.size(), shapes.size()));
    }
    const auto borrowed = wiring.shared_layers.find(layer_config.name);
    for (std::size_t i = 0; i < shapes.size(); ++i) {
        std::shared_ptr<Tensor> tensor;
        const std::string& shared_name =
            i < layer_config.params.size() ? layer_config.params[i].name : std::string();
        const auto named =
            shared_name.empty() ? wiring.named_params.end() : wiring.named_params.find(shared_name);
        if (borrowed == wiring.shared_layers.end() && named != wiring.named_params.end()) {
            // A later user of a named parameter: the first layer's values, its own gradient
            // (added into the first's), and no entry in params(): the solver updates it once.
            const Wiring::Named& first = named->second;
            if (first.tensor->shape() != shapes[i]) {
                fail_layer(config, layer_config,
                           fmt::format("parameter '{}' is {} here but {} in layer '{}', which "
                                       "shares it (Caffe's STRICT rule: the same shape)",
                                       shared_name, fmt::join(shapes[i], "x"),
                                       first.tensor->shape_string(), first.layer_name));
            }
            tensor =
                m_phase == Phase::test ? first.tensor : Tensor::sharing_values_of(first.tensor);
            if (m_phase != Phase::test) {
                m_layers[first.layer]->shared_gradients.emplace_back(first.tensor.get(),
                                                                     tensor.get());
            }
            layer.params().push_back(tensor);
            continue;
        }
        if (borrowed != wiring.shared_layers.end()) {
            tensor = borrowed->second->layer->params().at(i);
            if (tensor->shape() != shapes[i]) {
                fail_layer(config, layer_config,
                           fmt::format("parameter {} is {} here but {} in the train net", i,
                                       fmt::join(shapes[i], "x"), tensor->shape_string()));
            }
        } else {
            tensor = std::make_shared<Tensor>(shapes[i], &m_backend);
            if (m_values == ParamValues::drawn) {
                fill(layer.param_filler(i), *tensor, m_rng);
            }
        }
        layer.params().push_back(tensor);
        ParamSpec spec = i < layer_config.params.size() ? layer_config.params[i] : ParamSpec{};
        if (!layer.learnable(i)) {
            spec.lr_mult = 0.0F;
            spec.decay_mult = 0.0F;
        }
        m_params.push_back(
            Param{fmt::format("{}.{}", layer_config.name, i), tensor, spec, m_layers.size()});
        if (!shared_name.empty()) {
            wiring.named_params[shared_name] = {tensor, m_layers.size(), layer_config.name};
        }
    }
    return shapes.size();
}

// A layer that backpropagates: its bottoms' gradients have one writer each (in place aside),
// and its tops now carry a gradient.
void Net::mark_gradients(const NetConfig& config, const LayerConfig& layer_config, Entry& entry,
                         Wiring& wiring) {
    for (std::size_t i = 0; i < entry.bottoms.size(); ++i) {
        if (!entry.propagate_down[i]) {
            continue;
        }
        const std::size_t index = wiring.blob_index[layer_config.bottoms[i]];
        const bool in_place = std::find(layer_config.tops.begin(), layer_config.tops.end(),
                                        layer_config.bottoms[i]) != layer_config.tops.end();
        if (!in_place && ++wiring.grad_consumers[index] > 1) {
            fail_layer(config, layer_config,
                       fmt::format("blob '{}' feeds two layers that backpropagate and no "
                                   "Split was placed for it (net/splits.cpp)",
                                   layer_config.bottoms[i]));
        }
    }
    for (const auto& name : layer_config.tops) {
        wiring.needs_grad[wiring.blob_index[name]] = true;
    }
}

Net::~Net() = default;

float Net::forward() {
    enqueue_forward();
    return read_loss();
}

void Net::enqueue_forward() {
    for (auto& entry : m_layers) {
        entry->layer->forward(entry->bottoms, entry->tops);
    }
}

float Net::read_loss() const {
    float loss = 0.0F;
    for (const auto& entry : m_layers) {
        if (entry->layer->is_loss()) {
            loss += entry->layer->config().loss_weight * entry->tops[0]->read_scalar();
        }
    }
    return loss;
}

void Net::backward(const std::function<void(std::size_t layer)>& after_layer) {
    for (std::size_t i = m_layers.size(); i-- > 0;) {
        Entry& entry = *m_layers[i];
        if (entry.backward) {
            entry.layer->backward(entry.tops, entry.propagate_down, entry.bottoms);
            add_shared_gradients(entry);
            if (after_layer) {
                after_layer(i);
            }
        }
    }
}

void Net::add_shared_gradients(const Entry& entry) {
    for (const auto& [owner, sharer] : entry.shared_gradients) {
        m_backend.eltwise_forward(EltwiseOp::sum, owner->count(), {owner->diff(), sharer->diff()},
                                  {1.0F, 1.0F}, owner->diff(), nullptr);
    }
}

namespace {
double elapsed_ms(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
}

double process_cpu_ms() {
    timespec now{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) * 1e-6;
}
} // namespace

float Net::forward_timed(std::vector<LayerTiming>& timings) {
    timings.resize(m_layers.size());
    float loss = 0.0F;
    for (std::size_t i = 0; i < m_layers.size(); ++i) {
        auto& entry = *m_layers[i];
        timings[i].name = entry.layer->config().name;
        timings[i].type = entry.layer->config().type;
        m_backend.synchronize();
        const auto start = std::chrono::steady_clock::now();
        const double cpu_start = process_cpu_ms();
        entry.layer->forward(entry.bottoms, entry.tops);
        m_backend.synchronize();
        timings[i].forward_ms += elapsed_ms(start);
        timings[i].forward_cpu_ms += process_cpu_ms() - cpu_start;
        if (entry.layer->is_loss()) {
            loss += entry.layer->config().loss_weight * entry.tops[0]->read_scalar();
        }
    }
    return loss;
}

void Net::backward_timed(std::vector<LayerTiming>& timings) {
    timings.resize(m_layers.size());
    for (std::size_t i = m_layers.size(); i-- > 0;) {
        auto& entry = *m_layers[i];
        if (entry.backward) {
            m_backend.synchronize();
            const auto start = std::chrono::steady_clock::now();
            const double cpu_start = process_cpu_ms();
            entry.layer->backward(entry.tops, entry.propagate_down, entry.bottoms);
            add_shared_gradients(entry);
            m_backend.synchronize();
            timings[i].backward_ms += elapsed_ms(start);
            timings[i].backward_cpu_ms += process_cpu_ms() - cpu_start;
        }
    }
}

Tensor* Net::blob(const std::string& name) {
    for (std::size_t i = m_blob_names.size(); i-- > 0;) {
        if (m_blob_names[i] == name) {
            return m_blobs[i].get();
        }
    }
    return nullptr;
}

std::vector<std::string> Net::output_names() const {
    return m_outputs;
}

std::vector<std::string> Net::layer_names() const {
    std::vector<std::string> names;
    names.reserve(m_layers.size());
    for (const auto& entry : m_layers) {
        names.push_back(entry->layer->config().name);
    }
    return names;
}

int Net::batch_size() const {
    return m_inputs.empty() ? 0 : m_inputs.front().layer->batch_size;
}

} // namespace dl
