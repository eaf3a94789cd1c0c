#pragma once
// A scratch directory where rendered job scripts run for real, with stand-ins on PATH: aprun,
// srun and mpirun run the command after `--` (logging their argv), a `module` function that
// keeps LOADEDMODULES like Lmod/Tcl do (and, like Tcl modules, exits 0 for a missing module),
// and a fake trainer that records its argv and exits with $FAKE_TRAIN_RC.

#include "render_support.hpp"
#include "support/run_process.hpp"

#include <fmt/format.h>

#include <unistd.h>

namespace dljob::test {

class ScriptSandbox {
public:
    ScriptSandbox() {
        char pattern[] = "/tmp/dljob-render-XXXXXX";
        const char* made = mkdtemp(pattern);
        root = made != nullptr ? made : "/tmp/dljob-render-fallback";
        bin = root / "bin";
        home = root / "home";
        canary = root / "CANARY";
        std::filesystem::create_directories(bin);
        std::filesystem::create_directories(home / "data" / "mnist");
        std::filesystem::create_directories(root / "local");
        write_text(home / "data" / "mnist" / "train-images-idx3-ubyte", "data");
        const std::string launcher = R"(#!/bin/bash
printf '%s\n' "$(basename "$0") $*" >>"$SANDBOX/launcher.log"
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
exec "$@"
)";
        for (const char* name : {"aprun", "srun", "mpirun"}) {
            write_text(bin / name, launcher, true);
        }
        // Scheduler commands must never be called from inside a job script.
        for (const char* name : {"sbatch", "qsub", "msub", "sqsub", "scontrol"}) {
            write_text(bin / name, "#!/bin/bash\necho called >>\"$SANDBOX/scheduler-called\"\n",
                       true);
        }
        write_text(root / "modules.sh", R"(module() {
    local verb=$1
    shift
    printf '%s\n' "$verb $*" >>"$SANDBOX/module.log"
    case "$verb" in
    load | add)
        for m in "$@"; do
            case "$m" in
            *missing*)
                echo "ERROR: Unable to locate a modulefile for '$m'" >&2
                return 0
                ;;
            esac
            LOADEDMODULES="${LOADEDMODULES:+$LOADEDMODULES:}$m"
        done
        ;;
    switch | swap) LOADEDMODULES="${LOADEDMODULES:+$LOADEDMODULES:}$2" ;;
    esac
    export LOADEDMODULES
}
)");
        write_text(bin / "fake-train", R"(#!/bin/bash
: >"$DLJOB_RUN_DIR/train.argv"
for a in "$@"; do printf '%s\0' "$a" >>"$DLJOB_RUN_DIR/train.argv"; done
# What the data directory holds while training runs (a staged copy may be gone afterwards).
prev=''
for a in "$@"; do
    if [ "$prev" = --data-dir ]; then ls -A -- "$a" >"$DLJOB_RUN_DIR/train.data" 2>&1; fi
    prev=$a
done
env >"$DLJOB_RUN_DIR/train.env"
if [ "${FAKE_TRAIN_WAIT:-0}" = 1 ]; then
    trap 'echo USR2 >"$DLJOB_RUN_DIR/train.signal"; exit 75' USR2
    trap 'echo TERM >"$DLJOB_RUN_DIR/train.signal"; exit 75' TERM
    : >"$DLJOB_RUN_DIR/train.started"
    for _ in $(seq 1 600); do sleep 0.1; done
    exit 1
fi
exit "${FAKE_TRAIN_RC:-0}"
)",
                   true);
    }
    ~ScriptSandbox() {
        std::error_code ec;
        std::filesystem::remove_all(root, ec);
    }
    ScriptSandbox(const ScriptSandbox&) = delete;
    ScriptSandbox& operator=(const ScriptSandbox&) = delete;

    /// Points the request at this sandbox: run dir under root/runs/<leaf>, the fake trainer, the
    /// stand-in module init.
    void adopt(RenderRequest& request, const std::string& leaf = "run") const {
        request.run_dir = root / "runs" / leaf;
        request.dltrain_binary = bin / "fake-train";
        request.dljob_binary = bin / "dljob";
        if (request.site.modules.flavor != ModuleFlavor::none) {
            request.site.modules.init_script = (root / "modules.sh").string();
        }
    }

    /// Writes the script where submit would and runs it like the scheduler would (bash, env
    /// cleared to what a job gets). `extra_env` is "NAME=value ..." already quoted.
    ProcessOutput run(const RenderRequest& request, const RenderedJob& job,
                      const std::string& extra_env = {}) const {
        std::filesystem::create_directories(request.run_dir);
        const auto script = request.run_dir / job.script_name;
        write_text(script, job.script, true);
        const std::string command = fmt::format(
            "cd {} && env -i SANDBOX={} HOME={} USER=tester PATH={}:/usr/bin:/bin SLURM_TMPDIR={} "
            "LSCRATCH={} RAMDISK={} TMPDIR={} PROJECT={} SCRATCH={} RAP={} {} /bin/bash {}",
            quote(root.string()), quote(root.string()), quote(home.string()), quote(bin.string()),
            quote((root / "local").string()), quote((root / "local").string()),
            quote((root / "local").string()), quote((root / "local").string()),
            quote(root.string()), quote(root.string()), quote(root.string()), extra_env,
            quote(script.string()));
        return run_shell(command);
    }

    static std::string quote(const std::string& value) {
        std::string out = "'";
        for (const char c : value) {
            out += c == '\'' ? std::string("'\\''") : std::string(1, c);
        }
        return out + "'";
    }

    std::filesystem::path root, bin, home, canary;
};

inline std::vector<std::string> read_nul_separated(const std::filesystem::path& path) {
    std::vector<std::string> out;
    const std::string text = read_text(path);
    std::string current;
    for (const char c : text) {
        if (c == '\0') {
            out.push_back(current);
            current.clear();
        } else {
            current.push_back(c);
        }
    }
    return out;
}

inline std::string trimmed(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
        text.pop_back();
    }
    return text;
}

} // namespace dljob::test
