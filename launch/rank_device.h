// This rank's device, settled with the other ranks before anything is built
// on it: the GPU (or the CPU) and what the choice decides in the options,
// and NCCL's peer access on this node. Each step is agreed on (AgreeOnStatus
// or CheckRanksAgree), so every rank fails alike with one line.
#pragma once

#include <mpi.h>

#include "comm/bootstrap.h"
#include "launch/device_binding.h"
#include "launch/peer_access.h"
#include "launch/train_options.h"
#include "runtime/status.h"

namespace ddp {

// One GPU per rank by local rank among those CUDA_VISIBLE_DEVICES shows, or
// the CPU (--device); then what the device decides in `options`: bf16's
// fallback to f32 on a CPU without AVX-512 BF16 (said once, by rank 0),
// --comm's choice, the --cuda-graphs check and `device` (the description
// for the start line). On a node, no two ranks may share one GPU under NCCL.
// `world`: every rank; `node`: this node's ranks. `visible_gpus` is what the
// driver showed this rank.
Status SettleDevice(const RankInfo& ranks, MPI_Comm world, MPI_Comm node, TrainOptions* options,
                    DeviceChoice* device, int* visible_gpus);

// NCCL's peer-to-peer on this node (launch/peer_access.h): where NCCL will
// join two or more of the node's GPUs, its local rank 0 probes them in a
// child process, before this process starts CUDA (a child of a CUDA process
// cannot use it), and every local rank takes that rank's finding; local rank
// 0 prints it. Collective over `node` only where a probe runs.
StatusOr<PeerAccessDecision> DecideNodePeerAccess(const RankInfo& ranks, MPI_Comm node, const TrainOptions& o);

// Why peer access was not probed, once the device is known: a single GPU,
// one rank on the node, or --comm mpi. Only a GPU rank's undecided
// "not applicable" is given a reason.
void ExplainNotApplicable(const DeviceChoice& device, int visible_gpus, const RankInfo& ranks, const TrainOptions& o,
                          PeerAccessDecision* decision);

}  // namespace ddp
