#!/usr/bin/env python3
"""Writes runtime/testdata/pytorch_golden.safetensors from torch tensors.

The reader test checks that ddp_train reads what PyTorch-side tooling writes.
Debian has no `safetensors` package, so this follows the format's reference
writer (safetensors.torch.save_file) byte for byte in layout: tensors ordered
by dtype alignment (largest first) then name, an 8-byte little-endian header
length, a JSON header with "__metadata__", padded with spaces to a multiple of
8 bytes, then each tensor's little-endian bytes.

Run with Debian's python3 (python3-torch): /usr/bin/python3 tests/golden/make_safetensors_golden.py
"""
import json
import os
import struct
import sys

import torch

NAMES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8",
}


def save_file(tensors, path, metadata):
    order = sorted(tensors.items(), key=lambda kv: (-kv[1].element_size(), kv[0]))
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name, t in order:
        data = t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "..", "runtime", "testdata", "pytorch_golden.safetensors")
    bn = torch.nn.BatchNorm2d(2)
    bn.num_batches_tracked.fill_(42)
    tensors = {
        "layer1.0.conv1.weight": (torch.arange(6, dtype=torch.float32) * 0.25 - 0.5).reshape(2, 3, 1, 1),
        "bn1.num_batches_tracked": bn.num_batches_tracked,  # 0-dimensional int64, as in a state_dict
        "bn1.running_var": bn.running_var,
        "half": torch.tensor([1.0, -1.0 / 3.0], dtype=torch.float16),
        "bfloat": torch.tensor([3.14159, 0.0], dtype=torch.bfloat16),
        "input_ids": torch.tensor([[101, 2023, 102], [101, 0, 30522]], dtype=torch.int64),
        "double": torch.tensor([0.1], dtype=torch.float64),
        "mask": torch.tensor([1, 0, 255], dtype=torch.uint8),
        "counts": torch.tensor([-5, 7], dtype=torch.int32),
    }
    assert tensors["bn1.num_batches_tracked"].dim() == 0
    save_file(tensors, out, {"format": "pt"})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
