#!/usr/bin/env python3
"""PyTorch eager's ResNet training throughput: the peer that tools/bench/bench_resnet.sh
(CPU) and the self-test's benchmarks (tools/gpu/bundle/selftest.py, GPU, and its
CPU rehearsal) measure ddp_train against, on the same model, batch and
precision in the same run.

torchvision's ResNet on one random batch resident on the device, SGD with
momentum 0.9, cross-entropy: the loop ddp_train runs. On the CPU, --precision
bf16 runs forward under torch.autocast("cpu", torch.bfloat16). On a GPU
(--device cuda), cudnn.benchmark is on; fp32 turns TF32 off for cuDNN and
matmul (PyTorch's convolutions use TF32 by default) and tf32 on; fp16 and
bf16 are eager AMP (torch.autocast("cuda")), with torch.amp.GradScaler for
fp16. --channels-last puts model and input in NHWC. The first --warmup steps
are not timed; one host read of the loss a step, as ddp_train's printed loss.

Prints "images_per_s X", then "peak_bytes Y" on a GPU
(torch.cuda.max_memory_allocated) or "peak_resident_bytes Y" on the CPU.

usage: bench_resnet_pytorch.py [--device cpu|cuda] [--model resnet50] [--precision fp32|tf32|fp16|bf16]
                               [--channels-last] [--batch-size 8] [--image-size 224] [--steps 12] [--warmup 2]
                               [--threads 2]
"""
import argparse
import resource
import time

import torch
import torch.nn.functional as F
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--precision", choices=["fp32", "tf32", "fp16", "bf16"], default="fp32")
    p.add_argument("--channels-last", action="store_true")
    a = p.parse_args()
    cuda = a.device == "cuda"
    if not cuda and a.precision in ("tf32", "fp16"):
        p.error(f"--precision {a.precision} is for --device cuda")
    if not 0 <= a.warmup < a.steps:
        p.error("--warmup must be below --steps")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
        torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
        torch.backends.cudnn.benchmark = True
    device = torch.device(a.device)
    model = getattr(torchvision.models, a.model)(num_classes=a.num_classes, zero_init_residual=True).to(device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch_size, 3, a.image_size, a.image_size, device=device)
    y = torch.randint(0, a.num_classes, (a.batch_size,), device=device)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    amp = a.precision in ("fp16", "bf16")
    autocast = torch.autocast(a.device, dtype=torch.float16 if a.precision == "fp16" else torch.bfloat16,
                              enabled=amp)
    fp16 = a.precision == "fp16"
    # torch.amp.GradScaler from PyTorch 2.3; torch.cuda.amp's before (Debian's 1.13).
    scaler = (torch.amp.GradScaler("cuda", enabled=fp16) if hasattr(torch.amp, "GradScaler")
              else torch.cuda.amp.GradScaler(enabled=fp16))
    start = None
    for step in range(a.steps):
        if step == a.warmup:
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast:
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        loss.item()
    if cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    print(f"images_per_s {(a.steps - a.warmup) * a.batch_size / elapsed:.3f}")
    if cuda:
        print(f"peak_bytes {torch.cuda.max_memory_allocated()}")
    else:
        print(f"peak_resident_bytes {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}")


if __name__ == "__main__":
    main()
