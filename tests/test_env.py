"""The environment builder's pure parts, and the environment the tests run in."""

import io
import os
import subprocess
import sys

import pytest

from dlscale.environment import build as env
from dlscale.environment import recipe as envspec


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
    monkeypatch.setitem(envspec.TOOL_PINS, "snakemake", "9.28.0")
    assert env.env_key(mpi) != key


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "mxnet", "jax"])
def test_each_framework_has_an_environment_named_and_rebuilt_by_its_own_pins_alone(framework, monkeypatch):
    """Each framework's own environment lives beside the workload environment under a name of its own;
    a change of its pins (in its package's pins.py) names a new one of it and leaves the workload
    environment and the other frameworks' as they are."""
    mpi = {"version": "mpirun (Open MPI) 4.1.4", "mpicc": "/usr/bin/mpicc"}
    workload, own = env.env_dir(mpi), env.env_dir(mpi, own=framework)
    others = {fw: env.env_dir(mpi, own=fw) for fw in envspec.OWN_ENVIRONMENTS if fw != framework}
    assert own.parent == workload.parent and own.name.startswith("py3") and f"-{framework}-" in own.name
    pins = envspec.declared(framework).PINS[env.variant()]  # its package's, in the variant the tests run
    monkeypatch.setitem(pins, next(iter(pins)), "0.0.1")
    assert env.env_dir(mpi, own=framework) != own and env.env_dir(mpi) == workload
    assert {fw: env.env_dir(mpi, own=fw) for fw in others} == others


def test_the_workload_environment_holds_no_framework_and_each_horovod_is_built_for_one():
    """The workload environment (the pipeline, the analysis, the tests' tools) has no framework and
    no Horovod in either variant; each Horovod framework's own environment builds Horovod for it
    alone; JAX's has numpy 2 and no Horovod."""
    frameworks = {"torch", "tensorflow-cpu", "tensorflow[and-cuda]", "mxnet", "mxnet-cu117", "jax", "cmake"}
    assert not set(envspec.all_pins()) & frameworks
    for variant in envspec.VARIANTS:
        assert "horovod" not in envspec.content(variant)
        assert envspec.requirements(variant) == envspec.requirements("cpu")
    for fw, (_, switch) in envspec.HOROVOD_FRAMEWORKS.items():
        for variant in envspec.VARIANTS:
            switches = envspec.content(variant, own=fw)["horovod_build_env"]
            without = {s.replace("_WITH_", "_WITHOUT_") for _, s in envspec.HOROVOD_FRAMEWORKS.values()}
            others = without - {switch.replace("_WITH_", "_WITHOUT_")}
            assert switches[switch] == "1" and all(switches[o] == "1" for o in others) and len(others) == 2
            assert envspec.own_pins(fw, variant)["numpy"] == "1.26.4"
    assert envspec.own_pins("jax")["numpy"].startswith("2.") and "horovod" not in envspec.content("cpu", own="jax")


def test_incomplete_environment_is_not_complete(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text("")
    assert not env.is_complete(tmp_path)
    (tmp_path / env.MARKER).write_text("ok\n")
    assert env.is_complete(tmp_path)


@pytest.mark.parametrize("framework", list(envspec.HOROVOD_FRAMEWORKS))
def test_each_horovod_frameworks_environment_has_horovod_built_for_it(framework):
    python = env.build(quiet=True, own=framework) / "bin" / "python"
    out, missing = env.check_build(python, framework, env.variant())  # NCCL too in the cuda variant
    assert missing == [], out


def test_mxnet_imports_through_the_numpy_shim_in_its_environment_and_the_tests_overlay():
    """MXNet 1.9.1 reads numpy.bool (gone from numpy 1.24 on): the shim its environment imports
    through a .pth file restores it, in MXNet's own Python and in the tests' overlay on it."""
    code = "import numpy, mxnet; print(numpy.__version__, mxnet.__version__, float(mxnet.nd.ones(3).sum().asscalar()))"
    pins = envspec.own_pins("mxnet")
    for python in (env.build(quiet=True, own="mxnet") / "bin" / "python", sys.executable):
        out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.split() == [pins["numpy"], pins["mxnet"], "3.0"]


def test_cuda_variant_builds_each_framework_apart_with_nccl(monkeypatch):
    """The cuda variant's environments are folders of their own; each Horovod framework's holds its
    GPU build alone, with Horovod built for it with NCCL, and all three the same NCCL release."""
    mpi = {"version": "mpirun (Open MPI) 4.1.4", "mpicc": "/usr/bin/mpicc"}
    assert env.env_key(mpi, "cuda") != env.env_key(mpi, "cpu")
    builds = {"torch": "torch", "tensorflow": "tensorflow[and-cuda]", "mxnet": "mxnet-cu117"}
    nccl = set()
    for fw, wheel in builds.items():
        cuda = envspec.content("cuda", own=fw)
        assert cuda["horovod_build_env"]["HOROVOD_GPU_OPERATIONS"] == "NCCL"
        assert "HOROVOD_GPU_OPERATIONS" not in envspec.content("cpu", own=fw)["horovod_build_env"]
        assert wheel in cuda["pins"] and not set(cuda["pins"]) & (set(builds.values()) - {wheel})
        assert envspec.horovod_features(fw, "cuda")[-1] == "NCCL" and "NCCL" not in envspec.horovod_features(fw)
        nccl |= {version for name, version in cuda["pins"].items() if name.startswith("nvidia-nccl-")}
    assert len(nccl) == 1
    assert "tensorflow-cpu" not in envspec.own_pins("tensorflow", "cuda")
    # the CUDA torch exactly (a local 2.13.0+cpu wheel satisfies ==2.13.0, not ===2.13.0)
    assert "torch===2.13.0" in envspec.requirements("cuda", own="torch")
    assert "torch==2.13.0" in envspec.requirements(own="torch")
    monkeypatch.setenv(env.VARIANT_VAR, "cuda")
    py = f"py{sys.version_info.major}{sys.version_info.minor}"
    assert env.env_dir(mpi).name.startswith(f"{py}-cuda-")
    assert env.env_dir(mpi, own="mxnet").name.startswith(f"{py}-cuda-mxnet-")
    monkeypatch.setenv(env.VARIANT_VAR, "rocm")
    with pytest.raises(env.EnvError, match="DLSCALE_ENV_VARIANT='rocm': the environment variants are cpu, cuda"):
        env.variant()


def fake_toolkit(root, release):
    """A CUDA toolkit folder whose nvcc answers --version and --dryrun as nvcc does."""
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("")
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(f"""#!/bin/sh
case "$1" in
  --version) echo "Cuda compilation tools, release {release}, V{release}.1";;
  --dryrun) echo '#$ TOP={root}/bin/..' >&2;;
esac
""")
    nvcc.chmod(0o755)
    return root


def test_cuda_build_finds_the_toolkit_of_the_right_release_and_links_pip_nccl(tmp_path, monkeypatch):
    for var in ("CUDA_HOME", "HOROVOD_CUDA_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    real_exists = env.Path.exists
    monkeypatch.setattr(
        env.Path, "exists", lambda self: not str(self).startswith("/usr/local/cuda") and real_exists(self)
    )
    with pytest.raises(env.EnvError, match="no CUDA toolkit with nvcc and its headers was found"):
        env.find_cuda_home()
    # A wrapper script on PATH (as site modules and this machine have) leads to the toolkit it runs.
    toolkit = fake_toolkit(tmp_path / "cuda-13.0", "13.0")
    (tmp_path / "wrapper").mkdir()
    wrapper = tmp_path / "wrapper" / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {toolkit}/bin/nvcc "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'wrapper'}:/usr/bin:/bin")
    assert env.find_cuda_home() == toolkit.resolve()
    monkeypatch.setenv("HOROVOD_CUDA_HOME", str(fake_toolkit(tmp_path / "cuda-12.4", "12.4")))
    with pytest.raises(
        env.EnvError,
        match=r"cuda-12.4 is release 12.4, and the cuda environments build Horovod with CUDA 13.x, "
        r"the release of PyTorch's wheel",
    ):
        env.find_cuda_home()
    monkeypatch.undo()
    lib = tmp_path / "nvidia" / "nccl" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnccl.so.2").write_text("")
    settings = env.nccl_build_env(tmp_path)
    assert settings["HOROVOD_NCCL_HOME"] == str(tmp_path / "nvidia" / "nccl")
    assert (lib / "libnccl.so").resolve() == (lib / "libnccl.so.2").resolve()


def test_a_frameworks_gpu_build_gets_its_own_nccl_headers_and_switches(tmp_path):
    """Each cuda environment builds Horovod with the toolkit found, the NCCL of its own wheels, the
    headers of its own CUDA wheels (MXNet's cuBLAS and cuRAND, PyTorch's CUDA 13 ones) and NCCL
    for that framework alone; only MXNet's build needs the driver stub (its library links the driver)."""
    site = tmp_path / "site"
    (site / "nvidia" / "nccl" / "lib").mkdir(parents=True)
    (site / "nvidia" / "nccl" / "lib" / "libnccl.so.2").write_text("")
    (site / "mxnet").mkdir()
    (tmp_path / "m.c").write_text("int cuInit(unsigned); int probe(void) { return cuInit(0); }\n")
    libmxnet = site / "mxnet" / "libmxnet.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(libmxnet), str(tmp_path / "m.c")], check=True)
    venv = tmp_path / "venv"
    for fw in envspec.HOROVOD_FRAMEWORKS:
        (tmp_path / fw).mkdir()
        cuda = env._cuda_build_env(tmp_path / fw, site, io.StringIO(), fw, "/opt/cuda-13.0")
        build_env = env._horovod_build_env(venv, sys.executable, cuda, fw, "cuda") if fw != "tensorflow" else None
        headers = [str(site / "nvidia" / lib / "include") for lib in envspec.CUDA_WHEEL_HEADERS.get(fw, [])]
        assert cuda["CPATH"] == headers and cuda["HOROVOD_CUDA_HOME"] == cuda["CUDA_HOME"] == "/opt/cuda-13.0"
        assert cuda["HOROVOD_NCCL_HOME"] == str(site / "nvidia" / "nccl")
        stubbed = (tmp_path / fw / "libcuda.so.1").exists()
        assert stubbed == (fw == "mxnet" and not driver_here()), fw
        if build_env:  # TensorFlow's also asks its own include folder (needs TensorFlow itself)
            assert build_env["CPATH"].split(os.pathsep)[: len(headers)] == headers
            assert build_env["HOROVOD_GPU_OPERATIONS"] == "NCCL" and build_env[envspec.HOROVOD_FRAMEWORKS[fw][1]] == "1"


def driver_here():
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def test_driver_stub_lets_a_library_that_links_the_driver_load_without_one(tmp_path):
    """mxnet-cu117 links libcuda.so.1; on a build machine without the NVIDIA driver the builder
    makes a stub of exactly the driver functions the library asks for, all reporting no device."""

    (tmp_path / "uses_driver.c").write_text(
        "int cuInit(unsigned); int cuDeviceGetCount(int *);\n"
        "int probe(void) { int n = 0; return cuInit(0) * 1000 + cuDeviceGetCount(&n); }\n"
    )
    library = tmp_path / "libuses_driver.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(tmp_path / "uses_driver.c")], check=True)
    stub = env.driver_stub(tmp_path, library)
    if driver_here():
        assert stub is None  # a machine with the driver builds against it
        return
    assert sorted(
        line.split("(")[0].split()[-1] for line in (tmp_path / "libcuda_stub.c").read_text().splitlines()
    ) == ["cuDeviceGetCount", "cuInit"]
    # in a process of its own, so that no stub driver stays loaded in the tests' process
    code = (
        f"import ctypes; ctypes.CDLL({str(stub / 'libcuda.so.1')!r}, mode=ctypes.RTLD_GLOBAL); "
        f"print(ctypes.CDLL({str(library)!r}).probe())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(100 * 1000 + 100)  # CUDA_ERROR_NO_DEVICE from both


def test_cuda_shim_keeps_the_numpy_shim(tmp_path):
    """The cuda variant's second import hook (MXNet's CUDA 11 libraries) must not hide the first."""
    (tmp_path / "sitecustomize.py").write_text(envspec.declared("mxnet").SITE_SHIM["text"]["cuda"])
    (tmp_path / "mxnet").mkdir()  # a stand-in: the hooks fire on the name, whichever build it is
    (tmp_path / "mxnet" / "__init__.py").write_text("")
    code = "import sys, mxnet, numpy; print(numpy.bool is bool, type(sys.meta_path[0]).__name__)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    ).stdout
    assert out.split() == ["True", "_MxnetCuda11Libraries"]
