"""One SGD step through a framework's real Trainer; weights saved (used by test_training.py).

python tests/mpi_one_step.py SPEC.json            under mpirun: each rank steps on its own batch
python tests/mpi_one_step.py SPEC.json --single N  one process, one step on ranks 0..N-1's
                                                   batches together (spec batch_size x N)
"""

import json
import sys
from pathlib import Path

import numpy as np

from dlscale.workloads.batches import SyntheticData
from dlscale.workloads.train import load_trainer, timed_step

spec = json.loads(Path(sys.argv[1]).read_text())
single = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--single" else 0
batch_size = spec["batch_size"]
if single:
    spec = {**spec, "batch_size": batch_size * single}
trainer = load_trainer(spec)
out = Path(spec["out_dir"])
tag = "single" if single else f"rank{trainer.rank}"
if single or trainer.rank == 0:
    np.savez(out / f"init_{tag}.npz", *trainer.state())
ranks = range(single) if single else [trainer.rank]
parts = [
    SyntheticData(spec["seed"], r, batch_size, spec["image_size"], spec["classes"], trainer.data_layout)(0)
    for r in ranks
]
batch = tuple(np.concatenate([p[i] for p in parts]) for i in (0, 1))
timed_step(trainer, lambda: batch)
np.savez(out / f"{tag}.npz", *trainer.state())
trainer.shutdown()
