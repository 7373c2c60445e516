#!/usr/bin/env python3
"""PyTorch eager's ResNet-50 training throughput on one GPU: the peer that the
GPU self-test (tools/bundle/selftest.sh) measures ddp_train against, on the
same model, batch and precision in the same run.

torchvision's resnet50 (1000 classes), SGD with momentum 0.9, cross-entropy,
synthetic 224x224 images resident on the GPU, cudnn.benchmark on. fp32 turns
TF32 off for cuDNN and matmul (PyTorch's convolutions use TF32 by default);
tf32 turns it on; fp16 and bf16 are eager AMP: torch.autocast("cuda") with
that dtype, and for fp16 torch.amp.GradScaler. --channels-last puts model
and input in NHWC (what AMP's tensor-core convolutions want). The first 2
steps are warm-up. Prints "peak_bytes N" (torch.cuda.max_memory_allocated),
then, as the last line, images/s over the timed steps.

usage: bench_resnet_gpu_pytorch.py [--precision fp32|tf32|fp16|bf16] [--channels-last] [--batch-size 64]
                                   [--steps 20]
"""
import argparse
import time

import torch
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--precision", choices=["fp32", "tf32", "fp16", "bf16"], default="fp32")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--image-size", type=int, default=224)
    args = p.parse_args()
    tf32 = args.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda")
    model = torchvision.models.resnet50().to(device)
    amp = args.precision in ("fp16", "bf16")
    amp_dtype = torch.float16 if args.precision == "fp16" else torch.bfloat16
    scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "fp16")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.025, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device)
    labels = torch.randint(0, 1000, (args.batch_size,), device=device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        images = images.to(memory_format=torch.channels_last)
    warmup = min(2, args.steps - 1)
    start = None
    for step in range(args.steps):
        if step == warmup:
            torch.cuda.synchronize()
            start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp_dtype, enabled=amp):
            loss = loss_fn(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        loss.item()  # one host read per step, as ddp_train's printed loss
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    print(f"peak_bytes {torch.cuda.max_memory_allocated()}")
    print(f"{args.batch_size * (args.steps - warmup) / elapsed:.1f}")


if __name__ == "__main__":
    main()
