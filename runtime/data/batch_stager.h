// Batches prepared ahead of need by a background thread (which decodes
// files on the data's loader threads), `depth` at most queued at once:
// what keeps the input off the step's critical path.
//
// GPU ranks: samples are written into page-locked host buffers and copied
// to the device on a copy stream of their own, so the host work and the
// copy of the next batch overlap the current step's kernels. The compute
// stream waits (an event) for a batch's copy before using it; a device
// buffer is refilled only after the compute stream has moved past the
// batch it held. CPU ranks (device < 0): the host batch is handed out as
// it is.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/data/batch_source.h"
#include "runtime/tensor.h"

namespace ddp {

class BatchStager {
 public:
  // Batches of `batch` samples of `data` (which must outlive this), for
  // CUDA device `device` whose compute stream is `compute_stream`, or for
  // the host (device -1); up to `depth` (>= 1) filled ahead.
  BatchStager(const BatchSource* data, int64_t batch, int device, void* compute_stream, int depth = 2);
  ~BatchStager();
  BatchStager(const BatchStager&) = delete;
  BatchStager& operator=(const BatchStager&) = delete;

  // Queues the samples `indices` (exactly `batch` of them) of `epoch`; at
  // most depth() batches are queued at once, so call Next() in between.
  void Prefetch(std::vector<int64_t> indices, int64_t epoch);
  // The oldest queued batch, on the device: valid for work enqueued on the
  // compute stream (the host: for use) before the next Next(), which
  // releases it.
  const Batch& Next();
  int queued() const { return static_cast<int>(pending_.size()); }
  int depth() const { return static_cast<int>(slots_.size()) - 1; }
  // How long the last Next() waited for its batch to be filled: the input
  // wait the step saw.
  double last_wait_seconds() const { return last_wait_seconds_; }

 private:
  struct Slot {
    Batch host, device;  // the same tensors: host (pinned for a GPU), and device
    void* copied = nullptr;    // on the copy stream: the device buffers hold the batch
    void* released = nullptr;  // on the compute stream: the last use of the device buffers
    bool filled = false;
  };
  struct Job {
    int slot;
    std::vector<int64_t> indices;
    int64_t epoch;
  };
  bool on_gpu() const { return device_ >= 0; }
  void Worker();

  const BatchSource* data_;
  int64_t batch_;
  int device_;
  void* compute_;
  void* copy_stream_ = nullptr;
  std::vector<Slot> slots_;  // depth + 1: the queued ones and the one held
  std::deque<int> pending_;  // slots queued, oldest first
  int next_slot_ = 0;        // the slot the next Prefetch takes
  int held_ = -1;            // the slot Next() last handed out
  double last_wait_seconds_ = 0.0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace ddp
