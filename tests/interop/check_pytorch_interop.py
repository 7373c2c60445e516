#!/usr/bin/env python3
"""Weights cross between ddp_train and PyTorch in both directions, for real:

1. ddp_train trains a ResNet briefly and saves weights; torchvision's model
   loads them with load_state_dict(strict=True), num_batches_tracked included.
2. torchvision's model (random init, BN statistics moved) is saved; ddp_train
   loads it with --load-weights, takes one step at a negligible rate and saves
   it again: the parameters come back unchanged, num_batches_tracked + 1.

Needs Debian's python3-torch; run after building //launch:ddp_train:
  /usr/bin/python3 tests/interop/check_pytorch_interop.py [--model resnet18]
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision

DTYPES = {"F32": (torch.float32, 4), "I64": (torch.int64, 8)}
NAMES = {torch.float32: "F32", torch.int64: "I64"}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype, _ = DTYPES[entry["dtype"]]
        begin, end = entry["data_offsets"]
        raw = bytearray(data[8 + n + begin:8 + n + end])
        out[name] = torch.frombuffer(raw, dtype=dtype).reshape(entry["shape"]) if raw else \
            torch.zeros(entry["shape"], dtype=dtype)
    return out


def write_safetensors(tensors, path):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet18")
    p.add_argument("--binary", default="bazel-bin/launch/ddp_train")
    a = p.parse_args()
    common = ["--model", a.model, "--image-size", "64", "--batch-size", "4", "--num-classes", "10", "--threads", "2",
              "--lr", "0.01"]
    with tempfile.TemporaryDirectory() as tmp:
        ours = os.path.join(tmp, "ours.safetensors")
        subprocess.run([a.binary, *common, "--steps", "3", "--save-weights", ours], check=True,
                       stdout=subprocess.DEVNULL)
        model = getattr(torchvision.models, a.model)(num_classes=10)
        model.load_state_dict(read_safetensors(ours), strict=True)
        print(f"1. torch load_state_dict(strict=True) accepted ddp_train's {a.model} "
              f"({len(model.state_dict())} entries, bn1.num_batches_tracked = {model.bn1.num_batches_tracked.item()})")

        torch_model = getattr(torchvision.models, a.model)(num_classes=10)
        torch_model.train()
        with torch.no_grad():
            torch_model(torch.randn(4, 3, 64, 64))  # moves BN statistics and num_batches_tracked
        theirs = os.path.join(tmp, "theirs.safetensors")
        write_safetensors(torch_model.state_dict(), theirs)
        resaved = os.path.join(tmp, "resaved.safetensors")
        subprocess.run([a.binary, *common, "--steps", "1", "--load-weights", theirs, "--save-weights", resaved,
                        "--lr", "1e-12"], check=True, stdout=subprocess.DEVNULL)
        back = read_safetensors(resaved)
        original = torch_model.state_dict()
        worst = max((back[k].double() - original[k].double()).abs().max().item()
                    for k in original if not k.endswith("running_mean") and not k.endswith("running_var")
                    and not k.endswith("num_batches_tracked"))
        print(f"2. ddp_train --load-weights accepted torch's {a.model}; after one step at lr 1e-12 the parameters "
              f"differ from torch's by at most {worst:.2e}; num_batches_tracked {original['bn1.num_batches_tracked'].item()}"
              f" -> {back['bn1.num_batches_tracked'].item()}")
        if worst > 1e-6 or back["bn1.num_batches_tracked"].item() != original["bn1.num_batches_tracked"].item() + 1:
            sys.exit("FAILED")
    print("ok")


if __name__ == "__main__":
    main()
