#include "comm/staged_communicator.h"

#include <algorithm>

#include "runtime/cuda/cuda_device.h"

namespace ddp {
namespace {

// The byte range a tensor covers in its storage.
struct Range {
  size_t begin, end;
};
Range RangeOf(const Tensor& t) { return {t.byte_offset(), t.byte_offset() + t.nbytes()}; }

class StagedWork final : public Work {
 public:
  StagedWork(std::shared_ptr<Work> inner, std::vector<std::pair<Tensor, Tensor>> copy_back,
             std::vector<Tensor> buffers, void* compute)
      : inner_(std::move(inner)), copy_back_(std::move(copy_back)), buffers_(std::move(buffers)), compute_(compute) {}
  Status Wait() override {
    RETURN_IF_ERROR(inner_->Wait());
    // Pinned to device on the compute stream: whatever is enqueued after
    // Wait() sees the results.
    for (auto& [host, device] : copy_back_) cuda::CopyTensorAsync(host, device, compute_);
    copy_back_.clear();
    return Status::Ok();
  }
  bool IsCompleted() override { return inner_->IsCompleted(); }
  WorkTiming timing() const override { return inner_->timing(); }

 private:
  std::shared_ptr<Work> inner_;
  std::vector<std::pair<Tensor, Tensor>> copy_back_;  // (pinned view, device tensor)
  std::vector<Tensor> buffers_;                       // kept until the copies back are enqueued
  void* compute_;
};

}  // namespace

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> host, int device, void* compute_stream)
    : host_(std::move(host)), device_(device), compute_(compute_stream), copied_(cuda::CreateEvent()) {}

StagedCommunicator::~StagedCommunicator() { cuda::DestroyEvent(copied_); }

template <typename Run>
std::shared_ptr<Work> StagedCommunicator::Staged(const std::vector<Tensor>& tensors, const std::vector<bool>& outputs,
                                                 Run run) {
  if (tensors.empty() || tensors[0].device().is_cpu()) return run(tensors);
  const size_t n = tensors.size();
  // Larger tensors first, so a tensor inside another becomes a view of it.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return tensors[a].nbytes() > tensors[b].nbytes(); });
  std::vector<Tensor> host(n), buffers;
  std::vector<int> owner(n, -1);  // the tensor whose buffer holds i (i itself when staged on its own)
  for (size_t i : order) {
    const Tensor& t = tensors[i];
    CHECK(t.device() == Device::Cuda(device_)) << "staged collective on " << t.DebugString() << ", communicator on cuda:"
                                               << device_;
    for (size_t j : order) {
      if (owner[j] != static_cast<int>(j) || tensors[j].storage() != t.storage()) continue;
      const Range outer = RangeOf(tensors[j]), inner = RangeOf(t);
      if (inner.begin < outer.begin || inner.end > outer.end || tensors[j].dtype() != t.dtype()) continue;
      owner[i] = static_cast<int>(j);
      host[i] = host[j].View(static_cast<int64_t>((inner.begin - outer.begin) / DTypeSize(t.dtype())), t.shape());
      break;
    }
    if (owner[i] >= 0) continue;
    owner[i] = static_cast<int>(i);
    host[i] = Tensor::EmptyFrom(cuda::PinnedHostAllocator(), t.shape(), t.dtype());
    buffers.push_back(host[i]);
    cuda::CopyTensorAsync(t, host[i], compute_);
  }
  // MPI reads the copies on the host: they must have landed.
  cuda::RecordEvent(copied_, compute_);
  cuda::EventSynchronize(copied_);
  std::vector<std::pair<Tensor, Tensor>> copy_back;
  for (size_t i = 0; i < n; ++i) {
    if (outputs[i]) copy_back.emplace_back(host[i], tensors[i]);
  }
  return std::make_shared<StagedWork>(run(host), std::move(copy_back), std::move(buffers), compute_);
}

std::shared_ptr<Work> StagedCommunicator::AllReduce(Tensor tensor, ReduceOp op) {
  return Staged({tensor}, {true}, [&](const std::vector<Tensor>& h) { return host_->AllReduce(h[0], op); });
}

std::shared_ptr<Work> StagedCommunicator::ReduceScatter(Tensor input, Tensor output, ReduceOp op) {
  return Staged({input, output}, {false, true},
                [&](const std::vector<Tensor>& h) { return host_->ReduceScatter(h[0], h[1], op); });
}

std::shared_ptr<Work> StagedCommunicator::AllGather(Tensor input, Tensor output) {
  return Staged({input, output}, {false, true},
                [&](const std::vector<Tensor>& h) { return host_->AllGather(h[0], h[1]); });
}

std::shared_ptr<Work> StagedCommunicator::Broadcast(Tensor tensor, int root) {
  return Staged({tensor}, {true}, [&](const std::vector<Tensor>& h) { return host_->Broadcast(h[0], root); });
}

std::shared_ptr<Work> StagedCommunicator::BroadcastCoalesced(std::vector<Tensor> tensors, int root) {
  return Staged(tensors, std::vector<bool>(tensors.size(), true),
                [&](const std::vector<Tensor>& h) { return host_->BroadcastCoalesced(h, root); });
}

}  // namespace ddp
