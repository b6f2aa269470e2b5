"""Every framework's own input pipeline (JAX's is tf.data, handed over as numpy) reads the same
prepared images: the same pixels, each image once per epoch across ranks, and a corrupt file named or
counted, never silently lost."""

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from dlscale.workloads import frameworks, images, loaders
from dlscale.workloads.frameworks import tfdata
from dlscale.workloads.loaders import DataError, crop_box
from tests.conftest import ROOT

torch_loader = frameworks.module("torch", "loader")
mx_loader = frameworks.module("mxnet", "loader")
jax_loader = frameworks.module("jax", "loader")


def unnormalized(x):
    return x * np.float32(loaders.STD) + np.float32(loaders.MEAN)


def first_batch(framework, dataset, size, batch, rank=0, ranks=1, augment=False):
    """NHWC float32 0-255 values of a loader's first batch, and its labels."""
    feed = loaders.Feed(dataset, rank, ranks, batch, size, augment=augment)
    if framework == "torch":
        x, y = next(torch_loader.stream(feed))
        return unnormalized(x.numpy().transpose(0, 2, 3, 1)), y.numpy()
    if framework == "tensorflow":
        x, y = next(iter(tfdata.records(feed)))
        return unnormalized(x.numpy()), y.numpy()
    if framework == "jax":
        x, y = next(jax_loader.stream(feed))
        return unnormalized(x), y
    x, y = next(mx_loader.Batches(mx_loader.record_iter(feed)))
    return unnormalized(x.asnumpy().transpose(0, 2, 3, 1)), y.asnumpy().astype(int)


@pytest.fixture(scope="module")
def squares(tmp_path_factory):
    """Two 256x256 JPEGs of the generated kind (one class), prepared."""
    root = tmp_path_factory.mktemp("squares")
    (root / "tree" / "a").mkdir(parents=True)
    for i in range(2):
        data, _, quality = images.image(3, i)
        img = Image.open(io.BytesIO(data)).convert("RGB")
        side = min(img.size)
        img.crop((0, 0, side, side)).resize((256, 256)).save(root / "tree" / "a" / f"{i}.JPEG", quality=quality)
    return images.prepare(root / "prepared", tree=root / "tree", shards=1)


def test_the_loaders_decode_the_same_image_to_the_same_tensor(squares):
    """Decoders: Pillow (PyTorch), TensorFlow's decode_and_crop_jpeg and OpenCV's imdecode (MXNet)
    all link libjpeg-turbo and run its accurate integer IDCT with fancy upsampling, so at the
    image's own size the tensors agree to within one level of 255 (measured: identical). After the
    shrink to 64x64 they differ by the resize filter only: TensorFlow's antialiased bilinear is
    Pillow's (measured within 0.9 levels), OpenCV's area shrink is a 4x4 box mean of the decoded
    pixels (checked against that, within 1 level)."""
    decoded = {fw: first_batch(fw, squares, 256, 2)[0] for fw in frameworks.NAMES}
    reference = decoded["torch"]
    assert reference.shape == (2, 256, 256, 3) and reference.std() > 20  # real content, not flat
    for fw in ("tensorflow", "mxnet", "jax"):
        assert np.abs(decoded[fw] - reference).max() <= 1.0, fw
    small = {fw: first_batch(fw, squares, 64, 2)[0] for fw in frameworks.NAMES}
    np.testing.assert_array_equal(small["jax"], small["tensorflow"])  # JAX is fed by tf.data
    assert np.abs(small["tensorflow"] - small["torch"]).max() <= 2.0
    assert np.abs(small["tensorflow"] - small["torch"]).mean() <= 0.5
    box = reference.reshape(2, 64, 4, 64, 4, 3).mean(axis=(2, 4))
    assert np.abs(small["mxnet"] - box).max() <= 1.0


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """12 generated images, each its own class: a label names its image."""
    return images.prepare(tmp_path_factory.mktemp("labelled"), generated=images.Generated(12, 12, 1), shards=4)


def one_epoch(framework, dataset, rank, ranks):
    """Labels of everything rank reads in its first epoch (batch 1, augmentation on)."""
    if framework == "torch":
        n = len(loaders.shard(len(dataset.files), rank, ranks, 0, 0))
        it = torch_loader.stream(loaders.Feed(dataset, rank, ranks, 1, 64))
        return [int(next(it)[1]) for _ in range(n)]
    if framework in ("tensorflow", "jax"):  # the rank's shards once, without repeat
        n = sum(
            1
            for f in dataset.form("tfrecords")[rank::ranks]
            for _ in __import__("tensorflow").data.TFRecordDataset(str(f))
        )
        if framework == "jax":
            it = jax_loader.stream(loaders.Feed(dataset, rank, ranks, 1, 64))
            return [int(next(it)[1][0]) for _ in range(n)]
        return [int(y[0]) for _, y in tfdata.records(loaders.Feed(dataset, rank, ranks, 1, 64)).take(n)]
    it = mx_loader.record_iter(loaders.Feed(dataset, rank, ranks, 1, 64))
    return [int(b.label[0].asnumpy()[0]) for b in it]  # one pass ends the epoch


@pytest.mark.parametrize("framework", frameworks.NAMES)
@pytest.mark.parametrize("ranks", [2, 3])
def test_the_ranks_together_read_every_image_once_per_epoch(labelled, framework, ranks):
    if framework == "tensorflow":  # whole shards per rank
        with pytest.raises(DataError, match="4 TFRecord shards for 5 ranks"):
            tfdata.records(loaders.Feed(labelled, 0, 5, 1, 64))
    read = [one_epoch(framework, labelled, r, ranks) for r in range(ranks)]
    assert sorted(sum(read, [])) == list(range(12)), read
    assert all(read), read  # every rank gets some


def test_epochs_reshuffle_and_the_shard_split_is_exact():
    first, second = loaders.shard(10, 0, 3, 0, 0), loaders.shard(10, 0, 3, 1, 0)
    assert sorted(np.concatenate([loaders.shard(10, r, 3, 4, 0) for r in range(3)])) == list(range(10))
    assert list(first) != list(second)


def test_augmentation_crops_flips_and_normalizes(labelled):
    x, y = first_batch("torch", labelled, 64, 4, augment=True)
    again, _ = first_batch("torch", labelled, 64, 4, augment=True)
    assert x.shape == (4, 64, 64, 3) and np.array_equal(x, again)  # seeded
    assert not np.array_equal(x, first_batch("torch", labelled, 64, 4)[0])  # not the centre crop
    for fw in ("tensorflow", "mxnet", "jax"):
        other, _ = first_batch(fw, labelled, 64, 4, augment=True)
        # normalized with ImageNet's mean and std: back to 0-255 pixel values
        assert other.shape == (4, 64, 64, 3) and -0.5 <= other.min() and other.max() <= 255.5 and other.std() > 20


@pytest.fixture
def broken_tree(tmp_path):
    tree = images.make(tmp_path / "tree", images=6, classes=2, seed=2)
    files = sorted(tree.rglob("*.JPEG"))
    files[1].write_bytes(files[1].read_bytes()[:4000])  # truncated
    files[4].write_bytes(b"not a jpeg at all")
    Image.open(files[0]).save(tree / "c0000" / "extra.png")  # a PNG: converted, not lost
    return tree, files[1], files[4]


def test_a_corrupt_jpeg_fails_the_preparation_naming_it(broken_tree, tmp_path):
    tree, truncated, _ = broken_tree
    with pytest.raises(DataError, match=str(truncated)):
        images.prepare(tmp_path / "out", tree=tree, on_corrupt="fail", shards=2)
    assert not (tmp_path / "out" / images.MANIFEST).exists()


def test_a_corrupt_jpeg_is_skipped_and_counted(broken_tree, tmp_path):
    tree, truncated, garbage = broken_tree
    dataset = images.prepare(tmp_path / "out", tree=tree, on_corrupt="skip", shards=2)
    info = dataset.describe()
    assert info["skipped"] == 2 and set(info["skipped_files"]) == {str(truncated), str(garbage)}
    assert info["images"] == 5 and info["converted"] == 1
    assert truncated not in dataset.files and garbage not in dataset.files
    for fw in frameworks.NAMES:
        assert first_batch(fw, dataset, 64, 5)[0].shape == (5, 64, 64, 3)


# -- in training: real ranks reading images through each framework's loader ---------------------------


def image_config(tmp_path, **over):
    from tests.conftest import tiny_config

    return tiny_config(
        tmp_path,
        classes=10,
        data={"kind": "images", "images": 16, "shards": 2, "on_corrupt": "fail", "cache": str(tmp_path / "data")},
        loader_workers=[1],
        **over,
    )


@pytest.mark.parametrize("framework", frameworks.NAMES)
def test_two_ranks_train_on_images_and_io_is_the_wait_for_the_loader(tmp_path, framework):
    from dlscale.core import paths
    from dlscale.core.records import parse_file
    from dlscale.runtime import config as cfg
    from dlscale.runtime import launch
    from tests.conftest import env_record

    conf = image_config(tmp_path, timing=["phased"])
    images.prepare(cfg.dataset_folder(conf), generated=images.Generated(16, 10, conf["seed"]), shards=2)
    run = {
        "framework": framework,
        "model": "tinynet",
        "allreduce_schedule": "overlap",
        "allreduce_library": frameworks.default_library(framework),
        "layout": "best",
        "timing": "phased",
        "nodes": 1,
        "ranks_per_node": 2,
        "batch_size": 4,
        "loader_workers": 1,
        "threads_per_rank": 1,
        "repeat": 0,
    }
    status = launch.launch(conf, run, env_record(run["framework"]))
    assert status["status"] == "ok", status
    run_dir, _, _ = paths.run_files(conf, run)
    for rank in range(2):
        recs, errors = parse_file(run_dir / f"rank{rank}.jsonl")
        assert not errors
        data = recs[0]["data"]
        assert (data["kind"], data["images"], data["skipped"], data["loader_workers"]) == ("images", 16, 0, 1)
        assert data["loader_img_per_s"] > 0 and data["loader"] == frameworks.get(framework).LOADER
        steps = [r for r in recs if r["kind"] == "step"]
        assert len(steps) == conf["warmup"] + conf["iterations"] and all(s["io_s"] > 0 for s in steps)
        assert all(np.isfinite(s["loss"]) for s in steps)


def test_a_run_started_by_hand_prepares_the_images_first(tmp_path):
    import subprocess
    import sys

    import yaml

    from dlscale.runtime import config as cfg

    conf = image_config(tmp_path, framework=["torch"], ranks_per_node=[1])
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(conf))
    proc = subprocess.run(
        [sys.executable, "-m", "dlscale", "launch", str(path), "model=tinynet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "preparing the training images" in proc.stderr
    assert images.Dataset(cfg.dataset_folder(conf)).describe()["images"] == 16


@settings(max_examples=300, deadline=None)
@given(
    width=st.integers(1, 4000),
    height=st.integers(1, 4000),
    seed=st.integers(0, 2**32 - 1),
    augment=st.booleans(),
)
def test_the_crop_is_inside_the_image_whatever_its_shape(width, height, seed, augment):
    """The crop box lies in the image; where torchvision's rule falls back to the centre crop (an
    image far from square, every random try outside it), at the nearest allowed aspect. A wide image
    once got a box taller than itself there (a negative offset: 'box offset can't be negative')."""
    left, top, right, bottom = crop_box(np.random.default_rng(seed), width, height, augment=augment)
    assert 0 <= left < right <= width and 0 <= top < bottom <= height


def test_the_centre_crop_of_a_very_wide_or_tall_image_keeps_the_short_side():
    class NoFit:  # every random try too large, so the rule falls back to the centre crop
        def uniform(self, lo, hi):
            return hi

        def integers(self, lo, hi):
            return lo

    assert crop_box(NoFit(), 1000, 100) == (433, 0, 566, 100)  # 4:3 at the image's height
    assert crop_box(NoFit(), 100, 1000) == (0, 433, 100, 566)  # 3:4 at the image's width


def test_loader_benchmark_fills_every_cell_for_the_frameworks_it_measures(tmp_path):
    """bench/loader.py, shrunk: MXNet's same-work loop (its image operators) and JAX's (tf.data's)
    give a rate, and a table's rows of frameworks not measured are kept."""
    import csv
    import subprocess
    import sys

    out = tmp_path / "loader.csv"
    out.write_text("framework,workers,images_per_s\ntorch,1,297.1\n")
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "loader.py"), "--framework", "mxnet", "jax", "--images", "24"]
        + ["--workers", "1", "--trials", "1", "--batches", "2", "--warmup", "1", "--batch-size", "4"]
        + ["--image-size", "32", "--out", str(out)],
        check=True,
        timeout=600,
        cwd=ROOT,
    )
    rows = {r["framework"]: r for r in csv.DictReader(open(out))}
    assert set(rows) == {"torch", "mxnet", "jax"}
    for name in ("mxnet", "jax"):
        assert float(rows[name]["same_work"]) > 0 and float(rows[name]["machinery_ratio"]) > 0, rows[name]
