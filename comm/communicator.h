// Communicator: the collectives data parallelism needs, asynchronous, each
// returning a Work handle (PyTorch c10d's shape). Backends: MPI for host
// tensors (comm/mpi_communicator.h), NCCL for CUDA tensors
// (comm/nccl_communicator.h). Every rank must issue the same collectives in
// the same order; backends run them in the order issued.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace ddp {

enum class ReduceOp { kSum, kAverage };

// When one collective was issued, started on the wire and finished, in
// seconds on the steady clock.
struct WorkTiming {
  double enqueued = 0.0, started = 0.0, finished = 0.0;
};

class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the collective has finished; a failure (an MPI or NCCL
  // error) comes back as the Status, naming the call.
  virtual Status Wait() = 0;
  virtual bool IsCompleted() = 0;
  // Valid once completed.
  virtual WorkTiming timing() const = 0;
};

// The shapes of a reduce-scatter or all-gather: `whole` holds `world`
// blocks of `block`'s size and dtype. A mismatch is a bug in the caller.
inline void CheckBlockShapes(const char* op, const Tensor& whole, const Tensor& block, int world) {
  CHECK(whole.dtype() == block.dtype() && whole.numel() == block.numel() * world)
      << op << " of " << whole.DebugString() << " and " << block.DebugString() << " over " << world << " ranks";
}

// A backend's receive buffer, kept from one collective to the next (as
// NCCL keeps its own): grown to `bytes` where smaller, the old one freed
// first. MPI's worker keeps one on the host, so a rank's memory does not
// depend on how its collectives overlap its backward; the memory planner's
// meta communicator keeps its mirror on the meta device.
inline void GrowReceiveBuffer(Tensor& buffer, int64_t bytes, Device device) {
  if (buffer.defined() && buffer.numel() >= bytes) return;
  buffer = Tensor();
  buffer = Tensor::Empty({bytes}, DType::kU8, device);
}

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Reduces `tensor` across ranks in place. f32, f64, f16, bf16 (summed in
  // float, rounded to the format at each step, as NCCL does), i32, i64.
  virtual std::shared_ptr<Work> AllReduce(Tensor tensor, ReduceOp op) = 0;
  // `input` holds world_size blocks of output.numel() elements; `output`
  // receives this rank's block of the reduction. Backends may use `input`
  // as scratch: its contents afterwards are unspecified, except that
  // `output` may be this rank's block of `input` (in place, as NCCL allows).
  virtual std::shared_ptr<Work> ReduceScatter(Tensor input, Tensor output, ReduceOp op) = 0;
  // `output` receives every rank's `input`, rank r's at block r. In place
  // when `input` is this rank's block of `output` (as NCCL allows).
  virtual std::shared_ptr<Work> AllGather(Tensor input, Tensor output) = 0;
  virtual std::shared_ptr<Work> Broadcast(Tensor tensor, int root) = 0;
  // Several tensors of any dtypes and sizes as one operation with one Work:
  // NCCL issues them inside one ncclGroupStart/End; MPI starts every
  // broadcast before waiting for any. For many small tensors (a model's BN
  // buffers) this costs one launch and one wait, not one per tensor.
  virtual std::shared_ptr<Work> BroadcastCoalesced(std::vector<Tensor> tensors, int root) = 0;
  virtual std::shared_ptr<Work> Barrier() = 0;
};

}  // namespace ddp
