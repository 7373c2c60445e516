#include "runtime/ops/attention.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include <glog/logging.h>

#include "runtime/ops/cpu/attention_cpu.h"
#include "runtime/ops/cuda/attention_cuda.h"
#include "runtime/ops/linear.h"
#include "runtime/ops/op_checks.h"

namespace ddp {
namespace {

float Scale(const Tensor& q) { return 1.0f / std::sqrt(static_cast<float>(q.dim(2))); }

// DDP_CUDA_ATTENTION=materialized: CUDA ranks make attention of the other
// ops, for an A/B run against the fused kernels.
bool MaterializedOnCuda() {
  static const bool materialized = [] {
    const char* v = std::getenv("DDP_CUDA_ATTENTION");
    const std::string value = v != nullptr ? v : "fused";
    CHECK(value == "fused" || value == "materialized")
        << "DDP_CUDA_ATTENTION must be fused or materialized, not '" << value << "'";
    return value == "materialized";
  }();
  return materialized;
}

// Fused on a CPU (and in a plan of one) and, for heads of 64, on CUDA;
// made of ops otherwise.
bool Fused(const ExecutionContext& ctx, const Tensor& q) {
  if (!ctx.planned_device().is_cuda()) return true;
  return q.dim(2) == cuda::kFusedAttentionHead && !MaterializedOnCuda();
}

const int64_t* KeyMaskData(const AttentionSaved& s) {
  return s.key_mask.defined() ? s.key_mask.data<int64_t>() : nullptr;
}

cpu::FusedAttentionArgs ArgsOf(const AttentionSaved& s) {
  return {s.samples, KeyMaskData(s), s.p, s.key, s.first_sample};
}

cuda::FusedAttentionArgs CudaArgsOf(const AttentionSaved& s) {
  const DropoutKeyWords words = DropoutPhiloxKey(s.key);
  return {s.samples, KeyMaskData(s), s.p, words.k0, words.k1, s.key.step, s.first_sample};
}

void FusedForward(ExecutionContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v, AttentionSaved& s,
                  Tensor& context) {
  CheckOnDevice(ctx, "AttentionForward", {&q, &k, &v, &context});
  if (s.key_mask.defined()) CheckOnDevice(ctx, "AttentionForward", {&s.key_mask});
  CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype() && context.dtype() == q.dtype())
      << "attention operands of one dtype: q " << q.DebugString() << ", k " << k.DebugString() << ", v "
      << v.DebugString() << ", context " << context.DebugString();
  // Dropout draws index a sample's elements below 2^34 (DropoutForward's
  // bound too).
  CHECK_LT(q.dim(0) / s.samples * q.dim(1) * q.dim(1), int64_t{1} << 34) << "attention: samples of over 2^34 scores";
  s.lse = Tensor::Empty({q.dim(0), q.dim(1)}, DType::kF32, q.device());
  if (OnMeta(ctx)) return;
  if (ctx.device().is_cuda()) {
    return DDP_ON_CUDA("AttentionForward", cuda::FusedAttentionForward(ctx, CudaArgsOf(s), q, k, v, context, s.lse));
  }
  cpu::FusedAttentionForward(ArgsOf(s), q, k, v, context, s.lse);
}

void MaterializedForward(ExecutionContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v, AttentionSaved& s,
                         Tensor& context) {
  const int64_t bh = q.dim(0), t = q.dim(1), samples = s.samples;
  const Tensor* key_mask = s.key_mask.defined() ? &s.key_mask : nullptr;
  const float p = s.p;
  Tensor scores = Tensor::Empty({bh, t, t}, q.dtype(), q.device());
  BatchedGemm(ctx, false, true, Scale(q), q, k, 0.0f, scores);
  Tensor probs = Tensor::EmptyLike(scores);
  Tensor probs_view = probs.View(0, {samples, bh / samples, t, t});
  MaskedSoftmaxForward(ctx, scores.View(0, {samples, bh / samples, t, t}), key_mask, probs_view);
  Tensor dropped = probs, keep;
  if (p > 0.0f) {
    dropped = Tensor::EmptyLike(probs);
    keep = Tensor::Empty(probs.shape(), DType::kU8, probs.device());
    const Shape per_sample = {samples, probs.numel() / samples};
    Tensor dropped_view = dropped.View(0, per_sample), keep_view = keep.View(0, per_sample);
    DropoutForward(ctx, probs.View(0, per_sample), p, s.key, s.first_sample, dropped_view, keep_view);
  }
  BatchedGemm(ctx, false, false, 1.0f, dropped, v, 0.0f, context);
  s.probs = probs;
  s.keep = keep;
}

void MaterializedBackward(ExecutionContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                          const AttentionSaved& saved, const Tensor& dcontext, Tensor& dq, Tensor& dk, Tensor& dv) {
  CHECK(saved.probs.defined()) << "attention backward without a saved forward";
  {
    // The dropped probabilities again: keep ? probs / (1 - p) : 0, the
    // expression and rounding of forward's dropout, so the same bits.
    Tensor dropped = saved.probs;
    if (saved.keep.defined()) {
      dropped = Tensor::EmptyLike(saved.probs);
      DropoutBackward(ctx, saved.probs, saved.keep, saved.p, dropped);
    }
    BatchedGemm(ctx, true, false, 1.0f, dropped, dcontext, 0.0f, dv);
  }
  Tensor ddropped = Tensor::EmptyLike(saved.probs);
  BatchedGemm(ctx, false, true, 1.0f, dcontext, v, 0.0f, ddropped);
  Tensor dprobs = ddropped;
  if (saved.keep.defined()) {
    dprobs = Tensor::EmptyLike(ddropped);
    DropoutBackward(ctx, ddropped, saved.keep, saved.p, dprobs);
  }
  Tensor dscores = Tensor::EmptyLike(saved.probs);
  SoftmaxBackward(ctx, saved.probs, dprobs, dscores);
  BatchedGemm(ctx, false, false, Scale(q), dscores, k, 0.0f, dq);
  BatchedGemm(ctx, true, false, Scale(q), dscores, q, 0.0f, dk);
}

}  // namespace

void AttentionForward(ExecutionContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v, int64_t samples,
                      const Tensor* key_mask, float p, const DropoutKey& key, int64_t first_sample, Tensor& context,
                      AttentionSaved* saved) {
  CHECK(q.ndim() == 3 && k.shape() == q.shape() && v.shape() == q.shape() && context.shape() == q.shape())
      << "attention: q " << q.DebugString() << ", k " << k.DebugString() << ", v " << v.DebugString()
      << ", context " << context.DebugString();
  const int64_t bh = q.dim(0), t = q.dim(1);
  CHECK(samples > 0 && bh % samples == 0) << "attention: " << bh << " rows of heads over " << samples << " samples";
  CHECK(key_mask == nullptr || (key_mask->shape() == Shape{samples, t} && key_mask->dtype() == DType::kI64))
      << "attention key mask " << key_mask->DebugString() << " for " << samples << " samples of " << t
      << " (i64)";
  CHECK(p >= 0.0f && p < 1.0f) << "attention dropout probability " << p << " is outside [0, 1)";
  AttentionSaved local;
  AttentionSaved& s = saved != nullptr ? *saved : local;
  s = AttentionSaved();
  s.key_mask = key_mask != nullptr ? *key_mask : Tensor();
  s.key = key;
  s.samples = samples;
  s.first_sample = first_sample;
  s.p = p;
  if (Fused(ctx, q)) return FusedForward(ctx, q, k, v, s, context);
  MaterializedForward(ctx, q, k, v, s, context);
}

void AttentionBackward(ExecutionContext& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionSaved& saved, const Tensor& dcontext, Tensor& dq, Tensor& dk, Tensor& dv) {
  if (!Fused(ctx, q)) return MaterializedBackward(ctx, q, k, v, saved, dcontext, dq, dk, dv);
  CHECK(saved.lse.defined()) << "attention backward without a saved forward";
  CHECK(saved.lse.shape() == (Shape{q.dim(0), q.dim(1)}) && saved.samples > 0 && q.dim(0) % saved.samples == 0 &&
        (!saved.key_mask.defined() || saved.key_mask.shape() == (Shape{saved.samples, q.dim(1)})))
      << "attention backward of q " << q.DebugString() << " from a forward of " << saved.lse.DebugString()
      << " rows over " << saved.samples << " samples";
  CHECK(dcontext.shape() == q.shape() && dq.shape() == q.shape() && dk.shape() == q.shape() &&
        dv.shape() == q.shape() && dcontext.dtype() == q.dtype() && dq.dtype() == q.dtype() &&
        dk.dtype() == q.dtype() && dv.dtype() == q.dtype())
      << "attention backward: q " << q.DebugString() << ", dcontext " << dcontext.DebugString() << ", dq "
      << dq.DebugString() << ", dk " << dk.DebugString() << ", dv " << dv.DebugString();
  CheckOnDevice(ctx, "AttentionBackward", {&q, &k, &v, &dcontext, &dq, &dk, &dv, &saved.lse});
  if (saved.key_mask.defined()) CheckOnDevice(ctx, "AttentionBackward", {&saved.key_mask});
  if (ctx.planned_device().is_cuda()) {
    // The row sums D the dQ kernel hands the dK/dV kernel.
    Tensor row_dot = Tensor::Empty({q.dim(0), q.dim(1)}, DType::kF32, q.device());
    if (OnMeta(ctx)) return;
    return DDP_ON_CUDA("AttentionBackward", cuda::FusedAttentionBackward(ctx, CudaArgsOf(saved), q, k, v, saved.lse,
                                                                         dcontext, row_dot, dq, dk, dv));
  }
  if (OnMeta(ctx)) return;
  cpu::FusedAttentionBackward(ArgsOf(saved), q, k, v, saved.lse, dcontext, dq, dk, dv);
}

}  // namespace ddp
