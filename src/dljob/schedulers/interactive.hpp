#pragma once
// Interactive sessions (`dljob shell`): the command that asks each scheduler family for an
// interactive allocation and lands in a shell on it, and the files that shell starts from.
//
// The resource options are not spelled twice: each family (schedulers/family.hpp) lists them
// when the job is rendered (RenderedJob::resource_options, so a shell asks for exactly what a
// batch job with the same resources would), without what only batch jobs use (output file,
// warning signal, requeue, mail), and builds its interactive command from them. Likewise the
// session's values and module lines are the rendered job script's own lines, so `module list` in a
// session shows what a batch job loads.
//
//   slurm   salloc <sbatch resource options> --comment=dljob:<token>
//                  srun --overlap --pty --nodes=1 --ntasks=1 /bin/bash --rcfile <rc> -i
//           The shell is always named, so the site's LaunchParameters=use_interactive_step (which
//           starts the login shell from the passwd file, without our rc) makes no difference;
//           --overlap lets `srun` typed in the shell use the allocation the shell's step holds.
//   pbs     qsub -I -x -N dlj-<token> <qsub resource options> <session.sh>
//           Torque's -x runs the script inside the interactive job. Slurm's Torque wrapper has
//           no -x: it runs `salloc ... <session.sh>` where qsub was typed, so session.sh first
//           hops onto the node with srun --pty (probed with `qsub --sbatchline`, wrapper only).
//   moab    msub -I -x -N dlj-<token> <msub resource options incl. -A and -l feature=> <session.sh>
//   aprun   (Big Red II: pbs + launcher aprun) as pbs; the shell is on a service (MOM) node, so
//           DLJOB_LAUNCH="aprun -n N -N 1 -d C -cc none" reaches the GPU node.
//   sqsub   SHARCNET has no interactive mode: refused, with the closest thing (a held job).
//   local   /bin/bash --rcfile <rc> -i on this machine.
// The job name carries the token (pbs/moab) or the comment does (slurm), so an allocation whose
// id dljob never learnt is found again with Scheduler::find_by_token and released.

#include <dljob/domain/render_request.hpp>
#include <dljob/domain/result.hpp>
#include <dljob/domain/site_profile.hpp>

#include <string>
#include <vector>

namespace dljob::schedulers {

struct InteractiveRequest {
    const SiteProfile* site = nullptr;
    const Partition* partition = nullptr;
    RenderedJob rendered; // render::render_job for the same resources (validated like a submit)
    std::string token;
    std::string rc_path;      // <run_dir>/session.rc: what bash --rcfile reads
    std::string session_path; // <run_dir>/session.sh: what qsub -I -x / msub -I -x run
    /// What the family's interactive_probe printed (it exited 0); empty: no probe, or it failed.
    std::string probe_output;
};

struct InteractivePlan {
    /// What dljob runs in the user's terminal, argv[0] first; empty when the family has no
    /// interactive mode (then `refusal` says why and `alternative` what to do instead).
    std::vector<std::string> argv;
    /// DLJOB_LAUNCH in the session: the prefix that runs a command where the GPUs are
    /// ("aprun -n 1 -N 1 -d 16 -cc none" on a Cray service node); empty: run commands directly.
    std::string launch;
    std::vector<std::string> notes;
    std::string refusal;
    std::string alternative;
};

/// The interactive command for the request's scheduler family (see the table above).
Result<InteractivePlan> plan_interactive(const InteractiveRequest& request);

/// What the session's rc file needs besides the rendered job script.
struct SessionFiles {
    std::string site;
    std::string scheduler = "local"; // the family's name
    std::string token;
    std::string rc_path;
    std::string launch;             // DLJOB_LAUNCH
    std::string dljob_binary;       // for `dljob stage-data`
    bool stage = false;             // the recipe stages its data (data.stage_to)
    bool keep_staged = false;       // data.keep_staged: the staged data outlives the session
    std::vector<std::string> notes; // printed when the shell starts
};

/// <run_dir>/session.rc: the user's ~/.bashrc first, then the rendered script's values block
/// (DLJOB_RUN_DIR, DLJOB_DATA_DIR, DLJOB_COMMAND ...), DLJOB_SITE and DLJOB_JOB_ID, the
/// script's module lines (a failing module warns instead of ending the session), staging, the
/// job identity file (how dljob learns the allocation started), the prompt and a banner.
/// Fails (internal) if the rendered script lacks the blocks it reuses.
Result<std::string> session_rc(const SessionFiles& files, const std::string& rendered_script);

/// <run_dir>/session.sh (see the table above).
std::string session_script(const std::string& rc_path);

/// The lines of `script` from the one equal to `first` up to (without) the first line equal to
/// `end`; empty when `first` is missing. Exposed for tests.
std::vector<std::string> script_block(const std::string& script, const std::string& first,
                                      const std::string& end);

} // namespace dljob::schedulers
