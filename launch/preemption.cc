#include "launch/preemption.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

namespace ddp {
namespace {

// Lock-free, so the handler may store and any thread may read them.
std::atomic<int> g_signal{0};
std::atomic<int64_t> g_signal_at_ns{0};  // CLOCK_MONOTONIC of the first signal
std::atomic<bool> g_answered{false};
std::atomic<bool> g_ending{false};  // the grace ran out: this process is ending, its line said
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler needs a lock-free flag");
static_assert(std::atomic<int64_t>::is_always_lock_free, "a signal handler needs a lock-free time");

// The second signal's lines, made before any signal can come: the handler
// may only write(2) them.
char g_second_term[256], g_second_usr1[256];

int64_t MonotonicNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

void OnSignal(int signal) {
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, signal)) {
    g_signal_at_ns = MonotonicNs();
    return;
  }
  // The launcher's own SIGTERM, once this process is ending, needs no line.
  if (!g_ending.load()) {
    const char* line = signal == SIGTERM ? g_second_term : g_second_usr1;
    ssize_t ignored = write(STDERR_FILENO, line, std::strlen(line));
    (void)ignored;
  }
  _exit(1);
}

void WatchGrace(double grace_s, std::function<void(const std::string&)> on_expired) {
  const auto grace_ns = static_cast<int64_t>(grace_s * 1e9);
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int signal = g_signal.load();
    if (signal == 0 || g_answered.load()) continue;
    if (MonotonicNs() - g_signal_at_ns.load() < grace_ns) continue;
    g_ending = true;
    on_expired(GraceExpiredLine(signal, grace_s));
    return;
  }
}

}  // namespace

void InstallPreemptionHandlers(const std::string& line_prefix, double grace_s,
                               std::function<void(const std::string&)> on_grace_expired) {
  for (auto [signal, line] : {std::pair<int, char*>{SIGTERM, g_second_term}, {SIGUSR1, g_second_usr1}}) {
    std::snprintf(line, sizeof(g_second_term),
                  "%sa second %s: ending now, without a checkpoint of the step in progress\n", line_prefix.c_str(),
                  PreemptionSignalName(signal));
  }
  struct sigaction action = {};
  action.sa_handler = &OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // system calls in flight continue
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  if (grace_s > 0.0) std::thread(&WatchGrace, grace_s, std::move(on_grace_expired)).detach();
}

void MarkPreemptionAnswered() { g_answered = true; }

int PreemptionSignal() { return g_signal.load(); }

const char* PreemptionSignalName(int signal) {
  if (signal == SIGUSR1) return "SIGUSR1";
  if (signal == SIGTERM) return "SIGTERM";
  return "a signal";
}

std::string GraceExpiredLine(int signal, double grace_s) {
  char line[256];
  std::snprintf(line, sizeof(line),
                "%s came %g s ago and the step in progress has not ended (--preemption-grace-s %g): ending now, "
                "without its checkpoint",
                PreemptionSignalName(signal), grace_s, grace_s);
  return line;
}

}  // namespace ddp
