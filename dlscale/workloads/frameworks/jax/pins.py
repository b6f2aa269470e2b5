"""JAX's environment per variant, as dlscale/environment/recipe.py installs it (declarations only): its own, as
JAX from 0.7 needs numpy >= 2, which MXNet 1.9.1 cannot import; its loader's TensorFlow at TensorFlow's pin."""

_COMMON = {"flax": "0.12.8", "optax": "0.2.8", "numpy": "2.4.6", "tensorflow-cpu": "2.21.0"}
# cuda: its CUDA 13 build and plugin wheels (not yet run on a GPU: docs/limits.md).
PINS = {
    "cpu": {"jax": "0.10.2", "jaxlib": "0.10.2", **_COMMON},
    "cuda": {"jax[cuda13]": "0.10.2", "jaxlib": "0.10.2", **_COMMON},
}
WORKLOAD_PINS = ()
EXACT_CUDA_PINS = ()
NCCL_WHEEL = None
HOROVOD_BUILD = None
CUDA_HEADERS = ()
INCLUDE_DIR, HOROVOD_INCLUDES = None, ()
SITE_SHIM = None
DRIVER_LINKED = None
