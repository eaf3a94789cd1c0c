// dltrain train, test and time. The training loop follows Caffe's Solver::Step: test at every
// test_interval (and at iteration 0), one forward/backward/update per iteration, display every
// `display` iterations, snapshot every `snapshot`; plus leaving early on a signal or deadline.

#include "backends/cuda_loader.hpp"
#include "data/batch_reader.hpp"
#include "data/hdf5_dataset.hpp"
#include "data/idx_dataset.hpp"
#include "data/image_list.hpp"
#include "data/mean_file.hpp"
#include "io/caffemodel.hpp"
#include "net/layer_kind.hpp"
#include "net/memory_plan.hpp"
#include "parallel/gradient_exchange.hpp"
#include "train/run_dir_lock.hpp"

#include <dl/backend.hpp>
#include <dl/blas.hpp>
#include <dl/checkpoint.hpp>
#include <dl/communicator.hpp>
#include <dl/config.hpp>
#include <dl/error.hpp>
#include <dl/net.hpp>
#include <dl/solver.hpp>
#include <dl/stop.hpp>
#include <dl/train.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace dl {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Where a Data layer's relative paths start: --data-dir; else, for Caffe's prototxt, the working
/// directory, as Caffe's tools resolve them (its examples name examples/mnist/mnist_train_lmdb
/// from Caffe's root); else the YAML config's own folder.
fs::path data_base(const std::optional<fs::path>& data_dir, const fs::path& config) {
    if (data_dir) {
        return *data_dir;
    }
    return config.extension() == ".prototxt" ? fs::current_path() : config.parent_path();
}

fs::path resolve(const std::string& source, const fs::path& base) {
    if (source.empty()) {
        return {};
    }
    const fs::path path(source);
    return path.is_absolute() ? path : base / path;
}

// One Data layer's files, loaded once; the image shape is written into the layer config.
struct Source {
    std::shared_ptr<const data::IdxDataset> set; // shared by the nets that read the same files
    std::vector<float> mean;                     // mean_value, or the mean_file's image
    std::unique_ptr<data::BatchReader> reader;
};

/// The data sets a run has loaded, by everything that decides their contents: a test net that
/// reads the train net's files (the MNIST autoencoder's test-on-train net) shares its copy.
using LoadedSets = std::map<std::string, std::shared_ptr<const data::IdxDataset>>;

/// A Data layer's reader from stream position `cursor`: in file order, or in a fresh order
/// every epoch drawn from the solver's seed when the layer has `shuffle: true`.
/// Data parallel: `rank` of `ranks` reads its slice of every global batch (BatchReader).
/// Crops and flips follow Caffe's phase rules (data::CropMirror), drawn from the solver's seed.
/// The labels `input`'s records may have (data::LabelLimit), with its Data layer for messages.
data::LabelLimit label_limit(const NetInput& input, const fs::path& config_file) {
    const LayerConfig& layer = *input.layer;
    return {input.label_classes,
            fmt::format("{}:{}: layer '{}'", config_file.string(), layer.line, layer.name),
            layer.label_source, input.label_reader};
}

/// Every label of the loaded set against the net's limit, before the run starts: a bad record
/// anywhere is refused now rather than hours in, when its batch comes (the reader checks each
/// batch as well, where the labels are used). One pass over bytes in memory.
void check_labels(const Source& source, const NetInput& input, const fs::path& config_file) {
    if (const auto bad = data::first_bad_label(*source.set, label_limit(input, config_file))) {
        throw Error(ErrorKind::config, *bad);
    }
}

std::unique_ptr<data::BatchReader> make_reader(const Source& source, const NetInput& input,
                                               Phase phase, const SolverConfig& solver,
                                               std::uint64_t cursor, const fs::path& config_file,
                                               int rank = 0, int ranks = 1) {
    const LayerConfig& layer = *input.layer;
    const std::optional<std::uint32_t> seed =
        layer.shuffle ? std::optional<std::uint32_t>(solver.random_seed) : std::nullopt;
    const data::CropMirror crop{layer.crop_size, layer.mirror, phase == Phase::train,
                                solver.random_seed};
    return std::make_unique<data::BatchReader>(
        *source.set, layer.batch_size, layer.scale, data::SampleOrder(source.set->count, seed),
        cursor, 4, rank, ranks, source.mean, crop, label_limit(input, config_file));
}

// No data set may take more than all the memory the run may use.
data::DataBudget data_budget(const MemoryLimit& memory) {
    return {memory.bytes.value_or(std::numeric_limits<std::uint64_t>::max()), memory.source};
}

/// An ImageData layer's image paths: root_folder and the line's path joined as Caffe joins
/// them (by concatenation), resolved as the config's other data paths.
data::ImageListOptions image_list_options(const LayerConfig& layer, const fs::path& base) {
    data::ImageListOptions options;
    options.image_path = [root = layer.root_folder, base](const std::string& name) {
        return resolve(root + name, base);
    };
    options.new_height = layer.new_height;
    options.new_width = layer.new_width;
    options.is_color = layer.is_color;
    return options;
}

/// An HDF5Data layer's files, resolved as the config's other data paths, and the datasets its
/// tops name (Caffe's rule: a top reads the dataset of its name).
data::Hdf5Options hdf5_options(const LayerConfig& layer, const fs::path& base) {
    data::Hdf5Options options;
    options.file_path = [base](const std::string& name) { return resolve(name, base); };
    options.data_name = layer.tops.empty() ? "data" : layer.tops[0];
    options.label_name = layer.tops.size() > 1 ? layer.tops[1] : "";
    return options;
}

/// The layer's data set: read from its files, or the copy in `loaded` of the same files read
/// the same way.
std::shared_ptr<const data::IdxDataset> load_set(const LayerConfig& layer, const fs::path& images,
                                                 const fs::path& labels, const fs::path& base,
                                                 const data::DataBudget& budget,
                                                 LoadedSets* loaded) {
    const std::string key =
        fmt::format("{}\n{}\n{}\n{}\n{}\n{}x{}\n{}\n{}", layer.type, images.string(),
                    labels.string(), layer.backend, layer.root_folder, layer.new_height,
                    layer.new_width, layer.is_color, fmt::join(layer.tops, ","));
    if (loaded != nullptr) {
        if (const auto found = loaded->find(key); found != loaded->end()) {
            return found->second;
        }
    }
    data::IdxDataset set;
    if (layer.type == "ImageData") {
        set = data::load_image_list(images, image_list_options(layer, base), budget);
        if (labels.empty()) {
            set.labels.clear();
        }
    } else if (layer.type == "HDF5Data") {
        set = data::load_hdf5_list(images, hdf5_options(layer, base), budget);
    } else {
        data::check_backend(images, layer.backend);
        set = data::load_idx(images, labels, budget);
    }
    auto shared = std::make_shared<const data::IdxDataset>(std::move(set));
    if (loaded != nullptr) {
        loaded->emplace(key, shared);
    }
    return shared;
}

std::unique_ptr<Source> load_source(LayerConfig& layer, const fs::path& base,
                                    const fs::path& config_file, const data::DataBudget& budget,
                                    LoadedSets* loaded = nullptr) {
    auto source = std::make_unique<Source>();
    const fs::path images = resolve(layer.source, base);
    const fs::path labels = resolve(layer.label_source, base);
    try {
        source->set = load_set(layer, images, labels, base, budget, loaded);
    } catch (const Error& e) {
        std::error_code ec;
        const bool lost = !fs::path(layer.source).is_absolute() && !fs::exists(images, ec);
        throw Error(e.kind(),
                    fmt::format("{}:{}: layer '{}': {}{}", config_file.string(), layer.line,
                                layer.name, e.what(),
                                lost ? fmt::format(" (the relative source '{}' was looked for in "
                                                   "{}: --data-dir DIR, else the working "
                                                   "directory for a Caffe prototxt as Caffe's "
                                                   "tools do, else the YAML config's folder)",
                                                   layer.source, base.string())
                                     : std::string()));
    }
    const std::vector<int> shape = {source->set->channels, source->set->height, source->set->width};
    if (!layer.shape.empty() && layer.shape != shape) {
        throw Error(ErrorKind::config,
                    fmt::format("{}:{}: layer '{}': key 'shape' says {}x{}x{} but {} holds "
                                "{}x{}x{} images",
                                config_file.string(), layer.line, layer.name, layer.shape[0],
                                layer.shape[1], layer.shape[2], images.string(), shape[0], shape[1],
                                shape[2]));
    }
    layer.shape = shape;
    layer.source = images.string();
    layer.label_source = labels.string();
    source->mean = layer.mean_value;
    if (!layer.mean_file.empty()) {
        const fs::path mean_file = resolve(layer.mean_file, base);
        try {
            source->mean = data::load_mean_file(mean_file, shape[0], shape[1], shape[2]);
        } catch (const Error& e) {
            throw Error(e.kind(), fmt::format("{}:{}: layer '{}': {}", config_file.string(),
                                              layer.line, layer.name, e.what()));
        }
        layer.mean_file = mean_file.string();
    }
    return source;
}

std::string find_top(const NetConfig& config, const NetState& state, LayerRole role) {
    for (const auto& layer : config.layers) {
        if (in_net(layer, state) && has_role(layer, role) && !layer.tops.empty()) {
            return layer.tops[0];
        }
    }
    return {};
}

std::string duration_text(double seconds) {
    const auto total = static_cast<long long>(std::llround(seconds));
    if (total < 60) {
        return fmt::format("{}s", total);
    }
    if (total < 3600) {
        return fmt::format("{}m{:02}s", total / 60, total % 60);
    }
    return fmt::format("{}h{:02}m", total / 3600, (total % 3600) / 60);
}

/// The metrics line as a person reads it in the job's log, Caffe's "Iteration 100, loss = ..."
/// lines in short: `dljob logs --follow` and `tail -f slurm-*.out` show progress as it happens.
std::string progress_text(const nlohmann::json& line) {
    const std::string type = line.value("type", "");
    const auto iter = line.contains("max_iter") ? fmt::format("iter {}/{}", line.value("iter", 0),
                                                              line.value("max_iter", 0))
                                                : fmt::format("iter {}", line.value("iter", 0));
    if (type == "start") {
        std::string text =
            fmt::format("dltrain: training from iteration {} to {} on {}", line.value("iter", 0),
                        line.value("max_iter", 0), line.value("device", ""));
        if (const int ranks = line.value("ranks", 1); ranks > 1) {
            text +=
                fmt::format(", {} ranks x batch {} = {} ({})", ranks, line.value("batch_size", 0),
                            line.value("global_batch_size", 0), line.value("communicator", ""));
        } else {
            text += fmt::format(", batch {}", line.value("batch_size", 0));
        }
        if (const std::string build = line.value("build", ""); !build.empty()) {
            text += fmt::format(", {} build", build);
        }
        if (const std::string blas = line.value("blas", ""); !blas.empty()) {
            text += fmt::format(", OpenBLAS {} kernels", blas);
        }
        for (const auto& [key, what] : {std::pair{"resumed_from", "resumed from"},
                                        std::pair{"weights_from", "weights from"}}) {
            if (const std::string from = line.value(key, ""); !from.empty()) {
                text += fmt::format(", {} {}", what, from);
            }
        }
        return text;
    }
    if (type == "train") {
        std::string text = fmt::format(
            "{}  loss {:.4f}  lr {:.6g}  {:.0f} img/s  data wait {:.2f}%", iter,
            line.value("loss", 0.0), line.value("lr", 0.0), line.value("images_per_s", 0.0),
            100.0 * line.value("data_wait_fraction", 0.0));
        if (line.contains("allreduce_ms")) {
            text +=
                fmt::format("  allreduce {:.2f} ms/step ({:.2f} waited)",
                            line.value("allreduce_ms", 0.0), line.value("allreduce_wait_ms", 0.0));
        }
        return text;
    }
    // null (NaN written as JSON) where the net has no Accuracy layer.
    const auto number = [&line](const char* key) {
        const auto found = line.find(key);
        return found != line.end() && found->is_number() ? found->get<double>() : std::nan("");
    };
    if (type == "test") {
        // Several test nets (Caffe's test_state): each line says which, as Caffe's "Test net
        // output #N".
        std::string which;
        if (line.contains("net")) {
            which = fmt::format(" #{}", line.value("net", 0));
            if (line.contains("stages") && line["stages"].is_array() && !line["stages"].empty()) {
                which += fmt::format(" ({})", line["stages"].dump());
            }
        }
        if (std::isnan(number("accuracy"))) {
            return fmt::format("{}  test{} loss {:.4f}", iter, which, number("loss"));
        }
        return fmt::format("{}  test{} accuracy {:.4f}  loss {:.4f}", iter, which,
                           number("accuracy"), number("loss"));
    }
    if (type == "final") {
        std::string text =
            fmt::format("dltrain: {} at iteration {} of {}", line.value("status", ""),
                        line.value("iter", 0), line.value("max_iter", 0));
        // NaN when there is no test net, or the run left before testing.
        if (const double accuracy = number("test_accuracy"); !std::isnan(accuracy)) {
            text +=
                fmt::format(": test accuracy {:.4f}, loss {:.4f}", accuracy, number("test_loss"));
        } else if (const double loss = number("test_loss"); !std::isnan(loss)) {
            text += fmt::format(": test loss {:.4f}", loss);
        }
        return text + fmt::format("; {:.0f} img/s, {} in all",
                                  line.value("train_images_per_s", 0.0),
                                  duration_text(line.value("wall_s", 0.0)));
    }
    return line.dump();
}

class MetricsLog {
public:
    explicit MetricsLog(const fs::path& file) : m_file(std::fopen(file.c_str(), "a")) {
        if (m_file == nullptr) {
            throw Error(ErrorKind::training, fmt::format("cannot write {}", file.string()));
        }
    }
    ~MetricsLog() { std::fclose(m_file); }
    MetricsLog(const MetricsLog&) = delete;
    MetricsLog& operator=(const MetricsLog&) = delete;
    MetricsLog(MetricsLog&&) = delete;
    MetricsLog& operator=(MetricsLog&&) = delete;

    // One line per event, flushed at once: dljob's status reads the file while we run. The
    // same event goes to stdout for people, flushed too (a job's stdout is a file, not a tty).
    void write(const nlohmann::json& line) {
        const std::string text = line.dump() + "\n";
        std::fwrite(text.data(), 1, text.size(), m_file);
        std::fflush(m_file);
        const std::string shown = progress_text(line) + "\n";
        std::fwrite(shown.data(), 1, shown.size(), stdout);
        std::fflush(stdout);
    }

private:
    std::FILE* m_file;
};

struct TestResult {
    double accuracy = 0.0;
    double loss = 0.0;
};

// The step as a recording (a CUDA graph), unless DLTRAIN_GRAPHS=0 asks for op-by-op launches
// (to compare, or to rule graphs out). A recording that fails is a warning, not a failed run:
// the same ops then run one by one.
std::unique_ptr<Recording> record_step(Backend& backend, const std::function<void()>& step_ops) {
    const char* graphs = std::getenv("DLTRAIN_GRAPHS");
    if (graphs != nullptr && std::string(graphs) == "0") {
        return nullptr;
    }
    try {
        return backend.record(step_ops);
    } catch (const Error& e) {
        if (e.kind() != ErrorKind::device) {
            throw;
        }
        std::cerr << "dltrain: warning: " << e.what() << "; launching the step op by op\n";
        return nullptr;
    }
}

// The test net's input stage and recorded forward pass, kept from one test to the next.
struct TestPass {
    std::unique_ptr<InputStage> stage;
    std::unique_ptr<Recording> recording;
    bool tried_recording = false;
};

// Runs test_iter batches of the test net; accuracy and loss are means over the batches. Like
// the training steps: the next batch is read and uploaded while this one computes, and the
// forward pass runs directly once, then as a recording (a CUDA graph) when the backend records.
// `leave` is asked before every batch: a test pass can take minutes (test_iter: 3000), longer
// than a scheduler waits after its warning signal (Torque 2 s), so it is abandoned, unscored
// (nothing), when the run has to leave.
std::optional<TestResult> run_test(Net& net, Source& source, const NetConfig& config,
                                   const NetState& state, int test_iter, TestPass& pass,
                                   const std::function<bool()>& leave) {
    const std::string accuracy_top = find_top(config, state, LayerRole::metric);
    const std::string loss_top = find_top(config, state, LayerRole::loss);
    NetInput& input = net.inputs().front();
    Backend& backend = net.backend();
    if (!pass.stage) {
        pass.stage = backend.make_input_stage(
            {input.data->count(), input.labels != nullptr ? input.labels->count() : 0}, 2);
    }
    const std::vector<float*> input_tensors = {
        input.data->data(), input.labels != nullptr ? input.labels->data() : nullptr};
    const auto read_batch = [&](int slot) {
        source.reader->next(pass.stage->host(slot, 0),
                            input.labels != nullptr ? pass.stage->host(slot, 1) : nullptr);
        pass.stage->upload(slot);
    };
    const auto forward = [&net] { net.enqueue_forward(); };
    TestResult result;
    int slot = 0;
    if (test_iter > 0) {
        read_batch(slot);
    }
    for (int i = 0; i < test_iter; ++i) {
        if (leave()) {
            return std::nullopt;
        }
        pass.stage->consume(slot, input_tensors);
        if (pass.recording) {
            pass.recording->replay();
        } else {
            forward();
            if (!pass.tried_recording) {
                pass.tried_recording = true;
                pass.recording = record_step(backend, forward);
            }
        }
        if (i + 1 < test_iter) {
            slot = 1 - slot;
            read_batch(slot);
        }
        if (!accuracy_top.empty()) {
            result.accuracy += net.blob(accuracy_top)->read_scalar();
        }
        if (!loss_top.empty()) {
            result.loss += net.read_loss(); // every loss by its weight, as training reports it
        }
    }
    // A net without an Accuracy layer (an autoencoder's) has no accuracy: null in the metrics.
    result.accuracy = accuracy_top.empty() ? std::nan("") : result.accuracy;
    result.accuracy /= std::max(test_iter, 1);
    result.loss /= std::max(test_iter, 1);
    return result;
}

/// One of the solver's test nets (one per Caffe test_state): its data, its net, the pass kept
/// from one test to the next and its last result.
struct TestNet {
    NetState state;
    int test_iter = 0;
    std::unique_ptr<Source> source;
    std::unique_ptr<Net> net;
    TestPass pass;
    // The cursor where an abandoned test pass began: the checkpoint records it, so the resumed
    // run repeats that whole test and reads what an unbroken run would have.
    std::optional<std::uint64_t> abandoned_cursor;
    TestResult last{std::nan(""), std::nan("")};
};

/// The Data layer of the net of `state`, loaded (or shared from `loaded`), its shape fixed in
/// the config; null when the net has none.
std::unique_ptr<Source> load_net_source(NetConfig& config, const NetState& state,
                                        const fs::path& base, const MemoryLimit& memory,
                                        LoadedSets* loaded = nullptr) {
    for (auto& layer : config.layers) {
        if (has_role(layer, LayerRole::input) && in_net(layer, state)) {
            return load_source(layer, base, config.file, data_budget(memory), loaded);
        }
    }
    return nullptr;
}

/// A Data layer without `shape` takes its images' C x H x W from the file's header; a bad
/// file is a config error naming the layer.
void shape_from_header(LayerConfig& layer, const fs::path& base, const fs::path& config_file,
                       const MemoryLimit& memory) {
    const fs::path images = resolve(layer.source, base);
    try {
        const data::IdxDataset header =
            layer.type == "ImageData"
                ? data::read_image_list_header(images, image_list_options(layer, base))
            : layer.type == "HDF5Data"
                ? data::read_hdf5_list_header(images, hdf5_options(layer, base))
                : data::read_idx_header(images, data_budget(memory));
        layer.shape = {header.channels, header.height, header.width};
    } catch (const Error& e) {
        throw Error(e.kind(), fmt::format("{}:{}: layer '{}': {}", config_file.string(), layer.line,
                                          layer.name, e.what()));
    }
}

/// What --weights gave the net, for stderr.
std::string describe(const WeightsCopy& copy, const fs::path& file) {
    std::string text =
        fmt::format("dltrain: {} parameters from {}", copy.copied.size(), file.string());
    if (!copy.kept.empty()) {
        text += fmt::format("; from their fillers: {}", fmt::join(copy.kept, ", "));
    }
    if (!copy.reshaped.empty()) {
        text +=
            fmt::format("; from their fillers, shapes differ: {}", fmt::join(copy.reshaped, "; "));
    }
    if (!copy.unused.empty()) {
        text += fmt::format("; not in this network: {}", fmt::join(copy.unused, ", "));
    }
    return text;
}

/// --weights: a dltrain checkpoint, or a Caffe model (.caffemodel) read by layer name.
WeightsCopy copy_any_weights(const fs::path& file, Net& net) {
    return io::is_caffemodel(file) ? io::copy_caffemodel_weights(file, net)
                                   : copy_weights(file, net);
}

/// The device of this rank: an explicit cuda:N is taken as given; "cuda" (or the default GPU)
/// becomes the local rank's GPU among the visible ones, so N ranks on a node of N GPUs use one
/// each, and ranks that each see one GPU (Slurm's per-task binding) all use their own cuda:0.
std::string rank_device(const std::string& asked, const RankEnv& env, int ranks) {
    std::string device = asked.empty() ? default_device() : asked;
    if (ranks <= 1 || !(device == "cuda" || (asked.empty() && device == "cuda:0"))) {
        return device;
    }
    std::string why;
    const auto* plugin = cuda_loader::load(why);
    const int visible = plugin != nullptr ? plugin->visible_gpu_count() : 0;
    if (visible <= 0) {
        return device; // make_backend says why there is no GPU
    }
    return fmt::format("cuda:{}", env.local_rank % visible);
}

/// Rank r > 0 draws its dropout masks from a stream of its own, restarted every step from
/// (seed, rank, iteration): independent of the other ranks' masks, and the same in a resumed run
/// as in an unbroken one without any per-rank state in the checkpoint. Rank 0 keeps the net's
/// continuous stream (saved in the checkpoint), so that one rank trains as it always did.
void seed_dropout_stream(std::mt19937& rng, std::uint32_t seed, int rank, int iteration) {
    std::seed_seq sequence{seed, static_cast<std::uint32_t>(rank),
                           static_cast<std::uint32_t>(iteration), 0x64726f70U /* "drop" */};
    rng.seed(sequence);
}

/// A device draws a mask from (a key, its draw counter, the index), the key taken from the rng
/// when the step is recorded and then fixed in the recording. So on a device rank r > 0 the
/// keys come from (seed, rank) alone, the generator restarted where the step's ops are issued,
/// recorded or not, and the iteration goes into the counter, set before every step: each mask
/// is again a function of (seed, rank, iteration, which Dropout layer). Room for 2^20 Dropout
/// layers per step.
constexpr int k_dropout_key_iteration = -1;
std::uint64_t dropout_counter(int iteration) {
    return static_cast<std::uint64_t>(iteration) << 20U;
}

/// FNV-1a, continued from `hash` over `size` bytes: what the ranks compare at start-up.
std::uint64_t fnv1a(std::uint64_t hash, const void* data, std::size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) {
        hash = (hash ^ bytes[i]) * 1099511628211ULL;
    }
    return hash;
}
constexpr std::uint64_t k_fnv_basis = 1469598103934665603ULL;

/// 62 bits: the agreement negates a hash (max of -h is -min), which must not overflow.
std::int64_t agreement_bits(std::uint64_t hash) {
    return static_cast<std::int64_t>(hash >> 2U);
}

/// Every parameter's bytes: equal on every rank after the start-up, or the ranks would train
/// different models.
std::int64_t parameter_hash(const Net& net) {
    std::uint64_t hash = k_fnv_basis;
    for (const auto& param : net.params()) {
        const std::vector<float> values = param.tensor->read_data();
        hash = fnv1a(hash, values.data(), values.size() * sizeof(float));
    }
    return agreement_bits(hash);
}

/// The config as dltrain reads it (net, solver, --solver and --max-iter applied).
std::int64_t text_hash(const std::string& text) {
    return agreement_bits(fnv1a(k_fnv_basis, text.data(), text.size()));
}

/// Ranks whose configs differ (a per-rank --solver, a file edited while the job started) would
/// train with different batch sizes or rates and still sum their gradients as one model. Every
/// rank, once the agreement has shown they differ, takes rank 0's text and names the first line
/// where its own differs.
[[noreturn]] void refuse_different_configs(Communicator& comm, const std::string& mine) {
    // Rank 0's text, at most 16 MiB (the configs dltrain reads are under its document limits):
    // every rank takes the size rank 0 sends, so the broadcast's sizes agree.
    constexpr std::int64_t k_max_bytes = std::int64_t{16} << 20U;
    std::int64_t size =
        comm.rank() == 0 ? std::min(static_cast<std::int64_t>(mine.size()), k_max_bytes) : 0;
    comm.broadcast(&size, sizeof(size), 0, "the config comparison");
    std::string root_text = comm.rank() == 0 ? mine.substr(0, static_cast<std::size_t>(size))
                                             : std::string(static_cast<std::size_t>(size), '\0');
    comm.broadcast(root_text.data(), root_text.size(), 0, "the config comparison");
    const auto lines_of = [](const std::string& text) {
        std::vector<std::string> lines;
        std::istringstream in(text);
        for (std::string line; std::getline(in, line);) {
            const std::size_t start = line.find_first_not_of(' ');
            lines.push_back(start == std::string::npos ? "" : line.substr(start));
        }
        return lines;
    };
    const std::vector<std::string> theirs = lines_of(root_text);
    const std::vector<std::string> ours = lines_of(mine);
    std::size_t line = 0;
    while (line < theirs.size() && line < ours.size() && theirs[line] == ours[line]) {
        ++line;
    }
    const auto at = [line](const std::vector<std::string>& lines) {
        return line < lines.size() ? fmt::format("'{}'", lines[line]) : "nothing";
    };
    throw Error(ErrorKind::config,
                comm.rank() == 0
                    ? "the ranks were given different configs (another rank names the line); "
                      "give every rank the same config, --solver and --max-iter"
                    : fmt::format("rank {} was given another config than rank 0: line {} of the "
                                  "config as read is {} on rank 0 and {} here; give every rank "
                                  "the same config, --solver and --max-iter",
                                  comm.rank(), line + 1, at(theirs), at(ours)));
}

/// Caffe's train and time: -level replaces the train_state's level, each -stage is added to
/// its stages.
void apply_train_state(SolverConfig& solver, const StateFlags& flags) {
    if (flags.level) {
        solver.train_state.level = *flags.level;
    }
    if (flags.stages) {
        solver.train_state.stages.insert(solver.train_state.stages.end(), flags.stages->begin(),
                                         flags.stages->end());
    }
}

} // namespace

std::optional<double> deadline_seconds(const std::string& spec) {
    // Seconds kept free before the scheduler's end time: enough to finish a step and write a
    // checkpoint on a slow shared file system.
    constexpr double k_margin_s = 120.0;
    if (spec == "none") {
        return std::nullopt;
    }
    if (spec.empty() || spec == "auto") {
        if (const char* end = std::getenv("SLURM_JOB_END_TIME")) {
            const double now =
                std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                    .count();
            return std::strtod(end, nullptr) - now - k_margin_s;
        }
        if (const char* walltime = std::getenv("PBS_WALLTIME")) {
            // Torque gives the walltime in seconds, not the end time: counting it from now
            // overestimates what is left by the job's start-up time, which the margin covers.
            return std::strtod(walltime, nullptr) - k_margin_s;
        }
        return std::nullopt;
    }
    std::size_t used = 0;
    double value = 0.0;
    try {
        value = std::stod(spec, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    const std::string unit = spec.substr(used);
    const std::map<std::string, double> units = {{"", 1.0}, {"s", 1.0}, {"m", 60.0}, {"h", 3600.0}};
    const auto found = units.find(unit);
    if (used == 0 || found == units.end() || value < 0) {
        throw Error(ErrorKind::usage,
                    fmt::format("--deadline '{}': expected seconds from now (e.g. 3600, 90m, 2h), "
                                "'auto' or 'none'",
                                spec));
    }
    return value * found->second;
}

namespace {

/// How gradients are summed, from DLTRAIN_COMM: "mpi" (the default; host staging for a GPU
/// unless the MPI is CUDA-aware), "gloo" (ranks meet without MPI; make_communicator reads it) or
/// "nccl".
std::string communicator_kind() {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts
    const char* comm_env = std::getenv("DLTRAIN_COMM");
    const std::string kind = comm_env != nullptr ? comm_env : "";
    if (!kind.empty() && kind != "mpi" && kind != "gloo" && kind != "nccl") {
        throw Error(ErrorKind::usage,
                    fmt::format("DLTRAIN_COMM='{}': expected mpi, gloo or nccl", kind));
    }
    return kind;
}

/// Images per second and data-wait fraction over the steps since the last display line, and
/// training time and images over the whole run.
struct Throughput {
    double total_s = 0.0;
    long long total_images = 0;
    double window_s = 0.0;
    double window_wait_s = 0.0;
    long long window_images = 0;
    int window_steps = 0;
    double exchange_s = 0.0; // the gradient sums' time, displayed windows only
    double exchange_wait_s = 0.0;

    void add_step(double step_s, double waited_s, long long images) {
        total_s += step_s;
        total_images += images;
        window_s += step_s;
        window_wait_s += waited_s;
        window_images += images;
        ++window_steps;
    }
    void start_window() {
        window_s = 0.0;
        window_wait_s = 0.0;
        window_images = 0;
        window_steps = 0;
    }
};

/// One `dltrain train`: dl::train runs its steps in order. The members are what the steps
/// share, declared in the order they come to exist, so that they are also destroyed in the
/// reverse of it (the communicators before the nets' backend, a recording before its stage).
class TrainingRun {
public:
    explicit TrainingRun(const TrainOptions& options);
    void load_data_and_nets();
    void restore_weights();
    void open_run_directory();
    void agree_at_start();
    void prepare_exchange_and_readers();
    void train_steps();
    int finish();

private:
    bool must_leave() const {
        return stop_requested() || (m_deadline && seconds_since(m_wall_start) >= *m_deadline);
    }
    void leave_if_asked(const char* during) const;
    void lock_run_dir();
    void log(const nlohmann::json& line) {
        if (m_metrics) {
            m_metrics->write(line);
        }
    }
    void write_start_line();
    /// Bytes of the data sets held in memory, each shared set once.
    [[nodiscard]] std::uint64_t data_bytes() const;
    double read_batch(int slot);
    TrainingState current_state() const;
    void checkpoint();
    bool test_now();
    bool test_all();
    void step_ops();
    bool step();
    std::optional<GradientExchange::Outcome> sum_gradients(int iter);
    float step_loss(int iter, std::optional<float> global_loss, bool wanted);
    void display(int iter, float loss, float rate);

    const TrainOptions& m_options;
    const Clock::time_point m_wall_start = Clock::now();
    NetConfig m_config;
    std::string m_config_text;
    std::optional<double> m_deadline;
    MemoryLimit m_memory;
    std::string m_comm_kind;
    std::size_t m_bucket_cap = 0;
    RankEnv m_rank_env;
    std::unique_ptr<Communicator> m_comm;
    int m_ranks = 1;
    bool m_root = true;
    bool m_distributed = false;
    std::unique_ptr<RunDirLock> m_lock;
    std::string m_lock_error;
    std::unique_ptr<Backend> m_backend_owner;
    Backend* m_backend = nullptr;
    std::unique_ptr<Source> m_train_source;
    std::unique_ptr<Net> m_net;
    std::vector<TestNet> m_tests; // those with data and test_iter > 0
    std::unique_ptr<Solver> m_solver;
    fs::path m_checkpoint_dir;
    TrainingState m_state;
    std::optional<fs::path> m_resume_from;
    std::unique_ptr<GradientExchange> m_exchange;
    std::unique_ptr<Communicator> m_nccl;
    std::unique_ptr<MetricsLog> m_metrics;
    std::unique_ptr<InputStage> m_stage;
    std::vector<float*> m_input_tensors;
    // The reader has handed out a batch that no step has used yet, which a checkpoint must not
    // count as seen.
    bool m_staged = false;
    int m_last_checkpoint = -1;
    bool m_overlap = false;
    bool m_device_dropout_keys = false;
    std::unique_ptr<Recording> m_recording;
    bool m_tried_recording = false;
    int m_slot = 0;
    double m_waited = 0.0;
    Throughput m_throughput;
    // Where the rest of the wall time went (the final line): everything before the first step
    // (backend, data, nets), the first step itself (a GPU's algorithm search and graph
    // capture), the test passes and the checkpoints.
    std::optional<double> m_setup_s;
    double m_first_step_s = 0.0;
    double m_test_s = 0.0;
    double m_checkpoint_s = 0.0;
    bool m_leaving = false;
};

TrainingRun::TrainingRun(const TrainOptions& options) : m_options(options) {
    // First of all: a signal while the data loads or the nets are built must not kill the run
    // (the default action) but make it leave as soon as it can, with exit 75.
    install_stop_signals();
    if (options.weights && !options.resume.empty() && options.resume != "auto") {
        throw Error(ErrorKind::usage,
                    "give a checkpoint to resume (--resume) or weights to fine-tune from "
                    "(--weights), not both; with --resume auto the weights are used only while "
                    "the run has no checkpoint of its own");
    }
    m_config = load_config(options.config, options.solver_overrides);
    apply_train_state(m_config.solver, options.state);
    if (options.max_iter) {
        m_config.solver.max_iter = *options.max_iter;
    }
    m_deadline = deadline_seconds(options.deadline);
    m_memory = memory_limit(options.max_memory);
    m_comm_kind = communicator_kind();
    // The gradient buckets' size: a bad value is refused before anything starts.
    m_bucket_cap = bucket_cap_floats();
    // The ranks, from the launcher's environment: one rank loads no MPI at all.
    m_rank_env = detect_rank_env();
    m_comm = make_communicator(m_rank_env);
    m_ranks = m_comm->size();
    m_root = m_comm->rank() == 0;
    m_distributed = m_ranks > 1;
    // What the ranks must agree on, taken before the data sources are resolved: ranks may read
    // their data from different places (node-local copies), never with different settings.
    if (m_distributed) {
        m_config_text = to_yaml(m_config);
    }
    // Held before the run directory's checkpoints are read, when it exists already.
    if (std::error_code ec; fs::is_directory(options.run_dir, ec)) {
        lock_run_dir();
    }
}

// Rank 0 owns the run directory for the set of ranks; a second training is refused. With
// several ranks, rank 0's refusal reaches the others through the start-up agreement.
void TrainingRun::lock_run_dir() {
    if (!m_root || m_lock || !m_lock_error.empty()) {
        return;
    }
    try {
        m_lock = std::make_unique<RunDirLock>(m_options.run_dir);
    } catch (const Error& e) {
        if (!m_distributed) {
            throw;
        }
        m_lock_error = e.what();
    }
}

// Before the first step there is nothing to save: the run leaves with exit 75 and a resume
// starts where its newest checkpoint (if any) is. Ranks leave together, through the start-up
// agreement, not each on its own.
void TrainingRun::leave_if_asked(const char* during) const {
    if (!m_distributed && must_leave()) {
        throw Error(ErrorKind::stopped,
                    fmt::format("stopped by a signal or the deadline {}, before the first step: "
                                "nothing new to checkpoint; resume with --resume auto (exit {})",
                                during, exit_code::checkpointed));
    }
}

void TrainingRun::load_data_and_nets() {
    const fs::path base = data_base(m_options.data_dir, m_options.config);
    LoadedSets loaded;
    m_train_source =
        load_net_source(m_config, m_config.solver.train_state, base, m_memory, &loaded);
    if (!m_train_source) {
        throw Error(ErrorKind::config,
                    fmt::format("{}: no Data layer in the train phase", m_config.file.string()));
    }
    for (const auto& spec : test_nets_of(m_config.solver)) {
        TestNet test;
        test.state = spec.state;
        test.test_iter = spec.test_iter;
        if (test.test_iter > 0) {
            test.source = load_net_source(m_config, test.state, base, m_memory, &loaded);
        }
        if (test.source) {
            m_tests.push_back(std::move(test));
        }
    }
    leave_if_asked("while the data loaded");
    // Before any tensor exists: a net too large is refused naming its layer, not a bad_alloc.
    check_memory(m_config, !m_tests.empty(), m_memory);
    // The device before anything is written: a bad --device leaves no run directory behind.
    m_backend_owner =
        make_backend(rank_device(m_options.device, m_rank_env, m_ranks), m_options.threads);
    m_backend = m_backend_owner.get();
    if (m_comm_kind == "nccl" && m_backend->host_accessible()) {
        throw Error(ErrorKind::usage,
                    fmt::format("DLTRAIN_COMM=nccl sums GPU memory, and this run is on {}: train "
                                "with --device cuda, or leave DLTRAIN_COMM unset",
                                m_backend->device_name()));
    }
    const std::uint32_t seed = m_config.solver.random_seed;
    m_net = std::make_unique<Net>(m_config, m_config.solver.train_state, *m_backend, seed);
    check_labels(*m_train_source, m_net->inputs().front(), m_config.file);
    for (TestNet& test : m_tests) {
        test.net = std::make_unique<Net>(m_config, test.state, *m_backend, seed, m_net.get());
        check_labels(*test.source, test.net->inputs().front(), m_config.file);
    }
    m_solver = std::make_unique<Solver>(m_config.solver, *m_net, *m_backend);
}

void TrainingRun::restore_weights() {
    m_checkpoint_dir = m_options.run_dir / "checkpoints";
    if (m_options.resume == "auto") {
        m_resume_from = find_latest_checkpoint(m_checkpoint_dir, [](const std::string& warning) {
            std::cerr << "dltrain: warning: " << warning << '\n';
        });
    } else if (!m_options.resume.empty()) {
        m_resume_from = fs::path(m_options.resume);
    }
    if (m_resume_from) {
        m_state = read_checkpoint(*m_resume_from, *m_net, m_solver.get());
        // Once for the set of ranks: every rank reads the same checkpoint (the agreement checks).
        if (m_root) {
            std::cerr << fmt::format("dltrain: resuming from {} (iteration {}){}\n",
                                     m_resume_from->string(), m_state.iteration,
                                     m_options.weights ? "; --weights not used" : "");
        }
    } else if (m_options.weights) {
        // A requeued job runs the same command line: its own checkpoints win (above).
        const std::string copied =
            describe(copy_any_weights(*m_options.weights, *m_net), *m_options.weights);
        if (m_root) {
            std::cerr << copied << '\n';
        }
    }
    // A run resumed from its own newest checkpoint does not write that checkpoint again when
    // it leaves without a step: an unchanged checkpoint directory is how dljob tells a job that
    // makes no progress from one that does, and stops resubmitting it.
    if (m_options.resume == "auto" && m_resume_from) {
        m_last_checkpoint = m_solver->iteration();
    }
    leave_if_asked("while the nets were built");
}

// Written only now: a bad --resume or --weights leaves no run directory behind.
void TrainingRun::open_run_directory() {
    if (m_root) {
        fs::create_directories(m_options.run_dir);
        lock_run_dir();
    }
}

// The start-up agreement, one collective: rank 0 holds the run directory, nobody was asked to
// stop, and every rank starts from the same iteration, the same weights (the same checkpoint,
// or the same fillers from the same seed) and the same config.
void TrainingRun::agree_at_start() {
    if (!m_distributed) {
        return;
    }
    const std::int64_t hash = parameter_hash(*m_net);
    const std::int64_t iter = m_solver->iteration();
    const std::int64_t config_hash = text_hash(m_config_text);
    std::int64_t agree[] = {m_lock_error.empty() ? 0 : 1,
                            must_leave() ? 1 : 0,
                            iter,
                            -iter,
                            hash,
                            -hash,
                            config_hash,
                            -config_hash};
    // Ranks load data and build nets at their own pace: the first wait is a long one.
    m_comm->set_timeout(3.0 * collective_timeout_seconds());
    m_comm->allreduce_max(agree, std::size(agree), "the start-up agreement");
    m_comm->set_timeout(collective_timeout_seconds());
    if (agree[0] != 0) {
        throw Error(ErrorKind::usage,
                    m_root ? m_lock_error
                           : fmt::format("rank 0 could not lock the run directory {} (its "
                                         "message says who holds it)",
                                         m_options.run_dir.string()));
    }
    if (agree[6] != -agree[7]) {
        refuse_different_configs(*m_comm, m_config_text);
    }
    if (agree[2] != -agree[3] || agree[4] != -agree[5]) {
        throw Error(ErrorKind::training,
                    fmt::format("the ranks start from different {} (this rank, {}: iteration "
                                "{}): do they all see the same run directory and checkpoint?",
                                agree[2] != -agree[3] ? "iterations" : "weights", m_comm->rank(),
                                iter));
    }
    if (agree[1] != 0) {
        throw Error(ErrorKind::stopped,
                    fmt::format("stopped by a signal or the deadline on a rank before the first "
                                "step: nothing new to checkpoint; resume with --resume auto "
                                "(exit {})",
                                exit_code::checkpointed));
    }
}

void TrainingRun::prepare_exchange_and_readers() {
    // DLTRAIN_COMM=nccl: the sum on the GPUs through NCCL (one GPU per rank), bootstrapped over
    // the MPI ranks; even one rank then sums through it, which is how one GPU checks the path.
    if (m_comm_kind == "nccl") {
        std::string why;
        const auto* plugin = cuda_loader::load(why);
        if (plugin == nullptr) {
            throw Error(ErrorKind::device, "DLTRAIN_COMM=nccl: " + why);
        }
        m_nccl = plugin->make_nccl_communicator(*m_backend, *m_comm, collective_timeout_seconds());
    }
    if (m_distributed || m_nccl) {
        m_exchange =
            std::make_unique<GradientExchange>(*m_net, m_nccl ? *m_nccl : *m_comm, m_bucket_cap);
    }
    if (m_root) {
        std::ofstream resolved(m_options.run_dir / "config.resolved.yaml");
        resolved << to_yaml(m_config);
    }
    m_train_source->reader =
        make_reader(*m_train_source, m_net->inputs().front(), Phase::train, m_config.solver,
                    m_state.train_cursor, m_config.file, m_comm->rank(), m_ranks);
    std::vector<std::string> test_nets;
    test_nets.reserve(m_tests.size());
    for (const TestNet& test : m_tests) {
        test_nets.push_back(net_state_text(test.state));
    }
    const std::vector<std::uint64_t> cursors = test_cursors_for(m_state, test_nets);
    for (std::size_t i = 0; i < m_tests.size(); ++i) {
        TestNet& test = m_tests[i];
        test.source->reader = make_reader(*test.source, test.net->inputs().front(), Phase::test,
                                          m_config.solver, cursors[i], m_config.file);
    }
    // Rank 0 alone writes metrics, test results and checkpoints: the weights are the same on
    // every rank after every step.
    if (m_root) {
        m_metrics = std::make_unique<MetricsLog>(m_options.run_dir / "metrics.jsonl");
    }
    write_start_line();
}

std::uint64_t TrainingRun::data_bytes() const {
    std::set<const data::IdxDataset*> sets{m_train_source->set.get()};
    for (const TestNet& test : m_tests) {
        sets.insert(test.source->set.get());
    }
    std::uint64_t bytes = 0;
    for (const data::IdxDataset* set : sets) {
        bytes += set->pixels.size() + (set->float_pixels.size() + set->labels.size()) * 4;
    }
    return bytes;
}

void TrainingRun::write_start_line() {
    const LayerConfig& train_layer = *m_net->inputs().front().layer;
    nlohmann::json line = {
        {"type", "start"},
        {"iter", m_solver->iteration()},
        {"max_iter", m_config.solver.max_iter},
        {"resumed_from", m_resume_from ? m_resume_from->string() : ""},
        {"weights_from", !m_resume_from && m_options.weights ? m_options.weights->string() : ""},
        {"threads", m_backend->threads()},
        {"backend", m_backend->name()},
        {"device", m_backend->device_name()},
        {"batch_size", train_layer.batch_size},
        {"data_bytes", data_bytes()},
        {"build", m_options.build},
        {"blas", m_backend->name() == "cpu" ? blas_core() : std::string()}};
    if (m_exchange) {
        // The config's batch is per rank (Caffe's rule); the learning rate is the config's,
        // not scaled behind anyone's back (docs/data-parallel.md).
        line["ranks"] = m_ranks;
        line["global_batch_size"] = m_ranks * train_layer.batch_size;
        // The one that sums: NCCL when asked for (bootstrapped over `comm`), else `comm`.
        line["communicator"] =
            fmt::format("{}, {}", m_nccl ? m_nccl->name() : m_comm->name(), m_exchange->path());
        line["launcher"] = m_rank_env.launcher;
        line["buckets"] = m_exchange->bucket_count();
    }
    log(line);
}

double TrainingRun::read_batch(int slot) {
    const NetInput& input = m_net->inputs().front();
    const double waited = m_train_source->reader->next(
        m_stage->host(slot, 0), input.labels != nullptr ? m_stage->host(slot, 1) : nullptr);
    m_stage->upload(slot);
    return waited;
}

TrainingState TrainingRun::current_state() const {
    TrainingState now;
    now.iteration = m_solver->iteration();
    const data::BatchReader& reader = *m_train_source->reader;
    const std::uint64_t cursor = reader.cursor();
    now.train_cursor = m_staged ? cursor - reader.stride() : cursor;
    for (const TestNet& test : m_tests) {
        now.test_cursors.push_back(test.abandoned_cursor ? *test.abandoned_cursor
                                                         : test.source->reader->cursor());
        now.test_nets.push_back(net_state_text(test.state));
    }
    std::ostringstream rng;
    rng << m_net->rng();
    now.rng_state = rng.str();
    return now;
}

void TrainingRun::checkpoint() {
    if (m_root && m_last_checkpoint != m_solver->iteration()) {
        const auto start = Clock::now();
        write_checkpoint(m_checkpoint_dir, current_state(), *m_net, *m_solver,
                         m_config.solver.keep_checkpoints);
        if (m_options.caffemodel_prefix) {
            io::write_caffemodel(fmt::format("{}_iter_{}.caffemodel",
                                             m_options.caffemodel_prefix->string(),
                                             m_solver->iteration()),
                                 m_config, *m_net);
        }
        m_last_checkpoint = m_solver->iteration();
        m_checkpoint_s += seconds_since(start);
    }
}

// test_all, its time counted for the final line.
bool TrainingRun::test_now() {
    const auto start = Clock::now();
    const bool done = test_all();
    m_test_s += seconds_since(start);
    return done;
}

// Every test net in turn, as Caffe's TestAll; false when a pass was abandoned because the run
// must leave (the checkpoint then keeps every net's cursor from before this round, and the
// resumed run takes the whole round again).
bool TrainingRun::test_all() {
    std::vector<std::uint64_t> started;
    started.reserve(m_tests.size());
    for (const TestNet& test : m_tests) {
        started.push_back(test.source->reader->cursor());
    }
    for (std::size_t i = 0; i < m_tests.size(); ++i) {
        TestNet& test = m_tests[i];
        // Every rank tests (the same weights, the same batches: the same answer) so that all
        // stay in step; only together, at a step's agreement, may they leave, so a test pass
        // with several ranks is never abandoned halfway.
        const auto never = [] { return false; };
        const auto leave = [this] { return must_leave(); };
        const auto result =
            run_test(*test.net, *test.source, m_config, test.state, test.test_iter, test.pass,
                     m_distributed ? std::function<bool()>(never) : std::function<bool()>(leave));
        if (!result) {
            // The resumed run takes this whole round of tests again, from where it began.
            for (std::size_t j = 0; j < m_tests.size(); ++j) {
                m_tests[j].abandoned_cursor = started[j];
            }
            return false;
        }
        test.last = *result;
        nlohmann::json line = {{"type", "test"},
                               {"iter", m_solver->iteration()},
                               {"max_iter", m_config.solver.max_iter},
                               {"accuracy", test.last.accuracy},
                               {"loss", test.last.loss}};
        if (m_tests.size() > 1) {
            line["net"] = i;
            line["stages"] = test.state.stages;
        }
        log(line);
    }
    return true;
}

// One step's ops: run directly the first time (that sets up descriptors, algorithms and
// workspaces), then recorded once and replayed when the backend records (a CUDA graph). With
// several ranks the update waits for the gradient sum: only forward and backward are recorded,
// and the update runs after the exchange. With several gradient buckets the backward pass runs
// unrecorded, so that each bucket's sum starts as its layers finish.
void TrainingRun::step_ops() {
    if (m_device_dropout_keys) {
        seed_dropout_stream(m_net->rng(), m_config.solver.random_seed, m_comm->rank(),
                            k_dropout_key_iteration);
    }
    m_net->enqueue_forward();
    if (!m_overlap) {
        m_net->backward();
    }
    if (!m_exchange) {
        m_solver->enqueue_update();
    }
}

void TrainingRun::train_steps() {
    // The batch of the next step is read (and on a GPU uploaded) while this step computes: two
    // stage slots, used in turn.
    NetInput& input = m_net->inputs().front();
    m_stage = m_backend->make_input_stage(
        {input.data->count(), input.labels != nullptr ? input.labels->count() : 0}, 2);
    m_input_tensors = {input.data->data(),
                       input.labels != nullptr ? input.labels->data() : nullptr};
    m_overlap = m_exchange && m_exchange->bucket_count() > 1;
    m_device_dropout_keys = m_comm->rank() > 0 && !m_backend->host_accessible();
    if (m_solver->iteration() < m_config.solver.max_iter) {
        m_waited = read_batch(m_slot);
        m_staged = true;
    }
    while (m_solver->iteration() < m_config.solver.max_iter && step()) {
    }
}

// One iteration: a test when one is due, the step, its report and checkpoint. False when the
// run must leave now.
bool TrainingRun::step() {
    const SolverConfig& s = m_config.solver;
    const int iter = m_solver->iteration();
    if (!m_setup_s) {
        m_setup_s = seconds_since(m_wall_start);
    }
    if (!m_tests.empty() && s.test_interval > 0 && iter % s.test_interval == 0 &&
        (iter > 0 || s.test_initialization) && !test_now()) {
        m_leaving = true;
        return false;
    }
    const auto step_start = Clock::now();
    m_stage->consume(m_slot, m_input_tensors);
    m_staged = false;
    const float rate = m_solver->current_lr();
    m_solver->prepare_update();
    if (m_device_dropout_keys) {
        m_backend->set_dropout_counter(dropout_counter(iter));
    } else if (m_comm->rank() > 0) {
        seed_dropout_stream(m_net->rng(), s.random_seed, m_comm->rank(), iter);
    }
    if (m_recording) {
        m_recording->replay();
    } else {
        step_ops();
        if (!m_tried_recording) {
            m_tried_recording = true;
            m_recording = record_step(*m_backend, [this] { step_ops(); });
        }
    }
    const std::optional<GradientExchange::Outcome> summed = sum_gradients(iter);
    m_solver->advance();
    // The next batch is read into the other slot while the device computes this step.
    double next_waited = 0.0;
    if (m_solver->iteration() < s.max_iter) {
        m_slot = 1 - m_slot;
        next_waited = read_batch(m_slot);
        m_staged = true;
    }
    const bool display_now = s.display > 0 && iter % s.display == 0;
    const bool snapshot_now = s.snapshot > 0 && m_solver->iteration() % s.snapshot == 0;
    const float loss = step_loss(iter, summed ? std::optional<float>(summed->loss) : std::nullopt,
                                 display_now || snapshot_now);
    // Steps still queued on a device belong to training time, not to the test that follows.
    if (!m_tests.empty() && s.test_interval > 0 && m_solver->iteration() % s.test_interval == 0) {
        m_backend->synchronize();
    }
    // Images of the global batch: the throughput of the whole set of ranks.
    const int batch = m_net->inputs().front().layer->batch_size;
    const double step_s = seconds_since(step_start);
    if (m_throughput.total_images == 0) {
        m_first_step_s = step_s;
    }
    m_throughput.add_step(step_s, m_waited, static_cast<long long>(batch) * m_ranks);
    m_waited = next_waited;
    if (display_now) {
        display(iter, loss, rate);
    }
    if (snapshot_now) {
        checkpoint();
    }
    // With several ranks the stop travelled with the gradients: all leave here, together.
    if (summed ? summed->stop : must_leave()) {
        m_leaving = m_solver->iteration() < s.max_iter;
        return false;
    }
    return true;
}

// With several ranks: the gradients summed across them (the backward pass's buckets started as
// their layers finish when there are several), then the update; `stop` and the global batch's
// loss travel with the sums. Nothing with one rank.
std::optional<GradientExchange::Outcome> TrainingRun::sum_gradients(int iter) {
    if (!m_exchange) {
        return std::nullopt;
    }
    m_exchange->begin(iter);
    if (m_overlap) {
        m_net->backward([this](std::size_t layer) { m_exchange->after_layer(layer); });
    }
    const auto outcome = m_exchange->finish(must_leave());
    m_solver->enqueue_update();
    return outcome;
}

// Reading the loss waits for the step. The CPU reads and checks it every step; a device only
// when `wanted` (display and checkpoint iterations), on a stop and at the end, so that the host
// queues the next steps (a few ahead at most: the input stage's events hold it) instead of
// idling the GPU. A non-finite loss is then caught there, before it is saved. With several
// ranks the global batch's loss came with the gradients, every step. NaN when not read.
float TrainingRun::step_loss(int iter, std::optional<float> global_loss, bool wanted) {
    if (!global_loss && !m_backend->host_accessible() && !wanted && !stop_requested() &&
        m_solver->iteration() < m_config.solver.max_iter) {
        return std::nanf("");
    }
    const float loss = global_loss ? *global_loss : m_net->read_loss();
    if (!std::isfinite(loss)) {
        throw Error(ErrorKind::training,
                    fmt::format("loss is {} at iteration {} (lower base_lr?)", loss, iter));
    }
    return loss;
}

void TrainingRun::display(int iter, float loss, float rate) {
    Throughput& t = m_throughput;
    nlohmann::json line = {{"type", "train"},
                           {"iter", iter},
                           {"max_iter", m_config.solver.max_iter},
                           {"loss", loss},
                           {"lr", rate},
                           {"images_per_s", static_cast<double>(t.window_images) / t.window_s},
                           {"data_wait_fraction", t.window_wait_s / t.window_s},
                           {"elapsed_s", seconds_since(m_wall_start)}};
    if (m_exchange) {
        // The time each step's sums took (waiting for the slowest rank included), and the part
        // of it not hidden behind the backward pass.
        const auto exchange_s = m_exchange->take_seconds();
        t.exchange_s += exchange_s.total;
        t.exchange_wait_s += exchange_s.waiting;
        line["allreduce_ms"] = 1000.0 * exchange_s.total / std::max(t.window_steps, 1);
        line["allreduce_wait_ms"] = 1000.0 * exchange_s.waiting / std::max(t.window_steps, 1);
    }
    log(line);
    t.start_window();
}

int TrainingRun::finish() {
    // Saved before the final test: a run stopped during that test resumes only to take it.
    checkpoint();
    if (!m_leaving && !m_tests.empty() && !test_now()) {
        m_leaving = true;
    }
    const Throughput& t = m_throughput;
    nlohmann::json final_line = {
        {"type", "final"},
        {"iter", m_solver->iteration()},
        {"max_iter", m_config.solver.max_iter},
        {"status", m_leaving ? "checkpointed" : "completed"},
        // The first test net's, as Caffe's "Test net output #0".
        {"test_accuracy", m_tests.empty() ? std::nan("") : m_tests.front().last.accuracy},
        {"test_loss", m_tests.empty() ? std::nan("") : m_tests.front().last.loss},
        {"train_images_per_s",
         t.total_s > 0 ? static_cast<double>(t.total_images) / t.total_s : 0.0},
        {"wall_s", seconds_since(m_wall_start)},
        {"setup_s", m_setup_s.value_or(seconds_since(m_wall_start))},
        {"first_step_s", m_first_step_s},
        {"test_s", m_test_s},
        {"checkpoint_s", m_checkpoint_s}};
    if (m_exchange) {
        const auto exchange_s = m_exchange->take_seconds();
        final_line["ranks"] = m_ranks;
        final_line["allreduce_s"] = t.exchange_s + exchange_s.total;
        final_line["allreduce_wait_s"] = t.exchange_wait_s + exchange_s.waiting;
        // No rank leaves before rank 0's checkpoint is on disk: a launcher that sees one rank
        // exit (75 is non-zero) ends the others, the writer included.
        std::int64_t done = 0;
        m_comm->allreduce_max(&done, 1, "the final agreement");
    }
    log(final_line);
    if (m_leaving && m_distributed) {
        std::cerr << fmt::format(
            "dltrain: rank {} of {}: stopped at iteration {} with every rank\n", m_comm->rank(),
            m_ranks, m_solver->iteration());
    }
    if (m_leaving && !m_root) {
        return exit_code::checkpointed;
    }
    if (m_leaving) {
        std::cerr << fmt::format("dltrain: checkpointed at iteration {} before the deadline; "
                                 "resume with --resume auto (exit {})\n",
                                 m_solver->iteration(), exit_code::checkpointed);
        return exit_code::checkpointed;
    }
    return exit_code::finished;
}

} // namespace

int train(const TrainOptions& options) {
    TrainingRun run(options);
    run.load_data_and_nets();
    run.restore_weights();
    run.open_run_directory();
    run.agree_at_start();
    run.prepare_exchange_and_readers();
    run.train_steps();
    return run.finish();
}

int test(const TestOptions& options) {
    NetConfig config = load_config(options.config);
    const fs::path base = data_base(options.data_dir, options.config);
    const MemoryLimit memory = memory_limit(options.max_memory);
    // The solver's first test net (with Caffe's test_state, the first state's); with --level or
    // --stage, the test net of that state, as caffe test builds it (and its test_iter when the
    // solver has a test net of that state).
    NetState net_state = test_nets_of(config.solver).front().state;
    int solver_test_iter = config.solver.test_iter;
    if (options.state.level || options.state.stages) {
        net_state = NetState{Phase::test};
        net_state.level = options.state.level.value_or(0);
        net_state.stages = options.state.stages.value_or(std::vector<std::string>{});
        solver_test_iter = 0;
        for (const auto& net : test_nets_of(config.solver)) {
            if (net.state.level == net_state.level && net.state.stages == net_state.stages) {
                solver_test_iter = net.test_iter;
                break;
            }
        }
    }
    const std::unique_ptr<Source> loaded = load_net_source(config, net_state, base, memory);
    if (!loaded) {
        throw Error(ErrorKind::config,
                    fmt::format("{}: no Data layer in the test net ({})", config.file.string(),
                                net_state_text(net_state)));
    }
    Source& source = *loaded;
    {
        // Only the test net is built, with parameters of its own: the walk sees its layers as
        // the one test net's.
        NetConfig test_only = config;
        std::erase_if(test_only.layers,
                      [&net_state](const LayerConfig& layer) { return !in_net(layer, net_state); });
        for (auto& layer : test_only.layers) {
            layer.phase = Phase::test;
            layer.include.clear();
            layer.exclude.clear();
        }
        test_only.solver.test_nets.clear();
        check_memory(test_only, true, memory);
    }
    const std::unique_ptr<Backend> backend =
        make_backend(options.device.empty() ? default_device() : options.device, options.threads);
    Net net(config, net_state, *backend, config.solver.random_seed);
    check_labels(source, net.inputs().front(), config.file);
    TrainingState state;
    if (io::is_caffemodel(options.weights)) {
        // Testing needs every weight: a parameter left at its filler would test nothing.
        const WeightsCopy copy = io::copy_caffemodel_weights(options.weights, net);
        if (!copy.kept.empty() || !copy.reshaped.empty()) {
            std::vector<std::string> missing = copy.kept;
            missing.insert(missing.end(), copy.reshaped.begin(), copy.reshaped.end());
            throw Error(ErrorKind::config,
                        fmt::format("weights file {} lacks parameters of this network: {}",
                                    options.weights.string(), fmt::join(missing, "; ")));
        }
    } else {
        state = read_checkpoint(options.weights, net, nullptr);
    }
    const LayerConfig& layer = *net.inputs().front().layer;
    source.reader =
        make_reader(source, net.inputs().front(), Phase::test, config.solver, 0, config.file);
    // Caffe's `caffe test -iterations N`; without it, the solver's test_iter or the whole set.
    const int test_iter =
        options.iterations > 0 ? options.iterations
        : solver_test_iter > 0
            ? solver_test_iter
            : static_cast<int>((source.set->count + layer.batch_size - 1) / layer.batch_size);
    TestPass pass;
    // dltrain test installs no stop signal: SIGTERM ends it at once, as it has nothing to save.
    const TestResult result =
        *run_test(net, source, config, net_state, test_iter, pass, [] { return false; });
    nlohmann::json line = {{"type", "test"},
                           {"iter", state.iteration},
                           {"accuracy", result.accuracy},
                           {"loss", result.loss},
                           {"batches", test_iter}};
    if (!net_state.stages.empty() || net_state.level != 0) {
        line["stages"] = net_state.stages;
        line["level"] = net_state.level;
    }
    std::cout << line.dump() << '\n';
    return exit_code::finished;
}

namespace {

/// The most data `check` reads to check labels: a few seconds on a login node.
constexpr std::uint64_t k_check_label_bytes = std::uint64_t{256} << 20U;

/// Bytes of `paths` on disk: a file's size, a directory's regular files (one level, as LMDB,
/// LevelDB and packs lie); nothing when one does not exist; the most there is for a directory of
/// over 100,000 entries.
std::optional<std::uint64_t> bytes_on_disk(std::initializer_list<fs::path> paths) {
    constexpr int k_max_entries = 100000;
    std::uint64_t total = 0;
    for (const fs::path& path : paths) {
        std::error_code ec;
        if (path.empty()) {
            continue;
        }
        const fs::file_status status = fs::status(path, ec);
        if (ec || !fs::exists(status)) {
            return std::nullopt;
        }
        if (fs::is_regular_file(status)) {
            total += fs::file_size(path, ec);
            continue;
        }
        int entries = 0;
        for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
            if (++entries > k_max_entries) {
                return std::numeric_limits<std::uint64_t>::max();
            }
            if (it->is_regular_file(ec)) {
                total += it->file_size(ec);
            }
        }
    }
    return total;
}

} // namespace

std::vector<std::string> check_config(const fs::path& file, const std::optional<fs::path>& data_dir,
                                      const std::string& max_memory,
                                      const std::vector<std::string>& solver_overrides) {
    NetConfig config = load_config(file, solver_overrides);
    const MemoryLimit memory = memory_limit(max_memory);
    const fs::path base = data_base(data_dir, file);
    std::vector<std::string> unchecked;
    for (auto& layer : config.layers) {
        if (!has_role(layer, LayerRole::input)) {
            continue;
        }
        const fs::path images = resolve(layer.source, base);
        std::error_code ec;
        if (layer.shape.empty() && fs::exists(images, ec)) {
            shape_from_header(layer, base, file, memory);
        }
        if (layer.shape.empty()) {
            unchecked.push_back(fmt::format(
                "layer '{}' has no 'shape' and {} is not here: the shapes after it are checked "
                "when the job starts",
                layer.name, images.string()));
        }
    }
    if (!unchecked.empty()) {
        return unchecked;
    }
    // At the batch sizes train will use: what a job would need, found without allocating it.
    check_memory(config, config.solver.test_iter > 0, memory);
    for (auto& layer : config.layers) {
        if (has_role(layer, LayerRole::input)) {
            layer.batch_size = 1;
        }
    }
    auto backend = make_backend("cpu", 1);
    // Every net the solver builds, the test nets borrowing the train net's parameters as in
    // train (which checks their shapes agree, and draws the weights once).
    std::vector<std::unique_ptr<Net>> nets;
    for (const NetState& state : net_states(config.solver)) {
        nets.push_back(std::make_unique<Net>(config, state, *backend, config.solver.random_seed,
                                             nets.empty() ? nullptr : nets.front().get(),
                                             ParamValues::zero));
    }
    // Every label against the classifier, as train does before its first step, where reading
    // the data is quick enough for a login node; larger sets are read by train.
    for (const auto& net : nets) {
        if (net->inputs().empty()) {
            continue;
        }
        const NetInput& input = net->inputs().front();
        LayerConfig layer = *input.layer;
        const fs::path images = resolve(layer.source, base);
        const fs::path labels = resolve(layer.label_source, base);
        const std::optional<std::uint64_t> bytes = bytes_on_disk({images, labels});
        if (!bytes) {
            continue; // not here (a pack member is read with the pack): train reads it
        }
        if (*bytes > k_check_label_bytes) {
            unchecked.push_back(fmt::format(
                "the labels of layer '{}' ({}: over the {} MiB check reads): train reads every "
                "label before its first step",
                layer.name, images.string(), k_check_label_bytes >> 20U));
            continue;
        }
        const auto source = load_source(layer, base, config.file, data_budget(memory));
        check_labels(*source, input, config.file);
    }
    return unchecked;
}

int time_net(const TimeOptions& options) {
    NetConfig config = load_config(options.config);
    apply_train_state(config.solver, options.state);
    const MemoryLimit memory = memory_limit(options.max_memory);
    // The image shape comes from the 'shape' key, else from the data's header.
    for (auto& layer : config.layers) {
        if (has_role(layer, LayerRole::input) && layer.shape.empty()) {
            shape_from_header(layer, data_base(std::nullopt, options.config), options.config,
                              memory);
        }
    }
    check_memory(config, false, memory);
    auto backend =
        make_backend(options.device.empty() ? default_device() : options.device, options.threads);
    Net net(config, config.solver.train_state, *backend, config.solver.random_seed);
    std::mt19937 rng(config.solver.random_seed);
    std::uniform_real_distribution<float> pixel(0.0F, 1.0F);
    for (auto& input : net.inputs()) {
        std::vector<float> values(input.data->count());
        for (float& value : values) {
            value = pixel(rng);
        }
        input.data->write_data(values.data());
    }
    std::vector<LayerTiming> timings;
    for (int i = 0; i < 3; ++i) { // warm-up: scratch buffers are sized on the first step
        net.forward();
        net.backward();
    }
    const int iterations = std::max(options.iterations, 1);
    const auto start = Clock::now();
    for (int i = 0; i < iterations; ++i) {
        net.forward_timed(timings);
        net.backward_timed(timings);
    }
    const double total_ms = seconds_since(start) * 1000.0 / iterations;
    fmt::print("{:<12} {:<16} {:>12} {:>12} {:>12} {:>12}\n", "layer", "type", "forward ms",
               "backward ms", "fwd cpu ms", "bwd cpu ms");
    double forward = 0.0;
    double backward = 0.0;
    double cpu = 0.0;
    for (const auto& timing : timings) {
        fmt::print("{:<12} {:<16} {:>12.3f} {:>12.3f} {:>12.3f} {:>12.3f}\n", timing.name,
                   timing.type, timing.forward_ms / iterations, timing.backward_ms / iterations,
                   timing.forward_cpu_ms / iterations, timing.backward_cpu_ms / iterations);
        forward += timing.forward_ms / iterations;
        backward += timing.backward_ms / iterations;
        cpu += (timing.forward_cpu_ms + timing.backward_cpu_ms) / iterations;
    }
    fmt::print("Average forward pass: {:.3f} ms\nAverage backward pass: {:.3f} ms\n"
               "Average forward-backward: {:.3f} ms ({:.0f} images/s at batch {}, {})\n"
               "Average CPU time per forward-backward: {:.3f} ms\n",
               forward, backward, total_ms, net.batch_size() * 1000.0 / total_ms, net.batch_size(),
               backend->device_name(), cpu);
    return exit_code::finished;
}

int export_model(const ExportOptions& options) {
    NetConfig config = load_config(options.config);
    const fs::path base = data_base(options.data_dir, options.config);
    // The parameters' shapes follow from the input's, as for `dltrain time`.
    for (auto& layer : config.layers) {
        if (has_role(layer, LayerRole::input)) {
            if (layer.shape.empty()) {
                shape_from_header(layer, base, options.config, memory_limit(""));
            }
            layer.batch_size = 1;
        }
    }
    auto backend = make_backend("cpu", 1);
    Net net(config, config.solver.train_state, *backend, config.solver.random_seed);
    if (io::is_caffemodel(options.weights)) {
        (void)io::copy_caffemodel_weights(options.weights, net);
    } else {
        (void)read_checkpoint(options.weights, net, nullptr);
    }
    io::write_caffemodel(options.caffemodel, config, net);
    std::cerr << fmt::format("dltrain: {} parameters of {} written to {}\n", net.params().size(),
                             options.weights.string(), options.caffemodel.string());
    return exit_code::finished;
}

} // namespace dl
