#include "runtime/thread_pool.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ddp {
namespace {

TEST(ThreadPoolTest, EveryIterationRunsOnceOnSeveralThreadsLoopAfterLoop) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int64_t n : {0, 1, 3, 1000}) {
      std::vector<std::atomic<int>> runs(n);
      std::mutex mu;
      std::set<std::thread::id> ids;
      pool.ParallelFor(n, [&](int64_t i) {
        runs[i].fetch_add(1);
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(runs[i].load(), 1) << "threads " << threads << " n " << n << " i " << i;
      EXPECT_LE(static_cast<int>(ids.size()), threads);
    }
  }
}

TEST(ThreadPoolTest, TheCallerAndTheWorkersShareALoop) {
  ThreadPool pool(3);
  std::atomic<int> inside{0}, most{0};
  pool.ParallelFor(3, [&](int64_t) {
    const int now = ++inside;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    // Each waits for the others, so three threads must hold one each.
    while (most.load() < 3) std::this_thread::yield();
    --inside;
  });
  EXPECT_EQ(most.load(), 3);
}

}  // namespace
}  // namespace ddp
