"""A training set made here, shaped like ImageNet's: deterministic JPEG photographs-alike in an
ImageFolder tree, and the same images in each framework's own record format.

Content: "dead leaves" (opaque discs of power-law radii, each its own colour and shading: the classic
model of natural images' occlusion and scale) under a 1/f texture and sensor-like noise, so that JPEG
decoding costs what it does on photographs, not on flat colour or white noise. Shape: ImageNet's training
set's (short side log-normal around 333 pixels, aspects 4:3, 3:4, 1:1, 3:2, 2:3, 16:9, JPEG quality 90-97,
a mean file of about 110 KB). Image i is made from (seed, i) alone: the same tree on every machine with
the same Pillow (`content_hash` says so).

    python -m dlscale.workloads.images make DIR [--images N] [--classes C] [--seed S]   (ImageFolder tree)
    python -m dlscale.workloads.images tfrecord DIR OUT [--shards K]                    (tf.data's format)
    python -m dlscale.workloads.images recordio DIR OUT                                 (MXNet's .rec + .idx)
    python -m dlscale.workloads.images prepare OUT [--tree DIR] [--on-corrupt skip|fail] (all of it, checked)
(a format's command runs in its framework's own environment where this Python lacks the framework)

The converters read any ImageNet-style tree (DIR/<class>/<image>.jpg|jpeg|JPEG|png), the user's own
too, and store each file's bytes as they are with its class index (classes in sorted order of their
folder names, as torchvision's ImageFolder numbers them).
"""

import argparse
import dataclasses
import hashlib
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from dlscale.core import paths, pythons
from dlscale.workloads import frameworks

EXTENSIONS = (".jpg", ".jpeg", ".png")
SHORT_SIDE_MEDIAN = 333
ASPECTS = (4 / 3, 3 / 4, 1.0, 3 / 2, 2 / 3, 16 / 9)
ASPECT_WEIGHTS = (0.55, 0.2, 0.08, 0.08, 0.04, 0.05)
QUALITY = (90, 97)
TEXTURE = 40.0  # amplitude (standard deviation) of the 1/f texture, in 8-bit levels
NOISE = 3.0  # sensor-like noise, in 8-bit levels: with TEXTURE, sets the mean file near 110 KB
FILES_SUFFIX = ".files.json"
MANIFEST = "manifest.json"
ON_CORRUPT = ("skip", "fail")


def _pink(rng, h, w):
    """A 1/f-amplitude (power 1/f^2) noise field, zero mean and unit standard deviation."""
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    f = np.sqrt(fx**2 + fy**2)
    f[0, 0] = 1.0
    spectrum = (rng.standard_normal(f.shape) + 1j * rng.standard_normal(f.shape)) / f
    spectrum[0, 0] = 0
    field = np.fft.irfft2(spectrum, s=(h, w))
    return field / field.std()


def _dead_leaves(rng, h, w, r_min=6.0, most=3000):
    """Dead leaves, front to back (radius density ~ r^-3: scale invariant), until the picture is covered."""
    img = np.zeros((h, w, 3), np.float32)
    free = np.ones((h, w), bool)
    r_max = 0.5 * max(h, w)
    radii = (r_min**-2 - rng.uniform(size=most) * (r_min**-2 - r_max**-2)) ** -0.5  # inverse CDF
    for k, r in enumerate(radii):
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        y0, y1 = int(max(cy - r, 0)), int(min(cy + r + 1, h))
        x0, x1 = int(max(cx - r, 0)), int(min(cx + r + 1, w))
        dy, dx = np.ogrid[y0:y1, x0:x1]
        dy, dx = dy - cy, dx - cx
        show = (dy**2 + dx**2 <= r * r) & free[y0:y1, x0:x1]
        if not show.any():
            continue
        colour = rng.uniform(20, 235) + rng.normal(0, 25, 3)  # a grey level and a little colour
        shade = 1.0 + 0.3 * (dy * rng.normal() + dx * rng.normal()) / (r + 1)  # a light gradient
        img[y0:y1, x0:x1][show] = colour[None, :] * np.broadcast_to(shade, show.shape)[show][:, None]
        free[y0:y1, x0:x1] &= ~show
        if k % 256 == 255 and not free.any():
            break
    img[free] = img[~free].mean(axis=0) if (~free).any() else 128.0
    return img


def size_of(rng):
    """(width, height) drawn like an ImageNet training image's."""
    short = int(np.clip(rng.lognormal(np.log(SHORT_SIDE_MEDIAN), 0.15), 160, 800))
    aspect = rng.choice(ASPECTS, p=ASPECT_WEIGHTS)
    return (int(round(short * aspect)), short) if aspect >= 1 else (short, int(round(short / aspect)))


def image(seed, index):
    """(JPEG bytes, (width, height), quality) of image `index`, made from (seed, index) alone."""
    from PIL import Image

    rng = np.random.default_rng([seed, index])
    w, h = size_of(rng)
    img = _dead_leaves(rng, h, w)
    img += TEXTURE * _pink(rng, h, w)[:, :, None] * rng.uniform(0.6, 1.4, 3)[None, None, :]
    img += rng.normal(0, NOISE, img.shape)  # sensor noise
    quality = int(rng.integers(QUALITY[0], QUALITY[1] + 1))
    out = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(out, "JPEG", quality=quality)
    return out.getvalue(), (w, h), quality


def class_name(c):
    return f"c{c:04d}"


def _write(job):
    folder, seed, i, classes = job
    (folder / class_name(i % classes) / f"{i:08d}.JPEG").write_bytes(image(seed, i)[0])


def make(folder, images, classes, seed=0, processes=None):
    """The ImageFolder tree DIR/<class>/<index>.JPEG, image i in class i mod classes, made in parallel."""
    import multiprocessing

    folder = Path(folder)
    for c in range(min(images, classes)):
        (folder / class_name(c)).mkdir(parents=True, exist_ok=True)
    with multiprocessing.get_context("spawn").Pool(processes or os.cpu_count()) as pool:
        pool.map(_write, [(folder, seed, i, classes) for i in range(images)], chunksize=8)
    return folder


def samples(folder):
    """[(path, class index)] of an ImageNet-style tree, classes in sorted order of their names."""
    folder = Path(folder)
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    if not classes:
        raise ValueError(f"{folder}: no class folders (expected {folder}/<class>/<image>.jpg)")
    out = [
        (p, label)
        for label, name in enumerate(classes)
        for p in sorted((folder / name).iterdir())
        if p.suffix.lower() in EXTENSIONS
    ]
    if not out:
        raise ValueError(f"{folder}: no images ({', '.join(EXTENSIONS)}) in its class folders")
    return out


def content_hash(folder):
    """SHA-256 over the tree's relative paths and bytes, in sorted order."""
    digest = hashlib.sha256()
    for path, _ in samples(folder):
        digest.update(str(path.relative_to(folder)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def listed(source):
    """[(path, label)]: a tree's samples, the list itself, or the list in a FILES_SUFFIX JSON file."""
    if isinstance(source, (str, Path)) and str(source).endswith(FILES_SUFFIX):
        return [(Path(p), label) for p, label in json.loads(Path(source).read_text())]
    return samples(source) if isinstance(source, (str, Path)) else list(source)


class DataError(RuntimeError):
    """A training image that cannot be used, named."""


class Dataset:
    """A prepared dataset (`prepare`): the images every loader reads, in three forms."""

    def __init__(self, folder):
        self.folder = Path(folder)
        path = self.folder / MANIFEST
        if not path.exists():
            raise FileNotFoundError(
                f"{self.folder}: no {MANIFEST}; prepare it with python -m dlscale.workloads.images prepare"
            )
        self.manifest = json.loads(path.read_text())
        self.files = [self.folder / f for f, _ in self.manifest["files"]]  # (an absolute f stays itself)
        self.labels = [label for _, label in self.manifest["files"]]

    def form(self, key):
        """The files of one framework's own format (its data.py's FORMAT), in order."""
        if key not in self.manifest:
            raise DataError(f"{self.folder}: {MANIFEST} lists no {key}; prepare the dataset again")
        return [self.folder / f for f in self.manifest[key]]

    def describe(self):
        """What a run's record says of its data."""
        m = self.manifest
        return {
            "kind": "images",
            "folder": str(self.folder),
            "source": m["source"],
            "content_hash": m["content_hash"],
            "images": len(self.files),
            "classes": len(m["classes"]),
            "skipped": len(m["skipped"]),
            "skipped_files": [s["file"] for s in m["skipped"]],
            "converted": len(m["converted"]),
            "forms": {f.FORMAT: len(self.manifest.get(f.FORMAT, [])) for f in formats().values()},
        }


def check(path, out_dir):
    """`path` decoded whole: itself if an RGB or grey JPEG, else a JPEG of it under out_dir (TF and MXNet take JPEG)."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            img.load()
            if img.format == "JPEG" and img.mode in ("RGB", "L"):
                return path
            out = out_dir / f"{path.parent.name}_{path.stem}.JPEG"
            out.parent.mkdir(parents=True, exist_ok=True)
            img.convert("RGB").save(out, "JPEG", quality=95)
            return out
    except (OSError, ValueError, SyntaxError) as e:
        raise DataError(f"{path}: not a usable image: {e}") from e


def formats():
    """{framework: its own dataset format (the data.py of its package)}, in the registry's order."""
    return {name: frameworks.module(name, "data") for name in frameworks.with_part("data")}


def python_for(framework):
    """The Python that writes `framework`'s format: this one if it has the framework, else its own (built by
    `dlscale env build`, a command: the layer above builds environments)."""
    if importlib.util.find_spec(frameworks.get(framework).MODULES[0]) is not None:
        return sys.executable
    argv = [sys.executable, "-m", "dlscale", "env", "build", "--framework", framework]
    done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(paths.SOURCE)})
    if done.returncode or not done.stdout.strip():
        raise DataError(f"{framework}'s own environment, to write its format: `{' '.join(argv[1:])}` failed")
    return str(Path(done.stdout.splitlines()[-1]) / "bin" / "python")


def write_format(framework, source, out, shards, python=None):
    """Write `source` (a tree, or [(path, label)]) in `framework`'s format at `out` with `python`; its files."""
    python = python or python_for(framework)
    form = formats()[framework]
    if pythons.is_this_python(python):
        return form.write(source, out, shards)
    listing = None
    if not isinstance(source, (str, Path)):  # handed over as a file, removed once written
        listing = Path(out).parent / f".{Path(out).name}{FILES_SUFFIX}"
        listing.parent.mkdir(parents=True, exist_ok=True)
        listing.write_text(json.dumps([[str(p), label] for p, label in source]))
        source = listing
    args = [form.COMMAND, source, out] + (["--shards", shards] if form.SHARDED else [])
    try:
        done = pythons.run_module(python, __spec__.name, args)  # (__name__ is __main__ under -m)
    finally:
        if listing:
            listing.unlink(missing_ok=True)
    if done.returncode:
        raise DataError(f"writing {form.FORMAT} in {python} failed: {done.stderr.strip()[-2000:]}")
    return [Path(line) for line in done.stdout.splitlines() if line.strip()]


@dataclasses.dataclass(frozen=True)
class Generated:
    """The set `prepare` makes without a tree; `classes` also bounds a given tree's class folders."""

    images: int = 1000
    classes: int = 1000
    seed: int = 0


def prepare(out, tree=None, generated=Generated(), shards=8, on_corrupt="fail", pythons=None):
    """The Dataset: the set made (`generated`) or taken (`tree`), every file checked, beside OUT/manifest.json
    in the formats of `pythons` ({framework: the Python that writes it}), else of every framework."""
    if on_corrupt not in ON_CORRUPT:
        raise ValueError(f"on_corrupt {on_corrupt!r}: one of {', '.join(ON_CORRUPT)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    before = json.loads((out / MANIFEST).read_text()) if (out / MANIFEST).exists() else {}
    (out / MANIFEST).unlink(missing_ok=True)
    tree, source, names = _source(out, tree, generated)
    kept, skipped, converted = _checked(tree, out, on_corrupt)

    def rel(p):
        return str(p.relative_to(out)) if p.is_relative_to(out) else str(p)

    manifest = {
        "source": source,
        "content_hash": content_hash(tree),
        "classes": names,
        "files": [[rel(p), label] for p, label in kept],
        "skipped": skipped,
        "converted": converted,
    }
    same = {k: before.get(k) for k in ("content_hash", "files")} == {k: manifest[k] for k in ("content_hash", "files")}
    for name, form in formats().items():
        if form.FORMAT in manifest:  # one format two frameworks read (TFRecords: TensorFlow, JAX), written once
            continue
        if pythons is None or name in pythons:
            written = write_format(name, kept, out / form.FOLDER, shards, (pythons or {}).get(name))
            manifest[form.FORMAT] = [rel(p) for p in written]
        elif same and form.FORMAT in before:  # written before from these very files: kept
            manifest[form.FORMAT] = before[form.FORMAT]
    tmp = out / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp.replace(out / MANIFEST)  # written last: a manifest means a whole dataset
    return Dataset(out)


def _source(out, tree, generated):
    """(the tree of class folders, where the manifest says it came from, its class names)."""
    classes = generated.classes
    if tree is None:
        tree = make(out / "tree", generated.images, classes, generated.seed)
        source = {"generated": dataclasses.asdict(generated)}
    else:
        tree = Path(tree).resolve()
        source = {"path": str(tree)}
    names = sorted(p.name for p in tree.iterdir() if p.is_dir())
    if len(names) > classes:
        raise DataError(
            f"{tree}: {len(names)} class folders, but the networks have {classes} outputs "
            "(set the study's `classes` to at least the number of folders)"
        )
    return tree, source, names


def _checked(tree, out, on_corrupt):
    """(kept [(path, label)], skipped, converted): every file of the tree decoded whole (`check`)."""
    found = samples(tree)
    kept, skipped, converted = [], [], []
    for path, label in found:
        try:
            used = check(path, out / "converted")
        except DataError as e:
            if on_corrupt == "fail":
                raise
            skipped.append({"file": str(path), "error": str(e)})
            continue
        if used != path:
            converted.append({"file": str(path), "as": str(used.relative_to(out))})
        kept.append((used, label))
    if not kept:
        raise DataError(f"{tree}: none of its {len(found)} images decodes")
    return kept, skipped, converted


def _pythons(ap, given):
    """{framework: python} from --python FRAMEWORK=PATH values (None: none given, every format)."""
    pythons = {}
    for item in given:
        name, sep, path = item.partition("=")
        if not sep or not path or name not in formats():
            ap.error(f"--python {item!r}: FRAMEWORK=PATH, FRAMEWORK one of {', '.join(formats())}")
        pythons[name] = path
    return pythons or None


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m dlscale.workloads.images",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="action", required=True)
    p = sub.add_parser("make")
    p.add_argument("dir")
    p.add_argument("--images", type=int, default=1000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    for form in {f.COMMAND: f for f in reversed(formats().values())}.values():  # one per format
        p = sub.add_parser(form.COMMAND, help=form.__doc__.split("\n\n")[0].replace("\n", " "))
        p.add_argument("dir")
        p.add_argument("out")
        if form.SHARDED:
            p.add_argument("--shards", type=int, default=8)
    p = sub.add_parser("prepare", help="make (or take, --tree) the set, check every file, write all three forms")
    p.add_argument("out")
    p.add_argument("--tree", help="an ImageNet-style folder of your own (default: make one)")
    p.add_argument("--images", type=int, default=1000)
    p.add_argument("--classes", type=int, default=1000, help="the networks' outputs (labels must be fewer)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--on-corrupt", choices=ON_CORRUPT, default="fail")
    p.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="FRAMEWORK=PATH",
        help="write only these frameworks' formats, each with this Python (default: every format, each "
        "here or in its framework's own environment)",
    )
    p.add_argument("--no-formats", action="store_true", help="write no framework's format (the tree alone)")
    args = ap.parse_args(argv)
    if args.action == "prepare":
        pythons = {} if args.no_formats else _pythons(ap, args.python)
        generated = Generated(args.images, args.classes, args.seed)
        d = prepare(args.out, args.tree, generated, args.shards, args.on_corrupt, pythons)
        print(json.dumps(d.describe(), indent=1))
    elif args.action == "make":
        make(args.dir, args.images, args.classes, args.seed)
        print(f"{args.dir}: {args.images} images, {args.classes} classes, sha256 {content_hash(args.dir)}")
    else:
        name = next(name for name, f in formats().items() if f.COMMAND == args.action)
        print(*write_format(name, args.dir, args.out, getattr(args, "shards", None)), sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
