#!/usr/bin/env bash
# Set up everything this harness needs on a fresh machine, then make .venv, this checkout's overlay on
# the shared environment (its packages and commands, and this checkout installed editable: `dlscale`):
#  1. MPI: uses the mpicc/mpirun on PATH (on a cluster, `module load` your site's MPI first).
#     If there is none and this is Debian/Ubuntu as root, installs Open MPI from the distribution.
#  2. A C++ compiler (for Horovod), installed the same way when missing.
#  3. iproute2 and taskset for emulated clusters, and Slurm (slurm-wlm, slurmdbd, munge, mariadb-server)
#     for the Slurm cluster `dlscale slurm up` makes (root only; their tests skip without them).
#  4. The workload environment (snakemake, the analysis, pytest; no framework): built once per pin
#     set under ~/.cache/dlscale/envs, reused afterwards. Each framework has an environment of its
#     own, which the first study that runs it builds (Horovod compiled into it for that framework).
#     With --dev (the tests' command) the Horovod frameworks' own environments are built here too
#     and .venv imports them all (the tests compare them in one process).
set -euo pipefail
cd "$(dirname "$0")"

need=()
command -v mpicc >/dev/null && command -v mpirun >/dev/null || need+=(openmpi-bin libopenmpi-dev)
command -v g++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
# iproute2 (ip, tc) and taskset for emulated clusters: installed when root can; optional otherwise.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  command -v ip >/dev/null && command -v tc >/dev/null || need+=(iproute2)
  command -v taskset >/dev/null || need+=(util-linux)
  command -v slurmctld >/dev/null && command -v slurmdbd >/dev/null || need+=(slurm-wlm slurmdbd munge mariadb-server)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "bootstrap: missing ${need[*]}. Install them (Debian/Ubuntu: sudo apt-get install ${need[*]})," >&2
    echo "or on a cluster load the site's MPI and compiler modules, then run this again." >&2
    exit 1
  fi
fi

PYTHON=${PYTHON:-python3}
dev=()
for arg in "$@"; do
  case "$arg" in
    --dev) dev=(--dev) ;;
    *) echo "bootstrap: unknown option $arg (the only one is --dev)" >&2; exit 2 ;;
  esac
done
"$PYTHON" -m dlscale env build --link .venv "${dev[@]}"
