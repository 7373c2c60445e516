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
  if (!r.cuda_error.empty()) {
    return FailedPrecondition("--device " + r.flag + ": the NVIDIA driver is installed but CUDA cannot start: " +
                              r.cuda_error + "; fix the driver, or train on the CPU with --device cpu");
  }
  // One visible GPU: this rank's own (or shared, which CheckGpusNotShared
  // decides); several: one per local rank.
  const bool enough = r.visible_gpus == 1 || (r.visible_gpus > 0 && r.local_size <= r.visible_gpus);
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
                           std::to_string(r.local_rank) +
                           ", but this binary was built without CUDA (no nvcc at build time); use --device cpu");
    }
  }
  DeviceChoice gpu;
  gpu.cuda = true;
  gpu.gpu = r.visible_gpus == 1 ? 0 : r.local_rank;
  gpu.description = "cuda:" + std::to_string(gpu.gpu);
  return gpu;
}

Status CheckGpusNotShared(const std::vector<std::string>& gpu_by_local_rank, bool nccl) {
  if (!nccl) return Status::Ok();
  for (size_t a = 0; a < gpu_by_local_rank.size(); ++a) {
    if (gpu_by_local_rank[a].empty()) continue;
    for (size_t b = a + 1; b < gpu_by_local_rank.size(); ++b) {
      if (gpu_by_local_rank[b] != gpu_by_local_rank[a]) continue;
      return FailedPrecondition("local ranks " + std::to_string(a) + " and " + std::to_string(b) +
                                " would share GPU " + gpu_by_local_rank[a] +
                                ", and NCCL needs one GPU per rank: start one rank per GPU, or use --comm mpi");
    }
  }
  return Status::Ok();
}

StatusOr<std::string> ChooseComm(const std::string& flag, const DeviceChoice& device) {
  if (flag == "auto") return std::string(device.cuda ? "nccl" : "mpi");
  if (flag == "nccl" && !device.cuda) {
    return InvalidArgument("--comm nccl needs GPUs, and this rank trains on cpu; use --comm mpi (the default on CPU)");
  }
  if (flag != "nccl" && flag != "mpi") return InvalidArgument("--comm '" + flag + "' is unknown; use auto, nccl or mpi");
  return flag;
}

Status CheckPrecision(const std::string& precision, const DeviceChoice& device) {
  if (precision == "fp32") return Status::Ok();
  if (precision == "tf32") {
    if (device.cuda) return Status::Ok();
    return InvalidArgument("--precision tf32 is a GPU math mode (tensor cores), and this rank trains on cpu; use "
                           "--precision fp32");
  }
  if (precision == "fp16" && !device.cuda) {
    return InvalidArgument("--precision fp16 is for GPUs, and this rank trains on cpu; use --precision bf16, the "
                           "CPU's 16-bit type");
  }
  if (precision == "fp16" || precision == "bf16") return Status::Ok();
  return InvalidArgument("--precision '" + precision + "' is unknown; use fp32, tf32, fp16 or bf16");
}

Status CheckCudaGraphs(bool cuda_graphs, const DeviceChoice& device, const std::string& comm, int world_size,
                       int zero_stage) {
  if (!cuda_graphs) return Status::Ok();
  if (!device.cuda) {
    return InvalidArgument("--cuda-graphs replays GPU work, and this rank trains on cpu; drop --cuda-graphs");
  }
  if (comm == "mpi" && world_size > 1) {
    return InvalidArgument("--cuda-graphs with --comm mpi: an MPI call cannot be captured into a CUDA graph; use "
                           "--comm nccl");
  }
  if (zero_stage > 0) {
    return Unimplemented("--cuda-graphs with --zero-stage " + std::to_string(zero_stage) +
                         " is not supported (ZeRO's parameter gather is waited for inside the forward); use "
                         "--zero-stage 0 or drop --cuda-graphs");
  }
  return Status::Ok();
}

}  // namespace ddp
