#include "comm/nccl_communicator.h"
#include "runtime/clock.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <string>

namespace ddp {
namespace {

Status CudaStatus(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal(std::string(call) + " failed: " + cudaGetErrorString(e));
}

Status NcclStatus(ncclResult_t r, const char* call) {
  if (r == ncclSuccess) return Status::Ok();
  return Internal(std::string(call) + " failed: " + ncclGetErrorString(r));
}

#define RETURN_IF_CUDA(call) RETURN_IF_ERROR(CudaStatus((call), #call))
#define RETURN_IF_NCCL(call) RETURN_IF_ERROR(NcclStatus((call), #call))

// Where nothing can be returned (destructors): checked, and a failure logged.
void WarnIfFailed(const Status& s) {
  if (!s.ok()) LOG(WARNING) << s.message();
}
#define WARN_IF_CUDA(call) WarnIfFailed(CudaStatus((call), #call))

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

class NcclWork final : public Work {
 public:
  NcclWork(cudaEvent_t done, cudaStream_t compute, double enqueued) : done_(done), compute_(compute) {
    timing_.enqueued = timing_.started = enqueued;
  }
  ~NcclWork() override { WARN_IF_CUDA(cudaEventDestroy(done_)); }
  Status Wait() override {
    // The compute stream waits; the host goes on queueing work.
    return CudaStatus(cudaStreamWaitEvent(compute_, done_, 0), "cudaStreamWaitEvent");
  }
  bool IsCompleted() override {
    const bool done = cudaEventQuery(done_) == cudaSuccess;
    if (done && timing_.finished == 0.0) timing_.finished = SteadySeconds();
    return done;
  }
  WorkTiming timing() const override { return timing_; }

 private:
  cudaEvent_t done_;
  cudaStream_t compute_;
  WorkTiming timing_;
};

// A Work that already failed: its Wait() reports why.
class FailedWork final : public Work {
 public:
  explicit FailedWork(Status s) : status_(std::move(s)) {}
  Status Wait() override { return status_; }
  bool IsCompleted() override { return true; }
  WorkTiming timing() const override { return {}; }

 private:
  Status status_;
};

class NcclCommunicatorImpl final : public NcclCommunicator {
 public:
  NcclCommunicatorImpl(ncclComm_t comm, int rank, int world, int device, cudaStream_t stream, cudaStream_t compute)
      : comm_(comm), rank_(rank), world_(world), device_(device), stream_(stream), compute_(compute) {}
  ~NcclCommunicatorImpl() override {
    WARN_IF_CUDA(cudaSetDevice(device_));
    WARN_IF_CUDA(cudaStreamSynchronize(stream_));
    WarnIfFailed(NcclStatus(ncclCommDestroy(comm_), "ncclCommDestroy"));
    WARN_IF_CUDA(cudaStreamDestroy(stream_));
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  std::shared_ptr<Work> AllReduce(Tensor tensor, ReduceOp op) override {
    return Run([&]() -> Status {
      ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(tensor.dtype()));
      return NcclStatus(ncclAllReduce(tensor.raw_data(), tensor.raw_data(), tensor.numel(), type,
                                      op == ReduceOp::kAverage ? ncclAvg : ncclSum, comm_, stream_),
                        "ncclAllReduce");
    });
  }
  std::shared_ptr<Work> ReduceScatter(Tensor input, Tensor output, ReduceOp op) override {
    return Run([&]() -> Status {
      ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(input.dtype()));
      return NcclStatus(ncclReduceScatter(input.raw_data(), output.raw_data(), output.numel(), type,
                                          op == ReduceOp::kAverage ? ncclAvg : ncclSum, comm_, stream_),
                        "ncclReduceScatter");
    });
  }
  std::shared_ptr<Work> AllGather(Tensor input, Tensor output) override {
    return Run([&]() -> Status {
      return NcclStatus(ncclAllGather(input.raw_data(), output.raw_data(), input.nbytes(), ncclUint8, comm_, stream_),
                        "ncclAllGather");
    });
  }
  std::shared_ptr<Work> Broadcast(Tensor tensor, int root) override {
    return Run([&]() -> Status {
      return NcclStatus(
          ncclBroadcast(tensor.raw_data(), tensor.raw_data(), tensor.nbytes(), ncclUint8, root, comm_, stream_),
          "ncclBroadcast");
    });
  }
  std::shared_ptr<Work> BroadcastCoalesced(std::vector<Tensor> tensors, int root) override {
    return Run([&]() -> Status {
      RETURN_IF_NCCL(ncclGroupStart());
      auto issue_all = [&]() -> Status {
        for (Tensor& t : tensors) {
          RETURN_IF_NCCL(ncclBroadcast(t.raw_data(), t.raw_data(), t.nbytes(), ncclUint8, root, comm_, stream_));
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
    // NCCL has no barrier: an all-reduce of one element is one.
    if (!barrier_.defined()) barrier_ = Tensor::Zeros({1}, DType::kF32, Device::Cuda(device_));
    return AllReduce(barrier_, ReduceOp::kSum);
  }

 private:
  // The one path every collective takes (c10d's collective()): order after
  // the compute stream, issue, record the end event.
  template <typename Issue>
  std::shared_ptr<Work> Run(Issue issue) {
    const double enqueued = SteadySeconds();
    Status s = [&]() -> Status {
      RETURN_IF_CUDA(cudaSetDevice(device_));
      cudaEvent_t ready;
      RETURN_IF_CUDA(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
      RETURN_IF_CUDA(cudaEventRecord(ready, compute_));
      RETURN_IF_CUDA(cudaStreamWaitEvent(stream_, ready, 0));
      RETURN_IF_CUDA(cudaEventDestroy(ready));
      return issue();
    }();
    if (!s.ok()) return std::make_shared<FailedWork>(s);
    cudaEvent_t done;
    const Status created = CudaStatus(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    if (!created.ok()) return std::make_shared<FailedWork>(created);
    const Status recorded = CudaStatus(cudaEventRecord(done, stream_), "cudaEventRecord");
    if (!recorded.ok()) {
      WARN_IF_CUDA(cudaEventDestroy(done));
      return std::make_shared<FailedWork>(recorded);
    }
    return std::make_shared<NcclWork>(done, compute_, enqueued);
  }

  ncclComm_t comm_;
  int rank_, world_, device_;
  cudaStream_t stream_, compute_;
  Tensor barrier_;
};

}  // namespace

StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(MPI_Comm bootstrap, int device,
                                                                    void* compute_stream) {
  int rank = 0, world = 1;
  if (MPI_Comm_rank(bootstrap, &rank) != MPI_SUCCESS || MPI_Comm_size(bootstrap, &world) != MPI_SUCCESS) {
    return Internal("MPI_Comm_rank/MPI_Comm_size failed while creating the NCCL communicator");
  }
  RETURN_IF_CUDA(cudaSetDevice(device));
  ncclUniqueId id;
  if (rank == 0) RETURN_IF_NCCL(ncclGetUniqueId(&id));
  if (MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, bootstrap) != MPI_SUCCESS) {
    return Internal("MPI_Bcast of the NCCL unique id failed");
  }
  ncclComm_t comm;
  RETURN_IF_NCCL(ncclCommInitRank(&comm, world, id, rank));
  cudaStream_t stream;
  RETURN_IF_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaStream_t compute = compute_stream ? static_cast<cudaStream_t>(compute_stream) : cudaStreamPerThread;
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicatorImpl(comm, rank, world, device, stream, compute));
}

}  // namespace ddp
