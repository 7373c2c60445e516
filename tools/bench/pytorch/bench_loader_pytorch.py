#!/usr/bin/env python3
"""The PyTorch peer of tools/bench/bench_loader: torchvision's ImageFolder with
RandomResizedCrop(SIZE), RandomHorizontalFlip, ToTensor and Normalize,
through a DataLoader with WORKERS worker processes (shuffled, batch B).
Prints one JSON line of training images per second, after one untimed
batch (the workers' start).

usage: bench_loader_pytorch.py DIR --workers W [--image-size 224] [--batch-size 32] [--batches 20]
"""
import argparse
import json
import time

import torch
import torchvision.datasets as datasets
import torchvision.transforms as T


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--batches", type=int, default=20)
    args = p.parse_args()
    torch.set_num_threads(1)
    transform = T.Compose([
        T.RandomResizedCrop(args.image_size),
        T.RandomHorizontalFlip(),
        T.ToTensor(),
        T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    data = datasets.ImageFolder(args.data, transform)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, shuffle=True, drop_last=True,
                                         num_workers=args.workers, persistent_workers=True)
    seen, start = 0, None
    while seen <= args.batches:
        for images, labels in loader:
            if seen == 1:
                start = time.perf_counter()
            seen += 1
            if seen > args.batches:
                break
    per_s = args.batches * args.batch_size / (time.perf_counter() - start)
    print(json.dumps({"images_per_s": round(per_s, 2), "workers": args.workers,
                      "images_per_s_per_worker": round(per_s / args.workers, 2)}))


if __name__ == "__main__":
    main()
