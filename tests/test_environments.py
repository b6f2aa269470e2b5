"""A framework in the user's own Python (config key `environments`): what its runs need, said by
`dlscale env check`; a study whose Python lacks it refused before any run, naming it; one that has
it run there, its runs recording that Python. The Pythons are real venvs made here: a bare one, and
one that sees the workload environment's packages (as a site's install of the same frameworks)."""

import csv
import importlib.util
import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import yaml

from dlscale.core import paths
from dlscale.core.errors import ConfigError
from dlscale.environment import build, recipe
from dlscale.runtime import config as cfg
from dlscale.runtime import environments
from dlscale.workloads import flops
from tests.conftest import ROOT, SNAKEMAKE, assert_runs_ok, tiny_config

CHECK = [str(ROOT / ".venv" / "bin" / "dlscale"), "env", "check", "--configfile"]


def _needed(config, framework):
    return {n["module"]: n["load"] for n in environments.needs(config, framework)}


def test_a_framework_needs_its_modules_its_horovod_binding_and_its_loaders(tmp_path):
    conf = tiny_config(tmp_path, framework=["torch", "jax"], data={"kind": "images"})
    assert _needed(conf, "torch") == {
        "numpy": False,
        "mpi4py": False,
        "torch": False,
        "horovod.torch": True,
        "PIL": False,
    }
    assert _needed(conf, "jax") == {
        m: False for m in ("numpy", "mpi4py", "jax", "jaxlib", "flax", "optax", "tensorflow")
    }
    synthetic = tiny_config(tmp_path, framework=["torch"], allreduce_library=["native"])
    assert _needed(synthetic, "torch") == {"numpy": False, "mpi4py": False, "torch": False}


def test_what_is_missing_is_named_with_why():
    need = [
        {"module": "torch", "why": "PyTorch", "load": False},
        {"module": "horovod.torch", "why": "allreduce_library horovod", "load": True},
        {"module": "numpy", "why": "every rank", "load": False},
    ]
    facts = {
        "python_version": "3.9.18",
        "modules": {
            "torch": {"found": False, "version": None},
            "horovod.torch": {"found": True, "version": "0.28.1", "error": "ImportError: not built with torch"},
            "numpy": {"found": True, "version": "2.1.0"},
        },
    }
    assert environments.missing(facts, need) == [
        "Python >= 3.10 (it is 3.9.18)",
        "torch (PyTorch): not installed",
        "horovod.torch (allreduce_library horovod): ImportError: not built with torch",
    ]


def test_a_python_that_is_not_there_is_refused_by_the_config_check(tmp_path):
    conf = tiny_config(tmp_path, environments={"torch": {"python": str(tmp_path / "nope" / "python")}})
    with pytest.raises(
        ConfigError, match=r"config key 'environments.torch.python': .*nope/python is not an executable"
    ):
        cfg.validate(conf)
    conf["environments"] = {"caffe": {"python": sys.executable}}
    with pytest.raises(ConfigError, match=r"environments"):
        cfg.validate(conf)


@pytest.fixture(scope="module")
def pythons(tmp_path_factory):
    """(bare, site): a venv with nothing, and one whose site-packages see the workload environment's."""
    root = tmp_path_factory.mktemp("pythons")
    venv.create(root / "bare", with_pip=False)
    venv.create(root / "site", with_pip=False)
    site = next((root / "site" / "lib").glob("python3*/site-packages"))
    workload = Path(importlib.util.find_spec("torch").origin).parents[1]  # the environment's site-packages
    (site / "workload.pth").write_text(f"import site; site.addsitedir({str(workload)!r})\n")
    return str(root / "bare" / "bin" / "python"), str(root / "site" / "bin" / "python")


def test_a_bare_python_lacks_the_framework_and_one_with_it_has_everything(pythons, tmp_path):
    bare, site = pythons
    conf = tiny_config(tmp_path, framework=["torch"])
    need = environments.needs(conf, "torch")
    lacking = environments.check(bare, "torch", need)["missing"]
    assert [line.split(" ")[0] for line in lacking] == ["numpy", "mpi4py", "torch", "horovod.torch"]
    checked = environments.check(site, "torch", need)
    assert checked["missing"] == [] and checked["python"] == site
    assert checked["modules"]["torch"]["version"].startswith("2.")


def _study(tmp_path, python, **overrides):
    conf = tiny_config(tmp_path, framework=["torch"], ranks_per_node=[1], environments={"torch": {"python": python}})
    conf.update(logs=str(tmp_path / "logs"), **overrides)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(conf))
    return conf, path


def test_env_check_says_what_a_python_lacks_for_the_study(pythons, tmp_path):
    bare, site = pythons
    _, path = _study(tmp_path, bare)
    proc = subprocess.run(CHECK + [str(path)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "torch (PyTorch): not installed" in proc.stdout and bare in proc.stdout
    _, path = _study(tmp_path, site)
    proc = subprocess.run(CHECK + [str(path)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"torch: {site}: ok" in proc.stdout


@pytest.mark.timeout(600)
def test_a_study_in_a_python_that_lacks_its_framework_is_refused_before_any_run(pythons, tmp_path):
    bare, _ = pythons
    conf, path = _study(tmp_path, bare)
    proc = subprocess.run(SNAKEMAKE + ["--configfile", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "lacks what the study's PyTorch runs need" in proc.stdout + proc.stderr, proc.stderr[-3000:]
    assert not (tmp_path / "results" / paths.RUNS).exists()
    # and so is a run launched by hand
    launch = [str(ROOT / ".venv" / "bin" / "dlscale"), "launch", str(path)]
    proc = subprocess.run(launch, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode != 0
    assert f"config key 'environments.torch.python': {bare} lacks what the study's PyTorch runs need" in proc.stderr
    assert not (tmp_path / "results" / paths.RUNS).exists()


@pytest.mark.timeout(900)
def test_a_study_runs_a_framework_in_the_users_python_and_records_it(pythons, tmp_path):
    _, site = pythons
    conf, path = _study(tmp_path, site)
    proc = subprocess.run(SNAKEMAKE + ["--configfile", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    specs = sorted((tmp_path / "results" / paths.RUNS).rglob("spec.json"))
    assert specs
    for spec in map(json.loads, (p.read_text() for p in specs)):
        assert spec["launch"]["environment"] == f"user:{site}"
        assert site in spec["launch"]["argv"]
    record = json.loads((tmp_path / "results" / f"{paths.framework_environment('torch')}.json").read_text())
    assert record["python"] == site and record["check"]["missing"] == []
    report = (tmp_path / "results" / paths.TABLES["report"]).read_text()
    assert f"- PyTorch ran in the Python `{site}` (config `environments`)" in report


@pytest.mark.timeout(900)
def test_a_study_runs_each_framework_in_its_own_environment_and_records_it(tmp_path):
    """Each framework's own environment (PyTorch's with Horovod built for it; JAX 0.10 with numpy 2:
    recipe.OWN_ENVIRONMENTS) is built or found by the study's `framework_environment` rule, checked
    for what the runs need, and every run and rank runs in it and records it; each native path of
    the sweep runs in its framework's Python (the study runs nothing through Horovod: no Horovod
    path), the peak of each in its own."""
    conf = tiny_config(tmp_path, framework=["torch", "jax"], allreduce_library=["native"], ranks_per_node=[2])
    conf.update(logs=str(tmp_path / "logs"))
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(conf))
    proc = subprocess.run(SNAKEMAKE + ["--configfile", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    own = {fw: build.env_dir(own=fw) for fw in ("torch", "jax")}
    made = sorted(p.stem for p in (tmp_path / "results" / paths.framework_environment("x")).parent.glob("*.json"))
    assert made == ["jax", "torch"]  # the frameworks the study names, and no other
    records = {
        fw: json.loads((tmp_path / "results" / f"{paths.framework_environment(fw)}.json").read_text()) for fw in own
    }
    for fw, record in records.items():
        assert (record["key"], record["framework"], record["check"]["missing"]) == (own[fw].name, fw, [])
        assert record["pins"] == recipe.own_pins(fw, build.variant())
    assert records["jax"]["horovod"] is None and records["torch"]["horovod"] == recipe.HOROVOD_VERSION
    for spec_path in (tmp_path / "results" / paths.RUNS).rglob("spec.json"):
        spec = json.loads(spec_path.read_text())
        python = str(own[spec["framework"]] / "bin" / "python")
        assert spec["launch"]["argv"].count(python) == 1, spec["launch"]["argv"]
    assert_runs_ok(tmp_path / "results", 2)
    sweep = (tmp_path / "results" / f"{paths.sweep(1, 2)}.jsonl").read_text()
    assert {json.loads(line)["path"] for line in sweep.splitlines()} == {
        "mpi",
        "jax",
        "jax_tensors",
        "torch",
        "torch_tensors",
    }
    peak = {r["framework"]: r for r in csv.DictReader((tmp_path / "results" / paths.TABLES["peak"]).open())}
    for fw in own:  # each measured in its framework's own Python
        assert peak[fw]["failure"] == "" and float(peak[fw]["matmul_flops_s"]) > 0
    report = (tmp_path / "results" / paths.TABLES["report"]).read_text()
    for fw, label in (("torch", "PyTorch"), ("jax", "JAX")):
        numpy = recipe.own_pins(fw)["numpy"]
        assert f"- {label} ran in its own environment `{own[fw].name}`, numpy {numpy}" in report
    assert f"Horovod {recipe.HOROVOD_VERSION}" in report
    assert "shared memory (MPI's on-node transport); measured by the allreduce sweep's mpi path" in report


@pytest.mark.timeout(900)
def test_a_study_without_pytorch_builds_and_uses_no_pytorch(tmp_path):
    """MXNet through Horovod and JAX through its own collectives: only their environments are made;
    the sweep hands Horovod its tensors through MXNet's binding, in MXNet's Python, and the FLOPs
    are counted on MXNet's definitions (equal to PyTorch's: tests/test_flops.py)."""
    conf = tiny_config(tmp_path, framework=["mxnet", "jax"], ranks_per_node=[2], logs=str(tmp_path / "logs"))
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(conf))
    proc = subprocess.run(SNAKEMAKE + ["--configfile", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = tmp_path / "results"
    made = sorted(p.stem for p in (results / paths.framework_environment("x")).parent.glob("*.json"))
    assert made == ["jax", "mxnet"]
    assert_runs_ok(results, 2)
    rows = [json.loads(line) for line in (results / f"{paths.sweep(1, 2)}.jsonl").read_text().splitlines()]
    transports = {r["path"]: r["transport"] for r in rows}
    assert set(transports) == {"mpi", "horovod", "horovod_tensors", "horovod_one", "jax", "jax_tensors"}
    assert transports["horovod"] == "horovod mpi (host memory, 4 tensors fused, MXNet's binding)"
    assert "counted 1 networks on MXNet's definitions" in (tmp_path / "logs" / "flops.log").read_text()
    counted = list(csv.DictReader((results / paths.TABLES["flops"]).open()))
    assert int(counted[0]["forward_macs"]) == flops.per_image("tinynet", 64, 1000)["forward_macs"]  # PyTorch's, here
    assert "measured by the allreduce sweep's horovod path" in (results / paths.TABLES["report"]).read_text()


def test_an_own_environment_that_lacks_what_runs_need_stops_the_study_naming_it(pythons, tmp_path):
    """The check a built environment of its own passes before any run (a recipe that dropped a
    package, say) refuses it as it refuses a user's Python."""
    bare, _ = pythons
    conf = tiny_config(tmp_path, framework=["jax"], allreduce_library=["native"])
    out = tmp_path / "jax.json"
    out.write_text(json.dumps({"python": bare, "key": "py311-jax-test"}))
    declared = {"framework": "jax", "needs": environments.needs(conf, "jax")}
    with pytest.raises(ConfigError, match=r"JAX's own environment .* lacks what the study's JAX runs need: numpy"):
        environments.admit(bare, declared, out, built=True)
