"""The Slurm profile: a dry run shows every MPI job with the nodes, tasks and resources it would ask
Slurm for, here without a Slurm cluster (tests/test_slurm_cluster.py runs them on one)."""

import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import ROOT


def _jobs(text):
    """{rule: [(wildcards dict, resources dict)]} from snakemake's dry-run listing."""
    jobs = {}
    for block in re.split(r"\n(?=\[[^\]]+\]\nrule )", text):
        rule = re.search(r"^rule (\w+):", block, re.M)
        if not rule:
            continue
        fields = {}
        for key in ("wildcards", "resources"):
            m = re.search(rf"^\s+{key}: (.*)$", block, re.M)
            fields[key] = dict(kv.split("=", 1) for kv in m.group(1).split(", ")) if m else {}
        jobs.setdefault(rule.group(1), []).append((fields["wildcards"], fields["resources"]))
    return jobs


def test_slurm_profile_dry_run_lists_jobs_with_their_resources(tmp_path):
    study = {
        "framework": ["torch"],
        "model": ["tinynet"],
        "allreduce_schedule": ["overlap"],
        "nodes": [1, 2],
        "ranks_per_node": [1, 4],
        "repeats": 1,
        "results": str(tmp_path / "results"),
        "logs": str(tmp_path / "logs"),
    }
    extra = tmp_path / "study.yaml"
    extra.write_text(yaml.safe_dump(study))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--profile",
            "profiles/slurm",
            "--configfile",
            "config/slurm.yaml",
            str(extra),
            "--dry-run",
            "--nolock",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = _jobs(proc.stdout)
    runs = {(w["nodes"], w["ranks_per_node"]): r for w, r in jobs["run"]}
    assert set(runs) == {("1", "1"), ("1", "4"), ("2", "1"), ("2", "4")}
    big = runs[("2", "4")]
    assert (big["nodes"], big["tasks"], big["mpi"], big["cpus_per_task"]) == ("2", "8", "srun", "8")
    assert big["slurm_extra"] == "--exclusive" and big["runtime"] == "30"
    assert "slurm_account" not in big and "slurm_partition" not in big  # the user's default account and partition
    single = runs[("1", "1")]
    assert (single["nodes"], single["tasks"], single["mpi"]) == ("1", "1", "")  # a plain job, not MPI
    sweeps = {(w["nodes"], w["ranks_per_node"]): r for w, r in jobs["allreduce"]}
    assert set(sweeps) == {("1", "4"), ("2", "1"), ("2", "4")}
    assert (sweeps[("2", "1")]["tasks"], sweeps[("2", "1")]["mpi"]) == ("2", "srun")
    assert {"tidy", "summary", "model", "figures", "peak", "dataset"} <= set(jobs)
    ((_, peak),) = jobs["peak"]
    assert (peak["nodes"], peak["tasks"], peak["cpus_per_task"], peak["slurm_extra"]) == ("1", "1", "8", "--exclusive")
    assert not Path(study["results"]).exists()  # a dry run submits and writes nothing


def test_the_slurm_cluster_config_names_every_emulated_node_with_its_address_and_cpus():
    """What `dlscale slurm up` writes (dlscale/runtime/slurm.py), here without starting anything."""
    from dlscale.runtime import emulate, slurm

    cluster = emulate.Cluster("x", 3, None, 0, cpus=["0", "1", "0,1"])
    lines = slurm._node_lines(cluster, 4000).splitlines()
    assert lines == [
        "NodeName=dlslurm-n0 NodeAddr=10.213.0.1 CPUs=1 RealMemory=4000 State=UNKNOWN",
        "NodeName=dlslurm-n1 NodeAddr=10.213.0.2 CPUs=1 RealMemory=4000 State=UNKNOWN",
        "NodeName=dlslurm-n2 NodeAddr=10.213.0.3 CPUs=2 RealMemory=4000 State=UNKNOWN",
    ]
    text = (
        (slurm.HERE / "slurm.conf.in")
        .read_text()
        .format(
            cluster="c",
            head_name="h",
            head_addr=slurm.HEAD_ADDR,
            state="/s",
            partition="p",
            node_lines="\n".join(lines),
        )
    )
    conf = dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith(("#", "NodeName")))
    assert conf["SlurmctldHost"] == f"h({slurm.HEAD_ADDR})" and conf["TmpFS"] == "/s/tmp/%n"
    assert conf["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert conf["PartitionName"].startswith("p Nodes=ALL Default=YES")
    assert slurm.HEAD_ADDR.rsplit(".", 1)[1] == "254" and emulate.MAX_NODES < 254  # never a node's address
