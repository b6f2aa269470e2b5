"""Training images through each framework's own input pipeline (`data: {kind: images}`).

A prepared dataset (harness/images.py `prepare`: the ImageFolder tree, its TFRecord shards and its
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

import math

import numpy as np

from harness.images import DataError  # a training image that cannot be used, named

MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)
AREA = (0.08, 1.0)
ASPECT = (3 / 4, 4 / 3)
PREFETCH = 2  # batches made ahead by each loader (per worker for PyTorch, as its DataLoader counts)
SHUFFLE = 1024  # TensorFlow's shuffle buffer, in records (bounded: ImageNet's would not fit in memory)


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
        aspect = width / height
        w, h = (
            (width, round(width / ASPECT[1]))
            if aspect > ASPECT[1]
            else (round(height * ASPECT[0]), height)
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


class TorchImages:
    """A map-style dataset of the tree for PyTorch's DataLoader: item (epoch, index) is that image
    decoded, cropped, resized and flipped, as an HWC uint8 array, with its label. The worker sends
    bytes (a quarter of float32's); the rank normalizes each batch in one vectorized step
    (`_normalized`), as PyTorch's and NVIDIA's fast ImageNet loaders do."""

    def __init__(self, files, labels, image_size, seed, augment=True):
        self.files, self.labels, self.size, self.seed, self.augment = files, labels, image_size, seed, augment

    def __len__(self):
        return len(self.files)

    def __getitem__(self, key):
        from PIL import Image

        epoch, index = key
        rng = np.random.default_rng([self.seed, epoch, index])
        img = decode_pil(self.files[index])
        box = crop_box(rng, *img.size, augment=self.augment)
        img = img.resize((self.size, self.size), Image.BILINEAR, box=box)
        if self.augment and rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        return np.asarray(img, dtype=np.uint8), self.labels[index]


class _Epochs:
    """The sampler: (epoch, index) keys of rank's shard, epoch after epoch, without end."""

    def __init__(self, n, rank, size, seed):
        self.n, self.rank, self.size, self.seed = n, rank, size, seed

    def __iter__(self):
        epoch = 0
        while True:
            for i in shard(self.n, self.rank, self.size, epoch, self.seed):
                yield epoch, int(i)
            epoch += 1


def torch_loader(dataset, rank, size, batch_size, image_size, workers, seed, pin=False, augment=True):
    import torch

    images = TorchImages(dataset.files, dataset.labels, image_size, seed, augment)
    loader = torch.utils.data.DataLoader(
        images,
        batch_size=batch_size,
        sampler=_Epochs(len(images), rank, size, seed),
        num_workers=workers,
        prefetch_factor=PREFETCH,
        pin_memory=pin,
        persistent_workers=True,
        multiprocessing_context="forkserver",
    )
    return _normalized(iter(loader))


def _normalized(batches):
    """(float32 NCHW images normalized, labels) from the workers' uint8 NHWC batches: the NCHW view
    of NHWC memory is PyTorch's channels_last."""
    import torch

    mean, std = torch.tensor(MEAN).view(1, 1, 1, 3), torch.tensor(STD).view(1, 1, 1, 3)
    for x, y in batches:
        yield ((x.float() - mean) / std).permute(0, 3, 1, 2), y


def tf_dataset(dataset, rank, size, batch_size, image_size, workers, seed, augment=True):
    import tensorflow as tf

    files = [str(f) for f in dataset.tfrecords]
    if len(files) < size:
        raise DataError(
            f"{dataset.folder}: {len(files)} TFRecord shards for {size} ranks (each rank reads "
            "whole shards: prepare the dataset with at least as many shards as ranks)"
        )
    mine = files[rank::size]
    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(record):
        example = tf.io.parse_single_example(record, features)
        return transform(example["image/encoded"]), example["image/class/label"]

    transform = tf_transform(image_size, seed, augment)
    ds = tf.data.TFRecordDataset(mine)
    if augment:
        ds = ds.shuffle(min(SHUFFLE, len(dataset.files)), seed=seed, reshuffle_each_iteration=True)
    ds = ds.repeat().map(parse, num_parallel_calls=workers).batch(batch_size, drop_remainder=True)
    ds = ds.prefetch(PREFETCH)
    options = tf.data.Options()
    options.threading.private_threadpool_size = workers
    options.threading.max_intra_op_parallelism = 1
    return ds.with_options(options)


def tf_transform(image_size, seed, augment=True):
    """TensorFlow's per-image work, from the JPEG's bytes to the normalized HWC float32 image. In
    TensorFlow's own ImageNet recipe's order: the crop window decoded and flipped as bytes, then
    resized (a quarter of the memory a float32 flip touches)."""
    import tensorflow as tf

    mean, scale = tf.constant(MEAN), tf.constant([1 / s for s in STD])

    def transform(data):
        shape = tf.io.extract_jpeg_shape(data)
        if augment:
            begin, crop, _ = tf.image.sample_distorted_bounding_box(
                shape,
                tf.zeros([1, 0, 4]),
                area_range=AREA,
                aspect_ratio_range=ASPECT,
                max_attempts=10,
                use_image_if_no_bounding_boxes=True,
                seed=seed,
            )
            window = tf.stack([begin[0], begin[1], crop[0], crop[1]])
        else:
            side = tf.minimum(shape[0], shape[1])
            window = tf.stack([(shape[0] - side) // 2, (shape[1] - side) // 2, side, side])
        img = tf.io.decode_and_crop_jpeg(data, window, channels=3, dct_method="INTEGER_ACCURATE")
        if augment:
            img = tf.image.random_flip_left_right(img, seed=seed)
        img = tf.image.resize(img, [image_size, image_size], method="bilinear", antialias=True)
        return (img - mean) * scale

    return transform


def mx_iter(dataset, rank, size, batch_size, image_size, workers, seed, augment=True):
    import mxnet as mx

    common = dict(
        path_imgrec=str(dataset.recordio[0]),
        path_imgidx=str(dataset.recordio[1]),
        data_shape=(3, image_size, image_size),
        batch_size=batch_size,
        part_index=rank,
        num_parts=size,
        preprocess_threads=workers,
        prefetch_buffer=PREFETCH,
        seed=seed,
        inter_method=3,
        round_batch=True,
        mean_r=MEAN[0],
        mean_g=MEAN[1],
        mean_b=MEAN[2],
        std_r=STD[0],
        std_g=STD[1],
        std_b=STD[2],
        verbose=False,
    )
    if augment:
        return mx.io.ImageRecordIter(
            shuffle=True,
            random_resized_crop=True,
            min_random_area=AREA[0],
            max_random_area=AREA[1],
            min_aspect_ratio=ASPECT[0],
            max_aspect_ratio=ASPECT[1],
            rand_mirror=True,
            **common,
        )
    return mx.io.ImageRecordIter(shuffle=False, resize=image_size, **common)


DESCRIPTION = {
    "torch": "torch.utils.data.DataLoader, worker processes, Pillow decode",
    "tensorflow": "tf.data TFRecordDataset, parallel map (private thread pool), decode_and_crop_jpeg",
    "mxnet": "mx.io.ImageRecordIter, preprocess threads, OpenCV decode",
}


def stream(framework, dataset, rank, size, batch_size, image_size, workers, seed, pin=False):
    """The rank's endless stream of (images, labels) batches in its framework's own tensors."""
    if framework == "torch":
        return torch_loader(dataset, rank, size, batch_size, image_size, workers, seed, pin=pin)
    if framework == "tensorflow":
        return iter(tf_dataset(dataset, rank, size, batch_size, image_size, workers, seed))
    return MxBatches(mx_iter(dataset, rank, size, batch_size, image_size, workers, seed))


class MxBatches:
    """ImageRecordIter as an endless stream of (data, label) NDArrays (it ends at each epoch)."""

    def __init__(self, it):
        self.it = it

    def __iter__(self):
        return self

    def __next__(self):
        try:
            batch = self.it.next()
        except StopIteration:
            self.it.reset()
            batch = self.it.next()
        return batch.data[0], batch.label[0]
