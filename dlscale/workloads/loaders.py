"""Each framework's own input pipeline, a rank reading its shard; per image: decode -> random-resized crop (the
ResNet ImageNet recipe), bilinear -> flip with probability 1/2 -> normalized float32 -> the framework's layout."""

import dataclasses
import math

import numpy as np

from dlscale.workloads import frameworks
from dlscale.workloads.images import DataError  # a training image that cannot be used, named

MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)
AREA = (0.08, 1.0)
ASPECT = (3 / 4, 4 / 3)
PREFETCH = 2  # batches made ahead by each loader (per worker for PyTorch, as its DataLoader counts)
SHUFFLE = 1024  # TensorFlow's shuffle buffer, in records (bounded: ImageNet's would not fit in memory)


@dataclasses.dataclass(frozen=True)
class Feed:
    """One rank's loader: `rank`'s shard of `size`; `pin`: into pinned memory; `augment` False: evaluation's."""

    dataset: object
    rank: int
    size: int
    batch_size: int
    image_size: int
    workers: int = 1
    seed: int = 0
    pin: bool = False
    augment: bool = True


def shard(n, rank, size, epoch, seed):
    """Rank's image indices in one epoch: a permutation seeded (seed, epoch), split rank::size."""
    return np.random.default_rng([seed, epoch]).permutation(n)[rank::size]


def crop_box(rng, width, height, augment=True):
    """(left, top, right, bottom): random-resized by torchvision's rule (10 tries, else centred), or a centre square."""
    if augment:
        area = width * height
        for _ in range(10):
            target = area * rng.uniform(*AREA)
            aspect = math.exp(rng.uniform(math.log(ASPECT[0]), math.log(ASPECT[1])))
            w, h = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
            if 0 < w <= width and 0 < h <= height:
                left, top = rng.integers(0, width - w + 1), rng.integers(0, height - h + 1)
                return left, top, left + w, top + h
        aspect = width / height  # clamped into ASPECT: a wide image keeps its height, a tall one its width
        if aspect > ASPECT[1]:
            w, h = round(height * ASPECT[1]), height
        elif aspect < ASPECT[0]:
            w, h = width, round(width / ASPECT[0])
        else:
            w, h = width, height
    else:
        w = h = min(width, height)
    left, top = (width - w) // 2, (height - h) // 2
    return left, top, left + w, top + h


def decode_pil(path):
    """Pillow's decode of one file as RGB, the error naming the file."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            img.load()
            return img if img.mode == "RGB" else img.convert("RGB")
    except (OSError, ValueError, SyntaxError) as e:
        raise DataError(f"{path}: cannot decode: {e}") from e


def stream(framework, feed):
    """The rank's endless stream of (images, labels) batches, from its framework's loader.py."""
    return frameworks.module(framework, "loader").stream(feed)
