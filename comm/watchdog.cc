#include "comm/watchdog.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

namespace ddp {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct State {
  std::mutex mu;
  std::condition_variable cv;
  double timeout_s = 0.0;
  std::function<void(const std::string&)> on_timeout;
  std::string phase;
  int64_t next_id = 1;
  std::map<int64_t, std::pair<std::string, double>> running;  // id -> (what, started)
  bool stop = false;
  bool ended = false;  // on_timeout was called: once only
  std::thread thread;
};

State& Get() {
  static State* state = new State();  // never destroyed: threads may still register at exit
  return *state;
}

void Watch() {
  State& s = Get();
  std::unique_lock<std::mutex> lock(s.mu);
  while (!s.stop) {
    s.cv.wait_for(lock, std::chrono::milliseconds(500));
    if (s.stop) break;
    const double now = Now();
    for (const auto& [id, entry] : s.running) {
      const double waited = now - entry.second;
      if (waited < s.timeout_s) continue;
      char line[512];
      std::snprintf(line, sizeof(line),
                    "%s%s%s has not finished after %.0f s (--comm-timeout-s %g): a peer rank stopped answering "
                    "or died; ending the job",
                    entry.first.c_str(), s.phase.empty() ? "" : " at ", s.phase.c_str(), waited, s.timeout_s);
      const std::string message = line;
      if (s.ended) return;
      s.ended = true;
      auto on_timeout = s.on_timeout;
      lock.unlock();
      on_timeout(message);  // does not return
      lock.lock();
      break;
    }
  }
}

thread_local std::string t_label;

}  // namespace

void CollectiveWatchdog::Start(double timeout_s, std::function<void(const std::string&)> on_timeout) {
  State& s = Get();
  if (timeout_s <= 0.0) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.thread.joinable()) return;
  s.timeout_s = timeout_s;
  s.on_timeout = std::move(on_timeout);
  s.stop = false;
  s.thread = std::thread(&Watch);
}

void CollectiveWatchdog::Stop() {
  State& s = Get();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.thread.joinable()) return;
    s.stop = true;
  }
  s.cv.notify_all();
  s.thread.join();
}

void CollectiveWatchdog::EndJob(const std::string& line) {
  State& s = Get();
  std::function<void(const std::string&)> on_timeout;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.thread.joinable() || s.ended) return;
    s.ended = true;
    on_timeout = s.on_timeout;
  }
  on_timeout(line);
}

void CollectiveWatchdog::SetPhase(const std::string& phase) {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  s.phase = phase;
}

int64_t CollectiveWatchdog::Begin(const std::string& what) {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  const int64_t id = s.next_id++;
  s.running.emplace(id, std::make_pair(what, Now()));
  return id;
}

void CollectiveWatchdog::End(int64_t id) {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  s.running.erase(id);
}

CollectiveLabel::CollectiveLabel(std::string label) : previous_(std::move(t_label)) { t_label = std::move(label); }

CollectiveLabel::~CollectiveLabel() { t_label = std::move(previous_); }

const std::string& CurrentCollectiveLabel() { return t_label; }

}  // namespace ddp
