"""The runtime's pipeline steps: each rule's `step` FUNCTION, taking one `Job` (rule.py) in its own process."""

import json
import sys
from pathlib import Path

from dlscale.environment import build
from dlscale.runtime import contention as calibration
from dlscale.runtime import dataset, environments, launch, peak


def _settings(job):
    """An MPI rule's declared settings, with its time limit (a resource)."""
    return {**json.loads(job.params.settings), "run_timeout_s": float(job.resources.run_timeout_s)}


def _record(job):
    return json.loads(Path(job.input.env).read_text())


def _records(apart):
    """{framework: environment record} from a rule's params.apart ({framework: record path}, JSON)."""
    return {fw: json.loads(Path(path).read_text()) for fw, path in json.loads(apart).items()}


def run(job):
    """`rule run`: the run params.run names, its status file output[0]."""
    launch.launch(_settings(job), job.params.run, _record(job), job.output[0], job.log[0], job.params.attempts)


def allreduce(job):
    """`rule allreduce`: the sweep on params.place (nodes, ranks_per_node)."""
    place = job.params.place
    apart = _records(job.params.apart)
    sweep = launch.Measurement(
        place["nodes"], place["ranks_per_node"], _record(job), job.output[0], job.log[0], job.params.attempts
    )
    launch.sweep_allreduce(_settings(job), sweep, apart)


def replay(job):
    """`rule replay`: the replay of input.plans on params.nodes nodes."""
    replayed = launch.Measurement(job.params.nodes, 1, _record(job), job.output.out, job.log[0], job.params.attempts)
    launch.replay_gradients(_settings(job), replayed, job.input.plans, job.output.spec)


def contention(job):
    """`rule contention`: the calibration of params.run (its ranks_per_node the copies) in params.folder."""
    calibration.calibrate(_settings(job), job.params.run, _record(job), job.output[0], job.params.folder)


def peak_rule(job):
    """`rule peak`: the matrix-multiply peak (dlscale/runtime/peak.py) with params.settings."""
    apart = _records(job.params.apart)
    peak.rule(json.loads(job.params.settings), job.params.python, job.output[0], job.log[0], apart)


def dataset_rule(job):
    """`rule dataset`: the study's training images (dlscale/runtime/dataset.py) from params.data."""
    data, writers = json.loads(job.params.data), json.loads(job.params.writers)
    dataset.prepare_rule(data, job.params.python, job.output[0], job.log[0], writers)


def framework_environment(job):
    """`rule framework_environment`: params.python (with params.build built here first) admitted for
    params.needs, its record output[0]."""
    declared = json.loads(job.params.needs)
    if job.params.build:
        build.record_rule(sys.executable, job.output[0], job.log[0], own=declared["framework"])
    with open(job.log[0], "a") as log:
        log.write(f"checking {job.params.python} for {job.params.needs}\n")
    environments.admit(job.params.python, declared, job.output[0], built=job.params.build)


def environment(job):
    """`rule environment`: the workload environment built or found, its record output[0]."""
    build.record_rule(job.params.python, job.output[0], job.log[0])
