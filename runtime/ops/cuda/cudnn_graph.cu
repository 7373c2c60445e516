#include "runtime/ops/cuda/cudnn_graph.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/cuda_device.h"
#include "runtime/ops/cuda/cudnn_util.h"

namespace ddp::cuda {
namespace {

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) { CUDNN_CALL(cudnnBackendCreateDescriptor(type, &d_)); }
  ~Desc() {
    if (d_ != nullptr) CUDNN_CALL(cudnnBackendDestroyDescriptor(d_));
  }
  Desc(Desc&& other) noexcept : d_(std::exchange(other.d_, nullptr)) {}
  Desc& operator=(Desc&&) = delete;
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  template <typename T>
  Desc& Set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const T* values) {
    CUDNN_CALL(cudnnBackendSetAttribute(d_, name, type, count, values));
    return *this;
  }
  Desc& Set(cudnnBackendAttributeName_t name, const Desc& other) {
    return Set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &other.d_);
  }
  Desc& Finalize() {
    CUDNN_CALL(cudnnBackendFinalize(d_));
    return *this;
  }
  // Engines and plans may not support a graph: that is an answer, not a failure.
  bool TryFinalize() { return cudnnBackendFinalize(d_) == CUDNN_STATUS_SUCCESS; }
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

constexpr int64_t kX = 'x', kW = 'w', kY = 'y';  // the tensors' unique ids
constexpr size_t kMaxTimed = 8;                  // plans timed per convolution

// A logical [N, C, H, W] tensor (or [K, C, R, S] filter), NCHW or
// channels-last in memory, `alignment` bytes aligned.
Desc TensorDesc(const Shape& s, DType data, bool channels_last, int64_t uid, int64_t alignment) {
  const int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  const int64_t dims[4] = {n, c, h, w};
  const int64_t nchw[4] = {c * h * w, h * w, w, 1}, nhwc[4] = {h * w * c, 1, w * c, c};
  const cudnnDataType_t type = CudnnType(data);
  Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.Set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)
      .Set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims)
      .Set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, channels_last ? nhwc : nchw)
      .Set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)
      .Set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment)
      .Finalize();
  return t;
}

// Cross-correlation accumulated in f32.
Desc ConvolutionDesc(const Conv2dParams& p) {
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial = 2;
  const int64_t dilation[2] = {p.dilation_h, p.dilation_w}, stride[2] = {p.stride_h, p.stride_w};
  const int64_t padding[2] = {p.pad_h, p.pad_w};
  Desc c(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  c.Set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute)
      .Set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .Set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial)
      .Set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation)
      .Set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride)
      .Set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, padding)
      .Set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, padding)
      .Finalize();
  return c;
}

// The operation node of one direction: its descriptor type and the
// attributes that name its three tensors, convolution, alpha and beta.
struct OperationKind {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
};

OperationKind KindOf(ConvKind kind) {
  switch (kind) {
    case ConvKind::kForward:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
    case ConvKind::kBackwardData:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
    case ConvKind::kBackwardFilter:
      break;
  }
  return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
}

// A chosen plan and everything it was built from (kept alive with it).
struct Entry {
  std::vector<Desc> parts;
  Desc* plan = nullptr;  // in parts; null: no engine supports this convolution
  int64_t workspace = 0;
};

// Whether the engine behind `config` carries a numerical note `avoid` rules out.
bool Avoided(const Desc& config, bool deterministic) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  int64_t got = 0;
  CUDNN_CALL(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
                                      &e));
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t count = 0;
  CUDNN_CALL(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                      CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes));
  for (int64_t i = 0; i < count; ++i) {
    // 16-bit accumulation would break "products accumulate in f32".
    if (notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) return true;
    if (deterministic && notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return true;
  }
  return false;
}

// Runs `plan` on the operands; its status, for the caller to judge.
cudnnStatus_t Execute(cudnnHandle_t handle, const Desc& plan, const ConvOperands& o, void* workspace) {
  const int64_t uids[3] = {kX, kW, kY};
  void* pointers[3] = {o.x, o.w, o.y};
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.Set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids)
      .Set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers)
      .Set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace)
      .Finalize();
  return cudnnBackendExecute(handle, plan.get(), pack.get());
}

// Seconds for two runs of `plan` after one to warm it up; infinite for a
// plan that finalized but fails to run (skipped, as cudnnFind reports such
// an algorithm's status).
double Time(ExecutionContext& ctx, cudnnHandle_t handle, const Desc& plan, const ConvOperands& o, void* workspace) {
  const double failed = std::numeric_limits<double>::infinity();
  if (Execute(handle, plan, o, workspace) != CUDNN_STATUS_SUCCESS) return failed;
  IntervalTimer timer;
  timer.Start(ctx.cuda_stream());
  bool ran = true;
  for (int i = 0; i < 2 && ran; ++i) ran = Execute(handle, plan, o, workspace) == CUDNN_STATUS_SUCCESS;
  timer.Stop(ctx.cuda_stream());
  Synchronize(ctx.cuda_stream());
  return ran ? timer.Seconds() : failed;
}

// Builds the graph of one convolution and picks its plan (see the header).
Entry Build(ExecutionContext& ctx, ConvKind kind, const Conv2dParams& p, DType data, bool cl, const ConvOperands& o,
            const int64_t alignment[3]) {
  cudnnHandle_t handle = CudnnHandle(ctx);
  Entry entry;
  std::vector<Desc>& parts = entry.parts;
  parts.reserve(64);  // pointers into it stay valid
  const OperationKind k = KindOf(kind);
  const float alpha = 1.0f, beta = 0.0f;
  parts.push_back(TensorDesc(*o.x_shape, data, cl, kX, alignment[0]));
  parts.push_back(TensorDesc(*o.w_shape, data, cl, kW, alignment[1]));
  parts.push_back(TensorDesc(*o.y_shape, data, cl, kY, alignment[2]));
  parts.push_back(ConvolutionDesc(p));
  Desc& op = parts.emplace_back(k.type);
  op.Set(k.x, parts[0]).Set(k.w, parts[1]).Set(k.y, parts[2]).Set(k.conv, parts[3]);
  op.Set(k.alpha, CUDNN_TYPE_FLOAT, 1, &alpha).Set(k.beta, CUDNN_TYPE_FLOAT, 1, &beta).Finalize();
  Desc& graph = parts.emplace_back(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  const cudnnBackendDescriptor_t op_desc = op.get();
  graph.Set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op_desc)
      .Set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  if (!graph.TryFinalize()) return entry;
  Desc heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heuristics.Set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph).Set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
                                                                     &mode);
  if (!heuristics.TryFinalize()) return entry;
  int64_t count = 0;
  CUDNN_CALL(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                      &count, nullptr));
  std::vector<Desc> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) raw.push_back(configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR).get());
  CUDNN_CALL(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                      count, &count, raw.data()));
  // The usable plans, in the heuristics' order.
  const int64_t limit = static_cast<int64_t>(SearchWorkspaceLimit(ctx));
  std::vector<std::pair<Desc*, int64_t>> plans;
  for (int64_t i = 0; i < count && plans.size() < (ctx.deterministic() ? 1 : kMaxTimed); ++i) {
    if (Avoided(configs[i], ctx.deterministic())) continue;
    Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan.Set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle).Set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                                                                  configs[i]);
    if (!plan.TryFinalize()) continue;
    int64_t workspace = 0, got = 0;
    CUDNN_CALL(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                                        &workspace));
    if (workspace > limit) continue;
    parts.push_back(std::move(configs[i]));
    plans.emplace_back(&parts.emplace_back(std::move(plan)), workspace);
  }
  if (plans.empty()) return entry;
  size_t best = 0;
  if (plans.size() > 1) {
    int64_t most = 0;
    for (const auto& plan : plans) most = std::max(most, plan.second);
    Tensor workspace = Tensor::Empty({std::max<int64_t>(most, 1)}, DType::kU8, ctx.device());
    double fastest = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < plans.size(); ++i) {
      const double seconds = Time(ctx, handle, *plans[i].first, o, workspace.raw_data());
      if (seconds < fastest) fastest = seconds, best = i;
    }
    if (fastest == std::numeric_limits<double>::infinity()) return entry;  // none runs: the legacy API
  }
  entry.plan = plans[best].first;
  entry.workspace = plans[best].second;
  return entry;
}

std::string Key(const ExecutionContext& ctx, ConvKind kind, const Conv2dParams& p, DType data, bool cl,
                const ConvOperands& o, const int64_t alignment[3]) {
  std::ostringstream key;
  key << static_cast<int>(kind) << ':' << ctx.device().index << ':' << ctx.deterministic() << ':' << DTypeName(data)
      << (cl ? ":nhwc" : ":nchw");
  for (const Shape* s : {o.x_shape, o.w_shape, o.y_shape}) {
    for (int64_t d : *s) key << ',' << d;
    key << ';';
  }
  key << p.stride_h << ',' << p.stride_w << ',' << p.pad_h << ',' << p.pad_w << ',' << p.dilation_h << ','
      << p.dilation_w << ',' << p.groups << ":a" << alignment[0] << ',' << alignment[1] << ',' << alignment[2];
  return key.str();
}

}  // namespace

bool RunBackendConv(ExecutionContext& ctx, ConvKind kind, const Conv2dParams& p, DType data, bool channels_last,
                    const ConvOperands& operands) {
  static const bool legacy = [] {
    const char* api = std::getenv("DDP_CUDNN_API");
    return api != nullptr && std::string(api) == "legacy";
  }();
  if (data == DType::kF32 || legacy) return false;
  // Vectorized engines need aligned buffers; 16 bytes is all they ask.
  const int64_t alignment[3] = {std::min<int64_t>(16, AddressAlignment(operands.x)),
                                std::min<int64_t>(16, AddressAlignment(operands.w)),
                                std::min<int64_t>(16, AddressAlignment(operands.y))};
  // Plans belong to the handle they were built with: one cache per thread,
  // as the handles are.
  thread_local std::map<std::string, Entry> cache;
  const std::string key = Key(ctx, kind, p, data, channels_last, operands, alignment);
  auto it = cache.find(key);
  if (it == cache.end()) {
    CHECK(!IsCapturing(ctx.cuda_stream())) << "cuDNN plan search for " << key
                                           << " while capturing a CUDA graph (a shape the warm-up did not run)";
    it = cache.emplace(key, Build(ctx, kind, p, data, channels_last, operands, alignment)).first;
  }
  const Entry& entry = it->second;
  if (entry.plan == nullptr) return false;
  void* workspace = nullptr;
  Tensor holder;
  if (entry.workspace > 0) {
    holder = ctx.Scratch(kCudnnWorkspaceSlot, entry.workspace);
    workspace = holder.raw_data();
  }
  CUDNN_CALL(Execute(CudnnHandle(ctx), *entry.plan, operands, workspace));
  return true;
}

}  // namespace ddp::cuda
