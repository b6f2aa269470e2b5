"""One rank of a training run: `python -m dlscale.workloads.train SPEC.json` (started by mpirun).

Phased timing syncs between phases, so each is the work it launched (the original study's method; it stops
TensorFlow and MXNet overlapping allreduce with backward). Native timing records wall time only, then traces
`profile_iterations` more (flagged `profiled`, never counted) for the phases. One ``rank<R>.jsonl`` line each."""

import collections
import itertools
import json
import math
import os
import shutil
import socket
import sys
import time
from pathlib import Path

import numpy as np

from dlscale.core import samples
from dlscale.core.processes import CpuMeter, started_at
from dlscale.core.records import IDENTITY, Writer
from dlscale.core.vocabulary import PHASE_SECONDS, TIMELINE, records_name, trace_name
from dlscale.workloads import frameworks, rendezvous, together, trace
from dlscale.workloads.batches import open_data
from dlscale.workloads.rank import leave, private_tmpdir, provenance


def load_trainer(spec, startup=None):
    """The spec's framework's Trainer; `startup` gets when its module was imported and it was built."""
    startup = {} if startup is None else startup
    try:
        trainer = frameworks.module(spec["framework"], "trainer")
    except frameworks.UnknownFramework as e:
        raise SystemExit(str(e)) from None
    startup["imported"] = time.time()
    built = trainer.Trainer(spec)
    startup["built"] = time.time()
    return built


def timed_step(trainer, fetch):
    """(phase seconds, start, loss handle) of one iteration on `fetch()`; io: the wait and the staging copy."""
    now = time.perf_counter
    start = now()
    host = trainer.load(fetch())
    trainer.sync()
    t_io = now()
    dev = trainer.h2d(host)
    trainer.sync()
    t_h2d = now()
    loss = trainer.forward(dev)
    trainer.sync()
    t_fwd = now()
    trainer.backward(loss)
    trainer.sync()
    t_bwd = now()
    trainer.comm()
    trainer.sync()
    t_comm = now()
    trainer.update()
    trainer.sync()
    end = now()
    durations = (t_io - start, t_h2d - t_io, t_fwd - t_h2d, t_bwd - t_fwd, t_comm - t_bwd, end - t_comm)
    return dict(zip(PHASE_SECONDS, durations)), start, loss


def native_step(trainer, fetch):
    """One iteration as the framework runs it fastest, one wait at the end; (start, loss handle)."""
    start = time.perf_counter()
    loss = trainer.step(fetch)
    trainer.sync()
    return start, loss


def profile(trainer, data, first, count, out):
    """`count` traced iterations from `first` on, into this rank's trace; {iteration: (start, end, loss)}."""
    folder = out / f"profile_rank{trainer.rank}"
    folder.mkdir(exist_ok=True)
    timeline = folder / "horovod_timeline.json"
    trainer.start_timeline(timeline)
    trainer.profile_start(folder)
    trainer.profiling = True
    clock = trace.Clock.now()
    spans = {}
    for it in range(first, first + count):
        with trainer.annotate(f"{trace.ITERATION}{it}"):
            start, loss = native_step(trainer, lambda it=it: data(it))
            end = time.perf_counter()
        spans[it] = (start, end, trainer.loss_value(loss))
    trainer.profiling = False
    events = trainer.profile_stop()
    trainer.stop_timeline()
    # one rank's timeline stays empty, and a run without Horovod writes none (waiting for one cost 5 s)
    if trainer.size > 1 and trainer.writes_timeline:
        _settled(timeline)
    merged = trace.merge(trainer.name, trainer.rank, clock, spans, events, timeline)
    (out / trace_name(trainer.rank)).write_text(json.dumps(merged))
    return spans


def _settled(path, timeout_s=5.0):
    """Wait until Horovod's writer thread has written all of `path` (its size stops changing)."""
    last, deadline = -1, time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.05)
        size = path.stat().st_size if path.exists() else -1
        if size == last and size > 0:
            return
        last = size


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    scratch = private_tmpdir()
    try:
        train(argv, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def train(argv, scratch):
    spec = json.loads(Path(argv[0]).read_text())
    if spec["timing"] == "native" and spec.get("profile_iterations"):
        # Horovod reads it at init; the launchers set it, a rank started by hand needs it too
        os.environ.setdefault("HOROVOD_TIMELINE", "DYNAMIC")
    # when the rank's process started and reached each point before its first iteration
    startup = {"process": started_at(), "harness": time.time()}
    trainer = load_trainer(spec, startup)
    out = Path(spec["out_dir"])
    writer = Writer(out / records_name(trainer.rank))
    sizes = trainer.gradient_sizes()
    data, described = open_data(trainer, spec)
    startup["data"] = time.time()
    writer.write(
        "run",
        **{k: spec[k] for k in IDENTITY},
        rank=trainer.rank,
        size=trainer.size,
        local_rank=trainer.local_rank,
        host=os.environ.get("DLSCALE_NODE") or socket.gethostname(),
        gradients={"tensors": len(sizes), "bytes": sum(sizes), "sizes": sizes},
        data=described,
        provenance=provenance(trainer, spec),
        startup=startup,
    )
    started, meter = time.perf_counter(), CpuMeter()
    ready, times, enough = measured(trainer, data, writer, spec, out, meter)
    cpu = meter.stop()  # the measured iterations' (profiled ones run under the profiler: not theirs)
    total = spec["warmup"] + len(times)
    profiled = spec.get("profile_iterations", 0) if spec["timing"] == "native" else 0
    if profiled:
        for it, (start, end, loss) in profile(trainer, data, total, profiled, out).items():
            writer.write("step", **_step(trainer, it, loss, warmup=False, profiled=True, wall_s=end - start))
    ready = [r for r in ready if r is not None]
    extra = {"gradient_ready_s": np.median(ready, axis=0).tolist()} if ready else {}
    writer.write(
        "end",
        rank=trainer.rank,
        iterations=total + profiled,
        checksum=trainer.checksum(),
        elapsed_s=time.perf_counter() - started,
        **enough.record(times),
        cpu=cpu,
        **extra,
        **({"compile": trainer.compile_times()} if trainer.compile_times() else {}),
    )
    writer.close()
    leave(data, trainer, scratch)


def measured(trainer, data, writer, spec, out, meter):
    """Warm-up and measured iterations until enough: (gradient ready times, times, the Enough decision)."""
    agree = None if trainer.size == 1 else rendezvous.agree  # the ranks' joint decision, through MPI
    enough = samples.Enough(spec["iterations"], spec.get("samples"), agree)
    if spec.get("calibration"):  # the cores in use over all its segments, the waits included
        meter.start()
        return [], segmented(trainer, data, writer, spec, out), enough
    if spec["timing"] == "native":
        return native_loop(trainer, data, writer, spec["warmup"], enough, meter)
    warmup = spec["warmup"]
    # Phased runs: Horovod's timeline (written by rank 0) covers the measured iterations only.
    timeline = trainer.size > 1 and trainer.rank == 0 and os.environ.get("HOROVOD_TIMELINE") == "DYNAMIC"
    ready, times = [], []
    for it in itertools.count():
        if it == warmup:
            meter.start()
        if timeline and it == warmup:
            trainer.start_timeline(out / TIMELINE)
        phases, start, loss = timed_step(trainer, lambda it=it: data(it))
        if it >= warmup:
            ready.append(trainer.gradient_ready())
        loss = trainer.loss_value(loss)
        # The iteration's wall time is taken apart from the phases and includes the loop's own
        # work (loss read-back), so that phases summing to it shows the timing misses nothing.
        wall = time.perf_counter() - start
        writer.write("step", **_step(trainer, it, loss, warmup=it < warmup, profiled=False, **phases, wall_s=wall))
        if it >= warmup:
            times.append(wall)
        if enough.due(len(times)) and enough.stop(times):
            break
    if timeline:
        trainer.stop_timeline()
    return ready, times, enough


def segmented(trainer, data, writer, spec, out):
    """A calibration copy's iterations: the warm-up, then its segments. Returns the measured times."""
    calibration, first, times = spec["calibration"], spec["warmup"], []
    for it in range(first):
        start, loss = native_step(trainer, lambda it=it: data(it))
        wall = time.perf_counter() - start
        writer.write("step", **_step(trainer, it, trainer.loss_value(loss), warmup=True, profiled=False, wall_s=wall))
    for index in range(len(calibration["segments"])):
        segment = together.Segment(calibration, index, out)
        segment.meet()
        if not segment.measures:
            segment.wait()
            continue
        tagged = _Tagged(writer, first, {"segment": index, "segment_kind": segment.kind})
        enough = samples.Enough(spec["iterations"])
        _, measured, _ = native_loop(trainer, lambda it, f=first: data(f + it), tagged, 0, enough, None)
        times, first = times + measured, first + len(measured)
        segment.keep_company(trainer, data, first)  # unrecorded steps, until every copy has measured
    return times


class _Tagged:
    """A Writer whose step records are numbered from `first` on and carry `fields` (a segment's)."""

    def __init__(self, writer, first, fields):
        self.writer, self.first, self.fields = writer, first, fields

    def write(self, kind, **record):
        record["iteration"] += self.first
        self.writer.write(kind, **record, **self.fields)


def native_loop(trainer, data, writer, warmup, enough, meter):
    """Native timing: iteration i+1 is queued before i finishes (`trainer.ahead` at most), so the device never
    idles while the host stages a batch. Each time runs from the previous end to its own, so the times sum to
    the loop's elapsed time less decisions taken with nothing in flight. `meter` None: the caller measures."""
    pending, ready, times = collections.deque(), [], []
    if warmup == 0 and meter:
        meter.start()
    last, it, stopping, limit = time.perf_counter(), 0, False, warmup + enough.most
    while it < limit and not stopping or pending:
        if it < limit and not stopping:
            loss = trainer.step(lambda it=it: data(it))
            pending.append((it, trainer.queued(loss)))
            it += 1
        while pending and (len(pending) > trainer.ahead or stopping or it == limit):
            done, handle = pending.popleft()
            loss = trainer.finish(handle)
            end = time.perf_counter()
            if done >= warmup:
                ready.append(trainer.gradient_ready())
                times.append(end - last)
            writer.write("step", **_step(trainer, done, loss, warmup=done < warmup, profiled=False, wall_s=end - last))
            last = end
            if done == warmup - 1 and meter:
                meter.start()
                last = time.perf_counter()  # a meeting of copies (`meet`) is in no iteration's time
            if not stopping and enough.due(len(times)):
                stopping = enough.stop(times)
                if not pending:  # the decision is in no iteration's time
                    last = time.perf_counter()
    return ready, times, enough


def _step(trainer, iteration, loss, **fields):
    """One iteration's record (a loss that is not finite kept as its text)."""
    return dict(rank=trainer.rank, iteration=iteration, **fields, loss=loss if math.isfinite(loss) else str(loss))


if __name__ == "__main__":
    main()
