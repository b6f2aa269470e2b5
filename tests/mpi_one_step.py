"""Run under mpirun by test_training.py: one SGD step through the real Trainer, weights saved."""

import json
import sys
from pathlib import Path

import numpy as np

from workloads.train import SyntheticData, load_trainer, timed_step

spec = json.loads(Path(sys.argv[1]).read_text())
trainer = load_trainer(spec)
out = Path(spec["out_dir"])
if trainer.rank == 0:
    np.savez(out / "init.npz", *trainer.state())
data = SyntheticData(spec["seed"], trainer.rank, spec["batch_size"], spec["image_size"], spec["classes"])
timed_step(trainer, data(0))
np.savez(out / f"rank{trainer.rank}.npz", *trainer.state())
trainer.shutdown()
