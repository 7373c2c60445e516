// The collectives' benchmark, in nccl-tests' style, over the project's own
// Communicator (MPI on CPU ranks; NCCL with --comm nccl on GPUs): sizes
// doubling from --min-bytes to --max-bytes, and for each the time per
// operation, algbw (bytes / time) and busbw (nccl-tests' bus bandwidth:
// x 2(N-1)/N for all-reduce, x (N-1)/N for all-gather and reduce-scatter,
// whose size is the whole buffer, x 1 for broadcast), and #wrong: the
// elements of a separate checked run that differ from the exact expected
// values. Beside the all-reduce, raw MPI_Allreduce and MPI_Iallreduce on
// the same buffer, so the communicator's own overhead shows.
//   mpirun -np 2 comm_bench [--ops allreduce,reducescatter,allgather,broadcast] [--min-bytes 8]
//                           [--max-bytes 256M] [--min-busbw GB/s] [--comm mpi|nccl]
// --min-busbw: exit 1 when an operation's busbw at the largest size is
// below it. --sequence 1M,25M,25M,25M,21.5M [--gap-ms 400] times instead a
// training step's gradient buckets as DDP issues them (queued at once on
// the communicator's thread after the step's compute), a row a bucket.
// Rank 0 prints; a bad flag is one line, exit 2, on every rank.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gflags/gflags.h>

#include "comm/bootstrap.h"
#include "comm/mpi_communicator.h"
#ifdef DDP_HAVE_CUDA
#include "comm/nccl_communicator.h"
#endif
#include "runtime/byte_size.h"
#include "runtime/clock.h"
#include "runtime/median.h"
#include "runtime/cuda/cuda_device.h"
#include "tools/tool_main.h"

DEFINE_string(ops, "allreduce,reducescatter,allgather,broadcast", "operations, comma-separated");
DEFINE_string(min_bytes, "8", "smallest size (B, K, M or G suffixes)");
DEFINE_string(max_bytes, "256M", "largest size");
DEFINE_double(min_busbw, 0.0, "GB/s: exit 1 when an operation's busbw at the largest size is below it");
DEFINE_double(seconds_per_size, 0.2, "time spent timing each size (at least 3 and at most 1000 iterations)");
DEFINE_bool(raw, true, "time raw MPI_Allreduce / MPI_Iallreduce beside the all-reduce (--noraw: the communicator only, "
            "whose waits sleep, as a load beside compute)");
DEFINE_string(comm, "mpi", "mpi (host buffers) or nccl (a GPU per local rank)");
DEFINE_string(sequence, "", "all-reduce these sizes (e.g. 1M,25M,25M,25M,21.5M) as DDP issues a step's buckets: "
              "queued at once after --gap-ms of idle link, --sequence-steps times; prints each bucket's median "
              "busy time (from the previous one's end) and the step's, the slowest rank's");
DEFINE_double(gap_ms, 0.0, "--sequence: idle time before each step's buckets (a step's compute)");
DEFINE_int32(sequence_steps, 10, "--sequence: steps timed (after one untimed)");
DEFINE_bool(sequence_queued, true, "--sequence: queue a step's buckets at once, as DDP does (--nosequence_queued: "
            "each waited for before the next is issued, as the sweep does)");

namespace ddp {
namespace {

constexpr int kElementBytes = 4;  // f32

enum class Op { kAllReduce, kReduceScatter, kAllGather, kBroadcast };

struct OpInfo {
  Op op;
  const char* name;
  double bus_factor(int n) const {
    switch (op) {
      case Op::kAllReduce: return 2.0 * (n - 1) / n;
      case Op::kReduceScatter:
      case Op::kAllGather: return static_cast<double>(n - 1) / n;
      case Op::kBroadcast: return 1.0;
    }
    return 1.0;
  }
};

struct Setup {
  std::vector<OpInfo> ops;
  int64_t min_bytes = 8, max_bytes = 256 << 20;
  std::vector<int64_t> sequence;  // --sequence's sizes
};

StatusOr<Setup> ParseFlags(int world) {
  Setup s;
  std::stringstream list(FLAGS_ops);
  for (std::string name; std::getline(list, name, ',');) {
    if (name == "allreduce") s.ops.push_back({Op::kAllReduce, "allreduce"});
    else if (name == "reducescatter") s.ops.push_back({Op::kReduceScatter, "reducescatter"});
    else if (name == "allgather") s.ops.push_back({Op::kAllGather, "allgather"});
    else if (name == "broadcast") s.ops.push_back({Op::kBroadcast, "broadcast"});
    else return InvalidArgument("--ops: unknown operation '" + name + "'; use allreduce, reducescatter, allgather, broadcast");
  }
  if (s.ops.empty()) return InvalidArgument("--ops names no operation");
  ASSIGN_OR_RETURN(s.min_bytes, ParseByteSize("--min-bytes", FLAGS_min_bytes));
  ASSIGN_OR_RETURN(s.max_bytes, ParseByteSize("--max-bytes", FLAGS_max_bytes));
  if (s.min_bytes < kElementBytes) {
    return InvalidArgument("--min-bytes " + std::to_string(s.min_bytes) + " is below one f32 element (4 bytes)");
  }
  if (s.max_bytes < s.min_bytes) return InvalidArgument("--max-bytes is below --min-bytes");
  // One MPI call counts its elements in an int; a size held three times
  // over (the collective's buffers, the raw MPI buffer) must fit memory.
  if (s.max_bytes / kElementBytes > std::numeric_limits<int>::max()) {
    return InvalidArgument("--max-bytes " + FLAGS_max_bytes + " is past the 2^31 - 1 f32 elements one collective takes");
  }
  RETURN_IF_ERROR(CheckFlagSize("--max-bytes " + FLAGS_max_bytes + " held 3 times", 3, s.max_bytes));
  if (FLAGS_comm != "mpi" && FLAGS_comm != "nccl") return InvalidArgument("--comm '" + FLAGS_comm + "': use mpi or nccl");
  std::stringstream sizes(FLAGS_sequence);
  for (std::string size; std::getline(sizes, size, ',');) {
    ASSIGN_OR_RETURN(const int64_t bytes, ParseByteSize("--sequence:", size));
    if (bytes < kElementBytes) return InvalidArgument("--sequence: " + size + " is below one f32 element (4 bytes)");
    s.sequence.push_back(bytes / kElementBytes * kElementBytes);
  }
  if (!FLAGS_sequence.empty() && s.sequence.empty()) return InvalidArgument("--sequence names no size");
  if (FLAGS_gap_ms < 0) return InvalidArgument("--gap-ms must be 0 or more");
  if (FLAGS_sequence_steps < 1) return InvalidArgument("--sequence-steps must be 1 or more");
  (void)world;
  return s;
}

// Rank r's element i before the operation: small integers, so every sum
// is exact in f32.
float Value(int rank, int64_t i) { return static_cast<float>((rank + 1) * (i % 97 + 1)); }

class Bench {
 public:
  Bench(Communicator* comm, int rank, int world, Device device)
      : comm_(comm), rank_(rank), world_(world), device_(device) {}

  // One operation on `bytes` (the whole buffer's for reduce-scatter and
  // all-gather): seconds per call, and the wrong elements of a checked run.
  StatusOr<std::pair<double, int64_t>> Run(Op op, int64_t bytes) {
    const int64_t count = bytes / kElementBytes;
    const int64_t block = count / world_;
    Tensor whole = Tensor::Empty({count}, DType::kF32, device_);
    Tensor part = Tensor::Empty({std::max<int64_t>(block, 1)}, DType::kF32, device_);
    auto issue = [&]() -> Status {
      switch (op) {
        case Op::kAllReduce: return comm_->AllReduce(whole, ReduceOp::kSum)->Wait();
        case Op::kReduceScatter: return comm_->ReduceScatter(whole, part, ReduceOp::kSum)->Wait();
        case Op::kAllGather: return comm_->AllGather(part, whole)->Wait();
        case Op::kBroadcast: return comm_->Broadcast(whole, 0)->Wait();
      }
      return Status::Ok();
    };
    // The checked run.
    Fill(whole, count, 0);
    Fill(part, block, block * rank_);
    RETURN_IF_ERROR(issue());
    Sync();
    const int64_t wrong = Check(op, op == Op::kReduceScatter ? part : whole, count, block);
    // Timed: warm-up, then as many calls as fit the time, every rank the
    // same number (rank 0's).
    RETURN_IF_ERROR(issue());
    Sync();
    RETURN_IF_ERROR(comm_->Barrier()->Wait());
    double start = SteadySeconds();
    RETURN_IF_ERROR(issue());
    Sync();
    const double once = SteadySeconds() - start;
    int iterations = static_cast<int>(std::clamp(FLAGS_seconds_per_size / std::max(once, 1e-6), 3.0, 1000.0));
    MPI_Bcast(&iterations, 1, MPI_INT, 0, MPI_COMM_WORLD);
    RETURN_IF_ERROR(comm_->Barrier()->Wait());
    start = SteadySeconds();
    for (int k = 0; k < iterations; ++k) RETURN_IF_ERROR(issue());
    Sync();
    double seconds = (SteadySeconds() - start) / iterations;
    // The slowest rank's time is the operation's.
    MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int64_t all_wrong = wrong;
    MPI_Allreduce(MPI_IN_PLACE, &all_wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return std::make_pair(seconds, all_wrong);
  }

  // A step's buckets (sizes in bytes), all-reduced as DDP issues them after
  // `gap` seconds of compute: per bucket the median over the steps of its
  // busy time (from the step's start or the previous bucket's end to its
  // end), then the step's median, the slowest rank's of each; last, the
  // elements of every rank's buckets that differ from the exact sums.
  struct SequenceResult {
    std::vector<double> medians;  // per bucket, then the step
    int64_t wrong = 0;
  };
  StatusOr<SequenceResult> RunSequence(const std::vector<int64_t>& sizes, double gap, int steps, bool queued) {
    std::vector<Tensor> buckets;
    for (int64_t bytes : sizes) buckets.push_back(Tensor::Empty({bytes / kElementBytes}, DType::kF32, device_));
    const size_t b = sizes.size();
    std::vector<std::vector<double>> busy(b + 1);
    for (int step = 0; step <= steps; ++step) {
      for (Tensor& bucket : buckets) Fill(bucket, bucket.numel(), 0);  // the sums stay exact
      Sync();
      RETURN_IF_ERROR(comm_->Barrier()->Wait());
      if (gap > 0) std::this_thread::sleep_for(std::chrono::duration<double>(gap));
      const double start = SteadySeconds();
      std::vector<std::shared_ptr<Work>> works;
      std::vector<double> ends;
      // On a GPU, Sync() keeps the stream's order: a bucket's end once all
      // before it are done.
      auto finish = [&](size_t k) -> Status {
        RETURN_IF_ERROR(works[k]->Wait());
        Sync();
        ends.push_back(SteadySeconds());
        return Status::Ok();
      };
      for (size_t k = 0; k < b; ++k) {
        works.push_back(comm_->AllReduce(buckets[k], ReduceOp::kSum));
        if (!queued) RETURN_IF_ERROR(finish(k));
      }
      for (size_t k = 0; queued && k < b; ++k) RETURN_IF_ERROR(finish(k));
      if (step == 0) continue;  // untimed
      for (size_t k = 0; k < b; ++k) busy[k].push_back(ends[k] - (k == 0 ? start : ends[k - 1]));
      busy[b].push_back(ends[b - 1] - start);
    }
    SequenceResult result;
    for (std::vector<double>& times : busy) result.medians.push_back(Median(times));
    MPI_Allreduce(MPI_IN_PLACE, result.medians.data(), static_cast<int>(result.medians.size()), MPI_DOUBLE, MPI_MAX,
                  MPI_COMM_WORLD);
    for (const Tensor& bucket : buckets) result.wrong += Check(Op::kAllReduce, bucket, bucket.numel(), 0);
    MPI_Allreduce(MPI_IN_PLACE, &result.wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return result;
  }

  // Raw MPI on a host buffer of `bytes`: seconds per MPI_Allreduce and per
  // MPI_Iallreduce + MPI_Wait, timed the same way.
  std::pair<double, double> RawMpi(int64_t bytes) {
    std::vector<float> buffer(static_cast<size_t>(bytes / kElementBytes), 1.0f);
    const int count = static_cast<int>(buffer.size());
    auto time = [&](bool nonblocking) {
      auto call = [&] {
        if (nonblocking) {
          MPI_Request request;
          MPI_Iallreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
          MPI_Wait(&request, MPI_STATUS_IGNORE);
        } else {
          MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
      };
      call();
      MPI_Barrier(MPI_COMM_WORLD);
      double start = SteadySeconds();
      call();
      int iterations = static_cast<int>(std::clamp(FLAGS_seconds_per_size / std::max(SteadySeconds() - start, 1e-6),
                                                   3.0, 1000.0));
      MPI_Bcast(&iterations, 1, MPI_INT, 0, MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
      start = SteadySeconds();
      for (int k = 0; k < iterations; ++k) call();
      double seconds = (SteadySeconds() - start) / iterations;
      MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      return seconds;
    };
    return {time(false), time(true)};
  }

 private:
  void Sync() {
    if (device_.is_cuda()) cuda::Synchronize(cuda::CurrentStream(device_.index));
  }

  void Fill(Tensor& t, int64_t n, int64_t first) {
    std::vector<float> host(static_cast<size_t>(std::max<int64_t>(n, 1)));
    for (int64_t i = 0; i < n; ++i) host[i] = Value(rank_, first + i);
    Tensor h = Tensor::FromVector<float>(host, {static_cast<int64_t>(host.size())});
    if (t.numel() == h.numel()) t.CopyFrom(h);
  }

  int64_t Check(Op op, const Tensor& result, int64_t count, int64_t block) {
    const Tensor host = result.device().is_cpu() ? result : result.To(Device::Cpu());
    const float* got = host.data<float>();
    const double ranks_sum = world_ * (world_ + 1) / 2.0;
    int64_t wrong = 0;
    const int64_t n = op == Op::kReduceScatter ? block : count;
    for (int64_t i = 0; i < n; ++i) {
      double want = 0;
      switch (op) {
        case Op::kAllReduce: want = ranks_sum * (i % 97 + 1); break;
        case Op::kReduceScatter: want = ranks_sum * ((block * rank_ + i) % 97 + 1); break;
        case Op::kAllGather: want = Value(static_cast<int>(i / block), i); break;  // rank i / block's block
        case Op::kBroadcast: want = Value(0, i); break;
      }
      if (op == Op::kAllGather && i >= block * world_) continue;
      if (got[i] != static_cast<float>(want)) ++wrong;
    }
    return wrong;
  }

  Communicator* comm_;
  int rank_, world_;
  Device device_;
};

// --sequence: one table row per bucket, then the step's.
int SequenceMain(Bench& bench, const RankInfo& ranks, const Setup& setup) {
  StatusOr<Bench::SequenceResult> result =
      bench.RunSequence(setup.sequence, FLAGS_gap_ms / 1e3, FLAGS_sequence_steps, FLAGS_sequence_queued);
  if (!result.ok()) {
    std::fprintf(stderr, "comm_bench: rank %d: --sequence: %s\n", ranks.rank, result.status().message().c_str());
    AbortJob();
  }
  const std::vector<double>& medians = result->medians;
  if (ranks.rank != 0) return result->wrong > 0 ? 1 : 0;
  const int n = ranks.world_size;
  const OpInfo allreduce{Op::kAllReduce, "allreduce"};
  std::printf("# comm_bench --sequence: %d ranks, %s, f32, buckets %s %s after %g ms idle, median of %d steps, "
              "slowest rank\n#  bucket     size (B)    busy (us)   busbw GB/s\n",
              n, FLAGS_comm.c_str(), FLAGS_sequence.c_str(), FLAGS_sequence_queued ? "queued at once" : "one at a time",
              FLAGS_gap_ms, FLAGS_sequence_steps);
  int64_t total = 0;
  for (size_t k = 0; k <= setup.sequence.size(); ++k) {
    const bool step = k == setup.sequence.size();
    const int64_t bytes = step ? total : setup.sequence[k];
    total += step ? 0 : bytes;
    std::printf("  %7s %12lld %12.1f %12.3f\n", step ? "step" : std::to_string(k).c_str(), static_cast<long long>(bytes),
                medians[k] * 1e6, bytes / medians[k] / 1e9 * allreduce.bus_factor(n));
  }
  std::printf("# #wrong in all: %lld\n", static_cast<long long>(result->wrong));
  return result->wrong > 0 ? 1 : 0;
}

int Main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  StatusOr<std::unique_ptr<MpiRuntime>> mpi = MpiRuntime::Init(&argc, &argv);
  if (!mpi.ok()) {
    std::fprintf(stderr, "comm_bench: %s\n", mpi.status().message().c_str());
    return 1;
  }
  const RankInfo ranks = (*mpi)->info();
  StatusOr<Setup> setup = ParseFlags(ranks.world_size);
  if (!setup.ok()) {
    if (ranks.rank == 0) std::fprintf(stderr, "comm_bench: %s\n", setup.status().message().c_str());
    return 2;
  }
  std::unique_ptr<Communicator> comm;
  Device device = Device::Cpu();
  if (FLAGS_comm == "nccl") {
#ifdef DDP_HAVE_CUDA
    if (cuda::DeviceCount() <= ranks.local_rank) {
      if (ranks.rank == 0) std::fprintf(stderr, "comm_bench: --comm nccl needs a GPU per local rank\n");
      return 1;
    }
    cuda::SetDevice(ranks.local_rank);
    void* stream = cuda::CreateStream();
    cuda::SetCurrentStream(ranks.local_rank, stream);
    StatusOr<std::unique_ptr<NcclCommunicator>> nccl = NcclCommunicator::Create(MPI_COMM_WORLD, ranks.local_rank, stream);
    if (!nccl.ok()) {
      std::fprintf(stderr, "comm_bench: rank %d: %s\n", ranks.rank, nccl.status().message().c_str());
      return 1;
    }
    comm = std::move(*nccl);
    device = Device::Cuda(ranks.local_rank);
#else
    if (ranks.rank == 0) std::fprintf(stderr, "comm_bench: --comm nccl: this build has no CUDA\n");
    return 1;
#endif
  } else {
    comm = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
  }
  Bench bench(comm.get(), ranks.rank, ranks.world_size, device);
  if (!FLAGS_sequence.empty()) return SequenceMain(bench, ranks, *setup);
  const int n = ranks.world_size;
  bool below = false;
  int64_t total_wrong = 0;
  if (ranks.rank == 0) {
    std::printf("# comm_bench: %d ranks, %s, f32, busbw as nccl-tests defines it\n", n, FLAGS_comm.c_str());
  }
  for (const OpInfo& info : setup->ops) {
    const bool raw = info.op == Op::kAllReduce && FLAGS_comm == "mpi" && FLAGS_raw;
    if (ranks.rank == 0) {
      std::printf("#\n# %s\n# %12s %12s %12s %12s %12s %7s", info.name, "size (B)", "count", "time (us)", "algbw GB/s",
                  "busbw GB/s", "#wrong");
      if (raw) std::printf(" %16s %16s %8s", "MPI_Allreduce bw", "MPI_Iallreduce bw", "vs raw");
      std::printf("\n");
    }
    double last_busbw = 0.0;
    for (int64_t bytes = setup->min_bytes; bytes <= setup->max_bytes; bytes *= 2) {
      // Reduce-scatter and all-gather need an element per rank at least.
      const bool blocks = info.op == Op::kReduceScatter || info.op == Op::kAllGather;
      int64_t used = bytes / kElementBytes * kElementBytes;
      if (blocks) used = used / (kElementBytes * n) * kElementBytes * n;
      if (used == 0) continue;
      StatusOr<std::pair<double, int64_t>> result = bench.Run(info.op, used);
      if (!result.ok()) {
        std::fprintf(stderr, "comm_bench: rank %d: %s of %lld bytes: %s\n", ranks.rank, info.name,
                     static_cast<long long>(used), result.status().message().c_str());
        AbortJob();
      }
      const auto [seconds, wrong] = *result;
      total_wrong += wrong;
      const double algbw = used / seconds / 1e9, busbw = algbw * info.bus_factor(n);
      last_busbw = busbw;
      std::pair<double, double> mpi_seconds{0, 0};
      if (raw) mpi_seconds = bench.RawMpi(used);
      if (ranks.rank == 0) {
        std::printf("  %12lld %12lld %12.1f %12.3f %12.3f %7lld", static_cast<long long>(used),
                    static_cast<long long>(used / kElementBytes), seconds * 1e6, algbw, busbw,
                    static_cast<long long>(wrong));
        if (raw) {
          const double blocking = used / mpi_seconds.first / 1e9 * info.bus_factor(n);
          const double nonblocking = used / mpi_seconds.second / 1e9 * info.bus_factor(n);
          std::printf(" %16.3f %16.3f %8.3f", blocking, nonblocking, busbw / blocking);
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
    if (FLAGS_min_busbw > 0.0 && last_busbw < FLAGS_min_busbw) below = true;
  }
  if (ranks.rank == 0) {
    std::printf("# #wrong in all: %lld\n", static_cast<long long>(total_wrong));
    if (below) std::printf("comm_bench: busbw at the largest size below --min-busbw %g GB/s\n", FLAGS_min_busbw);
  }
  comm.reset();
  return total_wrong > 0 || below ? 1 : 0;
}

}  // namespace
}  // namespace ddp

int main(int argc, char** argv) { return ddp::Main(argc, argv); }
