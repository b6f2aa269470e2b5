"""PyTorch's input pipeline over a prepared dataset (the shared recipe: dlscale/workloads/loaders.py)."""

import numpy as np

from dlscale.workloads.loaders import MEAN, PREFETCH, STD, crop_box, decode_pil, shard


class TorchImages:
    """DataLoader's dataset: item (epoch, index) is that image, augmented, as HWC uint8, and its label. Workers
    send bytes (a quarter of float32's); the rank normalizes each batch (`_normalized`), as fast loaders do."""

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


def stream(feed):
    """The rank's endless stream of (images, labels) batches of a loaders.Feed (pinned memory for a GPU)."""
    import torch

    images = TorchImages(feed.dataset.files, feed.dataset.labels, feed.image_size, feed.seed, feed.augment)
    loader = torch.utils.data.DataLoader(
        images,
        batch_size=feed.batch_size,
        sampler=_Epochs(len(images), feed.rank, feed.size, feed.seed),
        num_workers=feed.workers,
        prefetch_factor=PREFETCH,
        pin_memory=feed.pin,
        persistent_workers=True,
        multiprocessing_context="forkserver",
    )
    return _normalized(iter(loader))


def _normalized(batches):
    """(normalized float32 NCHW images, labels) of uint8 NHWC batches (their NCHW view: channels_last)."""
    import torch

    mean, std = torch.tensor(MEAN).view(1, 1, 1, 3), torch.tensor(STD).view(1, 1, 1, 3)
    for x, y in batches:
        yield ((x.float() - mean) / std).permute(0, 3, 1, 2), y
