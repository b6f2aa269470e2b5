"""TensorFlow's profiler output (XSpace protobuf, `<host>.xplane.pb`) as Chrome trace "X" events.

Each plane (host or device) holds a line per thread or stream, each event an offset (picoseconds)
from its line's start; they come back in microseconds, `tid` the line, `cat` "host" or "device"."""

from pathlib import Path


def _load(folder):
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    files = sorted(Path(folder).glob("plugins/profile/*/*.xplane.pb"))
    if not files:
        raise FileNotFoundError(f"TensorFlow's profiler wrote no .xplane.pb under {folder}")
    space = xplane_pb2.XSpace()
    space.ParseFromString(files[-1].read_bytes())
    return space


def host_events(folder):
    events = []
    for plane in _load(folder).planes:
        kind = "host" if plane.name.startswith("/host:") else "device" if plane.name.startswith("/device:") else None
        if kind is None:
            continue
        for line in plane.lines:
            tid = f"{plane.name}/{line.display_name or line.name or line.id}"
            base_ps = line.timestamp_ns * 1000
            for ev in line.events:
                meta = plane.event_metadata.get(ev.metadata_id)
                name = (meta.name or meta.display_name) if meta else str(ev.metadata_id)
                events.append(
                    {
                        "name": name,
                        "ph": "X",
                        "ts": (base_ps + ev.offset_ps) / 1e6,
                        "dur": ev.duration_ps / 1e6,
                        "tid": tid,
                        "cat": kind,
                    }
                )
    return events
