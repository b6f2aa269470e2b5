"""TensorFlow's own environment, per variant: what dlscale/environment/recipe.py installs for it (beside
numpy and mpi4py, which every rank has, and Horovod's requirements). Declarations only, read under
the bare Python that builds the environments."""

# tensorflow[and-cuda] 2.21.0: CUDA 12.5+ libraries from PyPI; kernels for sm_60-sm_89, H100 (sm_90)
# through PTX compiled at start-up (read from the wheels, November 2026; not yet run on a GPU here).
PINS = {"cpu": {"tensorflow-cpu": "2.21.0"}, "cuda": {"tensorflow[and-cuda]": "2.21.0"}}
WORKLOAD_PINS = ()
EXACT_CUDA_PINS = ()
# The NCCL wheel of its CUDA release (its and-cuda extra takes the CUDA 12 build), at recipe.NCCL_VERSION.
NCCL_WHEEL = "nvidia-nccl-cu12"
HOROVOD_BUILD = ("TensorFlow", "HOROVOD_WITH_TENSORFLOW")
CUDA_HEADERS = ()
# Header folders inside its wheel that its own headers include but that are not on the default
# include path, relative to its include directory (the function that gives it).
INCLUDE_DIR = "tensorflow.sysconfig.get_include"
HOROVOD_INCLUDES = ("external/highwayhash", "external/farmhash_archive/src")
SITE_SHIM = None
DRIVER_LINKED = None
