"""The prepared dataset in MXNet's own format: an indexed RecordIO file, OUT.rec and OUT.idx."""

from pathlib import Path

from dlscale.workloads.images import listed

FORMAT = "recordio"  # its key in the dataset's manifest.json
COMMAND = "recordio"  # python -m dlscale.workloads.images recordio DIR OUT
FOLDER = "recordio/train"  # where prepare writes it, under the dataset's folder
SHARDED = False  # ImageRecordIter partitions the one file by byte ranges


def write(source, out, shards=None):
    """OUT.rec and OUT.idx, record j sample j's bytes and label (`shards`: the sharded formats' concern)."""
    from mxnet import recordio

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rec = recordio.MXIndexedRecordIO(str(out.with_suffix(".idx")), str(out.with_suffix(".rec")), "w")
    try:
        for j, (path, label) in enumerate(listed(source)):
            rec.write_idx(j, recordio.pack(recordio.IRHeader(0, float(label), j, 0), path.read_bytes()))
    finally:
        rec.close()
    return out.with_suffix(".rec"), out.with_suffix(".idx")
