#include "runtime/ops/cpu/linear_cpu.h"

#include <algorithm>
#include <vector>

#include <glog/logging.h>
#include <oneapi/dnnl/dnnl.h>

namespace ddp::cpu {

void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const dnnl_status_t status = dnnl_sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n, k, alpha, a, lda, b,
                                          ldb, beta, c, ldc);
  CHECK_EQ(status, dnnl_success) << "dnnl_sgemm(" << m << "x" << n << "x" << k << ") failed with status " << status;
}

void BroadcastRows(const float* row, int64_t rows, int64_t cols, float* out) {
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) std::copy(row, row + cols, out + r * cols);
}

void SumRows(const float* m, int64_t rows, int64_t cols, float* out) {
  // Column sums in double per column block: exact enough for any batch size.
  std::vector<double> sums(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* mr = m + r * cols;
    for (int64_t c = 0; c < cols; ++c) sums[c] += mr[c];
  }
  for (int64_t c = 0; c < cols; ++c) out[c] = static_cast<float>(sums[c]);
}

}  // namespace ddp::cpu
