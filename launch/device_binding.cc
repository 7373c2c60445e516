#include "launch/device_binding.h"

namespace ddp {
namespace {

std::string VisibleNote(const DeviceRequest& r) {
  return r.cuda_visible_devices ? " (CUDA_VISIBLE_DEVICES='" + *r.cuda_visible_devices + "')"
                                : std::string(" (CUDA_VISIBLE_DEVICES is unset)");
}

}  // namespace

StatusOr<DeviceChoice> ChooseDevice(const DeviceRequest& r) {
  DeviceChoice cpu;
  cpu.description = "cpu";
  if (r.flag == "cpu") return cpu;
  if (r.flag != "auto" && r.flag != "cuda") {
    return InvalidArgument("--device '" + r.flag + "' is unknown; use auto, cpu or cuda");
  }
  const bool enough = r.visible_gpus > 0 && r.local_size <= r.visible_gpus;
  if (r.flag == "auto") {
    if (!enough || !r.cuda_training) return cpu;
  } else {
    if (r.visible_gpus == 0) return FailedPrecondition("--device cuda: no GPU is visible" + VisibleNote(r));
    if (!enough) {
      return FailedPrecondition("--device cuda: " + std::to_string(r.local_size) +
                                " ranks on this node but only " + std::to_string(r.visible_gpus) + " visible GPU" +
                                (r.visible_gpus == 1 ? "" : "s") + VisibleNote(r) +
                                "; start one rank per GPU");
    }
    if (!r.cuda_training) {
      return Unimplemented("--device cuda: local rank " + std::to_string(r.local_rank) + " would train on GPU " +
                           std::to_string(r.local_rank) + ", but CUDA training is not in this build yet; use --device cpu");
    }
  }
  DeviceChoice gpu;
  gpu.cuda = true;
  gpu.gpu = r.local_rank;
  gpu.description = "cuda:" + std::to_string(r.local_rank);
  return gpu;
}

}  // namespace ddp
