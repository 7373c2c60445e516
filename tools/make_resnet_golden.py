#!/usr/bin/env python3
"""Writes tests/golden/resnet_golden.json: PyTorch's per-step losses for
ResNet-18 and ResNet-50 from a fixed start, computed in float64.

Both sides build the same start without shipping weights: every parameter
and the batch come from a counter-based generator (SplitMix64 over FNV-1a
name streams) that runtime/testing/portable_random.cc computes bit for bit.
The start is torchvision's zero_init_residual=True structure; conv weights
are uniform with kaiming-normal's variance (fan_out), fc uniform with
PyTorch's default bound, BN as torchvision initializes it. Training is plain
SGD with momentum, lr 0.02, on one repeated batch.

Run with Debian's python3 (python3-torch, python3-torchvision):
  /usr/bin/python3 tools/make_resnet_golden.py
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

M1 = np.uint64(0x9E3779B97F4A7C15)
M2 = np.uint64(0xBF58476D1CE4E5B9)
M3 = np.uint64(0x94D049BB133111EB)


def splitmix64(z):
    with np.errstate(over="ignore"):
        z = z + M1
        z = (z ^ (z >> np.uint64(30))) * M2
        z = (z ^ (z >> np.uint64(27))) * M3
        return z ^ (z >> np.uint64(31))


def stream(name):
    h = 0xCBF29CE484222325
    for c in name.encode():
        h ^= c
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return np.uint64(h)


def bits(name, n):
    with np.errstate(over="ignore"):
        return splitmix64(splitmix64(stream(name)) + np.arange(n, dtype=np.uint64))


def uniform(name, n):
    return (bits(name, n) >> np.uint64(11)).astype(np.float64) * 2.0 ** -52 - 1.0


def as_f32_then_f64(values):
    return torch.from_numpy(values.astype(np.float32).astype(np.float64))


CASES = {
    "resnet18": dict(batch=4, image_size=64, num_classes=10),
    "resnet50": dict(batch=4, image_size=64, num_classes=10),
}
LR, MOMENTUM, WEIGHT_DECAY, STEPS = 0.02, 0.9, 1e-4, 4
CHECKED = ["conv1.weight", "layer1.0.conv1.weight", "layer4.1.bn2.weight", "fc.weight", "fc.bias"]


def start_state(model):
    state = {}
    for name, t in model.state_dict().items():
        if name.startswith("fc."):
            bound = 1.0 / math.sqrt(model.fc.in_features)
            state[name] = as_f32_then_f64(uniform(name, t.numel()) * bound).reshape(t.shape)
        elif t.dim() == 4:
            fan_out = t.shape[0] * t.shape[2] * t.shape[3]
            state[name] = as_f32_then_f64(uniform(name, t.numel()) * math.sqrt(6.0 / fan_out)).reshape(t.shape)
        else:
            state[name] = t.clone()  # BN as torchvision initializes it
    return state


def run(name, batch, image_size, num_classes):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(num_classes=num_classes, zero_init_residual=True).double()
    model.load_state_dict(start_state(model), strict=True)
    model.train()
    n = batch * 3 * image_size * image_size
    x = as_f32_then_f64(uniform("images", n)).reshape(batch, 3, image_size, image_size)
    y = torch.from_numpy((bits("labels", batch) % np.uint64(num_classes)).astype(np.int64))
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        losses.append(loss.item())
        loss.backward()
        opt.step()
    params = dict(model.named_parameters())
    checks = {k: {"abs_sum": params[k].abs().sum().item(), "square_sum": (params[k] ** 2).sum().item()}
              for k in CHECKED if k in params}
    return dict(batch=batch, image_size=image_size, num_classes=num_classes, lr=LR, momentum=MOMENTUM,
                weight_decay=WEIGHT_DECAY, losses=losses, parameters_after=checks)


def main():
    torch.set_num_threads(2)
    golden = {
        "generator_check": {"stream": "check", "uniform": uniform("check", 4).tolist(),
                            "bits": [str(b) for b in bits("check", 2)]},
        "models": {name: run(name, **case) for name, case in CASES.items()},
    }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "resnet_golden.json")
    with open(out, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.normpath(out)}")


if __name__ == "__main__":
    main()
