"""TensorFlow's profiler output (XSpace protobuf, `<host>.xplane.pb`) as Chrome trace "X" events: each plane
(host or device) holds a line per thread or stream, each event an offset in picoseconds from its line's start."""

from pathlib import Path


def host_events(folder):
    """The events in microseconds, `tid` their line, `cat` "host" or "device"."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    files = sorted(Path(folder).glob("plugins/profile/*/*.xplane.pb"))
    if not files:
        raise FileNotFoundError(f"TensorFlow's profiler wrote no .xplane.pb under {folder}")
    space = xplane_pb2.XSpace()
    space.ParseFromString(files[-1].read_bytes())
    events = []
    for plane in space.planes:
        kind = "host" if plane.name.startswith("/host:") else "device" if plane.name.startswith("/device:") else None
        if kind is None:
            continue
        for line in plane.lines:
            tid = f"{plane.name}/{line.display_name or line.name or line.id}"
            base_ps = line.timestamp_ns * 1000
            for ev in line.events:
                meta = plane.event_metadata.get(ev.metadata_id)
                name = (meta.name or meta.display_name) if meta else str(ev.metadata_id)
                ts = (base_ps + ev.offset_ps) / 1e6
                events.append({"name": name, "ph": "X", "ts": ts, "dur": ev.duration_ps / 1e6, "tid": tid, "cat": kind})
    return events
