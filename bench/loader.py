"""Benchmark (not a test): how fast each framework's input pipeline decodes, per worker, against a
bare decode loop of the same decoder library (the ceiling).

For each framework and worker count, one process per measurement: the loader of dlscale/workloads/loaders.py
(random-resized crop to --image-size, flip, normalize, batches of --batch-size, one rank) is read
for --batches batches after --warmup batches, and its decoded images/s divided by the workers is
its rate per worker. The ceiling is the same JPEG files decoded whole on one core in the tightest
loop the loader's decoder library offers from Python: Pillow (PyTorch's DataLoader path),
tf.io.decode_jpeg in tf.data's own loop (no Python between images), mx.image.imdecode pushed to the
engine's one CPU worker and waited for once (OpenCV, as ImageRecordIter). ratio = per-worker rate /
ceiling (target >= 0.9: the loader's own machinery and the crop/resize/flip/normalize cost at most a
tenth of decoding). TensorFlow's loader decodes the crop window only (decode_and_crop_jpeg), so its
ratio can exceed 1. `same_work` is a bare loop on one core doing the loader's whole per-image work
through the same functions the loader calls (PyTorch, TensorFlow and JAX, whose loader is tf.data),
or, for MXNet, whose loader's work is inside ImageRecordIter's C++, through MXNet's image operators
(the same OpenCV calls); machinery_ratio = per-worker rate / same_work: what the loader's workers,
queues and batching cost apart from the work itself. Trials rotate which framework goes first; the
median is reported with min and max.

  .venv/bin/python bench/loader.py [--framework torch ...] [--images 400] [--workers 1 2] [--trials 3]
      [--out bench/results/loader.csv]   (replaces the table's rows of the frameworks measured, keeps the others)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.overhead import machine, merge_table, write_table  # noqa: E402
from dlscale.workloads import frameworks, images, loaders  # noqa: E402
from dlscale.workloads.frameworks import NAMES as FRAMEWORKS  # noqa: E402
from dlscale.workloads.frameworks import tfdata  # noqa: E402

TF_DATA = ("tensorflow", "jax")  # JAX's loader is tf.data's, to numpy


def ceiling(framework, files, image_size, work=False):
    """Images/s of one core decoding the files whole with the loader's decoder library, in the
    tightest loop the library offers from Python; with `work`, doing the loader's whole per-image
    work instead (decode, crop, resize, flip, normalize: the same functions the loader calls), so
    that what the loader's machinery costs shows apart from what the work costs."""
    blobs = [Path(f).read_bytes() for f in files]
    if framework == "torch":
        import io

        from dlscale.workloads import loaders

        items = frameworks.module("torch", "loader").TorchImages(files, [0] * len(files), image_size, 0)

        def decode(i):
            return items[(0, i)] if work else loaders.decode_pil(io.BytesIO(blobs[i]))

        def run():
            for i in range(len(blobs)):
                decode(i)
    elif framework in TF_DATA:
        import tensorflow as tf

        from dlscale.workloads import loaders

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        fn = (
            tfdata.image_transform(image_size, 0)
            if work
            else (lambda b: tf.io.decode_jpeg(b, channels=3, dct_method="INTEGER_ACCURATE"))
        )
        options = tf.data.Options()
        options.threading.private_threadpool_size = 1
        options.threading.max_intra_op_parallelism = 1
        ds = tf.data.Dataset.from_tensor_slices(blobs).map(fn).with_options(options)

        def run():  # no Python between images: tf.data's own loop
            ds.reduce(0, lambda n, _: n + 1)
    else:
        run = mxnet_run(blobs, image_size, work)

    run()  # warm-up: first calls, the files in the page cache
    start = time.perf_counter()
    run()
    return len(blobs) / (time.perf_counter() - start)


def mxnet_run(blobs, image_size, work):
    """MXNet's loop: each image pushed to the engine's one CPU worker, waited for once. With `work`,
    ImageRecordIter's per-image work through MXNet's own image operators, the same OpenCV calls its
    C++ makes: decode, the random-resized crop (the loaders' box rule) resized with OpenCV's area
    interpolation (ImageRecordIter's inter_method 3), a random flip, the mean and std, HWC to CHW."""
    import mxnet as mx
    import numpy as np

    from dlscale.workloads import loaders

    mean, std = mx.nd.array(loaders.MEAN), mx.nd.array(loaders.STD)

    def one(blob, rng):
        img = mx.image.imdecode(blob)
        if not work:
            return img
        height, width = img.shape[:2]
        left, top, right, bottom = loaders.crop_box(rng, width, height)
        img = mx.image.fixed_crop(img, left, top, right - left, bottom - top, size=(image_size, image_size), interp=3)
        if rng.random() < 0.5:
            img = mx.nd.flip(img, axis=1)
        return mx.nd.transpose(mx.image.color_normalize(img.astype("float32"), mean, std), axes=(2, 0, 1))

    def run():
        rng = np.random.default_rng(0)
        [one(b, rng) for b in blobs]
        mx.nd.waitall()

    return run


def loader_rate(framework, dataset, workers, batch, image_size, warmup, batches):
    """Decoded images/s of the framework's loader (one rank), after warm-up batches."""
    if framework in TF_DATA:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    it = loaders.stream(framework, loaders.Feed(dataset, 0, 1, batch, image_size, workers))
    for _ in range(warmup):
        next(it)
    start = time.perf_counter()
    for _ in range(batches):
        x, _ = next(it)
    if framework == "mxnet":
        x.wait_to_read()
    return batch * batches / (time.perf_counter() - start)


def measure(args):
    """One measurement in a process of its own (`--one`): prints JSON."""
    framework, workers = args.one
    dataset = images.Dataset(args.dataset)
    if int(workers) <= 0:  # 0: the decode ceiling, -1: the same work in a bare loop
        rate = ceiling(framework, dataset.files, args.image_size, work=int(workers) < 0)
    else:
        rate = loader_rate(
            framework, dataset, int(workers), args.batch_size, args.image_size, args.warmup, args.batches
        )
    print(json.dumps({"images_per_s": rate}))


def run_one(framework, workers, args, dataset_dir):
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "MXNET_CPU_WORKER_NTHREADS": "1",
        "TF_ENABLE_ONEDNN_OPTS": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    cmd = [
        sys.executable,
        __file__,
        "--one",
        framework,
        str(workers),
        "--dataset",
        str(dataset_dir),
        "--batch-size",
        str(args.batch_size),
        "--image-size",
        str(args.image_size),
        "--warmup",
        str(args.warmup),
        "--batches",
        str(args.batches),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode or not lines:
        sys.exit(f"{framework} workers={workers} failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1])["images_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", nargs="+", default=list(FRAMEWORKS), choices=FRAMEWORKS)
    ap.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--images", type=int, default=400)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--dataset", help="a prepared dataset folder (default: one made in a temporary folder)")
    ap.add_argument("--one", nargs=2, metavar=("FRAMEWORK", "WORKERS"), help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "loader.csv"))
    args = ap.parse_args()
    if args.one:
        return measure(args)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.dataset) if args.dataset else Path(tmp) / "data"
        if not args.dataset:
            print(f"making {args.images} images ...", flush=True)
            images.prepare(folder, generated=images.Generated(args.images, 10), shards=8)
        results = {}
        for trial in range(args.trials):
            order = args.framework[trial % len(args.framework) :] + args.framework[: trial % len(args.framework)]
            for framework in order:
                for workers in [0, -1] + args.workers:  # 0: the ceiling, -1: the same work bare
                    rate = run_one(framework, workers, args, folder)
                    results.setdefault((framework, workers), []).append(rate)
                    what = {0: "ceiling (bare decode, 1 core)", -1: "same work, bare loop (1 core)"}.get(
                        workers, f"loader, {workers} worker(s)"
                    )
                    print(f"trial {trial} {framework} {what}: {rate:.1f} images/s", flush=True)
    rows = []
    for framework in args.framework:
        top = statistics.median(results[(framework, 0)])
        work = statistics.median(results[(framework, -1)])
        for workers in args.workers:
            per_worker = [r / workers for r in results[(framework, workers)]]
            ratios = [p / c for p, c in zip(per_worker, results[(framework, 0)])]
            rows.append(
                {
                    "framework": framework,
                    "workers": workers,
                    "images_per_s": round(statistics.median(results[(framework, workers)]), 1),
                    "images_per_s_per_worker": round(statistics.median(per_worker), 1),
                    "ceiling": round(top, 1),
                    "ratio": round(statistics.median(ratios), 3),
                    "ratio_min": round(min(ratios), 3),
                    "ratio_max": round(max(ratios), 3),
                    "same_work": round(work, 1),
                    "machinery_ratio": round(
                        statistics.median([p / c for p, c in zip(per_worker, results[(framework, -1)])]), 3
                    ),
                    "trials": args.trials,
                    "image_size": args.image_size,
                    "batch_size": args.batch_size,
                    "machine": machine(),
                }
            )
            r = rows[-1]
            print(
                f"  {framework} {workers} worker(s): {r['images_per_s_per_worker']} images/s per worker, "
                f"ceiling {r['ceiling']}, ratio {r['ratio']} ({r['ratio_min']}-{r['ratio_max']}); "
                f"same work bare {r['same_work']}, machinery ratio {r['machinery_ratio']}",
                flush=True,
            )
    write_table(merge_table(rows, args.out, key=("framework", "workers")), args.out)


if __name__ == "__main__":
    main()
