#include "runtime/ops/cuda/gemm_cublaslt.h"

#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include "runtime/ops/cuda/float16.cuh"
#include "runtime/ops/cuda/kernel_util.cuh"

namespace ddp::cuda {
namespace {

void CheckCublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "%s:%d: cuBLASLt call %s failed: status %d\n", file, line, call, static_cast<int>(status));
  std::abort();
}
#define CUBLAS_CALL(call) CheckCublas((call), #call, __FILE__, __LINE__)

constexpr int kWorkspaceSlot = ExecutionContext::kLibraryWorkspaceSlot;  // ops' scratch slot for library workspaces
constexpr int kBiasSlot = 4;
constexpr size_t kWorkspaceBytes = ExecutionContext::kGemmWorkspaceBytes;

cublasLtHandle_t Handle() {
  static cublasLtHandle_t handle = [] {
    cublasLtHandle_t h = nullptr;
    CUBLAS_CALL(cublasLtCreate(&h));
    return h;
  }();
  return handle;
}

// RAII for the descriptors of one matmul.
struct MatmulDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  ~MatmulDescs() {
    if (d) CUBLAS_CALL(cublasLtMatrixLayoutDestroy(d));
    if (b) CUBLAS_CALL(cublasLtMatrixLayoutDestroy(b));
    if (a) CUBLAS_CALL(cublasLtMatrixLayoutDestroy(a));
    if (op) CUBLAS_CALL(cublasLtMatmulDescDestroy(op));
  }
};

struct Choice {
  cublasLtMatmulAlgo_t algo;
  bool found = false;
};

std::mutex g_mu;
std::map<std::string, Choice>& Cache() {
  static auto* cache = new std::map<std::string, Choice>();
  return *cache;
}

cudaDataType_t CudaType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default:
      std::fprintf(stderr, "cuBLASLt GEMMs take f32, bf16 or f16 matrices, not %s\n", DTypeName(dtype));
      std::abort();
  }
}

int SplitK(const cublasLtMatmulAlgo_t& algo) {
  int splits = 1;
  size_t written = 0;
  CUBLAS_CALL(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits),
                                                   &written));
  return splits;
}

// Up to 32 heuristic candidates for the matmul `d`, with operand alignments
// {A, B, C, D} in bytes; `reductions` masks the split-K reduction schemes
// allowed (CUBLASLT_REDUCTION_SCHEME_MASK: all).
int Heuristic(const MatmulDescs& d, const std::array<uint32_t, 4>& alignment, uint32_t reductions,
              cublasLtMatmulHeuristicResult_t* results, int requested) {
  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CALL(cublasLtMatmulPreferenceCreate(&pref));
  const size_t max_workspace = kWorkspaceBytes;
  CUBLAS_CALL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                                   sizeof(max_workspace)));
  const cublasLtMatmulPreferenceAttributes_t attributes[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    CUBLAS_CALL(cublasLtMatmulPreferenceSetAttribute(pref, attributes[i], &alignment[i], sizeof(alignment[i])));
  }
  CUBLAS_CALL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions,
                                                   sizeof(reductions)));
  int returned = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(Handle(), d.op, d.a, d.b, d.d, d.d, pref, requested, results, &returned);
  CUBLAS_CALL(cublasLtMatmulPreferenceDestroy(pref));
  return status == CUBLAS_STATUS_SUCCESS ? returned : 0;  // none: the caller reports it, with the shape
}

// The heuristics' first usable algorithm. Split-K sums partial products in
// an order that may vary, so `deterministic` asks for algorithms without a
// split-K reduction; where the heuristics offer none (they may, for small
// f32 GEMMs on Hopper), their best one is run unsplit, if cuBLASLt accepts it.
Choice ChooseAlgo(const MatmulDescs& d, const std::array<uint32_t, 4>& alignment, bool deterministic) {
  constexpr int kRequested = 32;
  cublasLtMatmulHeuristicResult_t results[kRequested];
  Choice choice;
  int returned = Heuristic(d, alignment, deterministic ? CUBLASLT_REDUCTION_SCHEME_NONE : CUBLASLT_REDUCTION_SCHEME_MASK,
                           results, kRequested);
  for (int i = 0; i < returned && !choice.found; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS || (deterministic && SplitK(results[i].algo) > 1)) continue;
    choice.algo = results[i].algo;
    choice.found = true;
  }
  if (choice.found || !deterministic) return choice;
  returned = Heuristic(d, alignment, CUBLASLT_REDUCTION_SCHEME_MASK, results, kRequested);
  for (int i = 0; i < returned && !choice.found; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
    cublasLtMatmulAlgo_t algo = results[i].algo;
    const int one = 1;
    const uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
    CUBLAS_CALL(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one, sizeof(one)));
    CUBLAS_CALL(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &none,
                                                     sizeof(none)));
    cublasLtMatmulHeuristicResult_t check;
    if (cublasLtMatmulAlgoCheck(Handle(), d.op, d.a, d.b, d.d, d.d, &algo, &check) != CUBLAS_STATUS_SUCCESS ||
        check.workspaceSize > kWorkspaceBytes) {
      continue;
    }
    choice.algo = algo;
    choice.found = true;
  }
  return choice;
}

__global__ void ScaleAddBiasKernel(float* c, int64_t m, int64_t n, int64_t ldc, float beta, const float* bias) {
  DDP_GRID_STRIDE(i, m * n) {
    const int64_t row = i / n, col = i % n;
    float v = beta == 0.0f ? 0.0f : beta * c[row * ldc + col];
    if (bias != nullptr) v += bias[col];
    c[row * ldc + col] = v;
  }
}

template <typename S>
__global__ void SumRowsKernel(const S* m, int64_t rows, int64_t cols, float* out) {
  // Block (32, 8): x picks the column, y strides over rows; the 8 partial
  // sums are then added in a fixed order.
  __shared__ double partial[8][33];
  const int64_t col = blockIdx.x * 32 + threadIdx.x;
  double sum = 0.0;
  if (col < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += 8) sum += ToFloat(m[r * cols + col]);
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    double total = 0.0;
    for (int y = 0; y < 8; ++y) total += partial[y][threadIdx.x];
    out[col] = static_cast<float>(total);
  }
}

}  // namespace

namespace {

// A strided batch on a layout: `count` matrices, each `stride` elements after
// the one before.
void SetBatch(cublasLtMatrixLayout_t layout, int64_t count, int64_t stride) {
  if (count == 1) return;
  const int32_t count32 = static_cast<int32_t>(count);
  CUBLAS_CALL(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count32, sizeof(count32)));
  CUBLAS_CALL(
      cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
}

// The alignment every matrix of a batch keeps: its first one's, and that of
// the step between them.
uint32_t BatchAlignment(const void* first, int64_t count, int64_t stride, DType dtype) {
  uint32_t alignment = AddressAlignment(first);
  if (count > 1) {
    alignment = std::min(alignment, AddressAlignment(reinterpret_cast<const void*>(
                                        static_cast<uintptr_t>(stride) * DTypeSize(dtype))));
  }
  return alignment;
}

// The bias epilogue wants an aligned vector: a misaligned one (a view into
// the flat parameter buffer) is copied into scratch memory first.
const void* AlignedBias(ExecutionContext& ctx, const void* bias, DType dtype, int64_t n, Tensor* holder) {
  if (bias == nullptr || AddressAlignment(bias) >= 16) return bias;
  const int64_t bytes = n * static_cast<int64_t>(DTypeSize(dtype));
  *holder = ctx.Scratch(kBiasSlot, bytes);
  DDP_CUDA_CHECK(cudaMemcpyAsync(holder->raw_data(), bias, bytes, cudaMemcpyDeviceToDevice, StreamOf(ctx)));
  return holder->raw_data();
}

}  // namespace

void Gemm(ExecutionContext& ctx, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc,
          const void* bias, DType ab, DType cd, const GemmBatch& batch) {
  if (m == 0 || n == 0 || batch.count == 0) return;
  if (cd != DType::kF32 && cd != ab) {  // f32 x f32 -> f32, 16 x 16 -> f32 or the same 16
    std::fprintf(stderr, "cuBLASLt GEMM: %s operands with a %s result\n", DTypeName(ab), DTypeName(cd));
    std::abort();
  }
  if (k == 0 && cd != DType::kF32) {
    std::fprintf(stderr, "cuBLASLt GEMM: a %s result needs k > 0\n", DTypeName(cd));
    std::abort();
  }
  if (k == 0) {  // no products: C = beta * C (+ bias), without cuBLASLt (ld >= 1 rules)
    for (int64_t i = 0; i < batch.count; ++i) {
      ScaleAddBiasKernel<<<BlocksFor(m * n), kThreads, 0, StreamOf(ctx)>>>(static_cast<float*>(c) + i * batch.stride_c,
                                                                           m, n, ldc, beta,
                                                                           static_cast<const float*>(bias));
      DDP_CHECK_LAUNCH("ScaleAddBiasKernel");
    }
    return;
  }
  Tensor aligned_bias;
  bias = AlignedBias(ctx, bias, cd, n, &aligned_bias);
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt
  // multiplies B's storage (as its "A") by A's storage (as its "B").
  const cublasOperation_t op_first = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  // 16-bit operands run on tensor cores with f32 accumulation under plain
  // COMPUTE_32F; f32 ones only under TF32.
  const cublasComputeType_t compute =
      ctx.allow_tf32() && ab == DType::kF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  MatmulDescs d;
  CUBLAS_CALL(cublasLtMatmulDescCreate(&d.op, compute, CUDA_R_32F));
  CUBLAS_CALL(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
  CUBLAS_CALL(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
  if (bias != nullptr) {
    // The bias has one value per row of the column-major result: per column
    // of the row-major C (the same bias for every matrix of a batch).
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    CUBLAS_CALL(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    CUBLAS_CALL(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  // Storage shapes, column-major: B as stored is [ldb-major] cols x rows.
  CUBLAS_CALL(cublasLtMatrixLayoutCreate(&d.a, CudaType(ab), transpose_b ? k : n, transpose_b ? n : k, ldb));
  CUBLAS_CALL(cublasLtMatrixLayoutCreate(&d.b, CudaType(ab), transpose_a ? m : k, transpose_a ? k : m, lda));
  CUBLAS_CALL(cublasLtMatrixLayoutCreate(&d.d, CudaType(cd), n, m, ldc));
  SetBatch(d.a, batch.count, batch.stride_b);
  SetBatch(d.b, batch.count, batch.stride_a);
  SetBatch(d.d, batch.count, batch.stride_c);

  // cuBLAS's A is our B.
  const uint32_t align_a = BatchAlignment(b, batch.count, batch.stride_b, ab);
  const uint32_t align_b = BatchAlignment(a, batch.count, batch.stride_a, ab);
  const uint32_t align_c = BatchAlignment(c, batch.count, batch.stride_c, cd);
  std::ostringstream key_text;
  key_text << ctx.device().index << ':' << transpose_a << transpose_b << ':' << m << ',' << n << ',' << k << ',' << lda
           << ',' << ldb << ',' << ldc << ':' << (bias != nullptr) << (beta != 0.0f) << ctx.allow_tf32()
           << ctx.deterministic() << ':' << align_a << ',' << align_b << ',' << align_c << ','
           << (bias ? AddressAlignment(bias) : 0) << ':' << DTypeName(ab) << DTypeName(cd) << ':' << batch.count << ','
           << batch.stride_a << ',' << batch.stride_b << ',' << batch.stride_c;
  const std::string key = key_text.str();
  Choice choice;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Cache().find(key);
    if (it != Cache().end()) choice = it->second;
  }
  if (!choice.found) {
    choice = ChooseAlgo(d, {align_a, align_b, align_c, align_c}, ctx.deterministic());
    if (!choice.found) {
      std::fprintf(stderr, "cuBLASLt has no algorithm for a %lldx%lldx%lld %s GEMM (batch %lld)%s\n",
                   static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), DTypeName(ab),
                   static_cast<long long>(batch.count), ctx.deterministic() ? " without split-K (--deterministic)" : "");
      std::abort();
    }
    std::lock_guard<std::mutex> lock(g_mu);
    Cache()[key] = choice;
  }
  Tensor workspace = ctx.Scratch(kWorkspaceSlot, static_cast<int64_t>(kWorkspaceBytes));
  CUBLAS_CALL(cublasLtMatmul(Handle(), d.op, &alpha, b, d.a, a, d.b, &beta, c, d.d, c, d.d, &choice.algo,
                             workspace.raw_data(), kWorkspaceBytes, StreamOf(ctx)));
}

void SumRows(ExecutionContext& ctx, const void* m, DType dtype, int64_t rows, int64_t cols, float* out) {
  if (cols == 0) return;
  const dim3 block(32, 8);
  DispatchFloat(dtype, "cuda::SumRows", [&](auto tag) {
    using S = decltype(tag);
    SumRowsKernel<S><<<static_cast<unsigned>((cols + 31) / 32), block, 0, StreamOf(ctx)>>>(static_cast<const S*>(m),
                                                                                            rows, cols, out);
  });
  DDP_CHECK_LAUNCH("SumRowsKernel");
}

}  // namespace ddp::cuda
