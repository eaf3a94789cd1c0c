#pragma once
// The stop a scheduler asks for before the walltime kill (SIGTERM, or SIGUSR1/SIGUSR2 as
// `--signal` and `-l signal` send it): the handler only sets a flag, which the training loop
// reads between steps and the data readers between records, so a long load also ends early.

namespace dl {

/// From now on SIGTERM, SIGUSR1, SIGUSR2 and SIGHUP (PySpark's worker daemon sends it to its
/// process group) set the flag instead of ending the process. With DLTRAIN_DIE_WITH_PARENT=1
/// the parent's end is a SIGTERM too (prctl PR_SET_PDEATHSIG): Spark's task starts the rank
/// and may be killed without signalling it.
void install_stop_signals();
bool stop_requested();
void request_stop();

} // namespace dl
