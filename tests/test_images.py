"""The training set made here: deterministic, shaped like ImageNet's, photograph-like in its
spectrum, and the same samples in TFRecord and RecordIO as in the ImageFolder tree."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from dlscale.workloads import frameworks, images
from tests.conftest import ROOT, env_record


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return images.make(tmp_path_factory.mktemp("data") / "train", images=12, classes=3, seed=7)


def test_the_tree_is_the_same_when_made_again(tree, tmp_path):
    again = images.make(tmp_path / "train", images=12, classes=3, seed=7, processes=1)  # fixture: one per core
    assert images.content_hash(again) == images.content_hash(tree)
    other = images.make(tmp_path / "other", images=12, classes=3, seed=8)
    assert images.content_hash(other) != images.content_hash(tree)


def test_imagefolder_layout_and_labels(tree):
    samples = images.samples(tree)
    assert len(samples) == 12 and sorted({label for _, label in samples}) == [0, 1, 2]
    assert all(p.parent.name == images.class_name(label) for p, label in samples)


def test_sizes_and_files_are_shaped_like_imagenets():
    made = [images.image(0, i) for i in range(40)]
    kb = np.mean([len(data) for data, _, _ in made]) / 1e3
    widths, heights = zip(*(size for _, size, _ in made))
    assert 85 < kb < 140, kb  # ImageNet's training JPEGs: about 110 KB
    assert 350 < np.mean(widths) < 480 and 300 < np.mean(heights) < 400
    assert all(images.QUALITY[0] <= q <= images.QUALITY[1] for _, _, q in made)
    first = Image.open(io.BytesIO(made[0][0]))
    assert first.format == "JPEG" and first.size == made[0][1] and first.mode == "RGB"


def test_the_spectrum_falls_like_a_photographs():
    """Natural images' power falls as about 1/f^2 (slope -2 on log-log); white noise is flat (0)
    and flat colour has no power at all above zero frequency."""
    grey = np.asarray(Image.open(io.BytesIO(images.image(0, 1)[0])).convert("L"), np.float64)
    power = np.abs(np.fft.fftshift(np.fft.fft2(grey - grey.mean()))) ** 2
    h, w = power.shape
    y, x = np.indices(power.shape)
    radius = np.hypot(y - h // 2, x - w // 2).astype(int)
    radial = np.bincount(radius.ravel(), power.ravel()) / np.bincount(radius.ravel())
    f = np.arange(4, min(h, w) // 2)
    slope = np.polyfit(np.log(f), np.log(radial[f]), 1)[0]
    assert -3.0 < slope < -1.5, slope


def test_tfrecord_shards_hold_every_sample_once(tree, tmp_path):
    import tensorflow as tf

    shards = frameworks.module("tensorflow", "data").write(tree, tmp_path / "tfrecord", shards=4)
    assert len(shards) == 4
    spec = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }
    got = [
        (ex["image/encoded"].numpy(), int(ex["image/class/label"]))
        for ex in tf.data.TFRecordDataset([str(s) for s in shards]).map(lambda r: tf.io.parse_single_example(r, spec))
    ]
    want = [(p.read_bytes(), label) for p, label in images.samples(tree)]
    assert sorted(got) == sorted(want)


def test_recordio_holds_every_sample_in_order(tree, tmp_path):
    from mxnet import recordio

    rec, idx = frameworks.module("mxnet", "data").write(tree, tmp_path / "train")
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    samples = images.samples(tree)
    assert sorted(reader.keys) == list(range(len(samples)))
    for j, (path, label) in enumerate(samples):
        header, data = recordio.unpack(reader.read_idx(j))
        assert (data, header.label, header.id) == (path.read_bytes(), label, j)
    reader.close()


@pytest.mark.parametrize("framework", list(images.formats()))
def test_a_format_written_in_its_frameworks_own_python_is_the_one_written_here(framework, tree, tmp_path):
    """The pipeline writes each record format in its framework's own Python (a process of that
    Python's, handed prepare's list of files in a file it removes after): the same files, of the
    same sizes, as written here, holding every image's bytes (not byte for byte: a
    tf.train.Example's features serialize in an order of the process's own), and nothing else."""
    from dlscale.environment import build

    here = images.write_format(framework, images.samples(tree), tmp_path / "here" / "out", 2)
    python = str(build.build(quiet=True, own=framework) / "bin" / "python")
    apart = images.write_format(framework, images.samples(tree), tmp_path / "apart" / "out", 2, python)
    assert [p.name for p in apart] == [p.name for p in here]
    assert [p.stat().st_size for p in apart] == [p.stat().st_size for p in here]
    written = b"".join(p.read_bytes() for p in apart)
    assert all(path.read_bytes() in written for path, _ in images.samples(tree))
    assert sorted(p.name for p in (tmp_path / "apart").iterdir()) == sorted(
        p.name for p in (tmp_path / "here").iterdir()
    )


def test_a_python_without_the_framework_takes_its_own_environment_from_the_command():
    """Where this Python does not import the framework, `python_for` asks `dlscale env build
    --framework` (a command: the environments are built a layer above the workloads) and takes that
    environment's Python, the one a study's runs of it get."""
    code = "from dlscale.workloads import images; print(images.python_for('mxnet'), images.python_for('jax'))"
    jax = env_record("jax")["python"]  # imports JAX, not MXNet
    done = subprocess.run(
        [jax, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [env_record("mxnet")["python"], jax]


def test_a_tree_without_classes_or_images_is_named(tmp_path):
    with pytest.raises(ValueError, match="no class folders"):
        images.samples(tmp_path)
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="no images"):
        images.samples(tmp_path)


def test_a_format_two_frameworks_read_is_written_once_and_for_either(tmp_path, monkeypatch):
    """TFRecords are TensorFlow's format and JAX's (frameworks/tfdata.py): a study of JAX alone gets
    them, written by JAX's Python; one of both writes them once."""
    writes = []
    real = images.write_format
    monkeypatch.setattr(images, "write_format", lambda name, *a, **k: writes.append(name) or real(name, *a, **k))
    alone = images.prepare(
        tmp_path / "jax", generated=images.Generated(8, 2), shards=2, pythons={"jax": sys.executable}
    )
    assert writes == ["jax"] and len(alone.form("tfrecords")) == 2
    writes.clear()
    both = {"tensorflow": sys.executable, "jax": sys.executable}
    images.prepare(tmp_path / "both", generated=images.Generated(8, 2), shards=2, pythons=both)
    assert writes == ["tensorflow"]
