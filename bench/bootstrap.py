"""Benchmark (not a test): how long building the environments takes, as on a fresh machine.

For the checkout at each revision asked (`--rev`, default: this one), in a temporary git worktree,
builds its workload environment (`python3 -m dlscale env build`: the pinned packages installed, then
Horovod compiled against its frameworks) and each environment of its own a framework has there
(`--framework NAME`: JAX's, from that revision's recipe.OWN_ENVIRONMENTS), each into an empty
environment folder (`$DLSCALE_ENV_ROOT`, so nothing already built is reused), and times each build
by the wall clock. Packages come from this machine's pip cache where it holds their wheels (as on a
second machine of a site with a shared cache; a first download adds the network's time). Writes a
row per revision and environment, and one for the revision's total, to bench/results/bootstrap.csv,
keeping the rows of other revisions and variants. `--variant cuda` builds the GPU variant's
(`$DLSCALE_ENV_VARIANT`: the frameworks' CUDA builds, Horovod with NCCL; it needs a CUDA 13 toolkit).

  .venv/bin/python bench/bootstrap.py [--rev REV ...] [--variant cpu|cuda] [--out bench/results/bootstrap.csv]

Each build runs under `python3` (as ./bootstrap.sh runs it, `$PYTHON` to choose another).
"""

import argparse
import csv
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from overhead import machine, write_table  # noqa: E402

PYTHON = os.environ.get("PYTHON", "python3")  # the builder's interpreter, as ./bootstrap.sh's
OWN = "from dlscale.environment import recipe; print(' '.join(getattr(recipe, 'OWN_ENVIRONMENTS', {})))"


def git(*args, cwd=ROOT):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def timed_build(checkout, env_root, variant, framework=None):
    """Seconds `python3 -m dlscale env build [--framework F]` of `checkout` takes into env_root."""
    argv = [PYTHON, "-m", "dlscale", "env", "build", *(["--framework", framework] if framework else [])]
    environ = {**os.environ, "DLSCALE_ENV_ROOT": str(env_root), "DLSCALE_ENV_VARIANT": variant}
    start = time.perf_counter()
    subprocess.run(argv, cwd=checkout, env=environ, check=True)
    return time.perf_counter() - start


def measure(rev, tmp, variant):
    """Rows of the builds of revision `rev` in `variant`: each environment, then the total."""
    commit = git("rev-parse", "--short", rev)
    checkout, env_root = Path(tmp) / f"checkout-{commit}", Path(tmp) / f"envs-{commit}"
    git("worktree", "add", "--detach", str(checkout), commit)
    try:
        own = subprocess.run([PYTHON, "-c", OWN], cwd=checkout, check=True, capture_output=True, text=True)
        builds = [("workload", None)] + [(f"{fw} (its own)", fw) for fw in own.stdout.split()]
        rows = [
            {"environment": name, "seconds": round(timed_build(checkout, env_root, variant, fw))} for name, fw in builds
        ]
        rows.append({"environment": "all (the workload's and each own)", "seconds": sum(r["seconds"] for r in rows)})
    finally:
        git("worktree", "remove", "--force", str(checkout))
    day = datetime.date.today().isoformat()
    stamp = {"date": day, "cores": os.cpu_count(), "machine": machine(), "variant": variant}
    return [{"commit": commit, **row, **stamp} for row in rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", nargs="+", default=["HEAD"])
    ap.add_argument("--variant", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "bootstrap.csv"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="dlscale-bootstrap-") as tmp:
        for rev in args.rev:
            rows += measure(rev, tmp, args.variant)
            print(rows[-1], flush=True)
    out = Path(args.out)
    measured = {(r["commit"], r["variant"]) for r in rows}
    # rows written before the variant column are the cpu variant's
    kept = [{**r, "variant": r.get("variant") or "cpu"} for r in csv.DictReader(out.open())] if out.exists() else []
    write_table([r for r in kept if (r["commit"], r["variant"]) not in measured] + rows, out)


if __name__ == "__main__":
    main()
