#include "launch/bucket_autotune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <vector>

#include "comm/scaling_model.h"
#include "comm/watchdog.h"
#include "launch/step_profile.h"
#include "runtime/clock.h"
#include "runtime/cuda/cuda_device.h"

namespace ddp {
namespace {

// The sizes the probe times all-reduce at, each four times the last; the
// contention pass loads backward with two of them.
constexpr int64_t kProbeBytes[] = {int64_t{256} << 10, int64_t{1} << 20, int64_t{4} << 20, int64_t{16} << 20};

// The contention pass's larger all-reduce: the largest probed size, 1 MiB
// or more, of which at least four fit in a quiet backward (so that several
// end inside it, and the first, which waits for every rank, is not most of
// the figure), by rank 0's probe. The smaller is a quarter of it, the
// probed size below.
int64_t LoadBytes(const std::vector<std::pair<int64_t, double>>& points, double backward_s) {
  int64_t chosen = int64_t{1} << 20;
  for (const auto& [bytes, seconds] : points) {
    if (bytes > chosen && 4 * seconds <= backward_s) chosen = bytes;
  }
  return chosen;
}

double QuietSeconds(const std::vector<std::pair<int64_t, double>>& points, int64_t bytes) {
  for (const auto& [b, seconds] : points) {
    if (b == bytes) return seconds;
  }
  return 0.0;
}

// One backward beside all-reduces of `bytes` queued on the communicator, as
// the reducer's buckets run beside backward: as many as take a quiet
// backward's time (rank 0's count, broadcast, which lines the ranks up
// after their forwards). The all-reduces done during it are timed to the
// last one's end.
StatusOr<ContentionLoad> LoadedBackward(Communicator* comm, Model* model, ExecutionContext& ctx, const Batch& batch,
                                        int64_t bytes, double quiet_s, double backward_s) {
  model->ForwardLoss(ctx, batch);
  Tensor count = Tensor::FromVector<double>({std::ceil(backward_s / std::max(quiet_s, 1e-6))}, {1});
  {
    const CollectiveLabel count_label("--bucket-mb auto's contention pass");
    RETURN_IF_ERROR(comm->Broadcast(count, 0)->Wait());
  }
  Tensor load = Tensor::Zeros({bytes / 4}, DType::kF32, ctx.device());
  std::vector<std::shared_ptr<Work>> works;
  const double start = SteadySeconds();
  for (int k = 0; k < static_cast<int>(count.data<double>()[0]); ++k) {
    works.push_back(comm->AllReduce(load, ReduceOp::kSum));
  }
  model->BackwardLoss(ctx, 1.0, /*accumulate=*/false);
  const double end = SteadySeconds();
  ContentionLoad out;
  out.bytes = bytes;
  out.backward_s = end - start;
  out.collective_quiet_s = quiet_s;
  int done = 0;
  double last = start;  // the last all-reduce to finish within the backward
  for (const std::shared_ptr<Work>& w : works) {
    RETURN_IF_ERROR(w->Wait());
    if (w->timing().started <= end) out.collectives += 1.0;
    if (w->timing().finished <= end) ++done, last = std::max(last, w->timing().finished);
  }
  out.collective_loaded_s = done > 0 ? (last - start) / done : quiet_s;
  return out;
}

// All-reduce seconds at a few sizes, this rank's view of each (the call
// ends on every rank at about the same time).
StatusOr<std::vector<std::pair<int64_t, double>>> ProbeAllReduce(Communicator* comm, const ExecutionContext& ctx) {
  std::vector<std::pair<int64_t, double>> points;
  for (int64_t bytes : kProbeBytes) {
    Tensor t = Tensor::Zeros({bytes / 4}, DType::kF32, ctx.device());
    double best = std::numeric_limits<double>::infinity();
    for (int k = 0; k < 4; ++k) {
      const double start = SteadySeconds();
      RETURN_IF_ERROR(comm->AllReduce(t, ReduceOp::kSum)->Wait());
      if (ctx.device().is_cuda()) cuda::Synchronize(ctx.cuda_stream());
      if (k > 0) best = std::min(best, SteadySeconds() - start);  // the first warms up
    }
    points.push_back({bytes, best});
  }
  return points;
}

}  // namespace

StatusOr<BucketChoice> ChooseBucketMb(Communicator* comm, Model* model, ExecutionContext& ctx, const Batch& batch,
                                      const BucketAutoOptions& options) {
  const CollectiveLabel label("--bucket-mb auto's probe");
  ASSIGN_OR_RETURN(const auto points, ProbeAllReduce(comm, ctx));
  // The profile: passes over this rank's first micro-batch, the model's
  // buffers put back afterwards (the gradients are overwritten by the first
  // real step).
  std::vector<Tensor> saved;
  for (const Buffer* b : model->buffers()) saved.push_back(b->value.Clone());
  StepProfile profile;
  {
    StepProfiler profiler(model, options.gpu ? ctx.cuda_stream() : nullptr);
    for (int pass = 0; pass < options.passes; ++pass) {
      const double start = SteadySeconds();
      profiler.ForwardStarted();
      model->ForwardLoss(ctx, batch);
      profiler.ForwardFinished();
      profiler.BackwardStarted(/*last=*/true);
      model->BackwardLoss(ctx, 1.0, /*accumulate=*/false);
      profiler.BackwardFinished();
      profiler.StepFinished(SteadySeconds() - start, /*timed=*/pass > 0);
    }
    profile = profiler.Summary();
  }
  // CPU ranks: compute and collectives share the cores, and smaller buckets
  // overlap more of them with backward. Two more backwards, each beside
  // all-reduces of one size (LoadedBackward), give the slowdown of each and
  // each collective's fixed cost (FitContention). Only backward is loaded:
  // it is what DDP overlaps, and collectives slow it more than the whole
  // pass (comm/contention_probe.h).
  Contention contention;
  int64_t load_bytes = 0;
  if (!options.gpu && comm->world_size() > 1) {
    Tensor size = Tensor::FromVector<double>({static_cast<double>(LoadBytes(points, profile.backward_s))}, {1});
    {
      const CollectiveLabel size_label("--bucket-mb auto's contention pass");
      RETURN_IF_ERROR(comm->Broadcast(size, 0)->Wait());
    }
    load_bytes = static_cast<int64_t>(size.data<double>()[0]);
    ContentionLoad loads[2];
    for (int k = 0; k < 2; ++k) {
      const int64_t bytes = k == 0 ? load_bytes : SmallerContentionLoad(load_bytes);
      ASSIGN_OR_RETURN(loads[k], LoadedBackward(comm, model, ctx, batch, bytes, QuietSeconds(points, bytes),
                                                profile.backward_s));
    }
    contention = FitContention(profile.backward_s, loads[0], &loads[1]);
  }
  for (size_t k = 0; k < saved.size(); ++k) model->buffers()[k]->value.CopyFrom(saved[k]);
  // Rank 0 chooses; every rank takes its choice.
  Tensor chosen = Tensor::FromVector<double>({0.0}, {1});
  BucketChoice choice;
  if (comm->rank() == 0) {
    profile.samples_per_step = 1;
    profile.other_s = 0.0;  // the same at every size
    StatusOr<Link> link = FitLink(points, comm->world_size(), "probe");
    if (!link.ok()) return Status(link.status().code(), "--bucket-mb auto: " + link.status().message());
    ClusterShape shape;
    shape.gpus_per_node = comm->world_size();
    shape.intra = *link;
    shape.intra.shares_compute = !options.gpu;
    shape.intra.compute_slowdown = contention.compute_slowdown;
    shape.intra.comm_slowdown = contention.comm_slowdown;
    shape.intra.compute_per_collective_ms = contention.compute_per_collective_s * 1e3;
    shape.intra.comm_per_collective_ms = contention.comm_per_collective_s * 1e3;
    PredictOptions predict;
    predict.first_bucket_mb = options.first_bucket_mb;
    predict.zero_stage = options.zero_stage;
    predict.wire_scale = options.wire_scale;
    double best_mb = 25.0, best = std::numeric_limits<double>::infinity(), at_default = 0.0;
    for (double mb : {1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 200.0}) {
      predict.bucket_mb = mb;
      const double step = Predict(profile, shape, predict).step_s;
      if (mb == 25.0) at_default = step;
      if (step < best) best = step, best_mb = mb;
    }
    // The default unless another size is predicted clearly faster: 2%, as
    // the CPU validation's cells spread about 5% either side (a 0.5% bar
    // chose 2 MiB on one of three runs' noise where 25 MiB was as fast).
    if (at_default <= best * 1.02) best = at_default, best_mb = 25.0;
    chosen.data<double>()[0] = best_mb;
    char beside[200] = "";
    if (!options.gpu) {
      std::snprintf(beside, sizeof(beside),
                    "; beside %g and %g MiB all-reduces backward %+.0f%% and %.1f ms a collective, all-reduce "
                    "%+.0f%% and %.1f ms each",
                    load_bytes / 1048576.0, load_bytes / 4194304.0, contention.compute_slowdown * 100,
                    contention.compute_per_collective_s * 1e3, contention.comm_slowdown * 100,
                    contention.comm_per_collective_s * 1e3);
    }
    char why[720];
    std::snprintf(why, sizeof(why),
                  "--bucket-mb auto: %g MiB: predicted forward + backward + exposed all-reduce %.1f ms a step, "
                  "%.1f ms at the default 25 MiB (probe: %.3g GB/s bus bandwidth, %.0f us a hop; profile of %d "
                  "passes: forward %.1f ms, backward %.1f ms%s)",
                  best_mb, best * 1e3, at_default * 1e3, link->bus_gbps, link->latency_us, options.passes - 1,
                  profile.forward_s * 1e3, profile.backward_s * 1e3, beside);
    choice.why = why;
  }
  {
    const CollectiveLabel broadcast_label("--bucket-mb auto's choice");
    RETURN_IF_ERROR(comm->Broadcast(chosen, 0)->Wait());
  }
  choice.bucket_mb = chosen.data<double>()[0];
  return choice;
}

}  // namespace ddp
