"""What a host is (dlscale/core/hardware.py), from the text Linux gives: enough for a reviewer to tell
two machines apart (the CPU's generation, clock, vector instructions, kernel, OS, virtualization)."""

import json

from dlscale.core import hardware

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
stepping\t: 1
cpu MHz\t\t: 2445.424
flags\t\t: fpu sse2 fma avx2 hypervisor

processor\t: 1
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
"""
OS_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n'


def test_a_virtual_machine_is_named_with_its_hypervisor_and_the_cpus_generation():
    lscpu = "Hypervisor vendor:   KVM\nVirtualization type: full\n"
    facts = hardware.platform_facts(CPUINFO, lscpu, OS_RELEASE)
    assert facts["cpu_family_model_stepping"] == "25/1/1" and facts["cpu_mhz"] == 2445
    assert facts["isa"] == ["avx2", "fma"] and facts["virtualization"] == "KVM (full)"
    assert facts["os"] == "Debian GNU/Linux 12 (bookworm)"
    # without lscpu the flag still says it is virtual
    assert hardware.platform_facts(CPUINFO, "", OS_RELEASE)["virtualization"] == "a hypervisor (type not reported)"
    bare = CPUINFO.replace(" hypervisor", "").replace(" avx2", "")
    assert hardware.platform_facts(bare, "", "")["virtualization"] == "none reported"
    assert hardware.platform_facts(bare, "", "")["isa"] == ["fma"]


def test_the_reports_line_names_it_all_and_an_older_record_keeps_its_line():
    host = {**hardware.cpu(CPUINFO), "memory_gib": 23.5, "gpus": []}
    old = hardware.summary(host)
    assert old == "AMD EPYC (1 socket, 2 cores, 2 logical CPUs), 23.5 GiB memory; GPU: none"
    new = hardware.summary({**host, **hardware.platform_facts(CPUINFO, "Hypervisor vendor: KVM\n", OS_RELEASE)})
    assert new.startswith(old) and "family/model/stepping 25/1/1, 2445 MHz, avx2, fma" in new
    assert "Debian GNU/Linux 12 (bookworm), Linux " in new and new.endswith("virtualization: KVM (type not reported)")


def test_os_release_values_keep_what_their_quotes_hold():
    text = '# a comment\nNAME="Debian GNU/Linux"\nPRETTY_NAME="Distro 12 (a=b: c)"\nID=debian\nVERSION_ID=\'12\'\n'
    facts = hardware.platform_facts(CPUINFO, "", text)
    assert facts["os"] == "Distro 12 (a=b: c)"
    assert hardware._os_release(text) == {
        "NAME": "Debian GNU/Linux",
        "PRETTY_NAME": "Distro 12 (a=b: c)",
        "ID": "debian",
        "VERSION_ID": "12",
    }


def test_a_process_records_the_cpus_its_affinity_allows_and_a_host_keeps_its_ranks_fewest():
    import os
    import subprocess
    import sys

    assert hardware.describe()["cpus_allowed"] == len(os.sched_getaffinity(0))
    # a process held to one CPU (as an emulated node's ranks are, by taskset) says one
    held = subprocess.run(
        [sys.executable, "-c", "from dlscale.core import hardware; print(hardware.cpus_allowed())"],
        preexec_fn=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}),
        capture_output=True,
        text=True,
        check=True,
    )
    assert held.stdout.strip() == "1"
    wide, narrow = {"logical_cpus": 2, "cpus_allowed": 2, "x": 1}, {"logical_cpus": 2, "cpus_allowed": 1, "x": 2}
    assert hardware.merged(None, wide) == wide
    assert hardware.merged(narrow, wide) == {**wide, "cpus_allowed": 1}
    assert hardware.merged(wide, {"logical_cpus": 2}) == {"logical_cpus": 2, "cpus_allowed": 2}
    line = hardware.summary({**hardware.cpu(CPUINFO), "cpus_allowed": 1, "memory_gib": 1, "gpus": []})
    assert "(1 socket, 2 cores, 2 logical CPUs, 1 of them allowed to a rank)" in line
    assert "allowed" not in hardware.summary({**hardware.cpu(CPUINFO), "cpus_allowed": 2, "memory_gib": 1})


def test_a_study_of_bound_and_unbound_runs_says_each_hosts_range_of_allowed_cpus():
    """The report's hardware line named the last run's `cpus_allowed` alone where a study mixed bindings."""
    host = {**hardware.cpu(CPUINFO), "memory_gib": 1, "gpus": []}
    bound, free = ({"vm": {**host, "cpus_allowed": n}} for n in (1, 2))
    mixed = hardware.hosts([json.dumps(bound), "", json.dumps(free), json.dumps(bound)])
    assert mixed["vm"]["cpus_allowed"] == [1, 2]
    assert "2 logical CPUs, 1 to 2 of them allowed to a rank (by run" in hardware.summary(mixed["vm"])
    alike = hardware.hosts([json.dumps(bound), json.dumps(bound)])
    assert alike == bound and "1 of them allowed to a rank)" in hardware.summary(alike["vm"])
