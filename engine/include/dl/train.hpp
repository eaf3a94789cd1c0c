#pragma once
// The dltrain commands as library calls (engine/tools/dltrain.cpp only parses flags).

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dl {

/// `--level N` and `--stage A,B` (Caffe's -level and -stage): the state of the net a command
/// builds, for nets whose layers include or exclude by level and stage.
struct StateFlags {
    std::optional<int> level;
    std::optional<std::vector<std::string>> stages;
};

struct TrainOptions {
    std::filesystem::path config;
    std::filesystem::path run_dir;
    std::optional<std::filesystem::path> data_dir; // unset: the config file's directory
    std::string resume;                            // "", "auto" or a checkpoint path
    std::optional<std::filesystem::path> weights;  // fine-tune: parameters copied by name
    int threads = 0;                               // 0: the CPUs this process may use
    std::string deadline;                          // "", seconds from now, "auto", "none"
    std::optional<int> max_iter;
    std::string device; // "cpu", "cuda", "cuda:N"; empty: default_device()
    std::string build;  // how this binary was built ("Release -O3 -DNDEBUG"), for the start line
    std::string max_memory; // --max-memory: "64G", "none"; empty: DLTRAIN_MAX_MEMORY, else RAM
    /// --solver KEY=VALUE: solver keys (and batch_size) over the config's (dl::load_config).
    std::vector<std::string> solver_overrides;
    /// Caffe's snapshots as well: at every checkpoint, PREFIX_iter_N.caffemodel (`dltrain train
    /// -solver S` without --run-dir, where Caffe's users look for them).
    std::optional<std::filesystem::path> caffemodel_prefix;
    StateFlags state; // the train net's, over the solver's train_state (as caffe train)
};

/// Returns exit_code::finished or exit_code::checkpointed; throws dl::Error otherwise.
int train(const TrainOptions& options);

struct TestOptions {
    std::filesystem::path config;
    std::filesystem::path weights;
    std::optional<std::filesystem::path> data_dir;
    int iterations = 0; // batches; 0: the solver's test_iter, else the whole test set
    int threads = 0;
    std::string device;
    std::string max_memory;
    StateFlags state; // given: the test net of this state; else the solver's first test net
};
int test(const TestOptions& options);

struct TimeOptions {
    std::filesystem::path config;
    int iterations = 50;
    int threads = 0;
    std::string device;
    std::string max_memory;
    StateFlags state; // the train net's, as for train
};
int time_net(const TimeOptions& options);

/// `dltrain export --caffemodel`: a checkpoint's (or a Caffe model's) parameters written as a
/// .caffemodel for Caffe users; the net's input shapes come from `shape` keys or the data.
struct ExportOptions {
    std::filesystem::path config;
    std::filesystem::path weights;
    std::filesystem::path caffemodel;
    std::optional<std::filesystem::path> data_dir;
};
int export_model(const ExportOptions& options);

/// `dltrain predict`: Caffe's classification example. A deploy net (one Input layer of N x C x H x
/// W, C 1 or 3) with its weights runs over image files: each decoded (BGR, as Caffe's OpenCV
/// reads it), resized to H x W bilinearly, the mean subtracted, in batches of up to N; the last
/// layer's top gives each image's top-k classes, printed as Caffe prints them.
struct PredictOptions {
    std::filesystem::path model;                    // the deploy prototxt (or YAML)
    std::filesystem::path weights;                  // .caffemodel or checkpoint
    std::optional<std::filesystem::path> mean_file; // mean.binaryproto: its per-channel means
    std::vector<float> mean_values;                 // or one per channel, in BGR order
    std::optional<std::filesystem::path> labels;    // synset_words.txt: one line per class
    std::vector<std::filesystem::path> images;
    std::optional<std::filesystem::path> list; // image paths, one per line ("path [label]")
    int top_k = 5;
    int threads = 0;
    std::string device;
};
int predict(const PredictOptions& options);

/// `dltrain convert`: a config (YAML, or Caffe's net or solver prototxt) written as dltrain's
/// YAML, or, when `output` ends in .prototxt, as Caffe's net prototxt (and solver prototxt when
/// `solver_output` is given; its `net` names the output). What Caffe's format cannot say
/// (shuffle, label_source, shape, keep_checkpoints) is listed on stderr.
struct ConvertOptions {
    std::filesystem::path config;
    std::filesystem::path output;
    std::optional<std::filesystem::path> solver_output;
};
int convert_config(const ConvertOptions& options);

/// Checks a config without training: it parses, and its train and test nets build (every shape
/// fits) from the Data layers' `shape` keys or, without one, the data file's header under
/// data_dir (else the config's directory). Batches of one, so a login node can afford it.
/// The memory the nets need at the config's batch sizes is checked against `max_memory` (as
/// --max-memory) first, as train checks it, naming the layer that passes it. Then every label
/// of data sets up to 256 MiB on disk is checked against the classifier, as train does.
/// Throws dl::Error(config) as train would; returns what it could not check (empty: all).
std::vector<std::string> check_config(const std::filesystem::path& config,
                                      const std::optional<std::filesystem::path>& data_dir,
                                      const std::string& max_memory = "",
                                      const std::vector<std::string>& solver_overrides = {});

/// Seconds from now until the walltime deadline minus the safety margin, or nothing.
/// spec: "" or "auto" read SLURM_JOB_END_TIME (epoch seconds) or PBS_WALLTIME (seconds from
/// job start, counted from now); "none" disables; digits (with optional s/m/h) are from now.
std::optional<double> deadline_seconds(const std::string& spec);

} // namespace dl
