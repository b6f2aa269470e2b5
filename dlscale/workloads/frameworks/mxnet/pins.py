"""MXNet's environment per variant, as dlscale/environment/recipe.py installs it (declarations only)."""

# mxnet-cu117 1.9.1, the last CUDA build of MXNet: kernels up to sm_86 and no PTX, so runs on H100 or
# newer fail. It links CUDA 11 libraries by name and ships none: these wheels (CUDA 11.8) provide them.
CUDA11_PINS = {
    "nvidia-cuda-runtime-cu11": "11.8.89",
    "nvidia-cublas-cu11": "11.11.3.6",
    "nvidia-cudnn-cu11": "8.9.6.50",
    "nvidia-cufft-cu11": "10.9.0.58",
    "nvidia-curand-cu11": "10.3.0.86",
    "nvidia-cusolver-cu11": "11.4.1.48",
    "nvidia-cusparse-cu11": "11.7.5.86",
    "nvidia-cuda-nvrtc-cu11": "11.8.89",
    "nvidia-nvtx-cu11": "11.8.86",
}
PINS = {"cpu": {"mxnet": "1.9.1"}, "cuda": {"mxnet-cu117": "1.9.1", **CUDA11_PINS}}
WORKLOAD_PINS = ()
EXACT_CUDA_PINS = ()
# The NCCL wheel it takes (libmxnet.so links libnccl.so.2 by name), at recipe.NCCL_VERSION: TensorFlow's.
NCCL_WHEEL = "nvidia-nccl-cu12"
HOROVOD_BUILD = ("MXNet", "HOROVOD_WITH_MXNET")
# Header folders of its CUDA 11 wheels that Horovod's build needs on CPATH (a minimal toolkit lacks
# them; not the CUDA runtime's, which would hide the toolkit's own).
CUDA_HEADERS = ("cublas", "curand", "cusolver", "cusparse", "cufft", "cuda_nvrtc", "cudnn")
INCLUDE_DIR, HOROVOD_INCLUDES = None, ()
# A library of its wheel that links the NVIDIA driver: Horovod's build links it against a driver stub.
DRIVER_LINKED = "mxnet/libmxnet.so"

# MXNet 1.9.1 reads `numpy.bool`, removed in numpy 1.24: this import hook restores it before mxnet is imported.
_NUMPY_SHIM = '''\
"""Installed by dlscale's environment builder: numpy.bool shim for MXNet 1.9.1."""
import importlib.abc
import sys


class _MxnetNumpyShim(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "mxnet":
            sys.meta_path.remove(self)
            import numpy

            if "bool" not in numpy.__dict__:
                numpy.bool = bool
        return None


sys.meta_path.insert(0, _MxnetNumpyShim())
'''

# The cuda variant's shim also loads its CUDA 11 libraries and NCCL, dependencies first, for libmxnet.so to find.
CUDA11_LIBS = """
libcudart.so.11.0 libcublasLt.so.11 libcublas.so.11 libnvrtc.so.11.2 libnvrtc-builtins.so.11.8 libcufft.so.10
libcurand.so.10 libcusparse.so.11 libcusolver.so.11 libcudnn_ops_infer.so.8 libcudnn_ops_train.so.8
libcudnn_cnn_infer.so.8 libcudnn_cnn_train.so.8 libcudnn_adv_infer.so.8 libcudnn_adv_train.so.8 libcudnn.so.8
libnvToolsExt.so.1 libnccl.so.2
""".split()
_CUDA_SHIM = f"""

class _MxnetCuda11Libraries(importlib.abc.MetaPathFinder):
    # Stays in sys.meta_path (removing it while the import system walks the list would skip the
    # numpy shim after it) and loads once.
    loaded = False

    def find_spec(self, name, path=None, target=None):
        if name == "mxnet" and not self.loaded:
            self.loaded = True
            import ctypes
            import glob
            import os

            site = os.path.dirname(os.path.abspath(__file__))
            for soname in {CUDA11_LIBS!r}:
                for lib in glob.glob(os.path.join(site, "nvidia", "*", "lib", soname)):
                    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
        return None


sys.meta_path.insert(0, _MxnetCuda11Libraries())
"""


# A module that a .pth file imports: unlike a sitecustomize, it also runs where the folder is added to another
# interpreter's path (dlscale.environment.build `link`).
SITE_SHIM = {
    "module": "_dlscale_mxnet_numpy",
    "pth": "dlscale-mxnet-numpy.pth",
    "text": {"cpu": _NUMPY_SHIM, "cuda": _NUMPY_SHIM + _CUDA_SHIM},  # per variant
}
