"""The trainers' device and precision checks: a run asked for a GPU it cannot use fails; it never takes the CPU."""

import os

from dlscale.core import hardware
from dlscale.workloads import frameworks


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
    """GPU `index`'s name from nvidia-smi (through $CUDA_VISIBLE_DEVICES; MXNet reports none), or None."""
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    physical = visible[index].strip() if index < len(visible) else str(index)
    argv = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", physical]
    return hardware.command_output(argv, 30).strip() or None


class LayoutError(ValueError):
    pass


def resolve_layout(framework, asked):
    """The layout a run uses (`best`: BEST_LAYOUT); a LayoutError where the framework cannot run it."""
    declared = frameworks.get(framework)
    layout = declared.BEST_LAYOUT if asked == "best" else asked
    if layout not in declared.LAYOUTS:
        raise LayoutError(f"layout {asked}: {declared.LAYOUT_NOTE}")
    return layout
