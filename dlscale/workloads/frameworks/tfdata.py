"""TFRecord shards (`write`) and a rank's tf.data pipeline over them (`records`), as TensorFlow and JAX read them.
The dlscale imports in its functions are deferred: JAX's declarations import this module where no numpy is."""

from pathlib import Path

MODULES = ("tensorflow",)  # what it imports: a framework that reads the format needs TensorFlow
FORMAT = "tfrecords"  # its key in the dataset's manifest.json
COMMAND = "tfrecord"  # python -m dlscale.workloads.images tfrecord DIR OUT [--shards K]
FOLDER = "tfrecord"  # where prepare writes it, under the dataset's folder
SHARDED = True  # each rank reads whole shards: at least as many shards as ranks


def write(source, out, shards=8):
    """TFRecord shards OUT/train-<k>-of-<K>.tfrecord of tf.train.Examples (image/encoded: the file's
    bytes, image/class/label: its class index); sample j goes to shard j mod K."""
    import tensorflow as tf

    from dlscale.workloads.images import listed  # deferred: see the module's docstring

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    writers = [tf.io.TFRecordWriter(str(out / f"train-{k:05d}-of-{shards:05d}.tfrecord")) for k in range(shards)]
    try:
        for j, (path, label) in enumerate(listed(source)):
            feature = {
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[path.read_bytes()])),
                "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            }
            writers[j % shards].write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    finally:
        for w in writers:
            w.close()
    return sorted(out.glob("*.tfrecord"))


def records(feed):
    """The tf.data pipeline of a loaders.Feed: its rank's shards, decoded, batched, prefetched."""
    import tensorflow as tf

    from dlscale.workloads.loaders import PREFETCH, SHUFFLE, DataError  # deferred: see the module's docstring

    dataset, size = feed.dataset, feed.size
    files = [str(f) for f in dataset.form(FORMAT)]
    if len(files) < size:
        raise DataError(
            f"{dataset.folder}: {len(files)} TFRecord shards for {size} ranks (each rank reads "
            "whole shards: prepare the dataset with at least as many shards as ranks)"
        )
    mine = files[feed.rank :: size]
    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(record):
        example = tf.io.parse_single_example(record, features)
        return transform(example["image/encoded"]), example["image/class/label"]

    transform = image_transform(feed.image_size, feed.seed, feed.augment)
    ds = tf.data.TFRecordDataset(mine)
    if feed.augment:
        ds = ds.shuffle(min(SHUFFLE, len(dataset.files)), seed=feed.seed, reshuffle_each_iteration=True)
    ds = ds.repeat().map(parse, num_parallel_calls=feed.workers).batch(feed.batch_size, drop_remainder=True)
    ds = ds.prefetch(PREFETCH)
    options = tf.data.Options()
    options.threading.private_threadpool_size = feed.workers
    options.threading.max_intra_op_parallelism = 1
    return ds.with_options(options)


def image_transform(image_size, seed, augment=True):
    """The JPEG's bytes to the normalized HWC float32 image, in TensorFlow's ImageNet recipe's order: the crop
    window decoded and flipped as bytes, then resized (a quarter of the memory a float32 flip touches)."""
    import tensorflow as tf

    from dlscale.workloads.loaders import AREA, ASPECT, MEAN, STD  # deferred: see the module's docstring

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
