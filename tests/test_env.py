"""The environment builder's pure parts, and the environment the tests run in."""

import subprocess
import sys

import pytest

from harness import env, envspec


def test_edits_apply_once_and_refuse_a_mismatch(tmp_path):
    (tmp_path / "a.txt").write_text("set(X 14)\nother\n")
    env.apply_edits(tmp_path, [("a.txt", "set(X 14)", "set(X 17)")])
    assert (tmp_path / "a.txt").read_text() == "set(X 17)\nother\n"
    with pytest.raises(env.EnvError, match=r"expected exactly one 'set\(X 14\)' in a.txt, found 0"):
        env.apply_edits(tmp_path, [("a.txt", "set(X 14)", "set(X 17)")])


def test_key_depends_on_pins_and_mpi(monkeypatch):
    mpi = {"version": "mpirun (Open MPI) 4.1.4", "mpicc": "/usr/bin/mpicc"}
    key = env.env_key(mpi)
    assert env.env_key({**mpi, "version": "mpirun (Open MPI) 5.0.0"}) != key
    monkeypatch.setitem(envspec.FRAMEWORK_PINS, "torch", "2.14.0")
    assert env.env_key(mpi) != key


def test_incomplete_environment_is_not_complete(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text("")
    assert not env.is_complete(tmp_path)
    (tmp_path / env.MARKER).write_text("ok\n")
    assert env.is_complete(tmp_path)


def test_running_environment_has_every_framework_built_into_horovod():
    out, missing = env.check_build(sys.executable)
    assert missing == [], out


def test_mxnet_imports_through_the_numpy_shim():
    code = "import numpy, mxnet; print(numpy.__version__, mxnet.__version__, float(mxnet.nd.ones(3).sum().asscalar()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [envspec.FRAMEWORK_PINS["numpy"], envspec.FRAMEWORK_PINS["mxnet"], "3.0"]
