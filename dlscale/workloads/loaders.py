"""Training images through each framework's own input pipeline (`data: {kind: images}`).

A prepared dataset (dlscale/workloads/images.py `prepare`: the ImageFolder tree, its TFRecord shards and its
indexed RecordIO, and manifest.json) is read by every rank from its own shard. Every loader does
the same work per image, in the same order:
  decode the JPEG (RGB) -> random-resized crop (8-100% of the area, aspect 3/4 to 4/3, the ImageNet
  recipe of ResNet training) resized bilinearly to image_size x image_size -> horizontal flip with
  probability 1/2 -> float32, minus ImageNet's channel mean, divided by its standard deviation (on
  0-255 values) -> the framework's layout;
and `workers` decode in parallel, with `PREFETCH` batches made ahead:
- torch: `torch.utils.data.DataLoader` with `workers` worker processes over the tree, started by a
  fork server rather than forked from the MPI rank (Horovod's advice: InfiniBand stacks are not
  fork-safe). Pillow's libjpeg-turbo decodes, and `Image.resize(box=...)` crops and resizes in one
  antialiased pass. The workers send uint8 images (pinned memory on the GPU), and the rank
  normalizes each batch in one vectorized step;
- tensorflow: `tf.data` over the rank's TFRecord shards, a parallel map on a private pool of
  `workers` threads (`decode_and_crop_jpeg` decodes the crop window only: TensorFlow's own ImageNet
  recipe; `INTEGER_ACCURATE` IDCT as libjpeg's default), `resize(antialias=True)`;
- mxnet: `mx.io.ImageRecordIter` over the RecordIO with `preprocess_threads=workers` (OpenCV's
  libjpeg-turbo decodes; area interpolation, OpenCV's antialiased shrink), partitioned by rank.
Shards: every epoch the rank's images are all the images once across ranks (PyTorch: a seeded
permutation of the epoch split rank::size; TensorFlow: the TFRecord shards split rank::size, so
shards >= ranks; MXNet: `part_index`/`num_parts`, ImageRecordIter's byte-range partitions). Batches
run on across epochs (the stream never ends).

`augment=False` is the deterministic evaluation transform (shorter side resized to image_size,
centre crop) used to test that the three decode the same image to the same tensor.
"""

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
    """What one rank's loader reads and makes: the prepared `dataset` (images.Dataset), this `rank`'s
    shard of `size`, batches of `batch_size` images `image_size` pixels a side, decoded by `workers`,
    shuffled by `seed`; `pin`: into pinned host memory (a GPU's); `augment`: the training transform
    (False: the evaluation transform, for tests)."""

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
    """The indices of rank's images in one epoch: a permutation seeded by (seed, epoch), split
    rank::size, so the ranks together read each image once per epoch."""
    return np.random.default_rng([seed, epoch]).permutation(n)[rank::size]


def crop_box(rng, width, height, augment=True):
    """(left, top, right, bottom) of the crop: random-resized (torchvision's rule: 10 tries at a
    random area and log-uniform aspect, else the centre crop at the nearest allowed aspect), or the
    centre square for evaluation."""
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
        w, h = (
            (round(height * ASPECT[1]), height)
            if aspect > ASPECT[1]
            else (width, round(width / ASPECT[0]))
            if aspect < ASPECT[0]
            else (width, height)
        )
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
    """The rank's endless stream of (images, labels) batches of the Feed in its framework's own
    tensors, from its own input pipeline (dlscale/workloads/frameworks/<name>/loader.py)."""
    return frameworks.module(framework, "loader").stream(feed)
