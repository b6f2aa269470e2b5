"""JAX's own environment, per variant: what dlscale/environment/recipe.py installs for it (beside
mpi4py, which every rank needs for the hosts' rendezvous; no Horovod: it has no binding).
Declarations only, read under the bare Python that builds the environments.

A current release (0.7 on) needs numpy >= 2, which MXNet 1.9.1 cannot import; sharing the workload
environment pinned it at 0.6.2 (bench/results/jax-environment.csv measures both, docs/methods/jax.md
says why it moved). Its image loader is tf.data (frameworks/tfdata.py): TensorFlow's CPU build in
both variants, at TensorFlow's own pin (it only reads and decodes files)."""

_COMMON = {"flax": "0.12.8", "optax": "0.2.8", "numpy": "2.4.6", "tensorflow-cpu": "2.21.0"}
# cuda: its CUDA 13 build, the plugin wheels and the CUDA libraries they require from PyPI (not yet
# run on a GPU by this project: see docs/limits.md).
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
