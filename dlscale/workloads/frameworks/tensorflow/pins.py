"""TensorFlow's environment per variant, as dlscale/environment/recipe.py installs it (declarations only)."""

# tensorflow[and-cuda] 2.21.0: CUDA 12.5+ libraries; kernels for sm_60-sm_89, sm_90 through PTX.
PINS = {"cpu": {"tensorflow-cpu": "2.21.0"}, "cuda": {"tensorflow[and-cuda]": "2.21.0"}}
WORKLOAD_PINS = ()
EXACT_CUDA_PINS = ()
# The NCCL wheel of its CUDA release, at recipe.NCCL_VERSION.
NCCL_WHEEL = "nvidia-nccl-cu12"
HOROVOD_BUILD = ("TensorFlow", "HOROVOD_WITH_TENSORFLOW")
CUDA_HEADERS = ()
# Header folders its headers include that are not on the default path, under its include directory.
INCLUDE_DIR = "tensorflow.sysconfig.get_include"
HOROVOD_INCLUDES = ("external/highwayhash", "external/farmhash_archive/src")
SITE_SHIM = None
DRIVER_LINKED = None
