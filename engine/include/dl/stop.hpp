#pragma once
// The stop a scheduler asks for before the walltime kill (SIGTERM, or SIGUSR1/SIGUSR2 as
// `--signal` and `-l signal` send it): the handler only sets a flag, which the training loop
// reads between steps and the data readers between records, so a long load also ends early.

namespace dl {

/// From now on SIGTERM, SIGUSR1 and SIGUSR2 set the flag instead of ending the process.
void install_stop_signals();
bool stop_requested();
void request_stop();

} // namespace dl
