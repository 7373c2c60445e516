#include "runtime/data/batch_stager.h"

#include "runtime/clock.h"
#include "runtime/cuda/cuda_device.h"

namespace ddp {

BatchStager::BatchStager(const BatchSource* data, int64_t batch, int device, void* compute_stream, int depth)
    : data_(data), batch_(batch), device_(device), compute_(compute_stream), slots_(std::max(1, depth) + 1) {
  if (on_gpu()) copy_stream_ = cuda::CreateStream();
  for (Slot& slot : slots_) {
    if (!on_gpu()) {
      slot.host = AllocateBatch(*data, batch, Device::Cpu());
      continue;
    }
    slot.host = AllocateBatch(*data, batch, Device::Cpu(), cuda::PinnedHostAllocator());
    slot.device = AllocateBatch(*data, batch, Device::Cuda(device));
    slot.copied = cuda::CreateEvent();
    slot.released = cuda::CreateEvent();
    cuda::RecordEvent(slot.copied, copy_stream_);
    cuda::RecordEvent(slot.released, compute_);
  }
  worker_ = std::thread([this] { Worker(); });
}

BatchStager::~BatchStager() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
  if (!on_gpu()) return;
  cuda::Synchronize(copy_stream_);
  for (Slot& slot : slots_) {
    cuda::DestroyEvent(slot.copied);
    cuda::DestroyEvent(slot.released);
  }
  cuda::DestroyStream(copy_stream_);
}

void BatchStager::Prefetch(std::vector<int64_t> indices, int64_t epoch) {
  CHECK_EQ(static_cast<int64_t>(indices.size()), batch_) << "BatchStager: a batch has " << batch_ << " samples";
  CHECK_LT(queued(), depth()) << "BatchStager: Prefetch beyond " << depth() << " queued batches";
  const int k = next_slot_;
  next_slot_ = (next_slot_ + 1) % static_cast<int>(slots_.size());
  CHECK_NE(k, held_) << "BatchStager: slot still held";
  pending_.push_back(k);
  {
    std::lock_guard<std::mutex> lock(mu_);
    slots_[k].filled = false;
    jobs_.push_back({k, std::move(indices), epoch});
  }
  cv_.notify_all();
}

const Batch& BatchStager::Next() {
  CHECK(!pending_.empty()) << "BatchStager::Next without a Prefetch";
  // The batch handed out before is done with once the work enqueued so far
  // has run: its device buffers may be refilled after that.
  if (held_ >= 0 && on_gpu()) cuda::RecordEvent(slots_[held_].released, compute_);
  const int k = pending_.front();
  pending_.pop_front();
  Slot& slot = slots_[k];
  const double start = SteadySeconds();
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return slot.filled; });
  }
  last_wait_seconds_ = SteadySeconds() - start;
  held_ = k;
  if (!on_gpu()) return slot.host;
  cuda::StreamWaitEvent(copy_stream_, slot.released);
  for (size_t i = 0; i < slot.host.tensors.size(); ++i) {
    cuda::CopyTensorAsync(slot.host.tensors[i].second, slot.device.tensors[i].second, copy_stream_);
  }
  slot.device.real_tokens = slot.host.real_tokens;
  slot.device.replaced_samples = slot.host.replaced_samples;
  cuda::RecordEvent(slot.copied, copy_stream_);
  cuda::StreamWaitEvent(compute_, slot.copied);
  return slot.device;
}

void BatchStager::Worker() {
  // A new thread's current device is 0: without this, its first CUDA call
  // would open a context on GPU 0 for every rank.
  if (on_gpu()) cuda::SetDevice(device_);
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    Slot& slot = slots_[job.slot];
    // The pinned buffers are rewritten only once their last copy out landed.
    if (on_gpu()) cuda::EventSynchronize(slot.copied);
    data_->Fill(job.indices.data(), batch_, job.epoch, slot.host);
    {
      std::lock_guard<std::mutex> lock(mu_);
      slot.filled = true;
    }
    cv_.notify_all();
  }
}

}  // namespace ddp
