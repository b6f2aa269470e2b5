"""Horovod for a GPU node that already has its PyTorch and CUDA and no package registry or MPI.

`python -m dlscale.environment.gpunode SDIST WHEEL_DIR [--cc 90]`: a Horovod wheel for this python with
the recipe's edits, PyTorch only, Gloo (no MPI), NCCL from PyTorch's nvidia-nccl wheel (docs/guides/gpus.md).
"""

import argparse
import os
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from pathlib import Path

from dlscale.environment import recipe
from dlscale.environment.build import EnvError, apply_edits, find_cuda_home

BUILD_ENV = {"HOROVOD_WITH_PYTORCH": "1", "HOROVOD_WITHOUT_TENSORFLOW": "1", "HOROVOD_WITHOUT_MXNET": "1"}
BUILD_ENV |= {"HOROVOD_WITHOUT_MPI": "1", "HOROVOD_WITH_GLOO": "1", "HOROVOD_CPU_OPERATIONS": "GLOO"}
BUILD_ENV |= {"HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_NCCL_LINK": "SHARED"}
# Gloo's CMakeLists asks for CMake 2.8; CMake 4 (the H100 image's) refuses that without this.
BUILD_ENV["CMAKE_POLICY_VERSION_MINIMUM"] = "3.5"
# Headers Horovod 0.28.1's Gloo and NCCL code uses without including them, which the H100 image's
# newer GCC's standard library no longer pulls in through others (group_table.h, common.h).
FORCED_INCLUDES = "-include string -include stdexcept -include cstdint"


def find_nccl(site, scratch):
    """(include dir, lib dir) of the nvidia-nccl wheel's NCCL; lib dir: a scratch folder with libnccl.so."""
    headers = sorted(Path(site).glob("nvidia/**/include/nccl.h"))
    libs = sorted(Path(site).glob("nvidia/**/lib/libnccl.so.2"))
    if not headers or not libs:
        raise EnvError(f"no NCCL (include/nccl.h and lib/libnccl.so.2 of an nvidia-nccl wheel) under {site}/nvidia")
    link = Path(scratch) / "nccl-lib"
    link.mkdir()
    for name in ("libnccl.so", "libnccl.so.2"):
        (link / name).symlink_to(libs[0])
    return headers[0].parent, link


def gpu_capability():
    import torch

    if not torch.cuda.is_available():
        raise EnvError("no GPU visible to PyTorch here: give the compute capabilities with --cc")
    major, minor = torch.cuda.get_device_capability(0)
    return f"{major}{minor}"


def build_wheel(sdist, wheel_dir, cc=None):
    site = sysconfig.get_paths()["purelib"]
    cc = cc or gpu_capability()
    home = find_cuda_home()
    wheel_dir = Path(wheel_dir).resolve()
    wheel_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dlscale-horovod-") as tmp:
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        src = Path(tmp) / f"horovod-{recipe.HOROVOD_VERSION}"
        if not src.is_dir():
            raise EnvError(f"{sdist} is not Horovod {recipe.HOROVOD_VERSION}'s source distribution")
        apply_edits(src, recipe.horovod_edits("cuda"))
        include, lib = find_nccl(site, tmp)
        cuda = {"HOROVOD_CUDA_HOME": str(home), "CUDA_HOME": str(home), "HOROVOD_BUILD_CUDA_CC_LIST": cc}
        nccl = {"HOROVOD_NCCL_INCLUDE": str(include), "HOROVOD_NCCL_LIB": str(lib)}
        cxxflags = " ".join(filter(None, [FORCED_INCLUDES, os.environ.get("CXXFLAGS")]))
        env = {**os.environ, **BUILD_ENV, **cuda, **nccl, "CXXFLAGS": cxxflags, "MAKEFLAGS": f"-j{os.cpu_count() or 2}"}
        offline = ["--no-build-isolation", "--no-deps", "--no-index", "-w", str(wheel_dir)]
        subprocess.run([sys.executable, "-m", "pip", "wheel", *offline, str(src)], env=env, check=True)
    return next(wheel_dir.glob("horovod-*.whl"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sdist")
    parser.add_argument("wheel_dir")
    parser.add_argument("--cc", help="compute capabilities, comma-separated (default: GPU 0's)")
    args = parser.parse_args(argv)
    print(build_wheel(args.sdist, args.wheel_dir, args.cc))


if __name__ == "__main__":
    main()
