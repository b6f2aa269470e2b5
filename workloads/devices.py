"""Device and precision checks shared by the trainers: a run asked to use a GPU that its framework
cannot use fails with the reason; it never falls back to the CPU."""

import os
import subprocess


class DeviceError(RuntimeError):
    pass


def check_precision(spec):
    if spec["precision"] == "mixed" and spec.get("device", "cpu") != "gpu":
        raise DeviceError(
            "precision mixed needs device gpu (half-precision kernels and loss scaling "
            "are what mixed precision means on the GPUs the study compares)"
        )


def gpu_for_rank(framework, version, count, local_rank, build):
    """The GPU index of this rank (its local rank), or a DeviceError saying why there is none."""
    if count == 0:
        raise DeviceError(
            f"device gpu: {framework} {version} sees no GPU ({build}); run device gpu "
            "studies on GPU nodes in the cuda environment (DLSCALE_ENV_VARIANT=cuda)"
        )
    if local_rank >= count:
        raise DeviceError(
            f"device gpu: local rank {local_rank} but {framework} sees {count} GPU(s) on this "
            "node; ranks_per_node must not exceed the GPUs per node"
        )
    return local_rank


def nvidia_smi_name(index):
    """The name of GPU `index` as this process numbers it (through $CUDA_VISIBLE_DEVICES), from
    nvidia-smi, for frameworks that do not report it (MXNet); None when nvidia-smi cannot say."""
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    physical = visible[index].strip() if index < len(visible) else str(index)
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", physical],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


class LayoutError(ValueError):
    pass


# The layout each framework's own performance guidance recommends, per device (`layout: best`),
# measured on the CPU (README, fairness table; bench/layout.py repeats the measurement):
# - PyTorch: channels_last (NHWC) for convolutional networks, on the CPU (oneDNN's blocked kernels;
#   measured ResNet-50 1.57x, GoogLeNet 1.43x) and on GPUs (cuDNN's NHWC Tensor Core kernels).
# - TensorFlow: NHWC, Keras's default; its CPU convolutions run NHWC only, and on GPUs Grappler's
#   layout optimizer converts convolutions to the layout cuDNN runs fastest.
# - MXNet: NCHW; its CPU convolutions (MKLDNN) take NCHW, and the Gluon models are written NCHW.
BEST_LAYOUT = {"torch": "NHWC", "tensorflow": "NHWC", "mxnet": "NCHW"}
# Layouts each framework's models here can run, and why not the other.
LAYOUTS = {"torch": ("NCHW", "NHWC"), "tensorflow": ("NHWC",), "mxnet": ("NCHW",)}
WHY_NOT = {
    "tensorflow": "TensorFlow's CPU convolutions run NHWC only, and on GPUs its layout optimizer already "
    "converts NHWC convolutions to what cuDNN runs fastest; the TensorFlow models are NHWC",
    "mxnet": "MXNet 1.9.1's CPU convolutions (MKLDNN) run NCHW, and the MXNet models are written NCHW",
}


def resolve_layout(framework, asked):
    """The layout a run uses: `best` becomes the framework's recommended one; a forced layout the
    framework cannot run is a LayoutError saying why."""
    layout = BEST_LAYOUT[framework] if asked == "best" else asked
    if layout not in LAYOUTS[framework]:
        raise LayoutError(f"layout {asked}: {WHY_NOT[framework]}")
    return layout
