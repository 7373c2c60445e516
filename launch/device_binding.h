// Which device a rank trains on (DESIGN.md, Launch): with CUDA, one GPU per
// rank, chosen by the rank's index among the ranks of its node (local rank)
// among the GPUs the driver shows it, so CUDA_VISIBLE_DEVICES (which the
// driver applies) narrows and reorders the choice, as PyTorch DDP and
// Horovod do. The choice itself is a pure function, so it is tested without
// a GPU.
#pragma once

#include <optional>
#include <string>

#include "runtime/status.h"

namespace ddp {

struct DeviceRequest {
  std::string flag = "auto";  // --device: auto, cpu or cuda
  int local_rank = 0, local_size = 1;
  int visible_gpus = 0;              // what the driver shows this process
  std::optional<std::string> cuda_visible_devices;  // the variable, for messages
  // Whether this build can train on CUDA. While it cannot, auto means CPU
  // and cuda is refused, after the binding is checked.
  bool cuda_training = false;
};

struct DeviceChoice {
  bool cuda = false;
  int gpu = -1;             // with cuda: the device index to bind
  std::string description;  // "cpu" or "cuda:1", for the start line
};

// auto: CUDA when GPUs are visible, enough for every local rank, and this
// build trains on them; CPU otherwise. cuda: a GPU for this rank, or one
// line saying why not (none visible, more local ranks than visible GPUs,
// CUDA training not in this build). cpu: CPU.
StatusOr<DeviceChoice> ChooseDevice(const DeviceRequest& request);

}  // namespace ddp
