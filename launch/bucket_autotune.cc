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

// The size of the all-reduces the contention pass queues beside compute
// (one the probe times alone).
constexpr int64_t kLoadBytes = int64_t{4} << 20;

// All-reduce seconds at a few sizes, this rank's view of each (the call
// ends on every rank at about the same time).
StatusOr<std::vector<std::pair<int64_t, double>>> ProbeAllReduce(Communicator* comm, const ExecutionContext& ctx) {
  std::vector<std::pair<int64_t, double>> points;
  for (int64_t bytes : {int64_t{256} << 10, int64_t{1} << 20, kLoadBytes, int64_t{16} << 20}) {
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
  // overlap more of them with backward. One more pass beside kLoadBytes
  // all-reduces queued on the communicator, as the reducer's buckets run
  // beside backward (as many as take a quiet pass's time, rank 0's count),
  // gives the slowdown of each: the pass against a quiet one, and the
  // all-reduces done during it (to the last one's end) against their quiet
  // time.
  double compute_slowdown = 0.0, comm_slowdown = 0.0;
  if (!options.gpu && comm->world_size() > 1) {
    double one = 0.0;  // a quiet all-reduce of kLoadBytes
    for (const auto& [bytes, seconds] : points) one = bytes == kLoadBytes ? seconds : one;
    const double quiet_pass = profile.forward_s + profile.backward_s;
    Tensor count = Tensor::FromVector<double>({std::ceil(quiet_pass / std::max(one, 1e-6))}, {1});
    {
      const CollectiveLabel count_label("--bucket-mb auto's contention pass");
      RETURN_IF_ERROR(comm->Broadcast(count, 0)->Wait());
    }
    Tensor load = Tensor::Zeros({kLoadBytes / 4}, DType::kF32, ctx.device());
    std::vector<std::shared_ptr<Work>> works;
    const double start = SteadySeconds();
    const int loads = static_cast<int>(count.data<double>()[0]);
    for (int k = 0; k < loads; ++k) works.push_back(comm->AllReduce(load, ReduceOp::kSum));
    model->ForwardLoss(ctx, batch);
    model->BackwardLoss(ctx, 1.0, /*accumulate=*/false);
    const double end = SteadySeconds();
    int done = 0;
    double last = start;  // the last all-reduce to finish within the pass
    for (const std::shared_ptr<Work>& w : works) {
      RETURN_IF_ERROR(w->Wait());
      if (w->timing().finished <= end) ++done, last = std::max(last, w->timing().finished);
    }
    compute_slowdown = std::max(0.0, (end - start) / quiet_pass - 1.0);
    if (done > 0) comm_slowdown = std::max(0.0, (last - start) / (done * one) - 1.0);
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
    shape.intra.compute_slowdown = compute_slowdown;
    shape.intra.comm_slowdown = comm_slowdown;
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
    // The default unless another size is predicted clearly faster.
    if (at_default <= best * 1.005) best = at_default, best_mb = 25.0;
    chosen.data<double>()[0] = best_mb;
    char contention[120] = "";
    if (!options.gpu) {
      std::snprintf(contention, sizeof(contention), "; beside all-reduces compute %+.0f%%, all-reduce %+.0f%%",
                    compute_slowdown * 100, comm_slowdown * 100);
    }
    char why[520];
    std::snprintf(why, sizeof(why),
                  "--bucket-mb auto: %g MiB: predicted forward + backward + exposed all-reduce %.1f ms a step, "
                  "%.1f ms at the default 25 MiB (probe: %.3g GB/s bus bandwidth, %.0f us a hop; profile of %d "
                  "passes: forward %.1f ms, backward %.1f ms%s)",
                  best_mb, best * 1e3, at_default * 1e3, link->bus_gbps, link->latency_us, options.passes - 1,
                  profile.forward_s * 1e3, profile.backward_s * 1e3, contention);
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
