#include "launch/preemption.h"

#include <signal.h>

#include <csignal>

namespace ddp {
namespace {

volatile std::sig_atomic_t g_signal = 0;

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

int PreemptionSignal() { return g_signal; }

const char* PreemptionSignalName(int signal) {
  if (signal == SIGUSR1) return "SIGUSR1";
  if (signal == SIGTERM) return "SIGTERM";
  return "a signal";
}

}  // namespace ddp
