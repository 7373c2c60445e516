// Times the heavy CPU ops on ResNet-50 shapes and prints GFLOP/s, one line
// per op: "op <name> <direction> <GFLOP/s>". tools/bench/bench_ops.sh runs the same
// ops in PyTorch and prints the ratio.
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

#include <gflags/gflags.h>

#include "runtime/execution_context.h"
#include "runtime/ops/conv2d.h"
#include "runtime/ops/linear.h"

DEFINE_int32(threads, 2, "OpenMP threads");
DEFINE_int32(repeats, 5, "timed repetitions (after one warm-up)");
DEFINE_int64(batch, 8, "batch size");

namespace ddp {
namespace {

double BestSeconds(const std::function<void()>& run) {
  run();  // warm-up: primitive creation, first touch
  double best = 1e30;
  for (int i = 0; i < FLAGS_repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

Tensor Random(const Shape& shape) {
  Tensor t = Tensor::Empty(shape, DType::kF32);
  uint32_t state = 12345;
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    t.data<float>()[i] = static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
  }
  return t;
}

void BenchConv(ExecutionContext& ctx, const std::string& name, Shape x_shape, Shape w_shape, int64_t stride,
               int64_t pad) {
  Conv2dParams p;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  const Shape y_shape = Conv2dOutputShape(x_shape, w_shape, p);
  Tensor x = Random(x_shape), w = Random(w_shape), y = Tensor::Empty(y_shape, DType::kF32), dy = Random(y_shape);
  Tensor dx = Tensor::Empty(x_shape, DType::kF32), dw = Tensor::Empty(w_shape, DType::kF32);
  const double flops = 2.0 * NumElements(y_shape) * w_shape[1] * w_shape[2] * w_shape[3];
  std::printf("op %s forward %.1f\n", name.c_str(),
              flops / BestSeconds([&] { Conv2dForward(ctx, p, x, w, nullptr, y); }) * 1e-9);
  std::printf("op %s backward_data %.1f\n", name.c_str(),
              flops / BestSeconds([&] { Conv2dBackwardData(ctx, p, dy, w, dx); }) * 1e-9);
  std::printf("op %s backward_weights %.1f\n", name.c_str(),
              flops / BestSeconds([&] { Conv2dBackwardWeights(ctx, p, x, dy, dw, nullptr); }) * 1e-9);
}

int Main() {
  ExecutionContext ctx = ExecutionContext::Cpu(FLAGS_threads);
  const int64_t n = FLAGS_batch;
  BenchConv(ctx, "conv3x3_64x56x56", {n, 64, 56, 56}, {64, 64, 3, 3}, 1, 1);
  BenchConv(ctx, "conv1x1_256to64x56x56", {n, 256, 56, 56}, {64, 256, 1, 1}, 1, 0);
  BenchConv(ctx, "conv7x7_stem_224", {n, 3, 224, 224}, {64, 3, 7, 7}, 2, 3);
  BenchConv(ctx, "conv3x3_256x14x14", {n, 256, 14, 14}, {256, 256, 3, 3}, 1, 1);
  const int64_t m = 1024;
  Tensor a = Random({m, m}), b = Random({m, m}), c = Tensor::Empty({m, m}, DType::kF32);
  std::printf("op gemm_1024 forward %.1f\n",
              2.0 * m * m * m / BestSeconds([&] { Gemm(ctx, false, true, 1.0f, a, b, 0.0f, c); }) * 1e-9);
  return 0;
}

}  // namespace
}  // namespace ddp

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return ddp::Main();
}
