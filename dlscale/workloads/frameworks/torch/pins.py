"""PyTorch's own environment, per variant: what dlscale/environment/recipe.py installs for it (beside
numpy and mpi4py, which every rank has, and Horovod's requirements where LIBRARIES has horovod).
Declarations only, read under the bare Python that builds the environments."""

# torch 2.13.0 from PyPI is the CUDA 13.0 build: compute capability 7.5-12.0 (T4, A100, H100, B200),
# NVIDIA driver >= 580 (read from the wheel, November 2026; not yet run on a GPU by this project).
PINS = {"cpu": {"torch": "2.13.0"}, "cuda": {"torch": "2.13.0"}}
# The workload environment's pins it takes too: its loader decodes, with Pillow, the JPEGs that
# environment made, so both hold the same libjpeg.
WORKLOAD_PINS = ("pillow",)
# Pins the cuda variant asks for with `===` (exactly this version string): `==` would also take a
# local CPU build `2.13.0+cpu` that a site's pip configuration offers (find-links), as it does on
# this project's machines.
EXACT_CUDA_PINS = ("torch",)
# The NCCL wheel of its CUDA release (its wheel requires the CUDA 13 build), at recipe.NCCL_VERSION.
NCCL_WHEEL = "nvidia-nccl-cu13"
# Horovod built into it: the name `horovodrun --check-build` lists it by, and the switch that builds it.
HOROVOD_BUILD = ("PyTorch", "HOROVOD_WITH_PYTORCH")
# Header folders of its CUDA wheels (under site-packages/nvidia) that Horovod's build needs on CPATH:
# its CUDA 13 wheels hold its own release's.
CUDA_HEADERS = ("cu13",)
# Where its headers live (a function of its Python package) and the folders under it that they
# include but that are not on the default include path: none.
INCLUDE_DIR, HOROVOD_INCLUDES = None, ()
# A module its environment imports before anything else (through a .pth file), per variant: none.
SITE_SHIM = None
# A library of its wheel that links the NVIDIA driver, stubbed for Horovod's build where no driver is: none.
DRIVER_LINKED = None
