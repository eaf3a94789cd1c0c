// dltrain: the bundled training engine's command line. Parses flags, calls the engine, and maps
// errors to exit codes in one place (docs/engine.md lists them).

#include <dl/blas.hpp>
#include <dl/config.hpp>
#include <dl/device.hpp>
#include <dl/error.hpp>
#include <dl/train.hpp>

#include <CLI/CLI.hpp>
#include <dljob_build_info.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

// What dltrain accepts, for programs that drive it: the solver keys' rules (dljob checks a
// recipe's `train:` keys by them, and its tests hold its own copy to this output).
int describe() {
    nlohmann::json keys = nlohmann::json::array();
    for (const auto& rule : dl::solver_key_rules()) {
        nlohmann::json entry = {{"key", rule.key}, {"kind", rule.kind}};
        if (rule.min > -1e308) {
            entry["min"] = rule.min;
            entry["min_open"] = rule.min_open;
        }
        if (rule.max < 1e308) {
            entry["max"] = rule.max;
            entry["max_open"] = rule.max_open;
        }
        if (!rule.choices.empty()) {
            entry["choices"] = rule.choices;
        }
        keys.push_back(entry);
    }
    std::cout << nlohmann::json{{"solver_keys", keys}}.dump(2) << '\n';
    return dl::exit_code::finished;
}

/// The GPU index of a `cuda:N` device; -1 for none ("", "cpu", "cuda").
int gpu_index(const std::string& device) {
    const std::string prefix = "cuda:";
    if (device.rfind(prefix, 0) != 0) {
        return -1;
    }
    const std::string digits = device.substr(prefix.size());
    if (digits.empty() || digits.size() > 4 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        throw dl::Error(dl::ErrorKind::usage,
                        fmt::format("--device {}: expected cpu, cuda or cuda:N", device));
    }
    return std::stoi(digits);
}

// Like `caffe device_query`: one block per GPU (only GPU N for --device cuda:N, Caffe's
// `device_query -gpu N`), then what dltrain would use by default.
int device_query(const std::string& device) {
    const int only = gpu_index(device);
    const dl::DeviceReport report = dl::query_devices();
    fmt::print("CPU: {} ({} CPUs usable by this process)\nBLAS: OpenBLAS, {} kernels\n",
               report.cpu_model, report.cpu_threads, dl::blas_core());
    if (!report.cuda_built) {
        fmt::print("GPUs: none ({})\n", report.cuda_status);
        if (only >= 0) {
            throw dl::Error(dl::ErrorKind::device,
                            fmt::format("there is no GPU {}: {}", only, report.cuda_status));
        }
        fmt::print("Default device: cpu\n");
        return 0;
    }
    const auto version = [](int v) {
        return v == 0 ? std::string("none") : fmt::format("{}.{}", v / 1000, v % 1000 / 10);
    };
    fmt::print("CUDA driver: {}\nCUDA runtime: {}\ncuDNN: {}.{}.{}\n",
               version(report.cuda_driver_version), version(report.cuda_runtime_version),
               report.cudnn_version / 10000, report.cudnn_version % 10000 / 100,
               report.cudnn_version % 100);
    if (only >= 0 && std::none_of(report.gpus.begin(), report.gpus.end(),
                                  [only](const dl::GpuInfo& gpu) { return gpu.index == only; })) {
        throw dl::Error(dl::ErrorKind::device,
                        fmt::format("there is no GPU {} ({} visible{})", only, report.gpus.size(),
                                    report.gpus.empty() ? ": " + report.cuda_status : ""));
    }
    for (const auto& gpu : report.gpus) {
        if (only >= 0 && gpu.index != only) {
            continue;
        }
        fmt::print("GPU {} (--device cuda:{})\n"
                   "  Name:                  {}\n"
                   "  Compute capability:    {}.{}\n"
                   "  Total global memory:   {:.1f} GiB ({} bytes)\n"
                   "  Multiprocessors:       {}\n",
                   gpu.index, gpu.index, gpu.name, gpu.compute_major, gpu.compute_minor,
                   static_cast<double>(gpu.memory_bytes) / (1ULL << 30), gpu.memory_bytes,
                   gpu.multiprocessors);
    }
    if (report.gpus.empty()) {
        fmt::print("GPUs: none ({})\n", report.cuda_status);
    }
    fmt::print("Default device: {}\n", report.gpus.empty() ? "cpu" : "cuda:0");
    return 0;
}

// OpenBLAS picks its kernels when it loads, before main: where its pick leaves this CPU's
// vector units unused (dl/blas.hpp), the process starts again with OPENBLAS_CORETYPE set to
// the better set. A user's own OPENBLAS_CORETYPE is never overridden, and the new image sees
// it set, so this happens at most once. execv keeps the pid, so launchers (srun, mpirun) and
// the job script's wrapper keep track of the process.
void choose_blas_kernels(char** argv) {
    if (std::getenv("OPENBLAS_CORETYPE") != nullptr) { // NOLINT(concurrency-mt-unsafe)
        return;
    }
    const std::string core = dl::better_blas_core();
    if (core.empty()) {
        return;
    }
    ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1); // NOLINT(concurrency-mt-unsafe)
    ::execv("/proc/self/exe", argv);
    ::unsetenv("OPENBLAS_CORETYPE"); // NOLINT(concurrency-mt-unsafe): exec failed, go on
}

/// `--solver` is Caffe's `caffe train --solver FILE` and dltrain's `--solver KEY=VALUE`: a value
/// that is a lower-case solver key, '=' and a value overrides one key; any other names the
/// solver file, which then stands for --config. Exactly one of the two names the config.
std::filesystem::path solver_and_config(const std::filesystem::path& config,
                                        std::vector<std::string>& solver_values) {
    std::vector<std::string> overrides;
    std::optional<std::filesystem::path> solver_file;
    for (const auto& value : solver_values) {
        const auto eq = value.find('=');
        const bool is_key =
            eq != std::string::npos && eq > 0 &&
            std::all_of(value.begin(), value.begin() + static_cast<std::ptrdiff_t>(eq),
                        [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; });
        if (is_key) {
            overrides.push_back(value);
            continue;
        }
        if (solver_file) {
            throw dl::Error(dl::ErrorKind::usage,
                            fmt::format("--solver names two solver files: {} and {}",
                                        solver_file->string(), value));
        }
        solver_file = value;
    }
    solver_values = overrides;
    if (!solver_file) {
        if (config.empty()) {
            throw dl::Error(dl::ErrorKind::usage,
                            "a config is needed: --config FILE (YAML, or Caffe's net or solver "
                            "prototxt) or --solver SOLVER.prototxt");
        }
        return config;
    }
    if (!config.empty()) {
        throw dl::Error(dl::ErrorKind::usage,
                        fmt::format("--config {} and --solver {}: give one (a solver names its "
                                    "net)",
                                    config.string(), solver_file->string()));
    }
    if (solver_file->extension() == ".prototxt" && !dl::is_solver_prototxt(*solver_file)) {
        throw dl::Error(dl::ErrorKind::usage,
                        fmt::format("--solver {} is not Caffe's solver prototxt (it names no "
                                    "'net'); a net prototxt is given with --config",
                                    solver_file->string()));
    }
    return *solver_file;
}

/// "104,117,123" as numbers; empty for "".
std::vector<float> numbers(const std::string& option, const std::string& text) {
    std::vector<float> values;
    std::size_t start = 0;
    while (!text.empty() && start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        const std::string item = text.substr(start, comma - start);
        char* end = nullptr;
        const float value = std::strtof(item.c_str(), &end);
        if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(value)) {
            throw dl::Error(dl::ErrorKind::usage,
                            fmt::format("{} {}: '{}' is not a number (expected numbers separated "
                                        "by commas)",
                                        option, text, item));
        }
        values.push_back(value);
        start = comma + 1;
    }
    return values;
}

/// Caffe's tool reads gflags, which take `-flag value`, `-flag=value` and `--flag`: the scripts
/// users bring say `caffe train -solver S -gpu 0 -weights W` and `caffe device_query -gpu 0`.
/// Those flags become dltrain's options before CLI11 parses (it takes one dash for one-letter
/// options only): -model is --config, -snapshot is --resume, -gpu N is --device cuda:N, -stage
/// and -level are --stage and --level.
/// Returns the arguments after the program name.
std::vector<std::string> caffe_spelling(int argc, char** argv) {
    static const std::map<std::string, std::string> renamed = {
        {"solver", "--solver"},         {"weights", "--weights"}, {"model", "--config"},
        {"iterations", "--iterations"}, {"snapshot", "--resume"}, {"gpu", "--device"},
        {"stage", "--stage"},           {"level", "--level"}};
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i]; // NOLINT(cppcoreguidelines-pro-bounds-pointer-arithmetic)
        if (args.empty() && arg == "device_query") {
            args.emplace_back("device-query");
            continue;
        }
        const std::size_t dashes = arg.rfind("--", 0) == 0 ? 2 : arg.rfind('-', 0) == 0 ? 1 : 0;
        const std::size_t eq = arg.find('=');
        const std::string name =
            dashes == 0 ? "" : arg.substr(dashes, eq == std::string::npos ? eq : eq - dashes);
        const auto found = renamed.find(name);
        if (found == renamed.end()) {
            args.push_back(arg);
            continue;
        }
        std::string value;
        if (eq != std::string::npos) {
            value = arg.substr(eq + 1);
        } else if (i + 1 < argc) {
            value = argv[++i]; // NOLINT(cppcoreguidelines-pro-bounds-pointer-arithmetic)
        } else {
            throw dl::Error(dl::ErrorKind::usage, fmt::format("{} needs a value", arg));
        }
        if (name == "gpu") {
            if (value.empty() || value.size() > 4 ||
                !std::all_of(value.begin(), value.end(),
                             [](char c) { return c >= '0' && c <= '9'; })) {
                throw dl::Error(
                    dl::ErrorKind::usage,
                    fmt::format("{} {}: dltrain takes one GPU per process (-gpu N, or --device "
                                "cuda:N); several GPUs train as data-parallel ranks, one per GPU "
                                "(docs/data-parallel.md)",
                                arg.substr(0, eq), value));
            }
            value = "cuda:" + value;
        }
        args.push_back(found->second);
        args.push_back(value);
    }
    return args;
}

constexpr const char* k_device_help =
    "cpu, cuda or cuda:N (default: the first visible GPU when built with CUDA, else cpu)";
constexpr const char* k_memory_help =
    "refuse a net whose tensors need more than SIZE bytes (64G, 512M; 'none'); default: "
    "DLTRAIN_MAX_MEMORY, else this machine's physical memory";
constexpr const char* k_solver_help =
    "SOLVER.prototxt (Caffe's form, instead of --config: the solver names its net), or "
    "KEY=VALUE over the config's solver (base_lr, momentum, weight_decay, lr_policy, gamma, "
    "stepsize, power, stepvalue, random_seed...) or batch_size of the train Data layers; "
    "repeatable";
constexpr const char* k_threads_help =
    "threads (default: $OMP_NUM_THREADS, else the CPUs this process may use)";
constexpr const char* k_data_dir_help = "where relative data sources resolve";

/// The subcommands: each adds its options (bound to members, which outlive the parse) and a
/// callback that runs it and sets `exit_code`.
class Commands {
public:
    explicit Commands(std::string build) : m_build(std::move(build)) {}
    int exit_code = 0;

    void add_train(CLI::App& app) {
        auto* cmd = app.add_subcommand("train", "Train a network (writes the run directory)");
        cmd->add_option("--config", m_train.config,
                        "network and solver: YAML, or Caffe's net or solver prototxt");
        cmd->add_option("--run-dir", m_train.run_dir,
                        "run directory (required, except with a Caffe solver prototxt: then "
                        "PREFIX_run beside Caffe's PREFIX_iter_N.caffemodel snapshots, PREFIX "
                        "being the solver's snapshot_prefix)");
        cmd->add_option("--data-dir", m_data_dir, k_data_dir_help);
        cmd->add_option("--resume", m_train.resume, "auto, or a checkpoint file");
        cmd->add_option("--weights", m_weights,
                        "fine-tune: start from the parameters of this checkpoint (or Caffe "
                        ".caffemodel) whose layer names the network has (the others keep their "
                        "fillers); not used once --resume auto finds a checkpoint of the run");
        cmd->add_option("--threads", m_train.threads, k_threads_help)
            ->check(CLI::NonNegativeNumber);
        cmd->add_option("--deadline", m_train.deadline,
                        "checkpoint and exit 75 after this many seconds (90m, 2h), 'auto' "
                        "(scheduler end time from the environment, the default) or 'none'");
        cmd->add_option("--max-iter", m_max_iter, "override solver.max_iter")
            ->check(CLI::NonNegativeNumber);
        cmd->add_option("--device", m_train.device, k_device_help);
        cmd->add_option("--max-memory", m_train.max_memory, k_memory_help);
        cmd->add_option("--solver", m_train.solver_overrides, k_solver_help);
        m_train_state.add(cmd, "the train net (over the solver's train_state, as caffe train)");
        cmd->callback([this] {
            m_train.state = m_train_state.flags();
            m_train.config = solver_and_config(m_train.config, m_train.solver_overrides);
            if (m_train.run_dir.empty()) {
                caffe_outputs(m_train);
            }
            if (!m_data_dir.empty()) {
                m_train.data_dir = m_data_dir;
            }
            if (m_max_iter >= 0) {
                m_train.max_iter = m_max_iter;
            }
            if (!m_weights.empty()) {
                m_train.weights = m_weights;
            }
            m_train.build = m_build;
            exit_code = dl::train(m_train);
        });
    }

    void add_test(CLI::App& app) {
        auto* cmd = app.add_subcommand("test", "Test weights from a checkpoint on the test phase");
        cmd->add_option("--config", m_test.config, "network and solver YAML")->required();
        cmd->add_option("--weights", m_test.weights, "checkpoint file (or Caffe .caffemodel)")
            ->required();
        cmd->add_option("--data-dir", m_test_data_dir, k_data_dir_help);
        cmd->add_option("--iterations", m_test.iterations,
                        "test batches, as caffe test -iterations (default: the solver's "
                        "test_iter, else the whole test set)")
            ->check(CLI::Range(1, 1000000000));
        cmd->add_option("--threads", m_test.threads, k_threads_help);
        cmd->add_option("--device", m_test.device, k_device_help);
        cmd->add_option("--max-memory", m_test.max_memory, k_memory_help);
        m_test_state.add(cmd, "the test net of this state (default: the solver's first test "
                              "net)");
        cmd->callback([this] {
            m_test.state = m_test_state.flags();
            if (!m_test_data_dir.empty()) {
                m_test.data_dir = m_test_data_dir;
            }
            exit_code = dl::test(m_test);
        });
    }

    void add_predict(CLI::App& app) {
        auto* cmd = app.add_subcommand(
            "predict", "Classify images with a deploy net and its weights (top-k per image)");
        cmd->add_option("--model,--config", m_predict.model,
                        "the deploy net (Caffe's deploy.prototxt: one Input layer)")
            ->required();
        cmd->add_option("--weights", m_predict.weights, ".caffemodel or checkpoint")->required();
        cmd->add_option("--mean", m_predict_mean,
                        "mean.binaryproto: each channel's mean is subtracted, as Caffe's "
                        "classification example does");
        cmd->add_option("--mean-value", m_predict_mean_values,
                        "or the mean of each channel, BGR (104,117,123), or one for all");
        cmd->add_option("--labels", m_predict_labels,
                        "one label per class, in order (synset_words.txt)");
        cmd->add_option("--top-k", m_predict.top_k, "classes shown per image (default 5)")
            ->check(CLI::Range(1, 1000000));
        cmd->add_option("--list", m_predict_list,
                        "a file of image paths, one per line (Caffe's image list: 'path "
                        "[label]')");
        cmd->add_option("--threads", m_predict.threads, k_threads_help);
        cmd->add_option("--device", m_predict.device, k_device_help);
        cmd->add_option("images", m_predict.images, "image files: PNG, JPEG, PGM/PPM");
        cmd->callback([this] {
            if (!m_predict_mean.empty()) {
                m_predict.mean_file = m_predict_mean;
            }
            if (!m_predict_labels.empty()) {
                m_predict.labels = m_predict_labels;
            }
            if (!m_predict_list.empty()) {
                m_predict.list = m_predict_list;
            }
            m_predict.mean_values = numbers("--mean-value", m_predict_mean_values);
            exit_code = dl::predict(m_predict);
        });
    }

    void add_export(CLI::App& app) {
        auto* cmd = app.add_subcommand(
            "export", "Write a checkpoint's parameters as Caffe weights (.caffemodel)");
        cmd->add_option("--config", m_export.config, "network and solver config")->required();
        cmd->add_option("--weights", m_export.weights, "checkpoint (or .caffemodel)")->required();
        cmd->add_option("--caffemodel", m_export.caffemodel, "the file to write")->required();
        cmd->add_option("--data-dir", m_export_data_dir, k_data_dir_help);
        cmd->callback([this] {
            if (!m_export_data_dir.empty()) {
                m_export.data_dir = m_export_data_dir;
            }
            exit_code = dl::export_model(m_export);
        });
    }

    void add_convert(CLI::App& app) {
        auto* cmd = app.add_subcommand(
            "convert",
            "Write a config as dltrain's YAML, or (-o NET.prototxt) as Caffe's prototxt");
        cmd->add_option("--config", m_convert.config,
                        "a YAML config, or Caffe's net or solver prototxt")
            ->required();
        cmd->add_option("-o,--output", m_convert.output, "OUT.yaml, or NET.prototxt")->required();
        cmd->add_option("--solver-output", m_convert_solver_output,
                        "with -o NET.prototxt: also write Caffe's solver prototxt");
        cmd->callback([this] {
            if (!m_convert_solver_output.empty()) {
                m_convert.solver_output = m_convert_solver_output;
            }
            exit_code = dl::convert_config(m_convert);
        });
    }

    void add_time(CLI::App& app) {
        auto* cmd = app.add_subcommand("time", "Forward and backward time per layer");
        cmd->add_option("--config", m_time.config, "network and solver YAML")->required();
        cmd->add_option("--iterations", m_time.iterations, "timed iterations (default 50)");
        cmd->add_option("--threads", m_time.threads, k_threads_help);
        cmd->add_option("--device", m_time.device, k_device_help);
        cmd->add_option("--max-memory", m_time.max_memory, k_memory_help);
        m_time_state.add(cmd, "the timed train net");
        cmd->callback([this] {
            m_time.state = m_time_state.flags();
            exit_code = dl::time_net(m_time);
        });
    }

    void add_check(CLI::App& app) {
        auto* cmd = app.add_subcommand(
            "check",
            "Check a config without training: it parses and every shape fits (exit 3 if not)");
        cmd->add_option("--config", m_check_config,
                        "network and solver: YAML, or Caffe's net or solver prototxt");
        cmd->add_option("--data-dir", m_check_data_dir, k_data_dir_help);
        cmd->add_option("--max-memory", m_check_max_memory, k_memory_help);
        cmd->add_option("--solver", m_check_solver, k_solver_help);
        cmd->callback([this] {
            m_check_config = solver_and_config(m_check_config, m_check_solver).string();
            std::optional<std::filesystem::path> dir;
            if (!m_check_data_dir.empty()) {
                dir = m_check_data_dir;
            }
            const auto unchecked =
                dl::check_config(m_check_config, dir, m_check_max_memory, m_check_solver);
            for (const auto& note : unchecked) {
                std::cout << "dltrain: not checked: " << note << '\n';
            }
            std::cout << m_check_config << (unchecked.empty() ? ": ok\n" : ": parses\n");
        });
    }

    void add_describe_and_device_query(CLI::App& app) {
        app.add_subcommand("describe", "Print what dltrain accepts as JSON: the solver keys' rules")
            ->callback([this] { exit_code = describe(); });
        auto* query = app.add_subcommand(
            "device-query", "List the CPU and GPUs this machine offers (Caffe: device_query)");
        query->add_option("--device", m_query_device, "only this GPU: cuda:N (Caffe: -gpu N)");
        query->callback([this] { exit_code = device_query(m_query_device); });
    }

private:
    /// --level and --stage of one command, bound until its callback reads them.
    struct StateOptions {
        int level = 0;
        std::vector<std::string> stages;
        CLI::Option* level_option = nullptr;
        CLI::Option* stage_option = nullptr;

        void add(CLI::App* cmd, const char* which) {
            level_option = cmd->add_option(
                "--level", level, fmt::format("{}: its level (Caffe's NetState level)", which));
            stage_option = cmd->add_option("--stage", stages,
                                           fmt::format("{}: its stages, separated by commas or "
                                                       "repeated (Caffe's NetState stage)",
                                                       which))
                               ->delimiter(',');
        }
        [[nodiscard]] dl::StateFlags flags() const {
            dl::StateFlags flags;
            if (level_option->count() > 0) {
                flags.level = level;
            }
            if (stage_option->count() > 0) {
                flags.stages = stages;
            }
            return flags;
        }
    };

    /// `caffe train -solver S` writes PREFIX_iter_N.caffemodel (PREFIX from S) and takes no run
    /// directory: dltrain's goes beside the snapshots. Checked here, before anything is
    /// written: Caffe's own check is that the prefix's folder exists.
    static void caffe_outputs(dl::TrainOptions& options) {
        if (options.config.extension() != ".prototxt" || !dl::is_solver_prototxt(options.config)) {
            throw dl::Error(dl::ErrorKind::usage,
                            "--run-dir DIR is required (only a Caffe solver prototxt gives its "
                            "own: beside its snapshot_prefix)");
        }
        const std::filesystem::path prefix = dl::caffe_snapshot_prefix(options.config);
        const std::filesystem::path folder =
            prefix.has_parent_path() ? prefix.parent_path() : std::filesystem::path(".");
        std::error_code ec;
        if (!std::filesystem::is_directory(folder, ec)) {
            throw dl::Error(dl::ErrorKind::config,
                            fmt::format("{}: snapshot_prefix '{}': the folder {} does not exist "
                                        "(Caffe writes its snapshots there; so does dltrain "
                                        "without --run-dir)",
                                        options.config.string(), prefix.string(), folder.string()));
        }
        options.caffemodel_prefix = prefix;
        options.run_dir = prefix.string() + "_run";
        std::cerr << fmt::format("dltrain: run directory {} (checkpoints, metrics); Caffe's "
                                 "snapshots {}_iter_N.caffemodel\n",
                                 options.run_dir.string(), prefix.string());
    }

    std::string m_build;
    dl::TrainOptions m_train;
    std::string m_data_dir;
    int m_max_iter = -1;
    std::string m_weights;
    dl::TestOptions m_test;
    std::string m_test_data_dir;
    dl::PredictOptions m_predict;
    std::string m_predict_mean;
    std::string m_predict_labels;
    std::string m_predict_list;
    std::string m_predict_mean_values;
    dl::ExportOptions m_export;
    std::string m_export_data_dir;
    dl::ConvertOptions m_convert;
    std::string m_convert_solver_output;
    dl::TimeOptions m_time;
    StateOptions m_train_state;
    StateOptions m_test_state;
    StateOptions m_time_state;
    std::string m_check_config;
    std::string m_check_data_dir;
    std::string m_check_max_memory;
    std::vector<std::string> m_check_solver;
    std::string m_query_device;
};

} // namespace

int main(int argc, char** argv) {
    choose_blas_kernels(argv);
    CLI::App app{"dltrain: trains Caffe-style networks on CPU and CUDA GPUs", "dltrain"};
    // The build type and flags travel with every figure: a slow run can be traced to its build.
    const std::string build =
        fmt::format("{} {}", dljob::build_info::build_type, dljob::build_info::cxx_flags);
    app.set_version_flag("--version",
                         fmt::format("dltrain {} (git {}, {})", dljob::build_info::version,
                                     dljob::build_info::git_revision, build));
    app.require_subcommand(1);
    Commands commands(build);
    commands.add_train(app);
    commands.add_test(app);
    commands.add_predict(app);
    commands.add_export(app);
    commands.add_convert(app);
    commands.add_time(app);
    commands.add_check(app);
    commands.add_describe_and_device_query(app);
    try {
        std::vector<std::string> args = caffe_spelling(argc, argv);
        std::reverse(args.begin(), args.end()); // CLI11 takes a vector last argument first
        app.parse(args);
        return commands.exit_code;
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : dl::exit_code::usage;
    } catch (const dl::Error& e) {
        // A stop before the first step is what was asked for, not an error.
        std::cerr << (e.kind() == dl::ErrorKind::stopped ? "dltrain: " : "dltrain: error: ")
                  << e.what() << '\n';
        return dl::exit_code_for(e.kind());
    } catch (const std::exception& e) {
        std::cerr << "dltrain: error: " << e.what() << '\n';
        return dl::exit_code::failed;
    }
}
