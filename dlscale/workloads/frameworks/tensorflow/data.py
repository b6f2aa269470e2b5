"""The prepared dataset in TensorFlow's own format (dlscale/workloads/images.py `prepare` writes every
framework's): TFRecord shards of tf.train.Examples."""

from pathlib import Path

from dlscale.workloads.images import listed

FORMAT = "tfrecords"  # its key in the dataset's manifest.json
COMMAND = "tfrecord"  # python -m dlscale.workloads.images tfrecord DIR OUT [--shards K]
FOLDER = "tfrecord"  # where prepare writes it, under the dataset's folder
SHARDED = True  # each rank reads whole shards: at least as many shards as ranks


def write(source, out, shards=8):
    """TFRecord shards OUT/train-<k>-of-<K>.tfrecord of tf.train.Examples (image/encoded: the file's
    bytes, image/class/label: its class index); sample j goes to shard j mod K."""
    import tensorflow as tf

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
