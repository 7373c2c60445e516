#!/usr/bin/env python3
"""Writes tests/golden/image_transforms.json: what torchvision (on PIL
images) makes of a small generated RGB image for given crop boxes
(transforms.functional.resized_crop, bilinear: RandomResizedCrop once its
box is drawn) and for the evaluation transform (Resize(round(size *
256 / 224)) then CenterCrop(size)), as 8-bit pixels before ToTensor and
Normalize. runtime/data/image_transforms_test.cc holds ddp_train's resampler
to these, within PIL's rounding.

The image: pixel (x, y) channel c is (7x + 13y + 50c + (x*y) % 17) % 256.

Run with Debian's python3: /usr/bin/python3 tests/golden/make_transform_golden.py
"""
import numpy as np
from PIL import Image
import torchvision.transforms as T
import torchvision.transforms.functional as F

from golden_io import write_golden

WIDTH, HEIGHT = 53, 37
# (x, y, width, height, output size): a downscale of the whole image, crops
# smaller and larger than the output, and elongated ones.
CROPS = [
    (0, 0, 53, 37, 16),
    (5, 3, 30, 20, 16),
    (10, 10, 8, 8, 16),
    (1, 2, 50, 33, 12),
    (20, 0, 9, 37, 10),
]
EVAL_SIZES = [16, 24]


def image():
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    planes = [(7 * x + 13 * y + 50 * c + (x * y) % 17) % 256 for c in range(3)]
    return np.stack(planes, axis=-1).astype(np.uint8)


def main():
    img = Image.fromarray(image(), "RGB")
    out = {"width": WIDTH, "height": HEIGHT, "crops": [], "eval": []}
    for x, y, w, h, size in CROPS:
        got = F.resized_crop(img, y, x, h, w, [size, size], interpolation=T.InterpolationMode.BILINEAR)
        out["crops"].append({"box": [x, y, w, h], "size": size, "pixels": np.asarray(got).flatten().tolist()})
    for size in EVAL_SIZES:
        short = (size * 256 + 112) // 224
        t = T.Compose([T.Resize(short, interpolation=T.InterpolationMode.BILINEAR), T.CenterCrop(size)])
        out["eval"].append({"size": size, "pixels": np.asarray(t(img)).flatten().tolist()})
    write_golden("image_transforms.json", out, separators=(",", ":"))


if __name__ == "__main__":
    main()
