from harness import launch


def test_mpirun_argv_single_node_exact():
    argv = launch.mpirun_argv(["localhost"], 2, {"name": "mpirun", "bind_to": "none"},
                              launch.workload_command("/env/bin/python", "/r/spec.json"),
                              {"OMP_NUM_THREADS": "1", "PYTHONPATH": "/repo"}, as_root=True)
    assert argv == ["mpirun", "--allow-run-as-root", "-np", "2", "--host", "localhost:2",
                    "--map-by", "ppr:2:node", "--bind-to", "none",
                    "-x", "OMP_NUM_THREADS=1", "-x", "PYTHONPATH=/repo",
                    "/env/bin/python", "-m", "workloads.train", "/r/spec.json"]


def test_mpirun_argv_cluster_exact():
    launcher = {"name": "mpirun", "bind_to": "core", "oversubscribe": True,
                "extra_args": ["--mca", "pml", "ucx"]}
    argv = launch.mpirun_argv(["node01", "node02", "node03"], 4, launcher, ["py", "-m", "workloads.train", "s.json"],
                              {"UCX_TLS": "rc,sm", "HOROVOD_FUSION_THRESHOLD": "0"})
    assert argv == ["mpirun", "-np", "12", "--host", "node01:4,node02:4,node03:4",
                    "--map-by", "ppr:4:node", "--bind-to", "core", "--oversubscribe",
                    "-x", "HOROVOD_FUSION_THRESHOLD=0", "-x", "UCX_TLS=rc,sm",
                    "--mca", "pml", "ucx", "py", "-m", "workloads.train", "s.json"]


def test_rank_env_sets_threads_and_config_env(base_config):
    base_config["threads_per_rank"] = 3
    base_config["launcher"]["env"] = {"HOROVOD_CYCLE_TIME": 1}
    env = launch.rank_env(base_config)
    assert env["OMP_NUM_THREADS"] == "3" and env["MKL_NUM_THREADS"] == "3"
    assert env["HOROVOD_CYCLE_TIME"] == "1"


def test_execute_kills_the_whole_group_on_timeout(tmp_path):
    log = tmp_path / "log"
    # a parent whose child would outlive it if only the parent were killed
    rc, timed_out = launch.execute(["bash", "-c", "sleep 30 & echo started; wait"], log, timeout_s=1)
    assert timed_out and rc != 0
    assert "started" in log.read_text()


def test_first_error_finds_the_root_cause():
    log = """[1,0]<stderr>:Traceback (most recent call last):
  File "x.py", line 1, in <module>
ModuleNotFoundError: No module named 'mxnet'
RuntimeError: later echo
mpirun detected that one or more processes exited with non-zero status"""
    assert launch.first_error(log) == "ModuleNotFoundError: No module named 'mxnet'"
    assert launch.first_error("all fine\n") is None
    assert launch.first_error("horovod.common.exceptions.HorovodInternalError: lost rank 1") == \
        "horovod.common.exceptions.HorovodInternalError: lost rank 1"
