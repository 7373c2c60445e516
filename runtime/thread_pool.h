// A fixed pool of threads for data-parallel loops on the host (decoding a
// batch's images): the caller works too, so a pool of T threads runs T
// iterations at once with T - 1 threads of its own. One loop at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ddp {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs body(0) ... body(n - 1), each once, on the pool and the caller;
  // returns when all have. Not reentrant.
  void ParallelFor(int64_t n, const std::function<void(int64_t)>& body);

 private:
  void Work();
  void RunShare();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_, done_;
  const std::function<void(int64_t)>* body_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
  int64_t generation_ = 0;
  int busy_ = 0;  // workers inside the current loop
  bool stop_ = false;
};

}  // namespace ddp
