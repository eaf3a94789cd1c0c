#include <dl/stop.hpp>

#include <sys/prctl.h>

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string_view>

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
    for (const int signal : {SIGTERM, SIGUSR1, SIGUSR2, SIGHUP}) {
        sigaction(signal, &action, nullptr);
        sigaddset(&stop_signals, signal);
    }
    // A mask inherited blocked (a job script's trap, a launcher) would hold the scheduler's
    // warning until the kill; one that came while blocked is delivered now.
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
    // A rank started by a task that a scheduler may end without signalling it (a YARN kill
    // ends Spark's task, not its child): the kernel sends SIGTERM when the parent goes, and a
    // parent already gone (the rank now a child of init) is a stop at once.
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts
    if (const char* die = std::getenv("DLTRAIN_DIE_WITH_PARENT");
        die != nullptr && std::string_view(die) == "1") {
        const pid_t parent = getppid();
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent || parent == 1) {
            g_stop = 1;
        }
    }
}

bool stop_requested() {
    return g_stop != 0;
}

void request_stop() {
    g_stop = 1;
}

} // namespace dl
