#pragma once
// A network and its solver, Caffe's model in YAML clothes (docs/engine.md has the format).
// Parsed by engine/src/config/yaml_config.cpp, the only file that sees yaml-cpp.

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dl {

enum class Phase { train, test };

/// Which net is being built: Caffe's NetState. The train net is {train}; the solver's test
/// nets are {test} or, with Caffe's test_state, {test, level, stages}.
struct NetState {
    explicit NetState(Phase net_phase = Phase::train) : phase(net_phase) {}
    Phase phase;
    int level = 0;
    std::vector<std::string> stages;
};

/// Caffe's NetStateRule: every condition given must hold for the rule to match.
struct NetStateRule {
    std::optional<Phase> phase;
    std::optional<int> min_level;
    std::optional<int> max_level;
    std::vector<std::string> stages;     // each must be among the net's
    std::vector<std::string> not_stages; // none may be
    [[nodiscard]] bool matches(const NetState& state) const;
};

/// Where a config value was given, for messages: its line and column in the file (1-based; 0
/// when not known), or the command-line override it came from (`--solver max_iter=5`).
struct SourceMark {
    int line = 0;
    int column = 0;
    std::string override_text;
};
/// Marks by key, as the reader saw them: a layer's keys ("stride"; a filler's as
/// "weight_filler.std"), or the solver's ("max_iter"). A key not given has none.
using SourceMarks = std::map<std::string, SourceMark>;

struct FillerConfig {
    std::string type = "constant"; // constant, uniform, gaussian, xavier, msra
    float value = 0.0F;            // constant
    float min = 0.0F;              // uniform
    float max = 1.0F;
    float mean = 0.0F; // gaussian
    float std = 1.0F;
    std::string variance_norm = "fan_in"; // xavier, msra: fan_in, fan_out, average
    int sparse = -1; // gaussian: each weight kept with probability sparse / shape[0] (Caffe's)
};

struct ParamSpec {
    float lr_mult = 1.0F;
    float decay_mult = 1.0F;
    // Caffe's shared weights: every layer's parameter of this name is one parameter (the
    // first layer's), as the siamese net's two towers are. Empty: the layer's own.
    std::string name;
};

struct LayerConfig {
    std::string name;
    std::string type;
    std::vector<std::string> bottoms;
    std::vector<std::string> tops;
    std::optional<Phase> phase; // unset: the layer is in both nets
    // Caffe's rules past a plain phase (stages, levels, several rules): with any include
    // rule the layer is in the nets one of them matches, else in those no exclude rule matches.
    std::vector<NetStateRule> include;
    std::vector<NetStateRule> exclude;
    std::vector<ParamSpec> params;
    int line = 0; // 1-based line of the layer in the config file, for messages
    SourceMarks marks;

    // Data
    std::string source;       // IDX images, .gz or raw; relative paths resolve against the data dir
    std::string label_source; // IDX labels
    std::string backend;      // Caffe's data_param backend, "lmdb" or "leveldb"; empty: the
                              // source's files say what it is
    int batch_size = 0;
    float scale = 1.0F;
    std::vector<float> mean_value; // subtracted before scaling: one per channel, or one for all
    std::string mean_file;         // or Caffe's mean.binaryproto: a mean per pixel
    int crop_size = 0;             // Caffe's: a square of this side (train: random, test: centre)
    bool mirror = false;           // Caffe's: each image flipped left-right with probability 1/2
    bool shuffle = false;          // a fresh order every epoch, drawn from solver.random_seed
    std::vector<int> shape;        // optional C x H x W of one image: checked against the file, and
                                   // lets `dltrain time` run without the data
    // ImageData: `source` is a list of `path label` lines (data/image_list.hpp)
    std::string root_folder; // put before each path, as Caffe does (so it ends in '/')
    int new_height = 0;      // with new_width: every image resized to it
    int new_width = 0;
    bool is_color = true; // false: decoded as grey
    // Convolution, InnerProduct
    int num_output = 0;
    int kernel_size = 0;
    int stride = 1;
    int pad = 0;
    int group = 1;
    bool bias_term = true;
    FillerConfig weight_filler{"xavier"};
    FillerConfig bias_filler{};
    // Pooling
    std::string pool = "max"; // max, ave
    // Dropout
    float dropout_ratio = 0.5F;
    // LRN (across channels)
    int local_size = 5;
    float alpha = 1.0F;
    float beta = 0.75F;
    float k = 1.0F;
    // ELU's is `alpha` too; Power: (shift + scale x)^power, `scale` being the Data layers' key
    float power = 1.0F;
    float shift = 0.0F;
    std::string norm_region = "across_channels"; // or within_channel (Caffe's enum)
    // BatchNorm; use_global_stats unset: batch statistics in the train net, the running ones in
    // the test net (Caffe's rule)
    std::optional<bool> use_global_stats;
    float moving_average_fraction = 0.999F;
    float eps = 1e-5F;
    // Scale: gamma's filler (bias_term defaults to false for Scale, and bias_filler applies)
    FillerConfig filler{"constant", 1.0F};
    FillerConfig data_filler{}; // DummyData's: Caffe's default, constant 0
    // PReLU: the slopes' filler (Caffe's default, constant 0.25) and one slope for all channels
    FillerConfig slope_filler{"constant", 0.25F};
    bool channel_shared = false;
    // Concat; Flatten (from axis through end_axis, negative counting from the last)
    int axis = 1;
    int end_axis = -1;
    std::vector<int> slice_point; // Slice: where along `axis` each top after the first begins
    // Crop: where the window starts along each axis from `axis` on (one for all, or one each)
    std::vector<int> crop_offset;
    // Reshape: `shape`'s dims (0: the bottom's, -1: inferred) replace the bottom's axes from
    // reshape_axis over num_axes of them (-1: to the end)
    int reshape_axis = 0;
    int num_axes = -1;
    // Eltwise
    std::string operation = "sum"; // sum, prod, max
    std::vector<float> coeff;      // sum only: one per bottom (default all 1)
    // Accuracy
    int top_k = 1;
    // SoftmaxWithLoss
    float loss_weight = 1.0F;
    // ContrastiveLoss: dissimilar pairs are pushed to this distance (legacy_version: this
    // squared distance, Caffe's first form)
    float margin = 1.0F;
    bool legacy_version = false;
    std::string norm = "l1"; // HingeLoss: l1 or l2 (Caffe's enum)
};

/// Whether the layer is in the net of `state`: its phase and its rules, by Caffe's
/// Net::FilterNet.
bool in_net(const LayerConfig& layer, const NetState& state);

/// The C x H x W a Data layer hands the net: its images' `shape`, cut to crop_size x crop_size
/// when it crops. Empty while the images' shape is unknown.
inline std::vector<int> input_shape(const LayerConfig& data_layer) {
    if (data_layer.shape.size() != 3 || data_layer.crop_size == 0) {
        return data_layer.shape;
    }
    return {data_layer.shape[0], data_layer.crop_size, data_layer.crop_size};
}

struct SolverConfig {
    std::string type = "SGD"; // SGD, Nesterov, Adam, AdaGrad, RMSProp, AdaDelta
    float base_lr = 0.01F;
    float momentum = 0.0F;    // SGD's and Nesterov's; Adam's beta1; AdaDelta's decay
    float momentum2 = 0.999F; // Adam's beta2
    float delta = 1e-8F;      // Adam's epsilon; the adaptive rules' too
    float rms_decay = 0.99F;  // RMSProp's
    float weight_decay = 0.0F;
    std::string lr_policy = "fixed"; // fixed, step, multistep, exp, inv, poly
    float gamma = 0.0F;
    float power = 0.0F;
    int stepsize = 0;
    std::vector<int> stepvalues;
    int max_iter = 0;
    int test_interval = 0;
    int test_iter = 0;
    // Caffe's test_state: one test net per entry, each with its own test_iter (test_iter
    // above is the first one's). Empty: one test net, {test}.
    struct TestNet {
        NetState state{Phase::test};
        int test_iter = 0;
    };
    std::vector<TestNet> test_nets;
    // Caffe's train_state: the train net's level and stages (`dltrain train --stage/--level`,
    // as `caffe train -stage/-level`, set it too).
    NetState train_state{Phase::train};
    bool test_initialization = true;
    int display = 0;
    int snapshot = 0;
    int keep_checkpoints = 3;
    unsigned random_seed = 1701;
};

/// The test nets a solver builds: Caffe's test_state entries, each with its test_iter, or one
/// {test} net with test_iter when it names none.
std::vector<SolverConfig::TestNet> test_nets_of(const SolverConfig& solver);
/// The states of the nets a solver builds: the train net's, then each test net's.
std::vector<NetState> net_states(const SolverConfig& solver);
/// A state as text, "test level 0 stages [a, b]": what a checkpoint keeps to tell test nets apart.
std::string net_state_text(const NetState& state);

/// The values a solver key (or --solver's batch_size) may take. One table: the validator checks
/// every config by it and `dltrain describe --json` prints it, so dljob checks a recipe's
/// `train:` keys by the same rules before a job is queued (a dljob test compares the two).
struct SolverKeyRule {
    std::string key;
    std::string kind;    // "number", "integer", "integers" (a list), "choice", "boolean"
    double min = -1e308; // -1e308 and 1e308: no bound
    bool min_open = false;
    double max = 1e308;
    bool max_open = false;
    std::vector<std::string> choices;
};
const std::vector<SolverKeyRule>& solver_key_rules();
/// The rule of `key`; a key not in the table is a programming error (std::out_of_range).
const SolverKeyRule& solver_key_rule(const std::string& key);

struct NetConfig {
    std::string name;
    std::filesystem::path file; // where it was read from, for messages
    std::vector<LayerConfig> layers;
    SolverConfig solver;
    // Where the solver's keys were read: `file`, or a solver prototxt naming the net file.
    std::filesystem::path solver_file;
    int solver_line = 0;
    SourceMarks solver_marks;
};

/// Reads and validates a config; throws dl::Error(config) naming file, line, key and choices.
/// `overrides` are `KEY=VALUE` (dltrain --solver): a solver key, or batch_size for the
/// train-phase Data layers; each replaces the file's value before validation. Whatever the
/// format, the values go through one validator (validate_config) after they are read.
NetConfig load_config(const std::filesystem::path& file,
                      const std::vector<std::string>& overrides = {});
NetConfig parse_config(const std::string& text, const std::filesystem::path& file_for_messages,
                       const std::vector<std::string>& overrides = {});
/// Caffe's prototxt (engine/src/config/prototxt_config.cpp): a net file (solver defaults), or a
/// solver file with its net. load_config calls it for files ending in .prototxt. Throws
/// dl::Error(config) with file:line for unknown or unsupported fields, values and layer types.
NetConfig load_prototxt(const std::filesystem::path& file);
/// Whether `file` is Caffe's solver prototxt naming its net (`net` or `train_net`), as
/// `dltrain train --solver FILE` needs; a missing or unreadable file is dl::Error(config).
bool is_solver_prototxt(const std::filesystem::path& file);
/// Where Caffe writes a solver's snapshots, by its own rule (upgrade_proto's
/// UpgradeSnapshotPrefixProperty): `snapshot_prefix`, relative to the working directory; a
/// prefix that is a directory gets the solver file's stem appended, and none at all is the
/// solver file's path without its extension.
std::filesystem::path caffe_snapshot_prefix(const std::filesystem::path& solver_file);
/// The config with every default written out, as dltrain stores it in the run directory.
std::string to_yaml(const NetConfig& config);

/// The one check of a read config's values, whatever format it came from: ranges (sizes,
/// ratios, finite numbers), choices, required keys, fillers Caffe refuses, unique layer names.
/// Throws dl::Error(config) naming file:line:column of the key where the reader marked it (else
/// the layer's line), the key, the layer and the value. parse_config, load_prototxt and
/// load_config call it; the nets then check what needs shapes (kernels that fit, groups).
void validate_config(const NetConfig& config);

} // namespace dl
