"""A rank's process around the training loop: its own temporary folder (removed as the rank ends,
and abandoned ones cleared: a rank killed by a signal cannot remove its own), and its end."""

import fcntl
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

from dlscale.core import hardware

SCRATCH = "dlscale-rank-"  # a rank's temporary folder: SCRATCH + a random suffix


def private_tmpdir():
    """A temporary folder of this rank's own under the node's (TMPDIR or /tmp), made the process's
    and its children's temporary folder before any framework is imported. The frameworks leave files
    there that they would remove only at interpreter exit, which a rank skips (`leave`): TensorFlow's
    AutoGraph writes a source file per converted function, multiprocessing (PyTorch's loader workers)
    a folder for its fork server's socket. The rank removes the folder as it ends, failed or not.
    A rank killed by a signal cannot: the rank holds a lock on its folder while it lives (the kernel
    drops it when the process dies, whatever kills it), and every rank starting on the node first
    removes the folders whose lock nobody holds. The folder is made under another name and renamed
    once locked, so a folder is never seen unlocked while its rank lives."""
    base = Path(tempfile.gettempdir())
    for folder in base.glob(f"{SCRATCH}*"):
        _remove_if_abandoned(folder)
    staging = Path(tempfile.mkdtemp(prefix=".dlscale-new-", dir=base))
    lock = os.open(staging / ".lock", os.O_CREAT | os.O_RDWR, 0o600)  # kept open: held until the rank ends
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
    except OSError:  # a file system without locks (a TMPDIR on some parallel file systems): the other
        pass  # ranks cannot lock it either, so they take it for live and leave it
    folder = base / (SCRATCH + staging.name.removeprefix(".dlscale-new-"))
    staging.rename(folder)
    os.environ["TMPDIR"] = tempfile.tempdir = str(folder)
    return folder


def _remove_if_abandoned(folder):
    """Remove a rank's temporary folder if no live process holds its lock (a folder without its lock
    file is no live rank's: the lock is made before the folder gets its name); leave it if its rank
    lives or it is another user's."""
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
    """End the rank: stop the loader's worker processes (left running, PyTorch's DataLoader workers
    keep the launcher waiting on their output), shut Horovod down (it finalizes MPI), then exit
    without the interpreter's teardown of the frameworks' objects. Every record and trace is written
    and closed by now; that teardown measures nothing and took TensorFlow ranks 2-23 s per run
    (2026-11-23: freeing the run's objects, then finalizing the interpreter), a tenth of the default
    study's time. So it removes its temporary folder itself (`private_tmpdir`)."""
    data.close()
    trainer.shutdown()
    shutil.rmtree(scratch, ignore_errors=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def provenance(trainer, spec):
    env_keys = sorted(
        k
        for k in os.environ
        if k.startswith(
            (
                "OMP_",
                "MKL_",
                "HOROVOD_",
                "TF_",
                "MXNET_",
                "DLSCALE_",
                "NCCL_",
                "UCX_",
                "NVIDIA_TF32",
                "OMPI_COMM_WORLD_SIZE",
                "CUDA_VISIBLE",
                "PJRT_NPROC",
                "XLA_FLAGS",
            )
        )
    )
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hardware": hardware.describe(),  # this rank's host: the report names every host's
        "argv": sys.argv,
        "pid": os.getpid(),
        "environ": {k: os.environ[k] for k in env_keys},
        "tmpdir": tempfile.gettempdir(),  # the rank's own, removed as it ends (private_tmpdir)
        "framework": trainer.describe().record(),
        "launch": spec.get("launch", {}),
    }
