// Which device a rank trains on (DESIGN.md, Launch): with CUDA, one GPU per
// rank, chosen by the rank's index among the ranks of its node (local rank)
// among the GPUs the driver shows it, so CUDA_VISIBLE_DEVICES (which the
// driver applies) narrows and reorders the choice, as PyTorch DDP and
// Horovod do. The choice itself is a pure function, so it is tested without
// a GPU.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/status.h"

namespace ddp {

struct DeviceRequest {
  std::string flag = "auto";  // --device: auto, cpu or cuda
  int local_rank = 0, local_size = 1;
  int visible_gpus = 0;              // what the driver shows this process
  // Why CUDA could not start where the driver is installed (cuda::DeviceQuery's
  // error), or "": then no GPU is visible, and that is not an error.
  std::string cuda_error;
  std::optional<std::string> cuda_visible_devices;  // the variable, for messages
  // Whether this build can train on CUDA (it was built with nvcc). Where it
  // cannot, auto means CPU and cuda is refused, after the binding is checked.
  bool cuda_training = false;
};

struct DeviceChoice {
  bool cuda = false;
  int gpu = -1;             // with cuda: the device index to bind
  std::string description;  // "cpu" or "cuda:1", for the start line
};

// A driver that is installed but cannot start CUDA is refused under auto
// and cuda alike, with CUDA's reason: training on the CPU instead would hide
// a broken GPU box.
//
// auto: CUDA when GPUs are visible, enough for every local rank, and this
// build trains on them; CPU otherwise. cuda: a GPU for this rank, or one
// line saying why not (none visible, more local ranks than visible GPUs,
// CUDA training not in this build). cpu: CPU.
//
// A rank that sees exactly one GPU takes it, however many ranks share the
// node: launchers that give each rank its own GPU (srun --gpus-per-task=1,
// wrappers setting CUDA_VISIBLE_DEVICES per rank) look like that. Whether
// ranks then really share one physical GPU is CheckGpusNotShared's call.
StatusOr<DeviceChoice> ChooseDevice(const DeviceRequest& request);

// The GPU of every rank on this node, by local rank: a stable identity such
// as the UUID ("GPU-6a1b..."), or "" for a rank on the CPU. NCCL refuses two
// ranks on one GPU, so with `nccl` a repeated GPU is refused naming the
// ranks and the GPU; MPI (staging through host memory) may share one, which
// is how data parallelism is tested on a one-GPU machine.
Status CheckGpusNotShared(const std::vector<std::string>& gpu_by_local_rank, bool nccl);

// --comm for the chosen device: auto is nccl on GPUs and mpi on CPU; nccl
// on a CPU rank is refused.
StatusOr<std::string> ChooseComm(const std::string& flag, const DeviceChoice& device);

// --precision for the chosen device: tf32 is a GPU math mode and fp16 a GPU
// type, refused on a CPU rank; bf16 trains anywhere.
Status CheckPrecision(const std::string& precision, const DeviceChoice& device);

// --cuda-graphs for the chosen device and communicator: graphs replay GPU
// work, so a CPU rank is refused; nothing captured may call MPI, so several
// ranks need --comm nccl; ZeRO's parameter gather (waited for inside the
// forward, layer by layer) is not captured, so --zero-stage 1 and 2 are
// refused too. One line each, naming the flag.
Status CheckCudaGraphs(bool cuda_graphs, const DeviceChoice& device, const std::string& comm, int world_size,
                       int zero_stage);

}  // namespace ddp
