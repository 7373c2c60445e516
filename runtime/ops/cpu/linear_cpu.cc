#include "runtime/ops/cpu/linear_cpu.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include <glog/logging.h>
#include <oneapi/dnnl/dnnl.h>

#include "runtime/ops/cpu/dnnl_util.h"
#include "runtime/ops/cpu/float_types.h"

namespace ddp::cpu {

void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const dnnl_status_t status = dnnl_sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n, k, alpha, a, lda, b,
                                          ldb, beta, c, ldc);
  CHECK_EQ(status, dnnl_success) << "dnnl_sgemm(" << m << "x" << n << "x" << k << ") failed with status " << status;
}

namespace {

using MatmulEntry = PrimitiveEntry<dnnl::matmul>;

}  // namespace

void MatmulBf16(bool transpose_a, bool transpose_b, const Tensor& a16, const Tensor& b16, const Tensor* bias,
                Tensor& c) {
  using Tag = dnnl::memory::format_tag;
  using DataType = dnnl::memory::data_type;
  CHECK(a16.dtype() == DType::kBF16 && b16.dtype() == DType::kBF16)
      << "MatmulBf16 of " << a16.DebugString() << " and " << b16.DebugString();
  const int64_t m = c.dim(0), n = c.dim(1), k = transpose_a ? a16.dim(0) : a16.dim(1);
  // A transposed is stored [K, M]: the logical [M, K] matrix in column-major
  // ("ba") order; likewise B.
  const dnnl::memory::desc a_desc({m, k}, DataType::bf16, transpose_a ? Tag::ba : Tag::ab);
  const dnnl::memory::desc b_desc({k, n}, DataType::bf16, transpose_b ? Tag::ba : Tag::ab);
  const dnnl::memory::desc c_desc({m, n}, DnnlType(c.dtype()), Tag::ab);
  const dnnl::memory::desc bias_desc({1, n}, bias ? DnnlType(bias->dtype()) : DataType::f32, Tag::ab);
  const std::string key = "matmul_bf16 " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                          (transpose_a ? "T" : "N") + (transpose_b ? "T" : "N") +
                          (bias ? std::string("+bias ") + DTypeName(bias->dtype()) : "") + DTypeName(c.dtype());
  MatmulEntry& e = CachedPrimitive<dnnl::matmul>(key, "matmul creation", [&] {
    const dnnl::matmul::desc desc =
        bias ? dnnl::matmul::desc(a_desc, b_desc, bias_desc, c_desc) : dnnl::matmul::desc(a_desc, b_desc, c_desc);
    return dnnl::matmul::primitive_desc(desc, DnnlEngine());
  });
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(a_desc, DnnlEngine(), a16.raw_data())},
      {DNNL_ARG_WEIGHTS, dnnl::memory(b_desc, DnnlEngine(), b16.raw_data())},
      {DNNL_ARG_DST, dnnl::memory(c_desc, DnnlEngine(), c.raw_data())}};
  if (bias) args[DNNL_ARG_BIAS] = dnnl::memory(bias_desc, DnnlEngine(), bias->raw_data());
  Execute("matmul", e.primitive, args);
}

void BatchedGemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const Tensor& a,
                 const Tensor& b, float beta, Tensor& c) {
  using Tag = dnnl::memory::format_tag;
  const int64_t batch = a.dim(0);
  if (batch == 0 || m == 0 || n == 0) return;
  if (k == 0) {  // no products: C = beta * C (oneDNN takes no empty reduction)
    CHECK(c.dtype() == DType::kF32) << "batched gemm with k = 0 into " << c.DebugString();
    float* out = c.data<float>();
    for (int64_t i = 0; i < batch * m * n; ++i) out[i] = beta == 0.0f ? 0.0f : beta * out[i];
    return;
  }
  // Transposed operands are stored [batch, K, M] and [batch, N, K]: the
  // logical matrices with their last two dimensions swapped ("acb").
  const dnnl::memory::desc a_desc({batch, m, k}, DnnlType(a.dtype()), transpose_a ? Tag::acb : Tag::abc);
  const dnnl::memory::desc b_desc({batch, k, n}, DnnlType(b.dtype()), transpose_b ? Tag::acb : Tag::abc);
  const dnnl::memory::desc c_desc({batch, m, n}, DnnlType(c.dtype()), Tag::abc);
  std::ostringstream key;
  key << "batched_matmul " << batch << 'x' << m << 'x' << n << 'x' << k << (transpose_a ? 'T' : 'N')
      << (transpose_b ? 'T' : 'N') << ' ' << std::hexfloat << alpha << ' ' << beta << ' ' << DTypeName(a.dtype())
      << DTypeName(c.dtype());
  MatmulEntry& e = CachedPrimitive<dnnl::matmul>(key.str(), "batched matmul creation", [&] {
    // alpha scales the products; beta adds the old C (a sum post-op).
    dnnl::primitive_attr attr;
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(beta);
      attr.set_post_ops(ops);
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_desc, b_desc, c_desc), attr, DnnlEngine());
  });
  Execute("batched matmul", e.primitive,
          {{DNNL_ARG_SRC, dnnl::memory(a_desc, DnnlEngine(), a.raw_data())},
           {DNNL_ARG_WEIGHTS, dnnl::memory(b_desc, DnnlEngine(), b.raw_data())},
           {DNNL_ARG_DST, dnnl::memory(c_desc, DnnlEngine(), c.raw_data())}});
}

void BroadcastRows(const float* row, int64_t rows, int64_t cols, float* out) {
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) std::copy(row, row + cols, out + r * cols);
}

void SumRows(const Tensor& m, Tensor& out) {
  const int64_t rows = m.dim(0), cols = m.dim(1);
  float* result = out.data<float>();
  DispatchFloat(m.dtype(), "SumRows", [&](auto tag) {
    using S = decltype(tag);
    const S* values = Elements<S>(m);
    // Column sums in double: exact enough for any batch size.
    std::vector<double> sums(cols, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const S* row = values + r * cols;
      for (int64_t c = 0; c < cols; ++c) sums[c] += ToFloat(row[c]);
    }
    for (int64_t c = 0; c < cols; ++c) result[c] = static_cast<float>(sums[c]);
  });
}

}  // namespace ddp::cpu
