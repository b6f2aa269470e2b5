"""Benchmark (not a test): what each way of adding JAX to the environment costs.

JAX >= 0.7 needs numpy >= 2 and MXNet 1.9.1 needs numpy < 2, so JAX can join the shared
environment only as 0.6.2 (the last release that takes numpy 1.26, as it did until JAX got an
environment of its own), or a current JAX can live in an environment of its own, which runs of JAX
use (dlscale/environment/recipe.py OWN_ENVIRONMENTS). For each option this builds a
fresh virtual environment in a temporary folder with the option's pins and measures:
  install_s        pip's wall time to install them (from this machine's pip cache where it holds
                   the wheels: the time a second machine with a warm cache sees)
  site_packages_mb the disk the option adds (its site-packages, less pip itself)
  packages         the distributions installed
  startup_s        `import jax` and a first jitted operation, wall time, median (min, max) over
                   paired trials that alternate the options' order
It also times the same start-up in JAX's own environment as dlscale builds it (with TensorFlow for
its image loader). Writes bench/results/jax-environment.csv.

  .venv/bin/python bench/jax_environment.py [--trials 7] [--out bench/results/jax-environment.csv]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from overhead import machine, write_table  # noqa: E402

from dlscale.environment import build as env  # noqa: E402
from dlscale.environment import recipe  # noqa: E402

# JAX as the shared environment held it: the last release that takes numpy 1.26.
SHARED = {"jax": "0.6.2", "jaxlib": "0.6.2", "flax": "0.10.7", "optax": "0.2.5", "numpy": "1.26.4"}
# The newest JAX the registry serves, with the Flax and Optax that go with it (numpy 2): JAX's own
# environment's pins.
OWN = {name: recipe.own_pins("jax")[name] for name in ("jax", "jaxlib", "flax", "optax")}
OWN_NUMPY = recipe.own_pins("jax")["numpy"]
BUILT = "JAX's own environment (as dlscale builds it)"
OPTIONS = {"shared (JAX 0.6.2, numpy 1.26)": SHARED, "own environment (current JAX, numpy 2)": OWN}
FIRST_OP = "import jax, jax.numpy as jnp; jax.jit(lambda x: x + 1)(jnp.ones(4)).block_until_ready()"


def build(folder, pins):
    """A fresh venv with `pins`: (install seconds, site-packages MB, installed distributions)."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    python = folder / "bin" / "python"
    start = time.perf_counter()
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *(f"{k}=={v}" for k, v in pins.items())],
        check=True,
    )
    seconds = time.perf_counter() - start
    (site,) = folder.glob("lib/python*/site-packages")
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file() and "pip" not in f.relative_to(site).parts[0])
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True)
    installed = [line for line in listed.stdout.split() if not line.startswith(("pip==", "setuptools=="))]
    return seconds, size / 2**20, installed


def startup(python):
    start = time.perf_counter()
    subprocess.run([str(python), "-c", FIRST_OP], check=True, capture_output=True)
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "jax-environment.csv"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        built = {}
        for i, (option, pins) in enumerate(OPTIONS.items()):
            built[option] = (Path(tmp) / f"option{i}", *build(Path(tmp) / f"option{i}", pins))
            print(f"{option}: installed in {built[option][1]:.1f} s, {built[option][2]:.0f} MB", flush=True)
        pythons = {option: b[0] / "bin" / "python" for option, b in built.items()}
        pythons[BUILT] = env.build(own="jax") / "bin" / "python"
        times = {option: [] for option in pythons}
        for trial in range(args.trials):
            order = list(pythons)[trial % len(pythons) :] + list(pythons)[: trial % len(pythons)]
            for option in order:
                times[option].append(startup(pythons[option]))
        rows = []
        for option in pythons:
            folder, seconds, size, installed = built.get(option, (None, None, None, []))
            pins = OPTIONS.get(option, OWN)
            rows.append(
                {
                    "option": option,
                    "jax": pins["jax"],
                    "flax": pins["flax"],
                    "optax": pins["optax"],
                    "numpy": next((p.split("==")[1] for p in installed if p.startswith("numpy==")), OWN_NUMPY),
                    "packages": len(installed) if installed else "",
                    "install_s": round(seconds, 1) if seconds else "",
                    "site_packages_mb": round(size) if size else "",
                    "startup_s": round(statistics.median(times[option]), 3),
                    "startup_s_min": round(min(times[option]), 3),
                    "startup_s_max": round(max(times[option]), 3),
                    "trials": args.trials,
                    "machine": machine(),
                }
            )
            print(rows[-1], flush=True)
    write_table(rows, args.out)


if __name__ == "__main__":
    main()
