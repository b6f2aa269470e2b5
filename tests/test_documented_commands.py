"""Every command the README and the docs site (every page under docs/) show is run here, as written or with a
stated substitution: a study is the shipped config's shrunk run (tests/test_shipped_configs.py) or
its dry run, a path outside the checkout becomes one under the test's folder, a command that needs
what this machine lacks (Slurm, a GPU, an editor) is checked as far as it can be and says why.

A new command in the docs fails `test_every_documented_command_says_how_it_is_tested` until it has
an entry in COMMANDS; an entry whose command left the docs fails it too."""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EMULATION, ROOT, WHY_NO_EMULATION
from tests.study import run_shrunk

FENCE = re.compile(r"^```(sh|bash|console|shell)\s*\n(.*?)^```", re.M | re.S)


def documents():
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def commands(text):
    """The commands of a page's shell blocks: continuation lines joined, trailing comments dropped."""
    found = []
    for block in FENCE.finditer(text):
        for line in block.group(2).replace("\\\n", " ").splitlines():
            line = re.sub(r"\s{2,}#.*$", "", line).strip()
            if line and not line.startswith("#"):
                found.append(re.sub(r"\s+", " ", line))
    return found


def documented():
    return {c: path.relative_to(ROOT) for path in documents() for c in commands(path.read_text())}


PY = ".venv/bin/python"
DLSCALE = ".venv/bin/dlscale"


def _on_the_cpu_shrunk(iterations):
    """The substitutions that run a GPU guide's `bench/overhead.py` command (ResNet-50, `iterations`)
    on this machine's CPU in this checkout's Python, shrunk to a tiny network."""
    return {
        "python3 bench/overhead.py": f"{PY} {ROOT}/bench/overhead.py",
        "--python python3 --device gpu": f"--python {PY} --device cpu",
        f"--model resnet50 --batch-size 64 --image-size 224 --threads 4 --warmup 5 {iterations} --trials 3": (
            "--model tinynet --batch-size 4 --image-size 32 --threads 1 --warmup 1 --iterations 2 --trials 1 "
            "--out {folder}/overhead.csv"
        ),
    }


# How each documented command is tested: (kind, detail).
#   study    the shipped config(s) it names, run end to end shrunk by tests/test_shipped_configs.py;
#            its other options (--config items) are checked by a dry run of the shrunk study
#   dry-run  run with --dry-run added (it needs a cluster this machine has not)
#   run      run as written, in the test's folder, with the substitutions given
#   suite    the test command itself: CI (.ci/run) runs exactly it
#   slurm    run on the Slurm cluster by the test of tests/test_slurm_cluster.py it names (root only)
#   manual   cannot run unattended (why); `detail` is the check that runs instead
COMMANDS = {
    "./bootstrap.sh && .venv/bin/snakemake --cores all": ("study", None),
    "./bootstrap.sh --dev && .venv/bin/python -m pytest": ("suite", None),
    f"{PY} -m dlscale.workloads.images prepare data/mine --tree /data/imagenet/train --shards 64 --on-corrupt skip": (
        "run",
        {"/data/imagenet/train": "data/train", "--shards 64": "--shards 2"},
    ),
    f"{PY} -m dlscale.workloads.images make data/train --images 1000 --classes 10": (
        "run",
        {"--images 1000": "--images 8"},
    ),
    f"{PY} -m dlscale.workloads.images tfrecord data/train data/tfrecord --shards 8": (
        "run",
        {"--shards 8": "--shards 2"},
    ),
    f"{PY} -m dlscale.workloads.images recordio data/train data/recordio/train": ("run", {}),
    f"{DLSCALE} retry": ("run", {}),
    f"{DLSCALE} retry framework=mxnet model=alexnet": ("run", {}),
    f"{DLSCALE} retry --configfile config/emulated.yaml -- --dry-run": ("run", {}),
    f"{DLSCALE} unlock": ("run", {}),  # its refusing and removing: tests/test_interrupts.py
    ".venv/bin/snakemake --cores all": ("study", None),
    f"{DLSCALE} check-config config/gpu.yaml": ("run", {}),
    f"{DLSCALE} retry --configfile config/emulated.yaml --config repeats=1": ("run", {}),
    "./bootstrap.sh && .venv/bin/snakemake --cores all --configfile config/emulated.yaml": ("study", None),
    f"{DLSCALE} emulate run --nodes 2 --rate-mbit 300 -- sh -c 'mpirun --allow-run-as-root --hostfile "
    "$DLSCALE_HOSTFILE -np 2 hostname'": ("run", {}),
    f"{DLSCALE} emulate up demo --nodes 4 --rate-mbit 1000 --hostfile /tmp/demo.hosts": (
        "run",
        {"/tmp/demo.hosts": "{folder}/demo.hosts", "&& cleanup": f"{DLSCALE} emulate down demo"},
    ),
    f"{DLSCALE} emulate list": ("run", {}),
    # what it finds: tests/test_environments.py (a bare venv, one that has the frameworks)
    f"{DLSCALE} env check": ("run", {}),
    f"{DLSCALE} env build --framework jax": ("run", {}),  # built once (the tests' JAX runs need it too)
    f"{DLSCALE} env check --python /opt/site/pytorch/bin/python --framework torch": (
        "run",
        {"/opt/site/pytorch/bin/python": PY},
    ),
    f"{DLSCALE} compare results-workstation results-gpu-node -o compare": (
        "manual",
        (
            "needs finished studies from two machines; tests/test_compare.py runs it on two real shrunk studies",
            f"{DLSCALE} compare --help",
        ),
    ),
    f"{DLSCALE} compare results docs/example -o compare": (
        "manual",
        (
            "needs a finished study; tests/test_pipeline.py compares its study with docs/example",
            f"{DLSCALE} compare --help",
        ),
    ),
    "python3 -m venv ~/dlscale && ~/dlscale/bin/pip install dlscale-0.3.0-py3-none-any.whl": (
        "manual",
        (
            "tests/test_package.py builds the wheel as a release does and installs it into an empty venv",
            "python3 -m venv --help",
        ),
    ),
    "~/dlscale/bin/dlscale init st && ~/dlscale/bin/dlscale run st": (
        "manual",
        (
            "the default study takes half an hour; tests/test_package.py runs init and run (and every other "
            "command) from the wheel in an empty venv on a shrunk study",
            f"{DLSCALE} init --help",
        ),
    ),
    f"{DLSCALE} plan results --candidates candidates.yaml -o plan": (
        "manual",
        (
            "needs a finished study; tests/test_compare.py runs plan on real shrunk studies with the guide's "
            "candidates file",
            f"{DLSCALE} plan --help",
        ),
    ),
    ".venv/bin/snakemake --cores all --configfile config/device-choice.yaml": ("study", None),
    ".venv/bin/snakemake --cores all --configfile config/device-choice-emulated.yaml": ("study", None),
    f"{PY} bench/device_choice.py results/device-choice results/device-choice-emulated": (
        "manual",
        (
            "needs both finished studies (about 40 minutes here); checked for its arguments",
            f"{PY} bench/device_choice.py --help",
        ),
    ),
    f'{PY} -m pytest -m "not slow"': (
        "manual",
        (
            "the fast tier runs inside the whole suite already; here it is collected, the slow tests left out",
            f'{PY} -m pytest -m "not slow" --collect-only -q -p no:cacheprovider | tail -1 '
            '| grep -E "^[0-9]+/[0-9]+ tests collected .[0-9]+ deselected."',
        ),
    ),
    f"{DLSCALE} example results docs/example": (
        "manual",
        (
            "needs a finished default study (12 minutes and more); tests/test_pipeline.py runs it on a fresh tiny "
            "study and checks the committed example has that report's form",
            "{PY} -c \"from dlscale.runtime import example; assert example.form_of('docs/example')[1]\"",
        ),
    ),
    f"{DLSCALE} emulate down demo": ("run", {}),
    f"{DLSCALE} init ~/studies/workstation --from emulated": ("run", {"~/studies": "{folder}/studies"}),
    f"{DLSCALE} run ~/studies/workstation": (
        "manual",
        (
            "a whole study (12 minutes and more); tests/test_package.py runs a shrunk one in a folder of its own from "
            "the installed wheel; here a fresh folder's run is planned",
            f'd=$(mktemp -d) && {DLSCALE} init "$d/w" && {DLSCALE} run "$d/w" -- -n | grep -q "This was a dry-run"',
        ),
    ),
    "./bootstrap.sh": ("run", {}),
    "cp config/slurm.yaml my-cluster.yaml": ("run", {"config/": f"{ROOT}/config/"}),
    "$EDITOR profiles/slurm/config.yaml": (
        "manual",
        (
            "opens an editor on the Slurm profile",
            f"{PY} -c \"import yaml; yaml.safe_load(open('profiles/slurm/config.yaml'))\"",
        ),
    ),
    ".venv/bin/snakemake --profile profiles/slurm --configfile my-cluster.yaml --dry-run": ("dry-run", "slurm.yaml"),
    ".venv/bin/snakemake --profile profiles/slurm --configfile my-cluster.yaml": ("dry-run", "slurm.yaml"),
    f"{DLSCALE} slurm up --nodes 2 --rate-mbit 1000": ("slurm", ("cluster", "UP")),
    "export SLURM_CONF=/run/dlscale-slurm/slurm.conf": (
        "manual",
        (
            "sets SLURM_CONF for the shell; checked against where `slurm up` writes it",
            "{PY} -c \"from dlscale.runtime import slurm; assert str(slurm.CONF) == '/run/dlscale-slurm/slurm.conf'\"",
        ),
    ),
    ".venv/bin/snakemake --profile profiles/slurm --configfile config/slurm.yaml config/slurm-emulated.yaml": (
        "slurm",
        ("test_a_study_under_slurm_has_the_tables_of_the_same_study_under_mpirun", "STUDY"),
    ),
    f"{DLSCALE} slurm down": ("slurm", ("test_down_removes_the_cluster_and_everything_running_on_it", "DOWN")),
    "export DLSCALE_ENV_VARIANT=cuda": (
        "manual",
        (
            "sets the variant for the shell; checked with the cuda variant's recipe",
            "DLSCALE_ENV_VARIANT=cuda {PY} -c "
            "\"from dlscale.environment import build; assert build.variant() == 'cuda'\"",
        ),
    ),
    ".venv/bin/snakemake --cores all --configfile config/gpu.yaml": ("study", None),
    ".venv/bin/snakemake --cores all --configfile config/gpu.yaml --config precision=mixed results=results/gpu-mixed "
    "logs=logs/gpu-mixed": ("study", None),
    f"{PY} bench/overhead.py --device gpu --framework torch": (
        "manual",
        ("needs a GPU", f"{PY} bench/overhead.py --help"),
    ),
    "pip download --no-deps --no-binary :all: horovod==0.28.1 -d carry": (
        "manual",
        ("downloads from PyPI for the GPU machine, which has no registry", "pip download --help"),
    ),
    "pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform "
    "manylinux_2_17_x86_64 -d carry cffi pycparser jsonschema jsonschema-specifications referencing rpds-py": (
        "manual",
        ("downloads from PyPI for the GPU machine, which has no registry", "pip download --help"),
    ),
    "python3 -m pip install --no-index --no-deps --target /tmp/site carry/*.whl && export PYTHONPATH=/tmp/site": (
        "manual",
        ("on the GPU machine, with the wheels downloaded above", "python3 -m pip install --help"),
    ),
    "python3 -m dlscale.environment.gpunode carry/horovod-0.28.1.tar.gz /tmp/wheels": (
        "manual",
        ("builds Horovod with NCCL on the GPU machine", f"{PY} -m dlscale.environment.gpunode --help"),
    ),
    "python3 -m pip install --no-index --no-deps --target /tmp/site /tmp/wheels/horovod-*.whl": (
        "manual",
        ("on the GPU machine, with the wheel built above", "python3 -m pip install --help"),
    ),
    "python3 -m pytest tests/test_gpu.py": ("run", {"python3": PY}),
    # the GPU node's commands on this machine's CPU: the same direct rank in the node's Python, shrunk
    "python3 bench/overhead.py --framework torch --ranks 1 --launcher direct --python python3 --device gpu "
    "--model resnet50 --batch-size 64 --image-size 224 --threads 4 --warmup 5 --iterations 20 --trials 3": (
        "run",
        _on_the_cpu_shrunk("--iterations 20"),
    ),
    "python3 bench/overhead.py --framework torch --library native --ranks 1 --launcher direct --python python3 "
    "--device gpu --model resnet50 --batch-size 64 --image-size 224 --threads 4 --warmup 5 --iterations 40 "
    "--trials 3": ("run", _on_the_cpu_shrunk("--iterations 40")),
    # the GPU run's command on this machine's CPU: the same direct rank and its cores, shrunk
    "python3 bench/cores.py --framework torch --library native --device gpu --launcher direct --python python3 "
    "--model resnet50 --batch-size 64 --image-size 224 --threads 1 4 --iterations 40 --trials 3": (
        "run",
        {
            "python3 bench/cores.py": f"{PY} {ROOT}/bench/cores.py",
            "--device gpu": "--device cpu",
            "--python python3": f"--python {PY}",
            "--model resnet50 --batch-size 64 --image-size 224 --threads 1 4 --iterations 40 --trials 3": (
                "--model tinynet --batch-size 4 --image-size 32 --threads 1 --iterations 2 --trials 1 "
                "--out {folder}/cores.csv"
            ),
        },
    ),
    f"{PY} -m mkdocs build --strict": ("run", {"--strict": "--strict -d {folder}/site"}),
    f"{PY} -m docs.generate": ("run", {"-m docs.generate": "-m docs.generate --check"}),
    ".venv/bin/snakemake --cores all --configfile config/emulated.yaml config/libraries.yaml": ("study", None),
    f"{PY} bench/overhead.py --framework torch tensorflow --library native": (
        "run",
        {
            f"{PY} bench/overhead.py": f"{PY} {ROOT}/bench/overhead.py --model tinynet "
            "--iterations 2 --warmup 1 --trials 1 --ranks 2 --out overhead.csv"
        },
    ),
    f"{PY} bench/block_error.py --studies 2000": (
        "run",
        {
            f"{PY} bench/block_error.py --studies 2000": f"{PY} {ROOT}/bench/block_error.py --studies 20 --out "
            + "{folder}/be.csv"
        },
    ),
    f"{PY} bench/overhead.py": (
        "run",
        {
            f"{PY} bench/overhead.py": f"{PY} {ROOT}/bench/overhead.py --model tinynet "
            "--iterations 2 --warmup 1 --trials 1 --ranks 1 --out overhead.csv"
        },
    ),
}


def test_every_documented_command_says_how_it_is_tested():
    docs = documented()
    untested = [f"{where}: {c}" for c, where in docs.items() if c not in COMMANDS]
    assert not untested, "add these to COMMANDS (how the test runs them):\n" + "\n".join(untested)
    assert not [c for c in COMMANDS if c not in docs], "no longer in the docs: remove from COMMANDS"


def _shell(command, cwd, timeout=900):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _venv_python(command):
    """`.venv/bin/python` and `.venv/bin/snakemake` are this test's own interpreter's."""
    return (
        command.replace(".venv/bin/python", sys.executable)
        .replace(".venv/bin/snakemake", f"{sys.executable} -m snakemake")
        .replace(".venv/bin/dlscale", str(Path(sys.executable).parent / "dlscale"))
    )


def _configfiles(argv):
    files = []
    for i, arg in enumerate(argv):
        if arg == "--configfile":
            files += [a for a in argv[i + 1 :] if not a.startswith("-")][:1]
    return files


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("command", sorted(set(COMMANDS)))
def test_documented_command(command, tmp_path):
    kind, detail = COMMANDS[command]
    if kind == "suite":
        assert command in (ROOT / ".ci" / "run").read_text()
        return
    if kind == "study":  # the run itself is test_shipped_configs'; here its options are checked
        argv = shlex.split(command.split("&&")[-1])
        configs = _configfiles(argv) or ["config/config.yaml"]
        assert all((ROOT / c).is_file() for c in configs)
        items = argv[argv.index("--config") + 1 :] if "--config" in argv else []
        if items:
            proc, _ = run_shrunk(configs, tmp_path, ["--dry-run", "--config", *items])
            assert proc.returncode == 0, proc.stderr[-3000:]
        return
    if kind == "dry-run":  # a copy of the shipped config, as the docs have users make
        shutil.copy(ROOT / "config" / detail, tmp_path / "my-cluster.yaml")
        argv = _venv_python(command).replace("my-cluster.yaml", str(tmp_path / "my-cluster.yaml"))
        proc = subprocess.run(
            shlex.split(argv) + (["--dry-run"] if "--dry-run" not in argv else []),
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "This was a dry-run" in proc.stdout and re.search(r"^run\s+\d+$", proc.stdout, re.M)
        return
    if kind == "slurm":  # the test (or fixture) that runs it there, with these very arguments
        from tests import test_slurm_cluster as on_slurm

        runner, arguments = detail
        assert callable(getattr(on_slurm, runner)), runner
        assert command.endswith(" ".join(getattr(on_slurm, arguments))), (command, arguments)
        return
    if kind == "manual":
        why, check = detail
        proc = _shell(_venv_python(check.replace("{PY}", PY)), ROOT)
        assert proc.returncode == 0, f"{why}: {check}: {proc.stderr[-2000:]}"
        return
    _run(command, detail, tmp_path)


def _run(command, substitutions, folder):
    if " emulate " in command or "emulated.yaml" in command:
        if not EMULATION:
            pytest.skip(f"emulated clusters: {WHY_NO_EMULATION}")
    cleanup = substitutions.get("&& cleanup")
    for old, new in substitutions.items():
        if old != "&& cleanup":
            command = command.replace(old, new.replace("{folder}", str(folder)))
    command = _venv_python(command)
    if "dlscale.workloads.images" in command and "make" not in command.split():
        _shell(f"{sys.executable} -m dlscale.workloads.images make data/train --images 8 --classes 2", folder)
    if " retry" in command:  # this checkout's own results are not the test's to redo
        before, sep, after = command.partition(" -- ")
        command = f"{before} --config results={folder / 'results'}{sep}{after}"
    # commands that write data/ or a copy of a config do it in the test's folder; the rest run where
    # users run them, in the checkout
    writes = "dlscale.workloads.images" in command or command.startswith("cp ") or "overhead.py" in command
    cwd = folder if writes else ROOT
    if "tests/test_gpu.py" in command:
        command = command.replace(f"{sys.executable} -m pytest", f"{sys.executable} -m pytest -p no:cacheprovider")
    try:
        proc = _shell(command, cwd)
    finally:
        if cleanup:
            _shell(_venv_python(cleanup), ROOT)
    assert proc.returncode == 0, f"{command}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
