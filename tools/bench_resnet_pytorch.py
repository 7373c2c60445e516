#!/usr/bin/env python3
"""PyTorch's side of tools/bench_resnet.sh: torchvision ResNet training on one
random batch, SGD with momentum, the same loop ddp_train runs. With
--precision bf16, forward runs under torch.autocast("cpu", torch.bfloat16)
(PyTorch's CPU mixed precision); --channels-last puts model and input in
NHWC. Prints "images_per_s X" (after warm-up steps) and
"peak_resident_bytes Y"."""
import argparse
import resource
import time

import torch
import torch.nn.functional as F
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--channels-last", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = getattr(torchvision.models, a.model)(zero_init_residual=True)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch_size, 3, a.image_size, a.image_size)
    y = torch.randint(0, 1000, (a.batch_size,))
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16")
    timed = 0.0
    for step in range(a.steps):
        start = time.perf_counter()
        opt.zero_grad()
        with autocast:
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y)
        loss.backward()
        opt.step()
        seconds = time.perf_counter() - start
        if step >= a.warmup:
            timed += seconds
    print(f"images_per_s {(a.steps - a.warmup) * a.batch_size / timed:.3f}")
    print(f"peak_resident_bytes {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}")


if __name__ == "__main__":
    main()
