import json

import pytest

from dlscale.core import paths
from dlscale.core.vocabulary import HOSTS_ENV
from dlscale.runtime import checks, execution, launch, launchers
from dlscale.runtime import config as cfg
from tests.conftest import ENV_RECORD, tiny_config, tiny_run


def test_mpirun_argv_single_node_exact():
    job = launchers.Job(
        ["localhost"],
        2,
        launch.workload_command("/env/bin/python", "/r/spec.json"),
        {"OMP_NUM_THREADS": "1", "PYTHONPATH": "/repo"},
        as_root=True,
    )
    argv = launchers.mpirun_argv(job, {"name": "mpirun", "bind_to": "none"})
    assert argv == [
        "mpirun",
        "--allow-run-as-root",
        "-np",
        "2",
        "--host",
        "localhost:2",
        "--map-by",
        "ppr:2:node",
        "--bind-to",
        "none",
        "-x",
        "OMP_NUM_THREADS=1",
        "-x",
        "PYTHONPATH=/repo",
        "/env/bin/python",
        "-m",
        "dlscale.workloads.train",
        "/r/spec.json",
    ]


def test_mpirun_argv_cluster_exact():
    launcher = {"name": "mpirun", "bind_to": "core", "oversubscribe": True, "extra_args": ["--mca", "pml", "ucx"]}
    job = launchers.Job(
        ["node01", "node02", "node03"],
        4,
        ["py", "-m", "dlscale.workloads.train", "s.json"],
        {"UCX_TLS": "rc,sm", "HOROVOD_FUSION_THRESHOLD": "0"},
    )
    argv = launchers.mpirun_argv(job, launcher)
    assert argv == [
        "mpirun",
        "-np",
        "12",
        "--host",
        "node01:4,node02:4,node03:4",
        "--map-by",
        "ppr:4:node",
        "--bind-to",
        "core",
        "--oversubscribe",
        "-x",
        "HOROVOD_FUSION_THRESHOLD=0",
        "-x",
        "UCX_TLS=rc,sm",
        "--mca",
        "pml",
        "ucx",
        "py",
        "-m",
        "dlscale.workloads.train",
        "s.json",
    ]


def test_horovodrun_argv_exact():
    launcher = {
        "name": "horovodrun",
        "bind_to": "core",
        "oversubscribe": True,
        "network_interfaces": ["ib0", "ib1"],
        "extra_args": ["--mca", "pml", "ucx"],
    }
    job = launchers.Job(
        ["node01", "node02"],
        4,
        ["py", "-m", "dlscale.workloads.train", "s.json"],
        {"UCX_TLS": "rc,sm", "OMP_NUM_THREADS": "2"},
    )
    argv = launchers.horovodrun_argv(job, launcher)
    assert argv == [
        "horovodrun",
        "-np",
        "8",
        "-H",
        "node01:4,node02:4",
        "--mpi",
        "--binding-args=--bind-to core --map-by ppr:4:node --oversubscribe",
        "--network-interfaces=ib0,ib1",
        "--mpi-args=--mca pml ucx",
        "env",
        "OMP_NUM_THREADS=2",
        "UCX_TLS=rc,sm",
        "py",
        "-m",
        "dlscale.workloads.train",
        "s.json",
    ]


def test_srun_argv_exact():
    launcher = {"name": "srun", "bind_to": "core", "mpi": "pmi2", "extra_args": ["--gpus-per-task=1"]}
    job = launchers.Job([None] * 4, 2, ["py", "-m", "dlscale.workloads.train", "s.json"], {"UCX_TLS": "rc,sm"}, 8)
    argv = launchers.srun_argv(job, launcher)
    assert argv == [
        "srun",
        "--nodes=4",
        "--ntasks=8",
        "--ntasks-per-node=2",
        "--cpus-per-task=8",
        "--cpu-bind=cores",
        "--mpi=pmi2",
        "--kill-on-bad-exit=1",
        "--gpus-per-task=1",
        "env",
        "UCX_TLS=rc,sm",
        "py",
        "-m",
        "dlscale.workloads.train",
        "s.json",
    ]
    plain = launchers.srun_argv(launchers.Job([None], 1, ["py"]), {"name": "srun"})
    assert plain == [
        "srun",
        "--nodes=1",
        "--ntasks=1",
        "--ntasks-per-node=1",
        "--cpus-per-task=1",
        "--cpu-bind=none",
        "--mpi=pmix",
        "--kill-on-bad-exit=1",
        "py",
    ]


@pytest.mark.slow
def test_srun_without_slurm_fails_the_run_with_the_reason(base_config, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no srun anywhere
    base_config.update(results=str(tmp_path / "results"), logs=str(tmp_path / "logs"))
    base_config["launcher"]["name"] = "srun"
    run = tiny_run()
    status = launch.launch(base_config, run, {"python": "python3"})
    assert status["status"] == "failed"
    assert status["reasons"][0].startswith("launcher srun: no srun on PATH")


def test_rank_env_sets_threads_and_config_env(base_config):
    base_config["threads_per_rank"] = 3
    base_config["launcher"]["env"] = {"HOROVOD_CYCLE_TIME": 1}
    env = launch.rank_env(cfg.job_plan(base_config))
    assert env["OMP_NUM_THREADS"] == "3" and env["MKL_NUM_THREADS"] == "3"
    assert env["HOROVOD_CYCLE_TIME"] == "1"
    # autotuning and TF32 alike for every framework
    assert (env["TF_CUDNN_USE_AUTOTUNE"], env["MXNET_CUDNN_AUTOTUNE_DEFAULT"], env["NVIDIA_TF32_OVERRIDE"]) == (
        "1",
        "1",
        "0",
    )
    base_config.update(autotune=False, tf32=True)
    env = launch.rank_env(cfg.job_plan(base_config))
    assert (env["TF_CUDNN_USE_AUTOTUNE"], env["MXNET_CUDNN_AUTOTUNE_DEFAULT"]) == ("0", "0")
    assert "NVIDIA_TF32_OVERRIDE" not in env


@pytest.mark.slow
def test_execute_kills_the_whole_group_on_timeout(tmp_path):
    log = tmp_path / "log"
    # a parent whose child would outlive it if only the parent were killed
    rc, timed_out = execution.execute(["bash", "-c", "sleep 30 & echo started; wait"], log, timeout_s=1)
    assert timed_out and rc != 0
    assert "started" in log.read_text()


def test_first_error_finds_the_root_cause():
    log = """[1,0]<stderr>:Traceback (most recent call last):
  File "x.py", line 1, in <module>
ModuleNotFoundError: No module named 'mxnet'
RuntimeError: later echo
mpirun detected that one or more processes exited with non-zero status"""
    assert checks.first_error(log) == "ModuleNotFoundError: No module named 'mxnet'"
    assert checks.first_error("all fine\n") is None
    assert (
        checks.first_error("horovod.common.exceptions.HorovodInternalError: lost rank 1")
        == "horovod.common.exceptions.HorovodInternalError: lost rank 1"
    )


@pytest.mark.slow
def test_every_rank_is_told_the_jobs_hosts(tmp_path):
    """A library that meets at rank 0 (JAX's coordination service) finds it from the environment: the
    job's hosts, rank 0's first, exported by the launcher from the hostfile (DLSCALE_HOSTS)."""
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("localhost slots=4\n")
    conf = tiny_config(tmp_path, hostfile=str(hostfile))
    status = launch.launch(conf, tiny_run(), ENV_RECORD)
    assert status["status"] == "ok", status
    run_dir, _, _ = paths.run_files(conf, tiny_run())
    argv = json.loads((run_dir / "spec.json").read_text())["launch"]["argv"]
    assert argv[argv.index(f"{HOSTS_ENV}=localhost") - 1] == "-x"


def test_each_registered_launcher_says_what_it_needs_and_srun_alone_lets_the_scheduler_place():
    assert launchers.NAMES == ("mpirun", "horovodrun", "srun")
    assert [n for n, c in launchers.LAUNCHERS.items() if c.scheduler_places_ranks] == ["srun"]
    assert launchers.EMULATED is launchers.LAUNCHERS["mpirun"]
    missing = launchers.Srun()
    missing.program = "no-such-srun"
    with pytest.raises(launchers.LauncherError, match="launcher srun: no no-such-srun on PATH .run the study inside"):
        missing.check()
    job = launchers.Job([None, None], 2, ["py"])
    assert launchers.LAUNCHERS["srun"].argv(job, {"name": "srun"}) == launchers.srun_argv(job, {"name": "srun"})


def test_jobs_started_at_once_give_mpirun_a_session_directory_of_its_own():
    """launchers.apart: Open MPI's mpirun gets `--mca orte_tmpdir_base DIR` before the launcher's own
    extra arguments; a launcher without mpirun's shared session directory is left as it is."""
    mpirun = {"name": "mpirun", "bind_to": "none", "extra_args": ["--report-bindings"]}
    apart = launchers.apart(mpirun, "/tmp/dlscale-copy-x")
    assert apart["extra_args"] == ["--mca", "orte_tmpdir_base", "/tmp/dlscale-copy-x", "--report-bindings"]
    job = launchers.Job(["localhost"], 1, ["python", "-c", "pass"], {})
    argv = launchers.mpirun_argv(job, apart)
    assert argv[argv.index("orte_tmpdir_base") - 1 : argv.index("python")][:3] == [
        "--mca",
        "orte_tmpdir_base",
        "/tmp/dlscale-copy-x",
    ]
    assert mpirun["extra_args"] == ["--report-bindings"]  # the study's launcher untouched
    srun = {"name": "srun"}
    assert launchers.apart(srun, "/tmp/x") is srun
