#!/usr/bin/env python3
"""PyTorch's side of tools/bench/bench_ops.sh: the same ops, the same output format."""
import argparse
import time

import torch
import torch.nn.functional as F


def best_seconds(fn, repeats):
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def bench_conv(name, x_shape, w_shape, stride, pad, repeats):
    x = torch.rand(x_shape) - 0.5
    w = torch.rand(w_shape) - 0.5
    y = F.conv2d(x, w, stride=stride, padding=pad)
    dy = torch.rand(y.shape) - 0.5
    flops = 2.0 * y.numel() * w_shape[1] * w_shape[2] * w_shape[3]
    fwd = best_seconds(lambda: F.conv2d(x, w, stride=stride, padding=pad), repeats)
    bwd_data = best_seconds(
        lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, stride=stride, padding=pad), repeats)
    bwd_weights = best_seconds(
        lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, stride=stride, padding=pad), repeats)
    print(f"op {name} forward {flops / fwd * 1e-9:.1f}")
    print(f"op {name} backward_data {flops / bwd_data * 1e-9:.1f}")
    print(f"op {name} backward_weights {flops / bwd_weights * 1e-9:.1f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    n = args.batch
    with torch.no_grad():
        bench_conv("conv3x3_64x56x56", (n, 64, 56, 56), (64, 64, 3, 3), 1, 1, args.repeats)
        bench_conv("conv1x1_256to64x56x56", (n, 256, 56, 56), (64, 256, 1, 1), 1, 0, args.repeats)
        bench_conv("conv7x7_stem_224", (n, 3, 224, 224), (64, 3, 7, 7), 2, 3, args.repeats)
        bench_conv("conv3x3_256x14x14", (n, 256, 14, 14), (256, 256, 3, 3), 1, 1, args.repeats)
        a = torch.rand(1024, 1024)
        b = torch.rand(1024, 1024)
        t = best_seconds(lambda: a @ b.t(), args.repeats)
        print(f"op gemm_1024 forward {2.0 * 1024 ** 3 / t * 1e-9:.1f}")


if __name__ == "__main__":
    main()
