#include "runtime/ops/cpu/conv2d_cpu.h"

#include <string>

#include "runtime/ops/cpu/dnnl_util.h"

namespace ddp::cpu {
namespace {

using dnnl::algorithm;
using dnnl::prop_kind;
using Dims = dnnl::memory::dims;
using Tag = dnnl::memory::format_tag;
using DataType = dnnl::memory::data_type;

// Everything oneDNN needs to know about one convolution, and a cache key.
// Data (src, dst and their gradients) and weights are of `data` type, f32 or
// bf16; bias and, in backward, weight gradients may be f32 with bf16 data
// (oneDNN's mixed-precision training configuration).
// Channels-last data is NHWC for the user and the primitive alike (oneDNN's
// brgemm convolutions read it as it is: no reorders); contiguous data is
// NCHW for the user and whatever blocked layout the primitive prefers.
struct ConvGeometry {
  Dims src, weights, dst, bias, strides, dilates, pad_l, pad_r;
  Tag weights_tag;
  DataType data;
  Tag user_tag, primitive_tag;  // of src and dst and their gradients
  std::string key;
};

// `weights_channels_last`: the user's weights (or their gradient) are
// [K, R, S, C] rather than [K, C, R, S]; the primitive's own layout is its
// choice either way.
ConvGeometry MakeGeometry(const Conv2dParams& p, const Shape& x, const Shape& w, DType data, bool channels_last,
                          bool weights_channels_last) {
  const Shape y = Conv2dOutputShape(x, w, p);
  ConvGeometry g;
  g.src = {x[0], x[1], x[2], x[3]};
  g.dst = {y[0], y[1], y[2], y[3]};
  g.bias = {w[0]};
  if (p.groups > 1) {
    g.weights = {p.groups, w[0] / p.groups, w[1], w[2], w[3]};
    g.weights_tag = weights_channels_last ? Tag::gohwi : Tag::goihw;
  } else {
    g.weights = {w[0], w[1], w[2], w[3]};
    g.weights_tag = weights_channels_last ? Tag::ohwi : Tag::oihw;
  }
  g.strides = {p.stride_h, p.stride_w};
  g.dilates = {p.dilation_h - 1, p.dilation_w - 1};  // oneDNN counts dilation from 0
  g.pad_l = {p.pad_h, p.pad_w};
  // Right padding that makes oneDNN's output size equal PyTorch's floor; it
  // is negative where the last input rows are never reached.
  g.pad_r = {(y[2] - 1) * p.stride_h + (w[2] - 1) * p.dilation_h + 1 - x[2] - p.pad_h,
             (y[3] - 1) * p.stride_w + (w[3] - 1) * p.dilation_w + 1 - x[3] - p.pad_w};
  g.key = ShapeToString(x) + ShapeToString(w) + "s" + std::to_string(p.stride_h) + "," + std::to_string(p.stride_w) +
          "p" + std::to_string(p.pad_h) + "," + std::to_string(p.pad_w) + "d" + std::to_string(p.dilation_h) + "," +
          std::to_string(p.dilation_w) + "g" + std::to_string(p.groups) + DTypeName(data) +
          (channels_last ? "nhwc" : "");
  g.data = DnnlType(data);
  g.user_tag = channels_last ? Tag::nhwc : Tag::nchw;
  g.primitive_tag = channels_last ? Tag::nhwc : Tag::any;
  return g;
}

dnnl::memory::desc Any(const Dims& dims, DataType type) { return {dims, type, Tag::any}; }
// The primitive's data (src, dst and their gradients) descriptor.
dnnl::memory::desc Data(const ConvGeometry& g, const Dims& dims) { return {dims, g.data, g.primitive_tag}; }

using ForwardEntry = PrimitiveEntry<dnnl::convolution_forward>;

ForwardEntry& GetForward(const ConvGeometry& g, bool with_bias) {
  return CachedPrimitive<dnnl::convolution_forward>(
      "conv_fwd" + g.key + (with_bias ? "+bias" : ""), "convolution_forward creation", [&] {
        auto desc = with_bias
                        ? dnnl::convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct,
                                                          Data(g, g.src), Any(g.weights, g.data),
                                                          {g.bias, DataType::f32, Tag::x}, Data(g, g.dst), g.strides,
                                                          g.dilates, g.pad_l, g.pad_r)
                        : dnnl::convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct,
                                                          Data(g, g.src), Any(g.weights, g.data), Data(g, g.dst),
                                                          g.strides, g.dilates, g.pad_l, g.pad_r);
        return dnnl::convolution_forward::primitive_desc(desc, DnnlEngine());
      });
}

using BackwardDataEntry = PrimitiveEntry<dnnl::convolution_backward_data>;
using BackwardWeightsEntry = PrimitiveEntry<dnnl::convolution_backward_weights>;

BackwardDataEntry& GetBackwardData(const ConvGeometry& g) {
  return CachedPrimitive<dnnl::convolution_backward_data>(
      "conv_bwd_data" + g.key, "convolution_backward_data creation", [&] {
        const ForwardEntry& hint = GetForward(g, /*with_bias=*/false);
        dnnl::convolution_backward_data::desc desc(algorithm::convolution_direct, Data(g, g.src),
                                                   Any(g.weights, g.data), Data(g, g.dst), g.strides, g.dilates,
                                                   g.pad_l, g.pad_r);
        return dnnl::convolution_backward_data::primitive_desc(desc, DnnlEngine(), hint.pd);
      });
}

// Weight gradients of `diff_weights` dtype (f32 with bf16 data, or the data's).
BackwardWeightsEntry& GetBackwardWeights(const ConvGeometry& g, bool with_bias, DType diff_weights) {
  const DataType diff_weights_type = DnnlType(diff_weights);
  return CachedPrimitive<dnnl::convolution_backward_weights>(
      "conv_bwd_weights" + g.key + (with_bias ? "+bias" : "") + DTypeName(diff_weights),
      "convolution_backward_weights creation", [&] {
        const ForwardEntry& hint = GetForward(g, with_bias);
        auto desc = with_bias ? dnnl::convolution_backward_weights::desc(
                                    algorithm::convolution_direct, Data(g, g.src), Any(g.weights, diff_weights_type),
                                    {g.bias, DataType::f32, Tag::x}, Data(g, g.dst), g.strides, g.dilates, g.pad_l,
                                    g.pad_r)
                              : dnnl::convolution_backward_weights::desc(
                                    algorithm::convolution_direct, Data(g, g.src), Any(g.weights, diff_weights_type),
                                    Data(g, g.dst), g.strides, g.dilates, g.pad_l, g.pad_r);
        return dnnl::convolution_backward_weights::primitive_desc(desc, DnnlEngine(), hint.pd);
      });
}

// The user's layouts, as UserMemory wraps them.
dnnl::memory::desc UserData(const ConvGeometry& g, const Dims& dims) { return {dims, g.data, g.user_tag}; }
dnnl::memory::desc UserWeights(const ConvGeometry& g, DType dtype) {
  return {g.weights, DnnlType(dtype), g.weights_tag};
}

}  // namespace

void Conv2dForward(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w,
                   const Tensor* bias, Tensor& y) {
  const ConvGeometry g = MakeGeometry(p, x.shape(), w.shape(), x.dtype(), x.channels_last(), w.channels_last());
  ForwardEntry& e = GetForward(g, bias != nullptr);
  dnnl::memory user_dst = UserMemory(y, g.dst, g.user_tag);
  dnnl::memory src = ToPrimitiveLayout(ctx, 0, UserMemory(x, g.src, g.user_tag), e.pd.src_desc());
  dnnl::memory weights = ToPrimitiveLayout(ctx, 1, UserMemory(w, g.weights, g.weights_tag), e.pd.weights_desc());
  dnnl::memory dst = OutputInPrimitiveLayout(ctx, 2, user_dst, e.pd.dst_desc());
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
  if (bias) args[DNNL_ARG_BIAS] = UserMemory(*bias, g.bias, Tag::x);
  Execute("convolution_forward", e.primitive, args, dst, user_dst);
}

void Conv2dBackwardData(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w,
                        Tensor& dx) {
  const ConvGeometry g = MakeGeometry(p, dx.shape(), w.shape(), dx.dtype(), dx.channels_last(), w.channels_last());
  BackwardDataEntry& e = GetBackwardData(g);
  dnnl::memory user_dx = UserMemory(dx, g.src, g.user_tag);
  dnnl::memory diff_dst = ToPrimitiveLayout(ctx, 0, UserMemory(dy, g.dst, g.user_tag), e.pd.diff_dst_desc());
  dnnl::memory weights = ToPrimitiveLayout(ctx, 1, UserMemory(w, g.weights, g.weights_tag), e.pd.weights_desc());
  dnnl::memory diff_src = OutputInPrimitiveLayout(ctx, 2, user_dx, e.pd.diff_src_desc());
  Execute("convolution_backward_data", e.primitive,
          {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DIFF_SRC, diff_src}}, diff_src,
          user_dx);
}

void Conv2dBackwardWeights(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                           Tensor& dw, Tensor* dbias) {
  const ConvGeometry g = MakeGeometry(p, x.shape(), dw.shape(), x.dtype(), x.channels_last(), dw.channels_last());
  const bool with_bias = dbias != nullptr;
  BackwardWeightsEntry& e = GetBackwardWeights(g, with_bias, dw.dtype());
  dnnl::memory user_dw = UserMemory(dw, g.weights, g.weights_tag);
  dnnl::memory src = ToPrimitiveLayout(ctx, 0, UserMemory(x, g.src, g.user_tag), e.pd.src_desc());
  dnnl::memory diff_dst = ToPrimitiveLayout(ctx, 1, UserMemory(dy, g.dst, g.user_tag), e.pd.diff_dst_desc());
  dnnl::memory diff_weights = OutputInPrimitiveLayout(ctx, 2, user_dw, e.pd.diff_weights_desc());
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, diff_weights}};
  if (with_bias) args[DNNL_ARG_DIFF_BIAS] = UserMemory(*dbias, g.bias, Tag::x);
  Execute("convolution_backward_weights", e.primitive, args, diff_weights, user_dw);
}

void PlanConv2dForward(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, bool bias) {
  const ConvGeometry g = MakeGeometry(p, x.shape(), w.shape(), x.dtype(), x.channels_last(), w.channels_last());
  const ForwardEntry& e = GetForward(g, bias);
  ReserveLayoutScratch(ctx, 0, UserData(g, g.src), e.pd.src_desc());
  ReserveLayoutScratch(ctx, 1, UserWeights(g, w.dtype()), e.pd.weights_desc());
  ReserveLayoutScratch(ctx, 2, UserData(g, g.dst), e.pd.dst_desc());
}

void PlanConv2dBackwardData(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& w, const Tensor& dx) {
  const ConvGeometry g = MakeGeometry(p, dx.shape(), w.shape(), dx.dtype(), dx.channels_last(), w.channels_last());
  const BackwardDataEntry& e = GetBackwardData(g);
  ReserveLayoutScratch(ctx, 0, UserData(g, g.dst), e.pd.diff_dst_desc());
  ReserveLayoutScratch(ctx, 1, UserWeights(g, w.dtype()), e.pd.weights_desc());
  ReserveLayoutScratch(ctx, 2, UserData(g, g.src), e.pd.diff_src_desc());
}

void PlanConv2dBackwardWeights(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dw,
                               bool bias) {
  const ConvGeometry g = MakeGeometry(p, x.shape(), dw.shape(), x.dtype(), x.channels_last(), dw.channels_last());
  const BackwardWeightsEntry& e = GetBackwardWeights(g, bias, dw.dtype());
  ReserveLayoutScratch(ctx, 0, UserData(g, g.src), e.pd.src_desc());
  ReserveLayoutScratch(ctx, 1, UserData(g, g.dst), e.pd.diff_dst_desc());
  ReserveLayoutScratch(ctx, 2, UserWeights(g, dw.dtype()), e.pd.diff_weights_desc());
}

}  // namespace ddp::cpu
