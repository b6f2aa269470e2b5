"""Benchmark (not a test): how fast each framework's input pipeline decodes, per worker, against a
bare decode loop of the same decoder library (the ceiling).

For each framework and worker count, one process per measurement: the loader of workloads/loaders.py
(random-resized crop to --image-size, flip, normalize, batches of --batch-size, one rank) is read
for --batches batches after --warmup batches, and its decoded images/s divided by the workers is
its rate per worker. The ceiling is the same JPEG files decoded whole in a tight loop on one core
with the library the loader decodes with: Pillow (PyTorch's DataLoader path), tf.io.decode_jpeg
(tf.data), mx.image.imdecode (OpenCV, as ImageRecordIter). ratio = per-worker rate / ceiling
(target >= 0.9: the loader's own machinery and the crop/resize/normalize cost at most a tenth of
decoding). TensorFlow's loader decodes the crop window only (decode_and_crop_jpeg), so its ratio can
exceed 1. Trials rotate which framework goes first; the median is reported with min and max.

  .venv/bin/python bench/loader.py [--images 400] [--workers 1 2] [--trials 3] [--out bench/results/loader.csv]
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

from bench.overhead import machine, write_table  # noqa: E402
from harness import images  # noqa: E402

FRAMEWORKS = ("torch", "tensorflow", "mxnet")


def ceiling(framework, files):
    """Images/s of one core decoding the files whole with the loader's decoder library."""
    blobs = [Path(f).read_bytes() for f in files]
    if framework == "torch":
        import io

        from PIL import Image

        def decode(b):
            with Image.open(io.BytesIO(b)) as img:
                img.convert("RGB")
    elif framework == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        fn = tf.function(lambda b: tf.io.decode_jpeg(b, channels=3, dct_method="INTEGER_ACCURATE"))

        def decode(b):
            fn(tf.constant(b)).numpy()
    else:
        import mxnet as mx

        def decode(b):
            mx.image.imdecode(b).wait_to_read()
    for b in blobs[:5]:
        decode(b)
    start = time.perf_counter()
    for b in blobs:
        decode(b)
    return len(blobs) / (time.perf_counter() - start)


def loader_rate(framework, dataset, workers, batch, image_size, warmup, batches):
    """Decoded images/s of the framework's loader (one rank), after warm-up batches."""
    from workloads import loaders

    if framework == "torch":
        it = loaders.torch_loader(dataset, 0, 1, batch, image_size, workers, 0)
    elif framework == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        it = iter(loaders.tf_dataset(dataset, 0, 1, batch, image_size, workers, 0))
    else:
        it = loaders.MxBatches(loaders.mx_iter(dataset, 0, 1, batch, image_size, workers, 0))
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
    if int(workers) == 0:
        rate = ceiling(framework, dataset.files)
    else:
        rate = loader_rate(framework, dataset, int(workers), args.batch_size, args.image_size, args.warmup,
                           args.batches)
    print(json.dumps({"images_per_s": rate}))


def run_one(framework, workers, args, dataset_dir):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MXNET_CPU_WORKER_NTHREADS": "1",
           "TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    cmd = [sys.executable, __file__, "--one", framework, str(workers), "--dataset", str(dataset_dir),
           "--batch-size", str(args.batch_size), "--image-size", str(args.image_size),
           "--warmup", str(args.warmup), "--batches", str(args.batches)]
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
            images.prepare(folder, images=args.images, classes=10, shards=8)
        results = {}
        for trial in range(args.trials):
            order = args.framework[trial % len(args.framework):] + args.framework[:trial % len(args.framework)]
            for framework in order:
                for workers in [0] + args.workers:  # 0: the ceiling
                    rate = run_one(framework, workers, args, folder)
                    results.setdefault((framework, workers), []).append(rate)
                    what = "ceiling (bare decode, 1 core)" if workers == 0 else f"loader, {workers} worker(s)"
                    print(f"trial {trial} {framework} {what}: {rate:.1f} images/s", flush=True)
    rows = []
    for framework in args.framework:
        top = statistics.median(results[(framework, 0)])
        for workers in args.workers:
            per_worker = [r / workers for r in results[(framework, workers)]]
            ratios = [p / c for p, c in zip(per_worker, results[(framework, 0)])]
            rows.append({"framework": framework, "workers": workers,
                         "images_per_s": round(statistics.median(results[(framework, workers)]), 1),
                         "images_per_s_per_worker": round(statistics.median(per_worker), 1),
                         "ceiling": round(top, 1), "ratio": round(statistics.median(ratios), 3),
                         "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3),
                         "trials": args.trials, "image_size": args.image_size, "batch_size": args.batch_size,
                         "machine": machine()})
            r = rows[-1]
            print(f"  {framework} {workers} worker(s): {r['images_per_s_per_worker']} images/s per worker, "
                  f"ceiling {r['ceiling']}, ratio {r['ratio']} ({r['ratio_min']}-{r['ratio_max']})", flush=True)
    write_table(rows, args.out)


if __name__ == "__main__":
    main()
