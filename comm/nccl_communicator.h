// The NCCL backend for CUDA tensors. Collectives run on a dedicated stream,
// ordered against the compute stream by events: each call waits for work
// already queued on the compute stream, and Work::Wait() makes the compute
// stream wait for the collective (the host does not block). The unique id
// travels over MPI. Only in builds with CUDA (DDP_HAVE_CUDA); no header here
// needs CUDA's.
#pragma once

#include <mpi.h>

#include <memory>

#include "comm/communicator.h"

namespace ddp {

class NcclCommunicator : public Communicator {
 public:
  // Collective over `bootstrap`: rank 0 makes the NCCL unique id and
  // broadcasts it; every rank joins on CUDA device `device`. `compute_stream`
  // (a cudaStream_t; null: the legacy default stream is never used, the
  // per-thread default is) is the stream collectives order against.
  static StatusOr<std::unique_ptr<NcclCommunicator>> Create(MPI_Comm bootstrap, int device, void* compute_stream);
};

}  // namespace ddp
