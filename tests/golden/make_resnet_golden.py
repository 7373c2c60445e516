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
  /usr/bin/python3 tests/golden/make_resnet_golden.py
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

from golden_io import write_golden

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


# Each case: model, batch, micro-batches per step (the dataset holds exactly
# one global batch, so every step sees the same samples), and options.
CASES = {
    "resnet18": dict(model="resnet18", batch=4, accumulation=1),
    "resnet50": dict(model="resnet50", batch=4, accumulation=1),
    # Accumulation, label smoothing, clipping that bites, Nesterov, and no
    # weight decay on BN and bias parameters.
    "resnet18_options": dict(model="resnet18", batch=4, accumulation=2, label_smoothing=0.1, clip_grad_norm=0.5,
                             nesterov=True, decay_bn_bias=False),
}
IMAGE_SIZE, NUM_CLASSES = 64, 10
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


def run(model, batch, accumulation, label_smoothing=0.0, clip_grad_norm=0.0, nesterov=False, decay_bn_bias=True):
    torch.manual_seed(0)
    net = getattr(torchvision.models, model)(num_classes=NUM_CLASSES, zero_init_residual=True).double()
    net.load_state_dict(start_state(net), strict=True)
    net.train()
    samples = batch * accumulation
    n = samples * 3 * IMAGE_SIZE * IMAGE_SIZE
    x = as_f32_then_f64(uniform("images", n)).reshape(samples, 3, IMAGE_SIZE, IMAGE_SIZE)
    y = torch.from_numpy((bits("labels", samples) % np.uint64(NUM_CLASSES)).astype(np.int64))
    if decay_bn_bias:
        groups = [{"params": list(net.parameters()), "weight_decay": WEIGHT_DECAY}]
    else:
        named = list(net.named_parameters())
        no_decay = [p for k, p in named if p.dim() == 1]  # BN weights and biases, and every bias
        decay = [p for k, p in named if p.dim() != 1]
        groups = [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.SGD(groups, lr=LR, momentum=MOMENTUM, nesterov=nesterov)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        step_loss = 0.0
        for m in range(accumulation):
            part = slice(m * batch, (m + 1) * batch)
            loss = F.cross_entropy(net(x[part]), y[part], label_smoothing=label_smoothing)
            (loss / accumulation).backward()
            step_loss += loss.item() / accumulation
        losses.append(step_loss)
        if clip_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(net.parameters(), clip_grad_norm)
        opt.step()
    params = dict(net.named_parameters())
    checks = {k: {"abs_sum": params[k].abs().sum().item(), "square_sum": (params[k] ** 2).sum().item()}
              for k in CHECKED if k in params}
    return dict(model=model, batch=batch, accumulation_steps=accumulation, image_size=IMAGE_SIZE,
                num_classes=NUM_CLASSES, lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY,
                label_smoothing=label_smoothing, clip_grad_norm=clip_grad_norm, nesterov=nesterov,
                decay_bn_bias=decay_bn_bias, losses=losses, parameters_after=checks)


def main():
    torch.set_num_threads(2)
    golden = {
        "generator_check": {"stream": "check", "uniform": uniform("check", 4).tolist(),
                            "bits": [str(b) for b in bits("check", 2)]},
        "cases": {name: run(**case) for name, case in CASES.items()},
    }
    write_golden("resnet_golden.json", golden, indent=1)


if __name__ == "__main__":
    main()
