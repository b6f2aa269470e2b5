"""A training set made here, shaped like ImageNet's: deterministic JPEG photographs-alike in an
ImageFolder tree, and the same images in each framework's own record format.

Content. Each image is a "dead leaves" picture (opaque discs of power-law distributed radii, each
with its own colour and a smooth shading, drawn over one another: the classic model of natural
images' occlusion and scale statistics) with a 1/f ("pink") luminance texture on top and sensor-like
noise, so that its power spectrum falls like a photograph's and JPEG has edges, texture and flat
areas to code: decoding costs what it costs on photographs, not on flat colour or white noise.

Shape. Sizes follow ImageNet's training set (most images 500x375 or 375x500, a mean near 400x350):
the short side is drawn from a log-normal around 333 pixels, the aspect from {4:3, 3:4, 1:1, 3:2,
2:3, 16:9}, and the JPEG quality from 90-97 (Flickr-era photographs); the texture's strength is set
so the mean file is about 110 KB, as ImageNet's is (40 images: 111 KB, 0.25 s each to make here).
Image i of class c is made from (seed, i) alone, so the tree is the same on
every machine with the same Pillow (its libjpeg codes the files); `content_hash` says so.

    python -m harness.images make DIR [--images N] [--classes C] [--seed S]   (ImageFolder tree)
    python -m harness.images tfrecord DIR OUT [--shards K]                    (tf.data's format)
    python -m harness.images recordio DIR OUT                                 (MXNet's .rec + .idx)

The converters read any ImageNet-style tree (DIR/<class>/<image>.jpg|jpeg|JPEG|png): the user's own
data too. They store each file's bytes as they are (no re-encoding) with its class index, classes
numbered in sorted order of their folder names, as torchvision's ImageFolder does.
"""

import argparse
import hashlib
import io
import sys
from pathlib import Path

import numpy as np

EXTENSIONS = (".jpg", ".jpeg", ".png")
SHORT_SIDE_MEDIAN = 333
ASPECTS = (4 / 3, 3 / 4, 1.0, 3 / 2, 2 / 3, 16 / 9)
ASPECT_WEIGHTS = (0.55, 0.2, 0.08, 0.08, 0.04, 0.05)
QUALITY = (90, 97)
TEXTURE = 40.0  # amplitude (standard deviation) of the 1/f texture, in 8-bit levels
NOISE = 3.0  # sensor-like noise, in 8-bit levels: with TEXTURE, sets the mean file near 110 KB


def _pink(rng, h, w):
    """A 1/f-amplitude (power 1/f^2) noise field, zero mean and unit standard deviation."""
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    f = np.sqrt(fx ** 2 + fy ** 2)
    f[0, 0] = 1.0
    spectrum = (rng.standard_normal(f.shape) + 1j * rng.standard_normal(f.shape)) / f
    spectrum[0, 0] = 0
    field = np.fft.irfft2(spectrum, s=(h, w))
    return field / field.std()


def _dead_leaves(rng, h, w, r_min=6.0, most=3000):
    """Dead leaves, drawn front to back: discs of radius r with density ~ r^-3 (scale invariance),
    each showing only where no nearer disc lies, until the picture is covered."""
    img = np.zeros((h, w, 3), np.float32)
    free = np.ones((h, w), bool)
    r_max = 0.5 * max(h, w)
    radii = (r_min ** -2 - rng.uniform(size=most) * (r_min ** -2 - r_max ** -2)) ** -0.5  # inverse CDF
    for k, r in enumerate(radii):
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        y0, y1 = int(max(cy - r, 0)), int(min(cy + r + 1, h))
        x0, x1 = int(max(cx - r, 0)), int(min(cx + r + 1, w))
        dy, dx = np.ogrid[y0:y1, x0:x1]
        dy, dx = dy - cy, dx - cx
        show = (dy ** 2 + dx ** 2 <= r * r) & free[y0:y1, x0:x1]
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


def make(folder, images, classes, seed=0):
    """The ImageFolder tree DIR/<class>/<index>.JPEG: image i belongs to class i mod classes."""
    folder = Path(folder)
    for c in range(classes):
        (folder / class_name(c)).mkdir(parents=True, exist_ok=True)
    for i in range(images):
        data, _, _ = image(seed, i)
        (folder / class_name(i % classes) / f"{i:08d}.JPEG").write_bytes(data)
    return folder


def samples(folder):
    """[(path, class index)] of an ImageNet-style tree, classes in sorted order of their names."""
    folder = Path(folder)
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    if not classes:
        raise ValueError(f"{folder}: no class folders (expected {folder}/<class>/<image>.jpg)")
    out = [(p, label) for label, name in enumerate(classes)
           for p in sorted((folder / name).iterdir()) if p.suffix.lower() in EXTENSIONS]
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


def to_tfrecord(folder, out, shards=8):
    """TFRecord shards OUT/train-<k>-of-<K>.tfrecord of tf.train.Examples (image/encoded: the file's
    bytes, image/class/label: its class index); sample j goes to shard j mod K."""
    import tensorflow as tf

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    writers = [tf.io.TFRecordWriter(str(out / f"train-{k:05d}-of-{shards:05d}.tfrecord")) for k in range(shards)]
    try:
        for j, (path, label) in enumerate(samples(folder)):
            feature = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[path.read_bytes()])),
                       "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}
            writers[j % shards].write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    finally:
        for w in writers:
            w.close()
    return sorted(out.glob("*.tfrecord"))


def to_recordio(folder, out):
    """MXNet's indexed RecordIO, OUT.rec and OUT.idx: record j holds sample j's bytes and label."""
    from mxnet import recordio

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rec = recordio.MXIndexedRecordIO(str(out.with_suffix(".idx")), str(out.with_suffix(".rec")), "w")
    try:
        for j, (path, label) in enumerate(samples(folder)):
            rec.write_idx(j, recordio.pack(recordio.IRHeader(0, float(label), j, 0), path.read_bytes()))
    finally:
        rec.close()
    return out.with_suffix(".rec"), out.with_suffix(".idx")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m harness.images", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="action", required=True)
    p = sub.add_parser("make")
    p.add_argument("dir")
    p.add_argument("--images", type=int, default=1000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("tfrecord")
    p.add_argument("dir")
    p.add_argument("out")
    p.add_argument("--shards", type=int, default=8)
    p = sub.add_parser("recordio")
    p.add_argument("dir")
    p.add_argument("out")
    args = ap.parse_args(argv)
    if args.action == "make":
        make(args.dir, args.images, args.classes, args.seed)
        print(f"{args.dir}: {args.images} images, {args.classes} classes, sha256 {content_hash(args.dir)}")
    elif args.action == "tfrecord":
        print(*to_tfrecord(args.dir, args.out, args.shards), sep="\n")
    else:
        print(*to_recordio(args.dir, args.out), sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
