"""Each framework's Python (its own environment, or the user's from the config key `environments`) and
what a study's runs need from it: one that lacks it is refused before any run starts, naming what is missing.
"""

import json
from pathlib import Path

from dlscale.core.errors import ConfigError
from dlscale.core.paths import SOURCE
from dlscale.environment import build, probe
from dlscale.runtime import config as cfg
from dlscale.workloads import frameworks

# What every rank imports, whatever its framework.
COMMON = (("numpy", "every rank"), ("mpi4py", "every rank: the hosts' rendezvous over MPI"))
# The oldest Python the workload's code runs on (pyproject.toml requires-python).
OLDEST_PYTHON = (3, 10)


def user_pythons(config):
    """{framework: python} for the study's frameworks the config points at a Python of the user's."""
    given = config.get("environments") or {}
    return {fw: given[fw]["python"] for fw in config["framework"] if fw in given}


def built_apart(config, framework):
    """Whether the study runs `framework` in the environment dlscale builds for it (not the user's Python)."""
    return framework not in user_pythons(config)


def python_of(config, framework):
    """The Python `framework` runs in: the user's (resolved), or its own environment's (maybe not built yet)."""
    users = user_pythons(config)
    if framework in users:
        return str(cfg.resolve(users[framework]))
    return str(build.env_dir(own=framework) / "bin" / "python")


def needs(config, framework):
    """[{module, why, load}]: what a run of `framework` imports (`load`: import it to know it works)."""
    declared = frameworks.get(framework)
    need = [{"module": m, "why": why, "load": False} for m, why in COMMON]
    need += [{"module": m, "why": declared.LABEL, "load": False} for m in declared.MODULES]
    if frameworks.HOROVOD in cfg.libraries(config, framework) and not frameworks.not_built(framework, "horovod"):
        why = f"allreduce_library horovod: Horovod built with {declared.LABEL}"
        need.append({"module": declared.HOROVOD_MODULE, "why": why, "load": True})
    if config["data"]["kind"] != "synthetic":
        need += [{"module": m, "why": "data: images (its loader)", "load": False} for m in declared.DATA_MODULES]
    return need


def missing(facts, need):
    """What of `need` the probe's `facts` lack, each as one readable line."""
    lines = []
    version = tuple(int(x) for x in facts["python_version"].split(".")[:2])
    if version < OLDEST_PYTHON:
        lines.append(f"Python >= {'.'.join(map(str, OLDEST_PYTHON))} (it is {facts['python_version']})")
    for n in need:
        got = facts["modules"].get(n["module"], {})
        if not got.get("found"):
            lines.append(f"{n['module']} ({n['why']}): not installed")
        elif got.get("error"):
            lines.append(f"{n['module']} ({n['why']}): {got['error']}")
    return lines


def check(python, framework, need):
    """The probe's facts of `python` for runs of `framework`, with `need` and what is missing."""
    modules = [n["module"] for n in need if not n["load"]]
    facts = probe.probe(str(python), modules, [n["module"] for n in need if n["load"]], source=SOURCE)
    return {**facts, "framework": framework, "needs": need, "missing": missing(facts, need)}


def record(checked):
    """A user's Python as an environment record (what a run reads of environment.json), with its check."""
    python, pins = checked["python"], {m: f["version"] for m, f in checked["modules"].items() if f["version"]}
    made = {"python": python, "key": f"user:{python}", "user": True, "framework": checked["framework"], "pins": pins}
    return made | {"mpi": build.find_mpi(), "check": checked}


def admitted(python, framework, needs, built=None):
    """The record `framework`'s runs run in (`built`, the build's, with the check), or ConfigError."""
    checked = check(python, framework, needs)
    if checked["missing"]:
        label = frameworks.get(framework).LABEL
        key = f"config key 'environments.{framework}.python'"
        where = f"{label}'s own environment {python}" if built else f"{key}: {python}"
        raise ConfigError(f"{where} lacks what the study's {label} runs need: " + "; ".join(checked["missing"]))
    return {**built, "check": checked} if built else record(checked)


def admit(python, declared, out_path, built=False):
    """The `framework_environment` step: `python` admitted for `declared` ({framework, needs}), its record
    written to out_path (with `built`, over the one the build wrote), or ConfigError naming what it lacks."""
    base = json.loads(Path(out_path).read_text()) if built else None
    made = admitted(python, declared["framework"], declared["needs"], base)
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(json.dumps(made, indent=2) + "\n")
