"""A rank's process around the training loop: its own temporary folder, its provenance and its end."""

import contextlib
import fcntl
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

from dlscale.core import hardware

SCRATCH = "dlscale-rank-"  # a rank's temporary folder: SCRATCH + a random suffix
# the environment variables a rank's provenance records, by prefix
ENVIRON_PREFIXES = ("OMP_", "MKL_", "HOROVOD_", "TF_", "MXNET_", "DLSCALE_", "NCCL_", "UCX_", "NVIDIA_TF32")
ENVIRON_PREFIXES += ("OMPI_COMM_WORLD_SIZE", "CUDA_VISIBLE", "PJRT_NPROC", "XLA_FLAGS")


def private_tmpdir():
    """This rank's own temporary folder, made before any framework leaves files there for an exit a rank skips;
    locked while the rank lives, so that ranks starting remove the unlocked ones (of ranks killed by a signal)."""
    base = Path(tempfile.gettempdir())
    for folder in base.glob(f"{SCRATCH}*"):
        _remove_if_abandoned(folder)
    staging = Path(tempfile.mkdtemp(prefix=".dlscale-new-", dir=base))
    lock = os.open(staging / ".lock", os.O_CREAT | os.O_RDWR, 0o600)  # kept open: held until the rank ends
    # a file system without locks (some parallel ones): the others cannot lock it either, and leave it
    with contextlib.suppress(OSError):
        fcntl.flock(lock, fcntl.LOCK_EX)
    folder = base / (SCRATCH + staging.name.removeprefix(".dlscale-new-"))
    staging.rename(folder)
    os.environ["TMPDIR"] = tempfile.tempdir = str(folder)
    return folder


def _remove_if_abandoned(folder):
    """Remove a rank's folder unless a live rank holds its lock or it is another user's (no lock file: no rank's)."""
    try:
        lock = os.open(folder / ".lock", os.O_RDWR)
    except FileNotFoundError:
        shutil.rmtree(folder, ignore_errors=True)
        return
    except OSError:
        return
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # its rank lives
    finally:
        os.close(lock)
    shutil.rmtree(folder, ignore_errors=True)


def leave(data, trainer, scratch):
    """End the rank: stop the loader's workers (PyTorch's keep the launcher waiting), shut Horovod down, remove
    the folder, exit without the teardown (it took TensorFlow ranks 2-23 s a run, a tenth of the study's time)."""
    data.close()
    trainer.shutdown()
    shutil.rmtree(scratch, ignore_errors=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def provenance(trainer, spec):
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hardware": hardware.describe(),  # this rank's host: the report names every host's
        "argv": sys.argv,
        "pid": os.getpid(),
        "environ": {k: os.environ[k] for k in sorted(os.environ) if k.startswith(ENVIRON_PREFIXES)},
        "tmpdir": tempfile.gettempdir(),  # the rank's own, removed as it ends (private_tmpdir)
        "framework": trainer.describe().record(),
        "launch": spec.get("launch", {}),
    }
