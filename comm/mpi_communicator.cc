#include "comm/mpi_communicator.h"

#include <sched.h>
#include <time.h>

#include <atomic>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>

#include "comm/watchdog.h"
#include "runtime/dtype.h"
#include "runtime/clock.h"

namespace ddp {
namespace {

// MPI counts are ints; larger tensors go in pieces of this many elements.
constexpr int64_t kMaxChunk = int64_t{1} << 30;
// All-reduces this large are our own (below: MPI_Iallreduce).
constexpr size_t kOwnAllReduceBytes = size_t{256} << 10;

template <typename T, float (*ToFloat)(T), T (*FromFloat)(float)>
void SumSixteenBit(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = FromFloat(ToFloat(a[i]) + ToFloat(b[i]));
}

// The sum of a 16-bit type, made once per type (commutative), summed in
// f32.
template <typename T, float (*ToFloat)(T), T (*FromFloat)(float)>
MPI_Op SixteenBitSumOp() {
  static MPI_Op op = [] {
    MPI_Op created;
    CHECK_EQ(MPI_Op_create(&SumSixteenBit<T, ToFloat, FromFloat>, 1, &created), MPI_SUCCESS);
    return created;
  }();
  return op;
}

MPI_Op Bf16SumOp() { return SixteenBitSumOp<BFloat16, BFloat16ToFloat, FloatToBFloat16>(); }
MPI_Op F16SumOp() { return SixteenBitSumOp<Half, HalfToFloat, FloatToHalf>(); }

struct MpiType {
  MPI_Datatype type;
  MPI_Op sum;
};

MpiType TypeFor(DType dtype) {
  switch (dtype) {
    case DType::kF32: return {MPI_FLOAT, MPI_SUM};
    case DType::kF64: return {MPI_DOUBLE, MPI_SUM};
    case DType::kI32: return {MPI_INT32_T, MPI_SUM};
    case DType::kI64: return {MPI_INT64_T, MPI_SUM};
    case DType::kU8: return {MPI_UINT8_T, MPI_SUM};
    case DType::kBF16: return {MPI_UINT16_T, Bf16SumOp()};
    case DType::kF16: return {MPI_UINT16_T, F16SumOp()};
  }
  LOG(FATAL) << "no MPI type for " << DTypeName(dtype);
}

Status MpiFailure(const char* call, int code) {
  return Internal(std::string(call) + " failed: " + MpiErrorString(code));
}

// Drives one nonblocking request to completion. MPI_Test both checks and
// progresses it; between tests the thread spins briefly, then yields, then
// sleeps with growing pauses, so an in-flight collective costs little CPU.
//
// Point-to-point transfers of large messages advance one fragment per test,
// so the ring collectives cap the pause lower (max_sleep_ns).
// After a failure, requests still active would go on writing into (or
// reading from) buffers the caller is about to free: each is cancelled and
// given up to two seconds to complete; one that will not ends the job,
// which beats corrupting memory.
Status Abandon(MPI_Request* requests, int count, Status failure) {
  for (int i = 0; i < count; ++i) {
    if (requests[i] != MPI_REQUEST_NULL) MPI_Cancel(&requests[i]);
  }
  const double deadline = SteadySeconds() + 2.0;
  for (int i = 0; i < count; ++i) {
    while (requests[i] != MPI_REQUEST_NULL) {
      int done = 0;
      if (MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || SteadySeconds() > deadline) {
        std::fprintf(stderr, "ddp_train: error: %s; a transfer in flight could not be cancelled: ending the job\n",
                     failure.message().c_str());
        std::fflush(nullptr);
        AbortJob();
      }
      if (!done) sched_yield();
    }
  }
  return failure;
}

// `point_to_point`: the requests are sends and receives, which a failure
// cancels (Abandon); a failed collective cannot be cancelled (MPI forbids
// it) and its buffers may still be written: the job ends.
Status Complete(MPI_Request* request, const char* call, int count = 1, long max_sleep_ns = 100000,
                bool point_to_point = false) {
  int idle = 0;
  long sleep_ns = 2000;
  while (true) {
    int done = 0;
    const int code = MPI_Testall(count, request, &done, MPI_STATUSES_IGNORE);
    if (code != MPI_SUCCESS && point_to_point) return Abandon(request, count, MpiFailure(call, code));
    if (code != MPI_SUCCESS) {
      std::fprintf(stderr, "ddp_train: error: %s; a collective failed in flight: ending the job\n",
                   MpiFailure(call, code).message().c_str());
      std::fflush(nullptr);
      AbortJob();
    }
    if (done) return Status::Ok();
    if (++idle < 64) continue;
    if (idle < 256) {
      sched_yield();
      continue;
    }
    timespec pause{0, sleep_ns};
    nanosleep(&pause, nullptr);
    sleep_ns = std::min(sleep_ns * 2, max_sleep_ns);
  }
}

// dst[i] += src[i] for n elements of `dtype`.
void AddInto(DType dtype, const void* src, void* dst, int64_t n) {
  auto add = [n](auto* d, const auto* s) {
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  };
  switch (dtype) {
    case DType::kF32: return add(static_cast<float*>(dst), static_cast<const float*>(src));
    case DType::kF64: return add(static_cast<double*>(dst), static_cast<const double*>(src));
    case DType::kI32: return add(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src));
    case DType::kI64: return add(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src));
    case DType::kU8: return add(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src));
    case DType::kBF16: {
      BFloat16* d = static_cast<BFloat16*>(dst);
      const BFloat16* s = static_cast<const BFloat16*>(src);
      for (int64_t i = 0; i < n; ++i) d[i] = FloatToBFloat16(BFloat16ToFloat(d[i]) + BFloat16ToFloat(s[i]));
      return;
    }
    case DType::kF16: {
      Half* d = static_cast<Half*>(dst);
      const Half* s = static_cast<const Half*>(src);
      for (int64_t i = 0; i < n; ++i) d[i] = FloatToHalf(HalfToFloat(d[i]) + HalfToFloat(s[i]));
      return;
    }
  }
}

// One ring step: send `send_bytes` at `send` to the next rank while
// receiving as many bytes into `receive` from the previous one.
// DDP_TEST_FAIL_ISEND=RANK:N: on that rank the Nth ring step's send fails
// after its receive was posted (the path that must not leave the receive
// writing into a freed buffer).
std::atomic<int64_t> g_ring_steps{0}, g_fail_ring_step{-1};

Status RingExchange(MPI_Comm comm, int rank, int world, const void* send, void* receive, int bytes, int tag,
                    const char* call, int receive_bytes = -1) {
  MPI_Request requests[2];
  int code = MPI_Irecv(receive, receive_bytes >= 0 ? receive_bytes : bytes, MPI_BYTE, (rank + world - 1) % world, tag,
                       comm, &requests[0]);
  if (code != MPI_SUCCESS) return MpiFailure(call, code);
  if (++g_ring_steps == g_fail_ring_step) {
    return Abandon(requests, 1, Internal(std::string(call) + " failed: MPI_Isend refused (DDP_TEST_FAIL_ISEND)"));
  }
  code = MPI_Isend(send, bytes, MPI_BYTE, (rank + 1) % world, tag, comm, &requests[1]);
  if (code != MPI_SUCCESS) return Abandon(requests, 1, MpiFailure(call, code));  // the receive is in flight
  return Complete(requests, call, 2, /*max_sleep_ns=*/10000, /*point_to_point=*/true);
}

// Scales a reduced tensor by 1/world for an average.
void DivideInPlace(Tensor& t, int world) {
  const double inv = 1.0 / world;
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::kF32: {
      float* p = t.data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(p[i] * inv);
      return;
    }
    case DType::kF64: {
      double* p = t.data<double>();
      for (int64_t i = 0; i < n; ++i) p[i] *= inv;
      return;
    }
    case DType::kBF16: {
      BFloat16* p = t.data<BFloat16>();
      for (int64_t i = 0; i < n; ++i) p[i] = FloatToBFloat16(static_cast<float>(BFloat16ToFloat(p[i]) * inv));
      return;
    }
    case DType::kF16: {
      Half* p = t.data<Half>();
      for (int64_t i = 0; i < n; ++i) p[i] = FloatToHalf(static_cast<float>(HalfToFloat(p[i]) * inv));
      return;
    }
    default: LOG(FATAL) << "average of " << t.DebugString() << " is not defined";
  }
}

void CheckHost(const Tensor& t, const char* what) {
  CHECK(t.defined() && t.device().is_cpu()) << "MPI " << what << " takes host tensors, got " << t.DebugString();
}

}  // namespace

namespace {
std::atomic<MpiPhase> g_mpi_phase{MpiPhase::kUnknown};
}  // namespace

void SetMpiPhase(MpiPhase phase) { g_mpi_phase = phase; }

void AbortJob() {
  const MpiPhase phase = g_mpi_phase.load();
  if (phase == MpiPhase::kStarting || phase == MpiPhase::kEnding) std::_Exit(1);
  int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized && MPI_Query_thread(&provided) == MPI_SUCCESS && provided == MPI_THREAD_MULTIPLE) {
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::_Exit(1);
}

std::string MpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, length);
}

class MpiCommunicator::MpiWork final : public Work {
 public:
  Status Wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return status_;
  }
  bool IsCompleted() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  WorkTiming timing() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return timing_;
  }
  void Finish(Status status, const WorkTiming& timing) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = std::move(status);
      timing_ = timing;
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
  WorkTiming timing_;
};

struct MpiCommunicator::Task {
  std::function<Status()> run;
  std::string what;
  std::shared_ptr<MpiWork> work;
  double enqueued;
};

MpiCommunicator::MpiCommunicator(MPI_Comm comm) {
  {
    const CollectiveWatchdog::Scope watched("MPI_Comm_dup (the communicator's own channel)");
    CHECK_EQ(MPI_Comm_dup(comm, &comm_), MPI_SUCCESS) << "MPI_Comm_dup";
  }
  CHECK_EQ(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), MPI_SUCCESS) << "MPI_Comm_set_errhandler";
  CHECK_EQ(MPI_Comm_rank(comm_, &rank_), MPI_SUCCESS) << "MPI_Comm_rank";
  CHECK_EQ(MPI_Comm_size(comm_, &world_size_), MPI_SUCCESS) << "MPI_Comm_size";
  Bf16SumOp();
  F16SumOp();
  if (const char* stop = std::getenv("DDP_TEST_STOP_IN_COLLECTIVE"); stop != nullptr) {
    int rank = -1;
    long long n = 0;
    if (std::sscanf(stop, "%d:%lld", &rank, &n) == 2 && rank == rank_) stop_at_task_ = n;
  }
  if (const char* fail = std::getenv("DDP_TEST_FAIL_ISEND"); fail != nullptr) {
    int rank = -1;
    long long n = 0;
    if (std::sscanf(fail, "%d:%lld", &rank, &n) == 2 && rank == rank_) g_fail_ring_step = n;
  }
  thread_ = std::thread([this] { Loop(); });
}

MpiCommunicator::~MpiCommunicator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  const CollectiveWatchdog::Scope watched("MPI_Comm_free (the communicator's own channel)");
  MPI_Comm_free(&comm_);
}

std::shared_ptr<Work> MpiCommunicator::Enqueue(const char* op, size_t bytes, std::function<Status()> run) {
  auto task = std::make_unique<Task>();
  task->run = std::move(run);
  // For the watchdog's line: the caller's label ("all-reduce of bucket
  // 3"), else the operation, and the size.
  const std::string& label = CurrentCollectiveLabel();
  char size[32];
  std::snprintf(size, sizeof(size), "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  task->what = (label.empty() ? std::string(op) : label) + " (" + size + ", MPI)";
  task->work = std::make_shared<MpiWork>();
  task->enqueued = SteadySeconds();
  std::shared_ptr<Work> work = task->work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    CHECK(!stop_) << "collective issued on a communicator being destroyed";
    queue_.push_back(std::move(task));
  }
  cv_.notify_all();
  return work;
}

void MpiCommunicator::Loop() {
  while (true) {
    std::unique_ptr<Task> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    WorkTiming timing;
    timing.enqueued = task->enqueued;
    timing.started = SteadySeconds();
    Status status;
    {
      const CollectiveWatchdog::Scope watched(task->what);
      // DDP_TEST_STOP_IN_COLLECTIVE=RANK:N: the Nth collective this rank
      // runs (1-based) stops the process (SIGSTOP) as it starts, leaving
      // its peers inside it: the watchdog's test.
      if (++tasks_run_ == stop_at_task_) std::raise(SIGSTOP);
      if (failed_.ok()) {
        status = task->run();
        if (!status.ok()) failed_ = status;
      } else {
        status = Internal("not run: an earlier collective on this communicator failed (" + failed_.message() + ")");
      }
    }
    timing.finished = SteadySeconds();
    // The tensors the collective captured go before its waiter wakes: what
    // the caller frees after Wait() is then freed (the memory record does
    // not depend on which thread lets go last).
    task->run = nullptr;
    task->work->Finish(std::move(status), timing);
  }
}

// The worker's receive buffer of at least `bytes` (GrowReceiveBuffer; the
// memory planner counts it with MpiScratchBytes).
static void* GrownScratch(Tensor& scratch, int64_t bytes) {
  GrowReceiveBuffer(scratch, bytes, Device::Cpu());
  return scratch.raw_data();
}

// A large all-reduce in place: each of W near-equal blocks is reduced on
// its owner (rank b owns block b), which receives every other rank's copy
// at once and sums them in rank order, then a ring all-gather passes the
// reduced blocks round. Each rank moves 2(W - 1)/W of the data, the
// bandwidth optimum, through nonblocking sends polled with short pauses.
// The rank-order sum makes the result independent of where an element sits
// in the tensor (bucket layouts do not change the bits), the same on every
// rank, and equal to one rank accumulating the ranks' values in order.
static Status RankOrderAllReduce(MPI_Comm comm, int r, int w, Tensor& tensor, Tensor& scratch) {
  const int64_t n = tensor.numel();
  const size_t element = DTypeSize(tensor.dtype());
  std::vector<int64_t> first(w + 1);
  for (int b = 0; b <= w; ++b) first[b] = n * b / w;
  auto bytes = [&](int b) { return static_cast<int>((first[b + 1] - first[b]) * element); };
  char* data = static_cast<char*>(tensor.raw_data());
  const int64_t mine = first[r + 1] - first[r];
  // Every other rank's copy of block r, by rank (this rank's stays in place).
  char* slots = static_cast<char*>(GrownScratch(scratch, std::max<int64_t>(mine, 1) * w * element));
  std::vector<MPI_Request> requests;
  const char* call = "rank-order all-reduce (MPI_Isend/MPI_Irecv)";
  for (int s = 0; s < w; ++s) {
    if (s == r) continue;
    requests.emplace_back();
    const int code = MPI_Irecv(slots + s * mine * element, bytes(r), MPI_BYTE, s, /*tag=*/3, comm, &requests.back());
    if (code != MPI_SUCCESS) {
      requests.pop_back();
      return Abandon(requests.data(), static_cast<int>(requests.size()), MpiFailure(call, code));
    }
  }
  for (int b = 0; b < w; ++b) {
    if (b == r) continue;
    requests.emplace_back();
    const int code = MPI_Isend(data + first[b] * element, bytes(b), MPI_BYTE, b, /*tag=*/3, comm, &requests.back());
    if (code != MPI_SUCCESS) {
      requests.pop_back();
      return Abandon(requests.data(), static_cast<int>(requests.size()), MpiFailure(call, code));
    }
  }
  RETURN_IF_ERROR(Complete(requests.data(), call, static_cast<int>(requests.size()), /*max_sleep_ns=*/10000,
                           /*point_to_point=*/true));
  // x_0 + x_1 + ... + x_{w-1}, left to right: the prefix before this
  // rank's own in slot 0, then added to its own in place (a + b is b + a
  // in floating point), then the rest.
  char* own = data + first[r] * element;
  auto slot = [&](int s) { return slots + s * mine * element; };
  if (r > 0) {
    for (int s = 1; s < r; ++s) AddInto(tensor.dtype(), slot(s), slot(0), mine);
    AddInto(tensor.dtype(), slot(0), own, mine);
  }
  for (int s = r + 1; s < w; ++s) AddInto(tensor.dtype(), slot(s), own, mine);
  for (int step = 0; step < w - 1; ++step) {
    const int send = (r - step + w) % w, receive = (r - step - 1 + w) % w;
    RETURN_IF_ERROR(RingExchange(comm, r, w, data + first[send] * element, data + first[receive] * element,
                                 bytes(send), /*tag=*/4, "ring all-gather of an all-reduce (MPI_Isend/MPI_Irecv)",
                                 bytes(receive)));
  }
  return Status::Ok();
}

// Whether an all-reduce takes RankOrderAllReduce's path.
static bool OwnAllReduce(const Tensor& tensor, int world) {
  const size_t largest_block = (tensor.numel() + world - 1) / world * DTypeSize(tensor.dtype());
  return world > 1 && tensor.nbytes() >= kOwnAllReduceBytes && largest_block <= static_cast<size_t>(INT_MAX);
}

int64_t MpiScratchBytes(const char* op, const Tensor& input, const Tensor& output, int rank, int world) {
  const int64_t element = static_cast<int64_t>(DTypeSize(input.dtype()));
  if (std::strcmp(op, "all-reduce") == 0 && OwnAllReduce(input, world)) {
    const int64_t n = input.numel(), mine = n * (rank + 1) / world - n * rank / world;
    return std::max<int64_t>(mine, 1) * world * element;
  }
  if (std::strcmp(op, "reduce-scatter") == 0 && world > 1) return output.numel() * element;
  return 0;
}

std::shared_ptr<Work> MpiCommunicator::AllReduce(Tensor tensor, ReduceOp op) {
  CheckHost(tensor, "AllReduce");
  return Enqueue("all-reduce", tensor.nbytes(), [this, tensor, op]() mutable -> Status {
    // Large tensors are reduced by the ranks themselves (Open MPI's
    // nonblocking all-reduce moved about half what its blocking one does),
    // small ones through MPI_Iallreduce, whose latency is lower.
    if (OwnAllReduce(tensor, world_size_)) {
      RETURN_IF_ERROR(RankOrderAllReduce(comm_, rank_, world_size_, tensor, scratch_));
      if (op == ReduceOp::kAverage) DivideInPlace(tensor, world_size_);
      return Status::Ok();
    }
    const MpiType t = TypeFor(tensor.dtype());
    const size_t element = DTypeSize(tensor.dtype());
    for (int64_t first = 0; first < tensor.numel(); first += kMaxChunk) {
      const int count = static_cast<int>(std::min(kMaxChunk, tensor.numel() - first));
      MPI_Request request;
      const int code = MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(tensor.raw_data()) + first * element, count,
                                      t.type, t.sum, comm_, &request);
      if (code != MPI_SUCCESS) return MpiFailure("MPI_Iallreduce", code);
      RETURN_IF_ERROR(Complete(&request, "MPI_Iallreduce"));
    }
    if (op == ReduceOp::kAverage) DivideInPlace(tensor, world_size_);
    return Status::Ok();
  });
}

std::shared_ptr<Work> MpiCommunicator::ReduceScatter(Tensor input, Tensor output, ReduceOp op) {
  CheckHost(input, "ReduceScatter");
  CheckHost(output, "ReduceScatter");
  CheckBlockShapes("ReduceScatter", input, output, world_size_);
  CHECK_LE(output.nbytes(), static_cast<size_t>(INT_MAX)) << "ReduceScatter blocks are limited to 2 GiB";
  // A ring: in W - 1 steps each rank passes one partially reduced block on
  // and adds the one it receives, so rank r ends with block r reduced, and
  // each rank moves (W - 1)/W of the data once. (Open MPI's nonblocking
  // reduce-scatter funnels everything through a root, several times slower.)
  // The input serves as the accumulator.
  return Enqueue("reduce-scatter", input.nbytes(), [this, input, output, op]() mutable -> Status {
    const int w = world_size_, r = rank_;
    const int64_t block = output.numel();
    const int bytes = static_cast<int>(output.nbytes());
    char* data = static_cast<char*>(input.raw_data());
    void* incoming = w > 1 ? GrownScratch(scratch_, bytes) : nullptr;
    for (int step = 0; step < w - 1; ++step) {
      const int send_block = (r - step - 1 + 2 * w) % w, receive_block = (r - step - 2 + 2 * w) % w;
      RETURN_IF_ERROR(RingExchange(comm_, r, w, data + send_block * static_cast<int64_t>(bytes), incoming,
                                   bytes, /*tag=*/1, "ring reduce-scatter (MPI_Isend/MPI_Irecv)"));
      AddInto(input.dtype(), incoming, data + receive_block * static_cast<int64_t>(bytes), block);
    }
    const char* mine = data + r * static_cast<int64_t>(bytes);
    if (output.raw_data() != mine) std::memcpy(output.raw_data(), mine, output.nbytes());  // else in place
    if (op == ReduceOp::kAverage) DivideInPlace(output, world_size_);
    return Status::Ok();
  });
}

std::shared_ptr<Work> MpiCommunicator::AllGather(Tensor input, Tensor output) {
  CheckHost(input, "AllGather");
  CheckHost(output, "AllGather");
  CheckBlockShapes("AllGather", output, input, world_size_);
  CHECK_LE(input.nbytes(), static_cast<size_t>(INT_MAX)) << "AllGather blocks are limited to 2 GiB";
  // A ring, like ReduceScatter: W - 1 steps, each passing one block on.
  return Enqueue("all-gather", output.nbytes(), [this, input, output]() mutable -> Status {
    const int w = world_size_, r = rank_;
    const int bytes = static_cast<int>(input.nbytes());
    char* data = static_cast<char*>(output.raw_data());
    char* mine = data + r * static_cast<int64_t>(bytes);
    if (mine != input.raw_data()) std::memcpy(mine, input.raw_data(), input.nbytes());  // else in place
    for (int step = 0; step < w - 1; ++step) {
      const int send_block = (r - step + w) % w, receive_block = (r - step - 1 + w) % w;
      RETURN_IF_ERROR(RingExchange(comm_, r, w, data + send_block * static_cast<int64_t>(bytes),
                                   data + receive_block * static_cast<int64_t>(bytes), bytes, /*tag=*/2,
                                   "ring all-gather (MPI_Isend/MPI_Irecv)"));
    }
    return Status::Ok();
  });
}

std::shared_ptr<Work> MpiCommunicator::Broadcast(Tensor tensor, int root) {
  return BroadcastCoalesced({std::move(tensor)}, root);
}

std::shared_ptr<Work> MpiCommunicator::BroadcastCoalesced(std::vector<Tensor> tensors, int root) {
  for (const Tensor& t : tensors) CheckHost(t, "Broadcast");
  CHECK(root >= 0 && root < world_size_) << "Broadcast root " << root;
  size_t bytes = 0;
  for (const Tensor& t : tensors) bytes += t.nbytes();
  return Enqueue("broadcast", bytes, [this, tensors, root]() mutable -> Status {
    // Every piece of every tensor in flight at once, completed together.
    std::vector<MPI_Request> requests;
    for (Tensor& tensor : tensors) {
      char* data = static_cast<char*>(tensor.raw_data());
      const int64_t total = static_cast<int64_t>(tensor.nbytes());
      for (int64_t first = 0; first < total; first += kMaxChunk) {
        const int count = static_cast<int>(std::min(kMaxChunk, total - first));
        requests.emplace_back();
        const int code = MPI_Ibcast(data + first, count, MPI_BYTE, root, comm_, &requests.back());
        if (code != MPI_SUCCESS) {
          requests.pop_back();
          // Those already started must finish before their buffers may go.
          if (!requests.empty()) (void)Complete(requests.data(), "MPI_Ibcast", static_cast<int>(requests.size()));
          return MpiFailure("MPI_Ibcast", code);
        }
      }
    }
    if (requests.empty()) return Status::Ok();
    return Complete(requests.data(), "MPI_Ibcast", static_cast<int>(requests.size()));
  });
}

std::shared_ptr<Work> MpiCommunicator::Barrier() {
  return Enqueue("barrier", 0, [this]() -> Status {
    MPI_Request request;
    const int code = MPI_Ibarrier(comm_, &request);
    if (code != MPI_SUCCESS) return MpiFailure("MPI_Ibarrier", code);
    return Complete(&request, "MPI_Ibarrier");
  });
}

}  // namespace ddp
