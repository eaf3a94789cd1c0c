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
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
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

// Like `caffe device_query`: one block per GPU, then what dltrain would use by default.
int device_query() {
    const dl::DeviceReport report = dl::query_devices();
    fmt::print("CPU: {} ({} CPUs usable by this process)\nBLAS: OpenBLAS, {} kernels\n",
               report.cpu_model, report.cpu_threads, dl::blas_core());
    if (!report.cuda_built) {
        fmt::print("GPUs: none ({})\n", report.cuda_status);
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
    for (const auto& gpu : report.gpus) {
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
    int exit_code = 0;

    dl::TrainOptions train;
    std::string data_dir;
    int max_iter = -1;
    auto* train_cmd = app.add_subcommand("train", "Train a network (writes the run directory)");
    train_cmd->add_option("--config", train.config,
                          "network and solver: YAML, or Caffe's net or solver prototxt");
    train_cmd->add_option("--run-dir", train.run_dir, "run directory")->required();
    train_cmd->add_option("--data-dir", data_dir, "where relative data sources resolve");
    train_cmd->add_option("--resume", train.resume, "auto, or a checkpoint file");
    std::string weights;
    train_cmd->add_option("--weights", weights,
                          "fine-tune: start from the parameters of this checkpoint (or Caffe "
                          ".caffemodel) whose layer names the network has (the others keep their "
                          "fillers); not used once --resume auto finds a checkpoint of the run");
    train_cmd
        ->add_option("--threads", train.threads, "threads (default: the CPUs this process may use)")
        ->check(CLI::NonNegativeNumber);
    train_cmd->add_option("--deadline", train.deadline,
                          "checkpoint and exit 75 after this many seconds (90m, 2h), 'auto' "
                          "(scheduler end time from the environment, the default) or 'none'");
    train_cmd->add_option("--max-iter", max_iter, "override solver.max_iter")
        ->check(CLI::NonNegativeNumber);
    const char* device_help =
        "cpu, cuda or cuda:N (default: the first visible GPU when built with CUDA, else cpu)";
    train_cmd->add_option("--device", train.device, device_help);
    const char* memory_help =
        "refuse a net whose tensors need more than SIZE bytes (64G, 512M; 'none'); default: "
        "DLTRAIN_MAX_MEMORY, else this machine's physical memory";
    train_cmd->add_option("--max-memory", train.max_memory, memory_help);
    const char* solver_help =
        "SOLVER.prototxt (Caffe's form, instead of --config: the solver names its net), or "
        "KEY=VALUE over the config's solver (base_lr, momentum, weight_decay, lr_policy, gamma, "
        "stepsize, power, stepvalue, random_seed...) or batch_size of the train Data layers; "
        "repeatable";
    train_cmd->add_option("--solver", train.solver_overrides, solver_help);
    train_cmd->callback([&] {
        train.config = solver_and_config(train.config, train.solver_overrides);
        if (!data_dir.empty()) {
            train.data_dir = data_dir;
        }
        if (max_iter >= 0) {
            train.max_iter = max_iter;
        }
        if (!weights.empty()) {
            train.weights = weights;
        }
        train.build = build;
        exit_code = dl::train(train);
    });

    dl::TestOptions test;
    std::string test_data_dir;
    auto* test_cmd = app.add_subcommand("test", "Test weights from a checkpoint on the test phase");
    test_cmd->add_option("--config", test.config, "network and solver YAML")->required();
    test_cmd->add_option("--weights", test.weights, "checkpoint file (or Caffe .caffemodel)")
        ->required();
    test_cmd->add_option("--data-dir", test_data_dir, "where relative data sources resolve");
    test_cmd->add_option("--threads", test.threads,
                         "threads (default: the CPUs this process may use)");
    test_cmd->add_option("--device", test.device, device_help);
    test_cmd->add_option("--max-memory", test.max_memory, memory_help);
    test_cmd->callback([&] {
        if (!test_data_dir.empty()) {
            test.data_dir = test_data_dir;
        }
        exit_code = dl::test(test);
    });

    dl::ExportOptions export_options;
    std::string export_data_dir;
    auto* export_cmd = app.add_subcommand(
        "export", "Write a checkpoint's parameters as Caffe weights (.caffemodel)");
    export_cmd->add_option("--config", export_options.config, "network and solver config")
        ->required();
    export_cmd->add_option("--weights", export_options.weights, "checkpoint (or .caffemodel)")
        ->required();
    export_cmd->add_option("--caffemodel", export_options.caffemodel, "the file to write")
        ->required();
    export_cmd->add_option("--data-dir", export_data_dir, "where relative data sources resolve");
    export_cmd->callback([&] {
        if (!export_data_dir.empty()) {
            export_options.data_dir = export_data_dir;
        }
        exit_code = dl::export_model(export_options);
    });

    dl::ConvertOptions convert;
    std::string convert_solver_output;
    auto* convert_cmd = app.add_subcommand(
        "convert", "Write a config as dltrain's YAML, or (-o NET.prototxt) as Caffe's prototxt");
    convert_cmd
        ->add_option("--config", convert.config, "a YAML config, or Caffe's net or solver prototxt")
        ->required();
    convert_cmd->add_option("-o,--output", convert.output, "OUT.yaml, or NET.prototxt")->required();
    convert_cmd->add_option("--solver-output", convert_solver_output,
                            "with -o NET.prototxt: also write Caffe's solver prototxt");
    convert_cmd->callback([&] {
        if (!convert_solver_output.empty()) {
            convert.solver_output = convert_solver_output;
        }
        exit_code = dl::convert_config(convert);
    });

    dl::TimeOptions time;
    auto* time_cmd = app.add_subcommand("time", "Forward and backward time per layer");
    time_cmd->add_option("--config", time.config, "network and solver YAML")->required();
    time_cmd->add_option("--iterations", time.iterations, "timed iterations (default 50)");
    time_cmd->add_option("--threads", time.threads,
                         "threads (default: the CPUs this process may use)");
    time_cmd->add_option("--device", time.device, device_help);
    time_cmd->add_option("--max-memory", time.max_memory, memory_help);
    time_cmd->callback([&] { exit_code = dl::time_net(time); });

    std::string check_config_file;
    std::string check_data_dir;
    auto* check_cmd = app.add_subcommand(
        "check", "Check a config without training: it parses and every shape fits (exit 3 if not)");
    check_cmd->add_option("--config", check_config_file,
                          "network and solver: YAML, or Caffe's net or solver prototxt");
    check_cmd->add_option("--data-dir", check_data_dir, "where relative data sources resolve");
    std::string check_max_memory;
    check_cmd->add_option("--max-memory", check_max_memory, memory_help);
    std::vector<std::string> check_solver;
    check_cmd->add_option("--solver", check_solver, solver_help);
    check_cmd->callback([&] {
        check_config_file = solver_and_config(check_config_file, check_solver).string();
        std::optional<std::filesystem::path> dir;
        if (!check_data_dir.empty()) {
            dir = check_data_dir;
        }
        const auto unchecked =
            dl::check_config(check_config_file, dir, check_max_memory, check_solver);
        for (const auto& note : unchecked) {
            std::cout << "dltrain: not checked: " << note << '\n';
        }
        std::cout << check_config_file << (unchecked.empty() ? ": ok\n" : ": parses\n");
    });

    app.add_subcommand("describe", "Print what dltrain accepts as JSON: the solver keys' rules")
        ->callback([&] { exit_code = describe(); });
    app.add_subcommand("device-query", "List the CPU and GPUs this machine offers")->callback([&] {
        exit_code = device_query();
    });
    try {
        app.parse(argc, argv);
        return exit_code;
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
