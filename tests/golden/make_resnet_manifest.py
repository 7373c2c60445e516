#!/usr/bin/env python3
"""Writes tests/golden/torchvision_state_dicts.json: the name, dtype and shape
of every state_dict entry of torchvision's ResNets, in order. The state-dict
test holds ddp_train's models to it, so torch's load_state_dict(strict=True)
accepts what ddp_train saves and ddp_train accepts what torch saves.

Run with Debian's python3: /usr/bin/python3 tests/golden/make_resnet_manifest.py
"""
import torchvision

from golden_io import write_golden

DTYPES = {"torch.float32": "f32", "torch.int64": "i64"}


def main():
    manifest = {}
    for name in ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152"]:
        model = getattr(torchvision.models, name)()
        manifest[name] = [[k, DTYPES[str(v.dtype)], list(v.shape)] for k, v in model.state_dict().items()]
    write_golden("torchvision_state_dicts.json", manifest, separators=(",", ":"))


if __name__ == "__main__":
    main()
