// The NCCL backend. Collectives run on a dedicated stream, ordered against
// the rank's compute stream by events. Only in builds with CUDA
// (DDP_HAVE_CUDA); no header here needs CUDA's.
//
// What Work::Wait() means here:
// - CUDA tensors: each call first orders the NCCL stream after the work
//   already queued on the compute stream (an event), and Wait() makes the
//   compute stream wait for the collective's end event: the host does not
//   block, and anything enqueued on the compute stream afterwards (the
//   optimizer, kernels reusing freed memory) runs after the collective.
//   Wait() also reports an NCCL error already known (ncclCommGetAsyncError).
//   The Work holds its tensors until destroyed, and a Work destroyed before
//   Wait() still makes the compute stream wait, so the caching allocator
//   never hands a tensor's memory to the compute stream mid-collective.
// - Host tensors (host-read values: a step's loss, evaluation counts, the
//   order check's flags): staged through device memory synchronously; the
//   call returns when the host holds the result, so Wait() is immediate.
// Waiting on the host (host tensors, Synchronize) polls the collective and
// NCCL's error state with a timeout (DDP_NCCL_TIMEOUT_S, default 600 s);
// on an error or a timeout the communicator is aborted (ncclCommAbort) and
// every later call fails: a failed peer ends this rank with an error, not a
// hang.
#pragma once

#include <mpi.h>

#include <memory>

#include "comm/communicator.h"

namespace ddp {

class NcclCommunicator : public Communicator {
 public:
  // Collective over `bootstrap`: rank 0 makes the NCCL unique id and
  // broadcasts it; every rank joins on CUDA device `device`, non-blocking,
  // polling with the timeout above. A failure on any rank (no device, no
  // id, a failed or stuck init) returns an error on every rank, never a
  // hang. `compute_stream` (a cudaStream_t; null: the legacy default
  // stream, which tests use) is the stream collectives order against.
  static StatusOr<std::unique_ptr<NcclCommunicator>> Create(MPI_Comm bootstrap, int device, void* compute_stream);

  // Blocks the host until every collective issued so far has finished (or
  // failed, or timed out).
  virtual Status Synchronize() = 0;
};

}  // namespace ddp
