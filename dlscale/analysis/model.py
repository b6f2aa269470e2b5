"""A performance model of synchronous SGD (docs/methods/model.md): the 1-rank run's phases and the allreduce
sweep on the same nodes replay Horovod's cycles and fusion against each gradient's ready time."""

import dataclasses
import math

import numpy as np

from dlscale.core.ring import FUSED_PIECES, ring_time
from dlscale.core.vocabulary import BACKWARD_S, CYCLE_TIME_S, FORWARD_S, FUSION_THRESHOLD_BYTES, H2D_S, IO_S, UPDATE_S

COMPUTE = [IO_S, H2D_S, FORWARD_S, BACKWARD_S, UPDATE_S]


def fusion_buffers(sizes, threshold=FUSION_THRESHOLD_BYTES):
    """(bytes, tensors) of each fused buffer Horovod makes from tensors ready together (in order)."""
    buffers = []
    for size in sizes:
        if buffers and buffers[-1][0] + size <= threshold:
            buffers[-1] = (buffers[-1][0] + size, buffers[-1][1] + 1)
        else:
            buffers.append((size, 1))
    return buffers


def sweep_cost(nbytes, times):
    """T(m) from a sweep's (bytes, median seconds): linear between sizes, extended past both ends."""
    m, t = np.asarray(nbytes, float), np.asarray(times, float)
    order = np.argsort(m)
    m, t = m[order], t[order]
    if len(m) < 2:
        raise ValueError("an allreduce sweep needs at least two sizes")
    slope = (t[-1] - t[-2]) / (m[-1] - m[-2])

    def cost(size):
        return float(np.interp(size, m, t)) if size <= m[-1] else float(t[-1] + slope * (size - m[-1]))

    return cost


def ring_cost(ranks, alpha, beta):
    return lambda size: ring_time(size, ranks, alpha, beta)


class Cost:
    """One fused buffer's time: fused(m) for FUSED_PIECES tensors, plus per_tensor per tensor beyond; one tensor
    of alone_from bytes or more takes alone(m) (reduced in place). `cores`: those an allreduce keeps busy."""

    def __init__(self, fused, per_tensor=0.0, alone=None, alone_from=math.inf, cores=0.0):
        self.fused, self.per_tensor, self.alone, self.alone_from = fused, per_tensor, alone, alone_from
        self.cores = cores

    def __call__(self, nbytes, tensors=FUSED_PIECES):
        if tensors == 1 and self.alone is not None and nbytes >= self.alone_from:
            return self.alone(nbytes)
        return self.fused(nbytes) + (tensors - FUSED_PIECES) * self.per_tensor


def schedule(ready, sizes, cost, threshold=FUSION_THRESHOLD_BYTES, cycle=CYCLE_TIME_S, per_tensor=0.0):
    """(time the last allreduce ends, busy time) for gradients `sizes` ready at `ready`; cost: a Cost, or T(m).
    Every input must be finite (a NaN compares false with everything: the loop would never advance)."""
    cost = cost if isinstance(cost, Cost) else Cost(cost, per_tensor)
    problem = _not_schedulable(ready, sizes, cycle, cost.per_tensor)
    if problem:
        raise ValueError(f"cannot schedule allreduces: {problem}")
    order = sorted(range(len(sizes)), key=lambda i: ready[i])
    t_cycle, t_free, busy, k = -cycle, 0.0, 0.0, 0
    while k < len(order):
        t_cycle = max(t_cycle + cycle, t_free)
        first = ready[order[k]]
        if first > t_cycle:  # sleep whole cycles until the next gradient is there
            t_cycle += math.ceil((first - t_cycle) / cycle - 1e-9) * cycle
            t_cycle = max(t_cycle, first)  # rounding may leave it a hair before: it is there, every pass takes one
        batch = []
        while k < len(order) and ready[order[k]] <= t_cycle:
            batch.append(sizes[order[k]])
            k += 1
        t_free = t_cycle
        for nbytes, tensors in fusion_buffers(batch, threshold):
            step = _buffer_cost(cost, nbytes, tensors)
            t_free += step
            busy += step
    return t_free, busy


def _buffer_cost(cost, nbytes, tensors):
    """A fused buffer's allreduce time; an error where it is not a finite number."""
    step = cost(nbytes, tensors)
    if not math.isfinite(step):
        raise ValueError(f"cannot schedule allreduces: an allreduce of {nbytes} bytes costs {step} s")
    return step


def _not_schedulable(ready, sizes, cycle, per_tensor):
    """What makes `schedule`'s inputs unusable, or None."""
    if len(ready) != len(sizes):
        return f"{len(ready)} ready times for {len(sizes)} gradients"
    for name, values in (("ready time", ready), ("gradient size", sizes), ("per-tensor cost", [per_tensor])):
        bad = [v for v in values if not math.isfinite(v)]
        if bad:
            return f"{name} {bad[0]} is not a finite number"
    if not (math.isfinite(cycle) and cycle > 0):
        return f"cycle time {cycle} s is not a positive finite number"
    return None


@dataclasses.dataclass(frozen=True)
class Gradients:
    """A step's gradients: sizes, ready times (s into backward; None: after it), Horovod's threshold and cycle."""

    sizes: list
    ready: list | None = None
    threshold: float = FUSION_THRESHOLD_BYTES
    cycle: float = CYCLE_TIME_S

    @classmethod
    def of(cls, record, ready):
        """From a baseline's or a replay plan's sizes, threshold and cycle, ready at `ready`."""
        return cls(record["sizes"], ready, record["threshold"], record["cycle"])


def on_backward(ready, backward):
    """Measured ready times (s) on the baseline's `backward`: as fractions of the last one's, times it.
    They come from the untraced iterations of one run, the phases from traced ones of all (scaled to the
    measured iteration): seconds of the one are not seconds of the other. Backward ends as its last
    gradient is complete (PyTorch, the framework that reports them, computes no input gradient)."""
    last = max(ready) if ready else 0.0
    return [r / last * backward for r in ready] if last > 0 else None


def shared_rate(threads, ranks_per_node, node_cpus, comm_cores):
    """The rate (0 to 1) of a rank's compute and allreduce while both run: CPUs per rank over their threads."""
    if not comm_cores or not node_cpus or math.isnan(comm_cores):
        return 1.0
    return min(1.0, node_cpus / (ranks_per_node * (threads + comm_cores)))


@dataclasses.dataclass(frozen=True)
class Sharing:
    """How fast (0 to 1 of alone) a rank's compute and its allreduce each progress while both run: one rate for
    both (shared_rate's rule), or each measured beside the other (bench/sharing.py: over an emulated link the
    allreduce kept its speed, 0.98, while compute beside its polling went at 0.58)."""

    compute: float = 1.0
    comm: float = 1.0

    @classmethod
    def of(cls, rate):
        return rate if isinstance(rate, cls) else cls(rate, rate)

    def slows(self):
        return self.compute < 1 or self.comm < 1


class _Shared:
    """Backward and the allreduces on a rank's share of the CPUs: `t` wall time, `done` backward's progress."""

    def __init__(self, backward, sharing):
        self.backward, self.rate, self.t, self.done, self.busy, self.ended = backward, sharing, 0.0, 0.0, 0.0, 0.0

    def backward_end(self):
        """When backward ends: already, or from now on alone."""
        return self.t + (self.backward - self.done) if self.done < self.backward else self.ended

    def _advance(self, wall, rate):
        """`wall` s of backward at `rate` (while it is not done)."""
        if self.done < self.backward and self.done + wall * rate >= self.backward:
            self.ended = self.t + (self.backward - self.done) / rate
        self.done, self.t = min(self.backward, self.done + wall * rate), self.t + wall

    def cycle_with(self, tick, first, cycle):
        """Backward alone until the first cycle from `tick` on that finds it `first` s done; that cycle."""
        need = self.t + max(0.0, first - self.done)
        if need > tick:  # whole cycles, and a hair of rounding taken as there (as `schedule`)
            tick = max(need, tick + math.ceil((need - tick) / cycle - 1e-9) * cycle)
        self._advance(tick - self.t, 1.0)
        self.done = max(self.done, min(first, self.backward))  # there at `need`, whatever the rounding
        return tick

    def reduce(self, work):
        """One buffer's allreduce of `work` s alone: at the comm rate while backward runs beside it (at the compute
        rate), then at full speed."""
        start, rate = self.t, self.rate
        if self.done < self.backward:
            beside = min(work / rate.comm, (self.backward - self.done) / rate.compute)
            work -= beside * rate.comm
            self._advance(beside, rate.compute)
        self.t += max(0.0, work)
        self.busy += self.t - start


def shared_schedule(ready, sizes, cost, gradients, backward, rate):
    """`schedule` on shared CPUs (ready: s of backward's progress; rate: one for both, or a Sharing): backward's
    end, the last's end, busy time."""
    problem, rate = _not_schedulable(ready, sizes, gradients.cycle, cost.per_tensor), Sharing.of(rate)
    if problem or not (rate.compute > 0 and rate.comm > 0):
        shared = f"shared rate {min(rate.compute, rate.comm)} (compute {rate.compute}, allreduce {rate.comm})"
        raise ValueError(f"cannot schedule allreduces: {problem or shared}")
    order, shared = sorted(range(len(sizes)), key=lambda i: ready[i]), _Shared(backward, rate)
    tick, k = -gradients.cycle, 0
    while k < len(order):
        tick = shared.cycle_with(max(tick + gradients.cycle, shared.t), ready[order[k]], gradients.cycle)
        batch = []
        while k < len(order) and ready[order[k]] <= shared.done:
            batch.append(sizes[order[k]])
            k += 1
        for nbytes, tensors in fusion_buffers(batch, gradients.threshold):
            shared.reduce(_buffer_cost(cost, nbytes, tensors))
    return shared.backward_end(), shared.t, shared.busy


def predict(base, gradients, ranks, cost, slowdown=1.0, rate=1.0):
    """Predicted iteration, communication and exposed communication (s) on `ranks` from the 1-rank phases;
    `rate`: how fast compute and allreduce go while both run (one rate for both, or a Sharing)."""
    base = {k: base[k] * slowdown for k in COMPUTE}
    ready = None if gradients.ready is None else [r * slowdown for r in gradients.ready]
    backward = base[BACKWARD_S]
    compute = sum(base[k] for k in COMPUTE)
    if ranks < 2:
        return {"iteration_s": compute, "comm_total_s": 0.0, "comm_exposed_s": 0.0}
    sizes = gradients.sizes
    ready = [backward] * len(sizes) if ready is None else [min(r, backward) for r in ready]
    if Sharing.of(rate).slows():
        cost = cost if isinstance(cost, Cost) else Cost(cost)
        ends, end, busy = shared_schedule(ready, sizes, cost, gradients, backward, rate)
        exposed = max(0.0, end - ends)
        return {"iteration_s": compute + (ends - backward) + exposed, "comm_total_s": busy, "comm_exposed_s": exposed}
    end, busy = schedule(ready, sizes, cost, gradients.threshold, gradients.cycle)
    exposed = max(0.0, end - backward)
    return {"iteration_s": compute + exposed, "comm_total_s": busy, "comm_exposed_s": exposed}


def relative_error(pred, meas):
    return (pred - meas) / meas if meas else math.nan


def error_parts(predicted_iteration, predicted_exposed, iteration, exposed):
    """A predicted iteration's relative error as (compute, exposed communication) parts adding up to it."""
    if not iteration:
        return math.nan, math.nan
    compute = ((predicted_iteration - predicted_exposed) - (iteration - exposed)) / iteration
    return compute, (predicted_exposed - exposed) / iteration
