#include "launch/preemption.h"

#include <signal.h>

#include <atomic>
#include <csignal>

namespace ddp {
namespace {

// Lock-free, so the handler may store and any thread may read it.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler needs a lock-free flag");

void OnSignal(int signal) { g_signal = signal; }

}  // namespace

void InstallPreemptionHandlers() {
  struct sigaction action = {};
  action.sa_handler = &OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // system calls in flight continue
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int PreemptionSignal() { return g_signal.load(); }

const char* PreemptionSignalName(int signal) {
  if (signal == SIGUSR1) return "SIGUSR1";
  if (signal == SIGTERM) return "SIGTERM";
  return "a signal";
}

}  // namespace ddp
