#include <dl/stop.hpp>

#include <pthread.h>

#include <csignal>

namespace dl {
namespace {

volatile std::sig_atomic_t g_stop = 0;

extern "C" void on_stop_signal(int /*signal*/) {
    g_stop = 1;
}

} // namespace

void install_stop_signals() {
    struct sigaction action = {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    for (const int signal : {SIGTERM, SIGUSR1, SIGUSR2}) {
        sigaction(signal, &action, nullptr);
        sigaddset(&stop_signals, signal);
    }
    // A mask inherited blocked (a job script's trap, a launcher) would hold the scheduler's
    // warning until the kill; one that came while blocked is delivered now.
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
}

bool stop_requested() {
    return g_stop != 0;
}

void request_stop() {
    g_stop = 1;
}

} // namespace dl
