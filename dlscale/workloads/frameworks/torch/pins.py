"""PyTorch's environment per variant, as dlscale/environment/recipe.py installs it (declarations only)."""

# torch 2.13.0 from PyPI is the CUDA 13.0 build: compute capability 7.5-12.0, NVIDIA driver >= 580.
PINS = {"cpu": {"torch": "2.13.0"}, "cuda": {"torch": "2.13.0"}}
# The workload environment's pins it takes too: the same libjpeg decodes the JPEGs it made.
WORKLOAD_PINS = ("pillow",)
# Pinned with `===` in the cuda variant: `==` would also take a local CPU build `2.13.0+cpu`.
EXACT_CUDA_PINS = ("torch",)
# The NCCL wheel of its CUDA release, at recipe.NCCL_VERSION.
NCCL_WHEEL = "nvidia-nccl-cu13"
# Horovod built into it: the name `horovodrun --check-build` lists it by, and the switch that builds it.
HOROVOD_BUILD = ("PyTorch", "HOROVOD_WITH_PYTORCH")
# Header folders of its CUDA wheels (site-packages/nvidia) that Horovod's build needs on CPATH.
CUDA_HEADERS = ("cu13",)
# Where its headers live and the folders under it they include: none.
INCLUDE_DIR, HOROVOD_INCLUDES = None, ()
# A module its environment imports before anything else (through a .pth file), per variant: none.
SITE_SHIM = None
# A library of its wheel that links the NVIDIA driver, stubbed for Horovod's build where no driver is: none.
DRIVER_LINKED = None
