"""MXNet's input pipeline over a prepared dataset: ImageRecordIter over its RecordIO."""

from dlscale.workloads.frameworks.mxnet.data import FORMAT
from dlscale.workloads.loaders import AREA, ASPECT, MEAN, PREFETCH, STD


def record_iter(feed):
    """ImageRecordIter over a loaders.Feed's RecordIO, partitioned by rank."""
    import mxnet as mx

    common = dict(
        path_imgrec=str(feed.dataset.form(FORMAT)[0]),
        path_imgidx=str(feed.dataset.form(FORMAT)[1]),
        data_shape=(3, feed.image_size, feed.image_size),
        batch_size=feed.batch_size,
        part_index=feed.rank,
        num_parts=feed.size,
        preprocess_threads=feed.workers,
        prefetch_buffer=PREFETCH,
        seed=feed.seed,
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
    if feed.augment:
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
    return mx.io.ImageRecordIter(shuffle=False, resize=feed.image_size, **common)


class Batches:
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


def stream(feed):
    """The rank's endless stream of (images, labels) batches of a loaders.Feed (ImageRecordIter places them itself)."""
    return Batches(record_iter(feed))
