#include "launch/rank_device.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "comm/bootstrap.h"
#include "launch/train_components.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/ops/conv2d.h"

namespace ddp {

Status SettleDevice(const RankInfo& ranks, MPI_Comm world, MPI_Comm node, TrainOptions* options,
                    DeviceChoice* device, int* visible_gpus) {
  DeviceRequest request;
  request.flag = options->device;
  request.local_rank = ranks.local_rank;
  request.local_size = ranks.local_size;
  if (options->device != "cpu") {
    const cuda::DeviceQuery gpus = cuda::QueryDevices();
    request.visible_gpus = gpus.count;
    request.cuda_error = gpus.error;
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible != nullptr) request.cuda_visible_devices = visible;
  request.cuda_training = cuda::BuiltWithCuda();
  *visible_gpus = request.visible_gpus;
  StatusOr<DeviceChoice> chosen = ChooseDevice(request);
  RETURN_IF_ERROR(AgreeOnStatus(world, chosen.status()));
  *device = *chosen;
  RETURN_IF_ERROR(CheckRanksAgree(world, {{"the device kind", device->cuda ? "cuda" : "cpu"}}));
  RETURN_IF_ERROR(AgreeOnStatus(world, CheckPrecision(options->precision, *device)));
  if (options->precision == "bf16" && !device->cuda) {
    // bf16 where oneDNN runs it natively; elsewhere it would be slower than
    // f32, so the job trains in f32 (and sends f32 gradients unless asked
    // otherwise). Decided alike on every rank, or refused.
    const bool native = CpuHasFastBf16();
    RETURN_IF_ERROR(CheckRanksAgree(
        world, {{"the CPU's AVX-512 BF16 support (for --precision bf16)", native ? "yes" : "no"}}));
    if (!native) FallBackFromCpuBf16(options, ranks.rank == 0);
  }
  StatusOr<std::string> comm_kind = ChooseComm(options->comm, *device);
  RETURN_IF_ERROR(AgreeOnStatus(world, comm_kind.status()));
  RETURN_IF_ERROR(CheckRanksAgree(world, {{"--comm", *comm_kind}}));
  options->comm = *comm_kind;
  RETURN_IF_ERROR(AgreeOnStatus(world, CheckCudaGraphs(options->cuda_graphs, *device, options->comm,
                                                       ranks.world_size, options->zero_stage)));
  // Ranks of this node that would share one physical GPU (each shown one
  // GPU, but the same one): NCCL refuses that, MPI staging does not.
  StatusOr<std::vector<std::string>> node_gpus =
      AllGatherStrings(node, device->cuda ? cuda::DeviceUuid(device->gpu) : std::string(), "the GPUs' UUIDs");
  Status shared = node_gpus.ok() ? CheckGpusNotShared(*node_gpus, options->comm == "nccl") : node_gpus.status();
  RETURN_IF_ERROR(AgreeOnStatus(world, shared));
  options->device = device->description;
  return Status::Ok();
}

StatusOr<PeerAccessDecision> DecideNodePeerAccess(const RankInfo& ranks, MPI_Comm node, const TrainOptions& o) {
  PeerAccessDecision decision;
  if (o.device == "cpu" || o.comm == "mpi" || ranks.local_size < 2 || !cuda::BuiltWithCuda()) return decision;
  // CUDA's start on 8 GPUs, then a few ms a copy; within the watchdog's
  // timeout, as the node's other ranks wait for the finding meanwhile.
  double deadline_s = 20.0;
  if (o.comm_timeout_s > 0.0) deadline_s = std::min(deadline_s, 0.75 * o.comm_timeout_s);
  const std::string mine = ranks.local_rank == 0 ? EncodePeerTopology(ProbePeerTopology(deadline_s)) : "";
  ASSIGN_OR_RETURN(std::vector<std::string> found, AllGatherStrings(node, mine, "the GPU peer-access probe"));
  ASSIGN_OR_RETURN(PeerTopology topology, DecodePeerTopology(found.at(0)));
  decision = DecidePeerAccess(topology, NcclP2pSettingsFromEnvironment());
  if (decision.set_p2p_disable) setenv("NCCL_P2P_DISABLE", "1", /*overwrite=*/1);
  if (ranks.local_rank == 0 && decision.state != "not applicable") {
    std::printf("ddp_train: %sGPU peer access: %s\n",
                ranks.world_size > ranks.local_size ? ("rank " + std::to_string(ranks.rank) + ": ").c_str() : "",
                decision.reason.c_str());
    std::fflush(stdout);
  }
  return decision;
}

void ExplainNotApplicable(const DeviceChoice& device, int visible_gpus, const RankInfo& ranks, const TrainOptions& o,
                          PeerAccessDecision* decision) {
  if (decision->state != "not applicable" || !decision->reason.empty() || !device.cuda) return;
  decision->reason = visible_gpus <= 1         ? "single GPU: not applicable"
                     : ranks.local_size < 2    ? "one rank on this node: not applicable"
                     : o.comm == "mpi"         ? "--comm mpi: NCCL does not join the GPUs"
                                               : "not applicable";
}

}  // namespace ddp
