#include "runtime/ops/cuda/cudnn_ops.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/ops/cuda/cudnn_graph.h"
#include "runtime/ops/cuda/cudnn_util.h"
#include "runtime/ops/cuda/elementwise_kernels.h"
#include "runtime/ops/cuda/float16.cuh"
#include "runtime/ops/cuda/kernel_util.cuh"

namespace ddp::cuda {

void CheckCudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  std::fprintf(stderr, "%s:%d: cuDNN call %s failed: %s\n", file, line, call, cudnnGetErrorString(status));
  std::abort();
}

cudnnHandle_t CudnnHandle(const ExecutionContext& ctx) {
  thread_local std::map<int, cudnnHandle_t> handles;
  const int device = ctx.device().index;
  auto it = handles.find(device);
  if (it == handles.end()) {
    int previous = 0;
    DDP_CUDA_CHECK(cudaGetDevice(&previous));
    DDP_CUDA_CHECK(cudaSetDevice(device));
    cudnnHandle_t handle = nullptr;
    CUDNN_CALL(cudnnCreate(&handle));
    DDP_CUDA_CHECK(cudaSetDevice(previous));
    it = handles.emplace(device, handle).first;
  }
  CUDNN_CALL(cudnnSetStream(it->second, static_cast<cudaStream_t>(ctx.cuda_stream())));
  return it->second;
}

cudnnDataType_t CudnnType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return CUDNN_DATA_FLOAT;
    case DType::kBF16: return CUDNN_DATA_BFLOAT16;
    case DType::kF16: return CUDNN_DATA_HALF;
    default:
      std::fprintf(stderr, "cuDNN ops take f32, bf16 or f16 tensors, not %s\n", DTypeName(dtype));
      std::abort();
  }
}

size_t WorkspaceLimit(const ExecutionContext& ctx) {
  constexpr size_t kMaxWorkspaceBytes = ExecutionContext::kConvWorkspaceBoundBytes;
  const int64_t cap = GetAllocator(ctx.device())->limit_bytes();
  return cap > 0 ? std::min(kMaxWorkspaceBytes, static_cast<size_t>(cap) / 8) : kMaxWorkspaceBytes;
}

size_t SearchWorkspaceLimit(const ExecutionContext& ctx) {
  const Allocator* allocator = GetAllocator(ctx.device());
  const int64_t cap = allocator->limit_bytes();
  if (cap <= 0 || ctx.deterministic()) return WorkspaceLimit(ctx);
  const int64_t left = std::max<int64_t>(0, cap - allocator->bytes_in_use());
  return std::min(WorkspaceLimit(ctx), static_cast<size_t>(left / 2));
}

namespace {

int Dim(int64_t d) {
  if (d > INT32_MAX) {
    std::fprintf(stderr, "cuDNN descriptor dimension %lld exceeds 2^31\n", static_cast<long long>(d));
    std::abort();
  }
  return static_cast<int>(d);
}

// Scratch slots (ops own those below 8): 16-bit staging of convolution
// weight and bias gradients (cuDNN writes them in the data's type; the
// master gradients are f32), and library workspaces.
constexpr int kWeightGradSlot = ExecutionContext::kConvWeightGradSlot;
constexpr int kBiasSlot = ExecutionContext::kConvBiasSlot;

cudnnTensorFormat_t CudnnFormat(bool channels_last) { return channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW; }

// A legacy descriptor, created and destroyed with its owner.
template <typename T, cudnnStatus_t (*kCreate)(T*), cudnnStatus_t (*kDestroy)(T)>
class Owned {
 public:
  Owned() { CUDNN_CALL(kCreate(&desc_)); }
  ~Owned() { CUDNN_CALL(kDestroy(desc_)); }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  T get() const { return desc_; }

 private:
  T desc_ = nullptr;
};

// NCHW or NHWC (an NC tensor is N x C x 1 x 1), f32 or 16-bit.
struct TensorDesc : Owned<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor> {
  explicit TensorDesc(const Shape& s, DType dtype = DType::kF32, bool channels_last = false) {
    const int64_t h = s.size() > 2 ? s[2] : 1, w = s.size() > 3 ? s[3] : 1;
    CUDNN_CALL(cudnnSetTensor4dDescriptor(get(), CudnnFormat(channels_last), CudnnType(dtype), Dim(s[0]), Dim(s[1]),
                                          Dim(h), Dim(w)));
  }
};

// [K, C, R, S], or channels-last [K, R, S, C] (what NHWC data needs).
struct FilterDesc : Owned<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor> {
  FilterDesc(const Shape& w, DType dtype, bool channels_last) {
    CUDNN_CALL(cudnnSetFilter4dDescriptor(get(), CudnnType(dtype), CudnnFormat(channels_last), Dim(w[0]), Dim(w[1]),
                                          Dim(w[2]), Dim(w[3])));
  }
};

struct ConvDesc
    : Owned<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor> {
  ConvDesc(const Conv2dParams& p, cudnnMathType_t math) {
    CUDNN_CALL(cudnnSetConvolution2dDescriptor(get(), Dim(p.pad_h), Dim(p.pad_w), Dim(p.stride_h), Dim(p.stride_w),
                                               Dim(p.dilation_h), Dim(p.dilation_w), CUDNN_CROSS_CORRELATION,
                                               CUDNN_DATA_FLOAT));  // f32 accumulation, 16-bit data too
    CUDNN_CALL(cudnnSetConvolutionGroupCount(get(), Dim(p.groups)));
    SetMath(math);
  }
  void SetMath(cudnnMathType_t math) { CUDNN_CALL(cudnnSetConvolutionMathType(get(), math)); }
};

// Tensor cores: always for 16-bit data (mixed precision), for f32 data only
// under TF32. fp32 means fp32: FMA math only.
bool TensorCores(const ExecutionContext& ctx, DType data) { return ctx.allow_tf32() || data != DType::kF32; }

cudnnMathType_t RequestedMath(const ExecutionContext& ctx, DType data) {
  return TensorCores(ctx, data) ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

// Candidates were found with the descriptor's math type (FMA for fp32).
// PyTorch asserts that cuDNN then reports FMA; this accepts any result that
// does not name tensor cores, to be safe, and sets FMA explicitly to run it.
bool MathAllowed(bool tensor_cores, cudnnMathType_t math) {
  return tensor_cores || (math != CUDNN_TENSOR_OP_MATH && math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

struct Algo {
  int algo = 0;
  size_t workspace = 0;
  cudnnMathType_t math = CUDNN_FMA_MATH;
};

std::string CacheKey(ConvKind kind, const ExecutionContext& ctx, const Conv2dParams& p, const Shape& x,
                     const Shape& w, DType data, bool channels_last, const void* weights) {
  std::ostringstream key;
  key << static_cast<int>(kind) << ':' << ctx.device().index << ':' << ctx.allow_tf32() << ctx.deterministic() << ':'
      << DTypeName(data) << (channels_last ? ":nhwc" : ":nchw") << ":a" << AddressAlignment(weights);  // the 16-bit copy's views may be 2-byte aligned
  for (int64_t d : x) key << ',' << d;
  for (int64_t d : w) key << ',' << d;
  key << ':' << p.stride_h << ',' << p.stride_w << ',' << p.pad_h << ',' << p.pad_w << ',' << p.dilation_h << ','
      << p.dilation_w << ',' << p.groups;
  return key.str();
}

std::mutex g_algo_mu;
std::map<std::string, Algo>& AlgoCache() {
  static auto* cache = new std::map<std::string, Algo>();
  return *cache;
}

// The first usable result of a Find or Get (sorted fastest first): status
// success, math allowed, deterministic when asked, workspace within bounds.
template <typename Perf>
bool PickFrom(const ExecutionContext& ctx, bool tensor_cores, size_t workspace_limit, const Perf* perf, int count,
              Algo* out) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || !MathAllowed(tensor_cores, perf[i].mathType)) continue;
    if (ctx.deterministic() && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    if (perf[i].memory > workspace_limit) continue;
    out->algo = static_cast<int>(perf[i].algo);
    out->workspace = perf[i].memory;
    out->math = tensor_cores ? perf[i].mathType : CUDNN_FMA_MATH;
    return true;
  }
  return false;
}

// Workspace for timing the candidates: as much as any algorithm may use
// (WorkspaceLimit), within a quarter of what the device has free. A tensor
// of its own, freed (back to the pool, for activations) once the search is
// over. (Candidates wanting more are reported failed by the search.)
Tensor FindWorkspace(ExecutionContext& ctx) {
  size_t free_bytes = 0, total = 0;
  DDP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  const size_t bytes = std::min(SearchWorkspaceLimit(ctx), free_bytes / 4);
  return Tensor::Empty({std::max<int64_t>(static_cast<int64_t>(bytes), 1)}, DType::kU8, ctx.device());
}

// Chooses (once per shape) and caches the algorithm of one convolution
// direction: `find(perf, &returned, workspace)` times the candidates on real
// buffers (cudnnFind*AlgorithmEx), `get(perf, &returned)` asks the
// heuristics (cudnnGet*Algorithm_v7, what --deterministic uses), and
// `fallback` is always supported and deterministic, its workspace given by
// `workspace_of`.
template <typename Perf, int kCount, typename Find, typename Get, typename WorkspaceOf>
Algo ChooseAlgo(ExecutionContext& ctx, DType data, const std::string& key, Find find, Get get, int fallback,
                WorkspaceOf workspace_of) {
  {
    std::lock_guard<std::mutex> lock(g_algo_mu);
    auto it = AlgoCache().find(key);
    if (it != AlgoCache().end()) return it->second;
  }
  // A search times kernels and waits for them: impossible inside a CUDA
  // graph capture, whose warm-up steps should have met every shape.
  CHECK(!cuda::IsCapturing(ctx.cuda_stream())) << "cuDNN algorithm search for " << key
                                               << " while capturing a CUDA graph (a shape the warm-up did not run)";
  Perf perf[kCount];
  int returned = 0;
  if (ctx.deterministic()) {
    get(perf, &returned);
  } else {
    Tensor workspace = FindWorkspace(ctx);
    find(perf, &returned, workspace);
  }
  Algo chosen;
  if (!PickFrom(ctx, TensorCores(ctx, data), SearchWorkspaceLimit(ctx), perf, returned, &chosen)) {
    // The descriptor still has the requested math type: the fallback runs
    // under it, so its workspace size is the one asked for here.
    chosen.algo = fallback;
    chosen.workspace = workspace_of(fallback);
    chosen.math = RequestedMath(ctx, data);
  }
  std::lock_guard<std::mutex> lock(g_algo_mu);
  AlgoCache()[key] = chosen;
  return chosen;
}

// Descriptors of one convolution whose data and weights are of type `data`
// and all NCHW or all channels-last.
struct ConvSetup {
  ConvSetup(const ExecutionContext& ctx, const Conv2dParams& p, const Shape& x, const Shape& w, const Shape& y,
            DType data, bool channels_last)
      : x_desc(x, data, channels_last),
        y_desc(y, data, channels_last),
        w_desc(w, data, channels_last),
        conv(p, RequestedMath(ctx, data)) {}
  TensorDesc x_desc, y_desc;
  FilterDesc w_desc;
  ConvDesc conv;
};

void* WorkspacePtr(ExecutionContext& ctx, size_t bytes, Tensor* holder) {
  if (bytes == 0) return nullptr;
  *holder = ctx.Scratch(kCudnnWorkspaceSlot, static_cast<int64_t>(bytes));
  return holder->raw_data();
}

const float kOne = 1.0f, kZero = 0.0f;

// cuDNN wants weights in the data's layout, as PyTorch arranges.
void CheckWeightLayout(const Tensor& data, const Tensor& w, const char* op) {
  CHECK(data.format() == w.format()) << op << ": " << (data.channels_last() ? "channels-last" : "NCHW")
                                     << " data needs " << (data.channels_last() ? "channels-last ([K, R, S, C])" : "[K, C, R, S]")
                                     << " weights on CUDA, got " << w.DebugString();
}

// The legacy API's forward: y = conv(x, w).
void LegacyForward(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, Tensor& y) {
  const DType data = x.dtype();
  const bool cl = x.channels_last();
  cudnnHandle_t h = CudnnHandle(ctx);
  ConvSetup s(ctx, p, x.shape(), w.shape(), y.shape(), data, cl);
  constexpr int kCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  auto workspace_of = [&](int algo) -> size_t {
    size_t bytes = 0;
    CUDNN_CALL(cudnnGetConvolutionForwardWorkspaceSize(h, s.x_desc.get(), s.w_desc.get(), s.conv.get(),
                                                       s.y_desc.get(), static_cast<cudnnConvolutionFwdAlgo_t>(algo),
                                                       &bytes));
    return bytes;
  };
  const Algo algo = ChooseAlgo<cudnnConvolutionFwdAlgoPerf_t, kCount>(
      ctx, data, CacheKey(ConvKind::kForward, ctx, p, x.shape(), w.shape(), data, cl, w.raw_data()),
      [&](cudnnConvolutionFwdAlgoPerf_t* perf, int* returned, const Tensor& ws) {
        CUDNN_CALL(cudnnFindConvolutionForwardAlgorithmEx(h, s.x_desc.get(), x.raw_data(), s.w_desc.get(),
                                                          w.raw_data(), s.conv.get(), s.y_desc.get(), y.raw_data(),
                                                          kCount, returned, perf, ws.raw_data(), ws.nbytes()));
      },
      [&](cudnnConvolutionFwdAlgoPerf_t* perf, int* returned) {
        CUDNN_CALL(cudnnGetConvolutionForwardAlgorithm_v7(h, s.x_desc.get(), s.w_desc.get(), s.conv.get(),
                                                          s.y_desc.get(), kCount, returned, perf));
      },
      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, workspace_of);
  s.conv.SetMath(algo.math);
  Tensor ws;
  void* ws_ptr = WorkspacePtr(ctx, algo.workspace, &ws);
  CUDNN_CALL(cudnnConvolutionForward(h, &kOne, s.x_desc.get(), x.raw_data(), s.w_desc.get(), w.raw_data(),
                                     s.conv.get(), static_cast<cudnnConvolutionFwdAlgo_t>(algo.algo), ws_ptr,
                                     algo.workspace, &kZero, s.y_desc.get(), y.raw_data()));
}

// The legacy API's backward data: dx = conv_transpose(dy, w).
void LegacyBackwardData(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx) {
  const DType data = dx.dtype();
  const bool cl = dx.channels_last();
  cudnnHandle_t h = CudnnHandle(ctx);
  ConvSetup s(ctx, p, dx.shape(), w.shape(), dy.shape(), data, cl);
  constexpr int kCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  auto workspace_of = [&](int algo) -> size_t {
    size_t bytes = 0;
    CUDNN_CALL(cudnnGetConvolutionBackwardDataWorkspaceSize(h, s.w_desc.get(), s.y_desc.get(), s.conv.get(),
                                                            s.x_desc.get(),
                                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &bytes));
    return bytes;
  };
  const Algo algo = ChooseAlgo<cudnnConvolutionBwdDataAlgoPerf_t, kCount>(
      ctx, data, CacheKey(ConvKind::kBackwardData, ctx, p, dx.shape(), w.shape(), data, cl, w.raw_data()),
      [&](cudnnConvolutionBwdDataAlgoPerf_t* perf, int* returned, const Tensor& ws) {
        CUDNN_CALL(cudnnFindConvolutionBackwardDataAlgorithmEx(h, s.w_desc.get(), w.raw_data(), s.y_desc.get(),
                                                               dy.raw_data(), s.conv.get(), s.x_desc.get(),
                                                               dx.raw_data(), kCount, returned, perf, ws.raw_data(),
                                                               ws.nbytes()));
      },
      [&](cudnnConvolutionBwdDataAlgoPerf_t* perf, int* returned) {
        CUDNN_CALL(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, s.w_desc.get(), s.y_desc.get(), s.conv.get(),
                                                               s.x_desc.get(), kCount, returned, perf));
      },
      CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, workspace_of);
  s.conv.SetMath(algo.math);
  Tensor ws;
  void* ws_ptr = WorkspacePtr(ctx, algo.workspace, &ws);
  CUDNN_CALL(cudnnConvolutionBackwardData(h, &kOne, s.w_desc.get(), w.raw_data(), s.y_desc.get(), dy.raw_data(),
                                          s.conv.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(algo.algo), ws_ptr,
                                          algo.workspace, &kZero, s.x_desc.get(), dx.raw_data()));
}

// The legacy API's backward filter: dw_data = the weight gradient, in the
// data's type and layout.
void LegacyBackwardFilter(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy,
                          Tensor& dw_data) {
  cudnnHandle_t h = CudnnHandle(ctx);
  const DType data = x.dtype();
  const bool cl = x.channels_last();
  ConvSetup s(ctx, p, x.shape(), dw_data.shape(), dy.shape(), data, cl);
  constexpr int kCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  auto workspace_of = [&](int algo) -> size_t {
    size_t bytes = 0;
    CUDNN_CALL(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, s.x_desc.get(), s.y_desc.get(), s.conv.get(), s.w_desc.get(),
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &bytes));
    return bytes;
  };
  const Algo algo = ChooseAlgo<cudnnConvolutionBwdFilterAlgoPerf_t, kCount>(
      ctx, data, CacheKey(ConvKind::kBackwardFilter, ctx, p, x.shape(), dw_data.shape(), data, cl, dw_data.raw_data()),
      [&](cudnnConvolutionBwdFilterAlgoPerf_t* perf, int* returned, const Tensor& ws) {
        CUDNN_CALL(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, s.x_desc.get(), x.raw_data(), s.y_desc.get(),
                                                                 dy.raw_data(), s.conv.get(), s.w_desc.get(),
                                                                 dw_data.raw_data(), kCount, returned, perf,
                                                                 ws.raw_data(), ws.nbytes()));
      },
      [&](cudnnConvolutionBwdFilterAlgoPerf_t* perf, int* returned) {
        CUDNN_CALL(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, s.x_desc.get(), s.y_desc.get(), s.conv.get(),
                                                                 s.w_desc.get(), kCount, returned, perf));
      },
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, workspace_of);
  s.conv.SetMath(algo.math);
  Tensor ws;
  void* ws_ptr = WorkspacePtr(ctx, algo.workspace, &ws);
  CUDNN_CALL(cudnnConvolutionBackwardFilter(h, &kOne, s.x_desc.get(), x.raw_data(), s.y_desc.get(), dy.raw_data(),
                                            s.conv.get(), static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo.algo),
                                            ws_ptr, algo.workspace, &kZero, s.w_desc.get(), dw_data.raw_data()));
}

// The bias gradient: db[k] = the sum of dy over every position of channel k,
// in f64, in a fixed order (a block per channel). cuDNN's
// cudnnConvolutionBackwardBias returned CUDNN_STATUS_NOT_SUPPORTED on an
// H200 for a 16-bit case (the layout of its bias descriptor may have been
// the cause); this one takes any layout and type.
template <typename S, typename D>
__global__ void BiasGradientKernel(const S* dy, int64_t n, int64_t c, int64_t hw, bool channels_last, D* db) {
  __shared__ double shared[kThreads];
  const int64_t k = blockIdx.x;
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < n * hw; j += blockDim.x) {
    sum += ToFloat(dy[channels_last ? j * c + k : (j / hw * c + k) * hw + j % hw]);
  }
  sum = BlockSum(sum, shared);
  if (threadIdx.x == 0) db[k] = FromFloat<D>(static_cast<float>(sum));
}

void BiasGradient(ExecutionContext& ctx, const Tensor& dy, Tensor& db) {
  const int64_t n = dy.dim(0), c = dy.dim(1), hw = dy.dim(2) * dy.dim(3);
  CHECK(db.numel() == c) << "conv bias gradient " << db.DebugString() << " for " << dy.DebugString();
  if (c == 0) return;
  DispatchFloat(dy.dtype(), "cuda::BiasGradient", [&](auto in) {
    DispatchFloat(db.dtype(), "cuda::BiasGradient", [&](auto out) {
      using S = decltype(in);
      using D = decltype(out);
      BiasGradientKernel<<<static_cast<unsigned>(c), kThreads, 0, StreamOf(ctx)>>>(
          static_cast<const S*>(dy.raw_data()), n, c, hw, dy.channels_last(), static_cast<D*>(db.raw_data()));
    });
  });
  DDP_CHECK_LAUNCH("BiasGradientKernel");
}

}  // namespace

void Conv2dForward(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor* bias,
                   Tensor& y) {
  CheckWeightLayout(x, w, "Conv2dForward");  // before any CUDA call: a death test's forked child has none
  const DType data = x.dtype();
  const bool cl = x.channels_last();
  const ConvOperands operands{&x.shape(), &w.shape(), &y.shape(), const_cast<void*>(x.raw_data()),
                              const_cast<void*>(w.raw_data()), y.raw_data()};
  if (!RunBackendConv(ctx, ConvKind::kForward, p, data, cl, operands)) {
    LegacyForward(ctx, p, x, w, y);
  }
  if (bias != nullptr) {
    // The bias is f32; cuDNN adds a bias of the output's type.
    Tensor b = *bias;
    if (data != DType::kF32) {
      b = ctx.ScratchTensor(kBiasSlot, bias->shape(), data);
      Check(CastF32To16(bias->data<float>(), 1.0f, static_cast<uint16_t*>(b.raw_data()), data == DType::kBF16,
                        b.numel(), ctx.cuda_stream()),
            "CastF32To16", __FILE__, __LINE__);
    }
    TensorDesc b_desc({1, w.dim(0), 1, 1}, data, cl), y_desc(y.shape(), data, cl);
    CUDNN_CALL(cudnnAddTensor(CudnnHandle(ctx), &kOne, b_desc.get(), b.raw_data(), &kOne, y_desc.get(), y.raw_data()));
  }
}

void Conv2dBackwardData(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx) {
  CheckWeightLayout(dx, w, "Conv2dBackwardData");
  const ConvOperands operands{&dx.shape(), &w.shape(), &dy.shape(), dx.raw_data(), const_cast<void*>(w.raw_data()),
                              const_cast<void*>(dy.raw_data())};
  if (!RunBackendConv(ctx, ConvKind::kBackwardData, p, dx.dtype(), dx.channels_last(), operands)) {
    LegacyBackwardData(ctx, p, dy, w, dx);
  }
}

void Conv2dBackwardWeights(ExecutionContext& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dw,
                           Tensor* dbias) {
  const DType data = x.dtype();
  const bool cl = x.channels_last();
  // cuDNN writes weight gradients in the data's type and layout: otherwise
  // into a staging buffer that is then widened (and, for channels-last data,
  // rearranged from [K, R, S, C]) into the f32 [K, C, R, S] one.
  const bool widen = dw.dtype() != data || dw.format() != x.format();
  Tensor dw_data = dw;
  if (widen) {
    dw_data = ctx.ScratchTensor(kWeightGradSlot, dw.shape(), data);
    if (cl) dw_data = dw_data.View(0, dw.shape(), MemoryFormat::kChannelsLast);
  }
  const ConvOperands operands{&x.shape(), &dw_data.shape(), &dy.shape(), const_cast<void*>(x.raw_data()),
                              dw_data.raw_data(), const_cast<void*>(dy.raw_data())};
  if (!RunBackendConv(ctx, ConvKind::kBackwardFilter, p, data, cl, operands)) {
    LegacyBackwardFilter(ctx, p, x, dy, dw_data);
  }
  if (widen) {
    Check(ConvertLayout(data, dw_data.raw_data(), cl, dw.dtype(), dw.raw_data(), dw.channels_last(), dw.dim(0),
                        dw.dim(1), dw.dim(2) * dw.dim(3), ctx.cuda_stream()),
          "ConvertLayout", __FILE__, __LINE__);
  }
  if (dbias != nullptr) BiasGradient(ctx, dy, *dbias);
}

}  // namespace ddp::cuda
