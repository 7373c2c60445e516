// ExecutionContext: where and how an op runs. Every op takes one, so the CUDA
// backend plugs in (device, stream) without changing op signatures.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "runtime/device.h"
#include "runtime/tensor.h"

namespace ddp {

class ExecutionContext {
 public:
  // Host execution with `num_threads` OpenMP threads for ops; 0 keeps the
  // OpenMP default.
  static ExecutionContext Cpu(int num_threads = 0);
  // Execution on CUDA device `index`, on `stream` (a cudaStream_t; null is
  // the legacy default stream, which tests use; training makes one stream
  // per rank and makes it the device's current stream).
  static ExecutionContext Cuda(int index, void* stream);
  // The meta device: ops check their arguments and allocate their outputs,
  // and run nothing (runtime/device.h). `planned` is the device whose step
  // it plans: what an op's backend would allocate besides its outputs
  // (oneDNN's layout scratch on a CPU) is reserved as there.
  static ExecutionContext Meta(Device planned = Device::Cpu());

  Device device() const { return device_; }
  // The device a meta context plans for; any other context's own.
  Device planned_device() const { return device_.is_meta() ? planned_ : device_; }
  int num_threads() const { return num_threads_; }
  void* cuda_stream() const { return cuda_stream_; }

  // GPU math: TF32 tensor cores for fp32 convolutions and GEMMs (--precision
  // tf32; off by default, so fp32 means fp32), and deterministic algorithms
  // chosen the same way every run (--deterministic).
  bool allow_tf32() const { return allow_tf32_; }
  void set_allow_tf32(bool allow) { allow_tf32_ = allow; }
  bool deterministic() const { return deterministic_; }
  void set_deterministic(bool deterministic) { deterministic_ = deterministic; }

  // Temporary memory on this context's device, reused from op to op (ops run
  // one after another on a context). `slot` separates buffers that one op
  // needs at the same time. The returned tensor is valid until the next
  // Scratch call with the same slot.
  Tensor Scratch(int slot, int64_t bytes);
  // Scratch(slot) as a typed tensor of `shape`.
  Tensor ScratchTensor(int slot, const Shape& shape, DType dtype);

  // Bytes the scratch slots hold now (workspaces, staging buffers).
  int64_t scratch_bytes() const;

  // A context like this one whose scratch slots start out as this one's
  // buffers (referenced again, not copied) and grow apart from then on. A
  // CUDA graph captured on it keeps the buffers its kernels use alive,
  // whatever the original context replaces later.
  ExecutionContext WithOwnScratch() const;

  // Slot ranges: ops use [0, kFirstLayerScratchSlot); layers use the rest, so
  // a layer's staging buffer survives the ops it calls.
  static constexpr int kFirstLayerScratchSlot = 8;
  // On CUDA the libraries' workspaces share one op slot: cuBLASLt's, from
  // the first GEMM on, and a convolution's cuDNN algorithm's, which
  // WorkspaceLimit bounds (runtime/ops/cuda/cudnn_util.h). A meta context
  // planning a CUDA rank reserves them so (kConvWorkspaceBoundBytes: the
  // bound, as no cuDNN is at hand to choose).
  static constexpr int kLibraryWorkspaceSlot = 7;
  static constexpr int64_t kGemmWorkspaceBytes = int64_t{32} << 20;
  static constexpr int64_t kConvWorkspaceBoundBytes = int64_t{1} << 30;
  // The other CUDA op buffers a planning meta context mirrors: cuDNN's
  // 16-bit or channels-last weight gradient and 16-bit conv bias staging
  // slots, and LayerNorm backward's f64 partial sums (two tensors of
  // ceil(rows / kLayerNormRowsPerPartial) x hidden, freed after the call).
  static constexpr int kConvWeightGradSlot = 5;
  static constexpr int kConvBiasSlot = 6;
  static constexpr int64_t kLayerNormRowsPerPartial = 32;

 private:
  ExecutionContext(Device device, int num_threads, void* stream)
      : device_(device), num_threads_(num_threads), cuda_stream_(stream),
        scratch_(std::make_shared<std::vector<Tensor>>()) {}

  Device device_;
  Device planned_;
  int num_threads_;
  void* cuda_stream_;
  bool allow_tf32_ = false;
  bool deterministic_ = false;
  std::shared_ptr<std::vector<Tensor>> scratch_;
};

}  // namespace ddp
