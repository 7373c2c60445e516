#!/usr/bin/env python3
"""PyTorch's side of tools/bench/bench_ddp.sh: torchvision ResNet trained on one
random batch per rank, either alone (--world 1) or under DistributedDataParallel
with the gloo backend over loopback. Rank 0 prints "images_per_s X" (global,
after 2 warm-up steps)."""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--port", type=int, default=29511)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.rank)
    model = getattr(torchvision.models, a.model)(zero_init_residual=True)
    if a.world > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
        dist.init_process_group("gloo", rank=a.rank, world_size=a.world)
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    x = torch.randn(a.batch_size, 3, a.image_size, a.image_size)
    y = torch.randint(0, 1000, (a.batch_size,))
    timed, warmup = 0.0, 2
    for step in range(a.steps):
        start = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        if step >= warmup:
            timed += time.perf_counter() - start
    if a.world > 1:
        dist.barrier()
        dist.destroy_process_group()
    if a.rank == 0:
        print(f"images_per_s {(a.steps - warmup) * a.batch_size * a.world / timed:.4f}")


if __name__ == "__main__":
    main()
