#include "comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <cstring>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "comm/bootstrap.h"
#include "comm/watchdog.h"
#include "runtime/clock.h"
#include "runtime/cuda/cuda_device.h"

namespace ddp {
namespace {

// A failure turned into a Status is handled here: it is also cleared as the
// thread's last error, which the next kernel launch's check would otherwise
// report as its own (cudaSetDevice(999) failing one test and the launch after
// it another).
Status CudaStatus(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return Status::Ok();
  cudaGetLastError();
  return Internal(std::string(call) + " failed: " + cudaGetErrorString(e));
}

Status NcclStatus(ncclResult_t r, const char* call) {
  if (r == ncclSuccess || r == ncclInProgress) return Status::Ok();
  return Internal(std::string(call) + " failed: " + ncclGetErrorString(r));
}

#define RETURN_IF_CUDA(call) RETURN_IF_ERROR(CudaStatus((call), #call))
#define RETURN_IF_NCCL(call) RETURN_IF_ERROR(NcclStatus((call), #call))

// Where nothing can be returned (destructors): checked, and a failure logged.
void WarnIfFailed(const Status& s) {
  if (!s.ok()) LOG(WARNING) << s.message();
}
#define WARN_IF_CUDA(call) WarnIfFailed(CudaStatus((call), #call))

double TimeoutSeconds() {
  const char* text = std::getenv("DDP_NCCL_TIMEOUT_S");
  const double value = text != nullptr ? std::atof(text) : 0.0;
  return value > 0.0 ? value : 600.0;
}

StatusOr<ncclDataType_t> NcclType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return ncclFloat32;
    case DType::kF64: return ncclFloat64;
    case DType::kF16: return ncclFloat16;
    case DType::kBF16: return ncclBfloat16;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
    case DType::kU8: return ncclUint8;
  }
  return InvalidArgument("no NCCL type");
}

// Polls until `done()` or NCCL reports an error on `comm` or the timeout
// passes; sleeps briefly between polls.
template <typename Done>
Status PollNccl(ncclComm_t comm, const char* what, Done done) {
  const double deadline = SteadySeconds() + TimeoutSeconds();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    RETURN_IF_NCCL(ncclCommGetAsyncError(comm, &state));
    if (state != ncclSuccess && state != ncclInProgress) {
      return Internal(std::string(what) + ": NCCL reported " + ncclGetErrorString(state));
    }
    ASSIGN_OR_RETURN(const bool finished, done(state));
    if (finished) return Status::Ok();
    if (SteadySeconds() > deadline) {
      return DeadlineExceeded(std::string(what) + " did not finish within " + std::to_string(TimeoutSeconds()) +
                              " s (DDP_NCCL_TIMEOUT_S): a peer rank may have failed");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

class NcclCommunicatorImpl;

class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicatorImpl* owner, cudaEvent_t done, cudaStream_t compute, std::vector<Tensor> tensors,
           double enqueued)
      : owner_(owner), done_(done), compute_(compute), tensors_(std::move(tensors)) {
    timing_.enqueued = timing_.started = enqueued;
  }
  ~NcclWork() override {
    // Not waited: the compute stream still waits, so the tensors' memory,
    // freed after this, is reused only after the collective.
    if (!waited_) WARN_IF_CUDA(cudaStreamWaitEvent(compute_, done_, 0));
    WARN_IF_CUDA(cudaEventDestroy(done_));
  }
  Status Wait() override;
  bool IsCompleted() override {
    // While the compute stream is captured into a CUDA graph, the event
    // belongs to the graph and cannot be queried: not known to be done.
    if (cuda::IsCapturing(compute_)) return false;
    const bool done = cudaEventQuery(done_) == cudaSuccess;
    if (done && timing_.finished == 0.0) timing_.finished = SteadySeconds();
    return done;
  }
  WorkTiming timing() const override { return timing_; }

 private:
  NcclCommunicatorImpl* owner_;
  cudaEvent_t done_;
  cudaStream_t compute_;
  std::vector<Tensor> tensors_;
  bool waited_ = false;
  WorkTiming timing_;
};

// A Work that already finished (host tensors) or failed: Wait() reports it.
class DoneWork final : public Work {
 public:
  DoneWork(Status s, WorkTiming timing) : status_(std::move(s)), timing_(timing) {}
  Status Wait() override { return status_; }
  bool IsCompleted() override { return true; }
  WorkTiming timing() const override { return timing_; }

 private:
  Status status_;
  WorkTiming timing_;
};

// The live communicators, which the wait watchdog checks.
std::mutex g_live_mu;
std::vector<NcclCommunicatorImpl*>& Live() {
  static auto* live = new std::vector<NcclCommunicatorImpl*>();
  return *live;
}
std::string WaitWatchdog(double waited_seconds);

class NcclCommunicatorImpl final : public NcclCommunicator {
 public:
  NcclCommunicatorImpl(ncclComm_t comm, int rank, int world, int device, cudaStream_t stream, cudaStream_t compute)
      : comm_(comm), rank_(rank), world_(world), device_(device), stream_(stream), compute_(compute) {
    std::lock_guard<std::mutex> lock(g_live_mu);
    Live().push_back(this);
    cuda::SetWaitWatchdog(&WaitWatchdog);
  }
  ~NcclCommunicatorImpl() override {
    {
      std::lock_guard<std::mutex> lock(g_live_mu);
      Live().erase(std::find(Live().begin(), Live().end(), this));
      if (Live().empty()) cuda::SetWaitWatchdog(nullptr);
    }
    WARN_IF_CUDA(cudaSetDevice(device_));
    if (!aborted_) {
      // Finalize flushes what was issued (polled, with the timeout; it takes
      // every rank of the node), then Destroy frees without blocking.
      Status s = Synchronize();
      if (s.ok()) s = NcclStatus(ncclCommFinalize(comm_), "ncclCommFinalize");
      if (s.ok()) s = Settle("ncclCommFinalize");
      if (s.ok()) {
        WarnIfFailed(NcclStatus(ncclCommDestroy(comm_), "ncclCommDestroy"));
      } else {
        WarnIfFailed(s);
        Abort(s);
      }
    }
    WARN_IF_CUDA(cudaStreamDestroy(stream_));
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  std::shared_ptr<Work> AllReduce(Tensor tensor, ReduceOp op) override {
    return Run({tensor}, [&](const std::vector<void*>& p) -> Status {
      ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(tensor.dtype()));
      return NcclStatus(ncclAllReduce(p[0], p[0], tensor.numel(), type, op == ReduceOp::kAverage ? ncclAvg : ncclSum,
                                      comm_, stream_),
                        "ncclAllReduce");
    });
  }
  std::shared_ptr<Work> ReduceScatter(Tensor input, Tensor output, ReduceOp op) override {
    CheckBlockShapes("ReduceScatter", input, output, world_);
    return Run({input, output}, [&](const std::vector<void*>& p) -> Status {
      ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(input.dtype()));
      return NcclStatus(ncclReduceScatter(p[0], p[1], output.numel(), type,
                                          op == ReduceOp::kAverage ? ncclAvg : ncclSum, comm_, stream_),
                        "ncclReduceScatter");
    });
  }
  std::shared_ptr<Work> AllGather(Tensor input, Tensor output) override {
    CheckBlockShapes("AllGather", output, input, world_);
    return Run({input, output}, [&](const std::vector<void*>& p) -> Status {
      return NcclStatus(ncclAllGather(p[0], p[1], input.nbytes(), ncclUint8, comm_, stream_), "ncclAllGather");
    });
  }
  std::shared_ptr<Work> Broadcast(Tensor tensor, int root) override {
    return Run({tensor}, [&](const std::vector<void*>& p) -> Status {
      return NcclStatus(ncclBroadcast(p[0], p[0], tensor.nbytes(), ncclUint8, root, comm_, stream_), "ncclBroadcast");
    });
  }
  std::shared_ptr<Work> BroadcastCoalesced(std::vector<Tensor> tensors, int root) override {
    return Run(tensors, [&](const std::vector<void*>& p) -> Status {
      RETURN_IF_NCCL(ncclGroupStart());
      auto issue_all = [&]() -> Status {
        for (size_t i = 0; i < tensors.size(); ++i) {
          RETURN_IF_NCCL(ncclBroadcast(p[i], p[i], tensors[i].nbytes(), ncclUint8, root, comm_, stream_));
        }
        return Status::Ok();
      };
      const Status issued = issue_all();
      // The group is closed whatever happened inside it.
      const Status ended = NcclStatus(ncclGroupEnd(), "ncclGroupEnd");
      return issued.ok() ? ended : issued;
    });
  }
  std::shared_ptr<Work> Barrier() override {
    // NCCL has no barrier: an all-reduce of one element on the device is one.
    if (!barrier_.defined()) {
      barrier_ = Tensor::Empty({1}, DType::kF32, Device::Cuda(device_));
      const Status zeroed =
          CudaStatus(cudaMemsetAsync(barrier_.raw_data(), 0, barrier_.nbytes(), compute_), "cudaMemsetAsync");
      if (!zeroed.ok()) return std::make_shared<DoneWork>(zeroed, WorkTiming());
    }
    return AllReduce(barrier_, ReduceOp::kSum);
  }

  Status Synchronize() override {
    if (aborted_) return AbortStatus();
    cudaEvent_t event;
    RETURN_IF_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    Status s = CudaStatus(cudaEventRecord(event, stream_), "cudaEventRecord");
    if (s.ok()) s = WaitForEvent(event, "NCCL collectives");
    WARN_IF_CUDA(cudaEventDestroy(event));
    return s;
  }

  // For the wait watchdog: the host has waited `waited_seconds` on the GPU.
  // An NCCL error, or a wait past the timeout (a collective that will never
  // finish), aborts the communicator and names the cause.
  Status CheckWait(double waited_seconds) {
    RETURN_IF_ERROR(CheckAsyncError());
    if (waited_seconds <= TimeoutSeconds()) return Status::Ok();
    Status s = DeadlineExceeded("waited " + std::to_string(static_cast<int>(waited_seconds)) +
                                " s on the GPU, past DDP_NCCL_TIMEOUT_S: a collective is not finishing (a peer "
                                "rank may have failed)");
    Abort(s);
    return s;
  }

  // Checks NCCL's error state without blocking; aborts on an error.
  Status CheckAsyncError() {
    if (aborted_) return AbortStatus();
    ncclResult_t state = ncclSuccess;
    Status s = NcclStatus(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
    if (s.ok() && state != ncclSuccess && state != ncclInProgress) {
      s = Internal(std::string("NCCL reported ") + ncclGetErrorString(state));
    }
    if (!s.ok()) Abort(s);
    return s;
  }

 private:
  // Waits on the host for `event` on the NCCL stream, watching NCCL's error
  // state and the timeout; aborts the communicator when either trips.
  Status WaitForEvent(cudaEvent_t event, const char* what) {
    Status s = PollNccl(comm_, what, [&](ncclResult_t) -> StatusOr<bool> {
      const cudaError_t e = cudaEventQuery(event);
      if (e == cudaErrorNotReady) return false;
      RETURN_IF_CUDA(e);
      return true;
    });
    if (!s.ok()) Abort(s);
    return s;
  }

  // Once, from any thread (the wait watchdog runs in whichever thread waits).
  void Abort(const Status& why) {
    {
      std::lock_guard<std::mutex> lock(abort_mu_);
      if (aborted_) return;
      abort_status_ = why;
      aborted_ = true;
    }
    WarnIfFailed(NcclStatus(ncclCommAbort(comm_), "ncclCommAbort"));
  }
  Status AbortStatus() {
    std::lock_guard<std::mutex> lock(abort_mu_);
    return abort_status_;
  }

  // In non-blocking mode an NCCL call may return while still being
  // enqueued: poll until the communicator is ready again.
  Status Settle(const char* what) {
    Status s = PollNccl(comm_, what, [](ncclResult_t state) -> StatusOr<bool> { return state != ncclInProgress; });
    if (!s.ok()) Abort(s);
    return s;
  }

  // The one path every collective takes (c10d's collective()): order after
  // the compute stream, stage host tensors, issue, record the end event.
  template <typename Issue>
  std::shared_ptr<Work> Run(std::vector<Tensor> tensors, Issue issue) {
    WorkTiming timing;
    timing.enqueued = timing.started = SteadySeconds();
    bool queued = false;  // work is on the NCCL stream: a failure must still order the compute stream after it
    auto fail = [&](Status s) {
      if (queued) OrderComputeAfterNccl();
      return std::make_shared<DoneWork>(std::move(s), timing);
    };
    if (aborted_) return fail(AbortStatus());
    const bool host = !tensors.empty() && tensors[0].device().is_cpu();
    for (const Tensor& t : tensors) {
      if (t.device().is_cpu() != host || (!host && t.device() != Device::Cuda(device_))) {
        return fail(InvalidArgument("NCCL collective on " + t.DebugString() + " mixed with " +
                                    tensors[0].DebugString() + " (communicator on cuda:" + std::to_string(device_) +
                                    ")"));
      }
    }
    Status s = CudaStatus(cudaSetDevice(device_), "cudaSetDevice");
    // Host tensors go through pinned and device copies; aliasing (an
    // in-place reduce-scatter's output inside its input) is kept by staging
    // each storage once and pointing at the same offsets. Device copies are
    // allocated on the compute stream, so staging comes after the NCCL
    // stream's wait.
    std::vector<Tensor> staged, pinned;
    if (host) {
      for (const Tensor& t : tensors) {
        size_t k = 0;
        while (k < staged.size() && tensors[k].storage() != t.storage()) ++k;
        const Shape bytes = {static_cast<int64_t>(t.storage()->nbytes())};
        staged.push_back(k < staged.size() ? staged[k] : Tensor::Empty(bytes, DType::kU8, Device::Cuda(device_)));
        pinned.push_back(k < pinned.size() ? pinned[k]
                                           : Tensor::EmptyFrom(cuda::PinnedHostAllocator(), bytes, DType::kU8));
      }
    }
    if (s.ok()) {
      cudaEvent_t ready;
      s = CudaStatus(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
      if (s.ok()) {
        s = CudaStatus(cudaEventRecord(ready, compute_), "cudaEventRecord");
        if (s.ok()) s = CudaStatus(cudaStreamWaitEvent(stream_, ready, 0), "cudaStreamWaitEvent");
        queued = s.ok();
        WARN_IF_CUDA(cudaEventDestroy(ready));
      }
    }
    std::vector<void*> pointers;
    if (s.ok() && host) s = StageIn(tensors, staged, pinned, &pointers);
    if (s.ok() && !host) {
      for (const Tensor& t : tensors) pointers.push_back(t.raw_data());
    }
    if (s.ok()) s = issue(pointers);
    if (s.ok()) s = Settle("an NCCL call");
    if (!s.ok()) return fail(s);
    if (host) {
      s = StageOut(tensors, staged, pinned);
      if (!s.ok()) return fail(s);
      timing.finished = SteadySeconds();
      return std::make_shared<DoneWork>(s, timing);
    }
    cudaEvent_t done;
    s = CudaStatus(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    if (!s.ok()) return fail(s);
    s = CudaStatus(cudaEventRecord(done, stream_), "cudaEventRecord");
    if (!s.ok()) {
      WARN_IF_CUDA(cudaEventDestroy(done));
      return fail(s);
    }
    return std::make_shared<NcclWork>(this, done, compute_, std::move(tensors), timing.enqueued);
  }

  // Copies each host tensor's storage into its device copy (once per
  // storage) through pinned memory, so the copy is truly asynchronous on the
  // NCCL stream and never blocks the host.
  Status StageIn(const std::vector<Tensor>& tensors, const std::vector<Tensor>& staged,
                 const std::vector<Tensor>& pinned, std::vector<void*>* pointers) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      bool first = true;
      for (size_t k = 0; k < i; ++k) first = first && tensors[k].storage() != t.storage();
      if (first) {
        std::memcpy(pinned[i].raw_data(), t.storage()->data(), t.storage()->nbytes());
        RETURN_IF_CUDA(cudaMemcpyAsync(staged[i].raw_data(), pinned[i].raw_data(), t.storage()->nbytes(),
                                       cudaMemcpyHostToDevice, stream_));
      }
      pointers->push_back(static_cast<char*>(staged[i].raw_data()) + t.byte_offset());
    }
    return Status::Ok();
  }

  // Copies the results back into the host tensors: into pinned memory on the
  // NCCL stream, waited for by polling (a dead peer times out instead of
  // blocking inside a copy to pageable memory), then on the host.
  Status StageOut(const std::vector<Tensor>& tensors, const std::vector<Tensor>& staged,
                  const std::vector<Tensor>& pinned) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      RETURN_IF_CUDA(cudaMemcpyAsync(static_cast<char*>(pinned[i].raw_data()) + t.byte_offset(),
                                     static_cast<char*>(staged[i].raw_data()) + t.byte_offset(), t.nbytes(),
                                     cudaMemcpyDeviceToHost, stream_));
    }
    RETURN_IF_ERROR(Synchronize());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      std::memcpy(t.raw_data(), static_cast<char*>(pinned[i].raw_data()) + t.byte_offset(), t.nbytes());
    }
    return Status::Ok();
  }

  // After a failure with work already on the NCCL stream: the compute stream
  // waits for it, so memory freed next is not reused under it.
  void OrderComputeAfterNccl() {
    cudaEvent_t event;
    if (!CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate").ok()) return;
    WARN_IF_CUDA(cudaEventRecord(event, stream_));
    WARN_IF_CUDA(cudaStreamWaitEvent(compute_, event, 0));
    WARN_IF_CUDA(cudaEventDestroy(event));
  }

  ncclComm_t comm_;
  int rank_, world_, device_;
  cudaStream_t stream_, compute_;
  Tensor barrier_;
  std::atomic<bool> aborted_{false};
  std::mutex abort_mu_;
  Status abort_status_;
};

std::string WaitWatchdog(double waited_seconds) {
  std::lock_guard<std::mutex> lock(g_live_mu);
  for (NcclCommunicatorImpl* comm : Live()) {
    const Status s = comm->CheckWait(waited_seconds);
    if (!s.ok()) return s.message();
  }
  return std::string();
}

Status NcclWork::Wait() {
  Status s = CudaStatus(cudaStreamWaitEvent(compute_, done_, 0), "cudaStreamWaitEvent");
  if (s.ok()) waited_ = true;
  if (s.ok()) s = owner_->CheckAsyncError();
  IsCompleted();  // records the finish time when it is already known
  return s;
}

}  // namespace

StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(MPI_Comm bootstrap, int device,
                                                                    void* compute_stream) {
  int rank = 0, world = 1;
  if (MPI_Comm_rank(bootstrap, &rank) != MPI_SUCCESS || MPI_Comm_size(bootstrap, &world) != MPI_SUCCESS) {
    return Internal("MPI_Comm_rank/MPI_Comm_size failed while creating the NCCL communicator");
  }
  // Every MPI stage is entered only once every rank got there: a rank that
  // failed before it would otherwise leave the others waiting.
  ncclUniqueId id{};
  Status local = CudaStatus(cudaSetDevice(device), "cudaSetDevice");
  if (local.ok() && rank == 0) local = NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId");
  RETURN_IF_ERROR(AgreeOnStatus(bootstrap, local));
  {
    const CollectiveWatchdog::Scope watched("MPI_Bcast of the NCCL unique id");
    if (MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, bootstrap) != MPI_SUCCESS) {
      return Internal("MPI_Bcast of the NCCL unique id failed");
    }
  }
  // Non-blocking init, polled with a timeout: agreement alone cannot free a
  // rank already blocked inside ncclCommInitRank when a peer never comes.
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  local = NcclStatus(ncclCommInitRankConfig(&comm, world, id, rank, &config), "ncclCommInitRankConfig");
  if (local.ok()) {
    local = PollNccl(comm, "ncclCommInitRankConfig",
                     [](ncclResult_t state) -> StatusOr<bool> { return state != ncclInProgress; });
  }
  cudaStream_t stream = nullptr;
  if (local.ok()) local = CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const Status agreed = AgreeOnStatus(bootstrap, local);
  if (!agreed.ok()) {
    if (comm != nullptr) WarnIfFailed(NcclStatus(ncclCommAbort(comm), "ncclCommAbort"));
    if (stream != nullptr) WARN_IF_CUDA(cudaStreamDestroy(stream));
    return agreed;
  }
  cudaStream_t compute = compute_stream ? static_cast<cudaStream_t>(compute_stream) : cudaStreamLegacy;
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicatorImpl(comm, rank, world, device, stream, compute));
}

}  // namespace ddp
