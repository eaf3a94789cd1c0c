#include <dljob/schedulers/family.hpp>
#include <dljob/schedulers/interactive.hpp>
#include <dljob/schedulers/launcher.hpp>
#include <dljob/util/shell.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <sstream>

namespace dljob::schedulers {

Result<InteractivePlan> plan_interactive(const InteractiveRequest& request) {
    if (request.site == nullptr || request.partition == nullptr ||
        request.rendered.submit_argv.empty()) {
        return fail(ErrorCode::internal, "plan_interactive: incomplete request");
    }
    auto plan = family_of(request.rendered.scheduler).interactive(request);
    if (!plan) {
        return fail(plan.error());
    }
    const Partition& partition = *request.partition;
    const Launcher& launcher = launcher_of(partition.launcher);
    if (launcher.script_off_compute_node()) {
        plan->launch = launcher.prefix(launch_geometry(partition, request.rendered.resources));
        plan->notes.push_back(fmt::format(
            "this shell runs on a service (MOM) node of {}, not on the GPU node: run programs "
            "there with $DLJOB_LAUNCH, e.g. $DLJOB_LAUNCH nvidia-smi ({})",
            request.site->name, plan->launch));
    }
    return plan;
}

std::vector<std::string> script_block(const std::string& script, const std::string& first,
                                      const std::string& end) {
    std::vector<std::string> lines;
    std::istringstream in(script);
    std::string line;
    bool inside = false;
    while (std::getline(in, line)) {
        if (!inside && line == first) {
            inside = true;
        } else if (inside && line == end) {
            break;
        }
        if (inside) {
            lines.push_back(line);
        }
    }
    return lines;
}

namespace {

// Staging as the batch job does it (the recipe's data.stage_to), and its removal at the end.
void add_staging(const SessionFiles& files, const std::function<void(std::string_view)>& add) {
    add("");
    const std::string dljob = util::shell_quote(files.dljob_binary);
    add("# The recipe stages its data (data.stage_to) as its batch job does: a pack through");
    add("# `dljob stage-data` (cached per node, this shell registered as one of its users;");
    add("# $DLJOB_DATA_DIR becomes a link to it), any other tree copied. Behind a launcher");
    add("# (aprun) this shell's PID is not on the node that checks it, so there the cached");
    add("# copy counts as unused by the session.");
    add("dljob_step='stage data'");
    add("dljob_data_link='' dljob_data_copy=''");
    add(R"sh(if [ -f "$DLJOB_DATA_SOURCE/manifest.json" ]; then)sh");
    add(R"sh(    rm -f -- "$DLJOB_DATA_DIR")sh");
    add(fmt::format(
        R"sh(    dljob_staged=$($DLJOB_LAUNCH {} stage-data "$DLJOB_DATA_SOURCE" --to "$(dirname -- "$DLJOB_DATA_DIR")" {}) &&)sh",
        dljob, files.keep_staged ? "--keep" : "--user-pid $$"));
    add(R"sh(        ln -s -- "$dljob_staged" "$DLJOB_DATA_DIR" && dljob_data_link=1)sh");
    add("else");
    add("    dljob_data_copy=1");
    add(R"sh(    $DLJOB_LAUNCH /bin/bash -c 'mkdir -p -- "$2" && cp -R -- "$1/." "$2/"' _ "$DLJOB_DATA_SOURCE" "$DLJOB_DATA_DIR")sh");
    add("fi || dljob_fail $?");
    add("export DLJOB_DATA_DIR");
    if (!files.keep_staged) {
        // As the batch job's end does (templates/prologue.mustache): node-local disks and
        // RAM disks belong to whoever comes next, and on Big Red II the ramdisk is RAM.
        add("# The staged data goes when the session ends (data.keep_staged keeps it).");
        add("dljob_unstage() {");
        add(R"sh(    if [ -n "$dljob_data_link" ]; then)sh");
        add(R"sh(        rm -f -- "$DLJOB_DATA_DIR")sh");
        add(fmt::format(
            R"sh(        $DLJOB_LAUNCH {} stage-data "$DLJOB_DATA_SOURCE" --to "$(dirname -- "$DLJOB_DATA_DIR")" --cleanup --user-pid $$ ||)sh",
            dljob));
        add(R"sh(            echo "dljob: warning: could not remove the staged copy of $DLJOB_DATA_SOURCE" >&2)sh");
        add("    fi");
        add(R"sh(    if [ -n "$dljob_data_copy" ]; then)sh");
        add(R"sh(        $DLJOB_LAUNCH rm -rf -- "$DLJOB_DATA_DIR" ||)sh");
        add(R"sh(            echo "dljob: warning: could not remove the copy $DLJOB_DATA_DIR of $DLJOB_DATA_SOURCE" >&2)sh");
        add("    fi");
        add("}");
        add("trap dljob_unstage EXIT");
    }
}

} // namespace

Result<std::string> session_rc(const SessionFiles& files, const std::string& rendered_script) {
    // The rendered job script's own lines (templates/header.mustache, prologue.mustache).
    const auto values =
        script_block(rendered_script, "# Values, each validated or single-quoted by dljob.", "");
    const auto modules = script_block(rendered_script, "dljob_module() {", "dljob_trap_signals");
    if (values.empty() || modules.empty()) {
        return fail(ErrorCode::internal,
                    "the job script template no longer has the values or module blocks an "
                    "interactive session reuses",
                    "templates/header.mustache and prologue.mustache changed: update "
                    "src/dljob/schedulers/interactive.cpp");
    }
    std::string rc;
    const auto add = [&rc](std::string_view line) {
        rc += line;
        rc += '\n';
    };
    add(fmt::format("# dljob interactive session on site {} (token {}): generated, read by",
                    files.site, files.token));
    add("# bash --rcfile. The user's own ~/.bashrc comes first, so dljob's settings win.");
    add("# shellcheck disable=SC1090,SC1091,SC2034");
    add(R"sh(if [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi)sh");
    add("");
    for (const auto& line : values) {
        add(line);
    }
    add("DLJOB_SITE=" + util::shell_quote(files.site));
    add(fmt::format("DLJOB_JOB_ID={}", family_of(files.scheduler).job_id_expression()));
    add("DLJOB_LAUNCH=" + util::shell_quote(files.launch));
    add("DLJOB_INTERACTIVE=1");
    add("export DLJOB_SITE DLJOB_JOB_ID DLJOB_LAUNCH DLJOB_INTERACTIVE DLJOB_SCRIPT "
        "DLJOB_DATA_SOURCE");
    add("");
    add("# The batch script's module lines; in a session a failure warns instead of ending it.");
    add("dljob_step=''");
    add("dljob_fail() {");
    add(R"sh(    echo "dljob: warning: $dljob_step failed (status $1); the session goes on without it" >&2)sh");
    add("}");
    for (const auto& line : modules) {
        add(line);
    }
    if (files.stage) {
        add_staging(files, add);
    }
    add("");
    add("# The recipe's command as the batch job runs it: `dljob_run` (extra arguments appended).");
    add(R"sh(dljob_run() { (cd -- "$DLJOB_RUN_DIR" && $DLJOB_LAUNCH "${DLJOB_COMMAND[@]}" "$@"); })sh");
    add(R"sh(cd -- "$DLJOB_RUN_DIR" || echo "dljob: warning: cannot enter $DLJOB_RUN_DIR" >&2)sh");
    add("# How dljob learns that the allocation started and which job it is.");
    add(R"sh(printf 'token=%s\nscheduler=%s\njob_id=%s\nhost=%s\nstarted=%s\npid=%s\n' \)sh");
    add(R"sh(    "$DLJOB_JOB_TOKEN" "$DLJOB_SCHEDULER" "$DLJOB_JOB_ID" "$(hostname 2>/dev/null)" \)sh");
    add(R"sh(    "$(date +%s)" "$$" >"$DLJOB_RUN_DIR/.job_identity.$$" &&)sh");
    add(R"sh(    mv -f -- "$DLJOB_RUN_DIR/.job_identity.$$" "$DLJOB_RUN_DIR/job_identity")sh");
    add("# An interactive bash ignores SIGTERM; `dljob cancel`, scancel and qdel send it.");
    add(R"sh(trap 'echo "dljob: the session was cancelled" >&2; : >"$DLJOB_RUN_DIR/cancelled"; exit 143' TERM)sh");
    add(R"sh(PS1='[dljob ${DLJOB_SITE} ${DLJOB_JOB_ID}] \w \$ ')sh");
    add(R"sh(echo "dljob: interactive session on site $DLJOB_SITE, job $DLJOB_JOB_ID; run directory $DLJOB_RUN_DIR")sh");
    for (const auto& note : files.notes) {
        add("echo " + util::shell_quote("dljob: note: " + note));
    }
    add(R"sh(echo "dljob: 'dljob_run' runs the job's command; 'exit' ends the session and releases the allocation")sh");
    return rc;
}

std::string session_script(const std::string& rc_path) {
    return fmt::format(R"(#!/bin/bash
# dljob interactive session (generated). Run inside the interactive job by `qsub -I -x` or
# `msub -I -x`; under Slurm's Torque wrapper it runs where qsub was typed (salloc), so it first
# hops onto the allocated node.
if [ -n "${{SLURM_JOB_ID:-}}" ] && [ -z "${{SLURM_STEP_ID:-}}" ] && command -v srun >/dev/null 2>&1; then
    exec srun --overlap --pty --nodes=1 --ntasks=1 /bin/bash "$0"
fi
exec /bin/bash --rcfile {} -i
)",
                       util::shell_quote(rc_path));
}

} // namespace dljob::schedulers
