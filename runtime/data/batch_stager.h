// Batches for a GPU rank: samples are written into page-locked host buffers
// by a background thread, ahead of need, and copied to the device on a copy
// stream of their own, so the host work and the copy of the next batch
// overlap the current step's kernels. The compute stream waits (an event)
// for a batch's copy before using it; a device buffer is refilled only after
// the compute stream has moved past the batch it held.
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
  // CUDA device `device` whose compute stream is `compute_stream`.
  BatchStager(const BatchSource* data, int64_t batch, int device, void* compute_stream);
  ~BatchStager();
  BatchStager(const BatchStager&) = delete;
  BatchStager& operator=(const BatchStager&) = delete;

  // Queues the samples `indices` (exactly `batch` of them); at most kDepth
  // batches are queued or held at once, so call Next() in between.
  void Prefetch(std::vector<int64_t> indices);
  // The oldest queued batch, on the device: valid for work enqueued on the
  // compute stream before the next Next() (which marks it released).
  const Batch& Next();
  int queued() const { return static_cast<int>(pending_.size()); }

  static constexpr int kDepth = 3;

 private:
  struct Slot {
    Batch host, device;  // the same tensors: pinned host, and device
    void* copied = nullptr;    // on the copy stream: the device buffers hold the batch
    void* released = nullptr;  // on the compute stream: the last use of the device buffers
    bool filled = false;
  };
  void Worker();

  const BatchSource* data_;
  int64_t batch_;
  int device_;
  void* compute_;
  void* copy_stream_;
  std::vector<Slot> slots_;
  std::deque<int> pending_;  // slots queued, oldest first
  int next_slot_ = 0;        // the slot the next Prefetch takes
  int held_ = -1;            // the slot Next() last handed out

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int, std::vector<int64_t>>> jobs_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace ddp
