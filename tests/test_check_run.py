"""check_run on hand-made record folders: each way a run can be wrong is caught."""

from dlscale.core.records import PHASE_KEYS, Writer
from dlscale.runtime import checks


def write_rank(run_dir, rank, steps=3, checksum=1.0, loss=2.0, end=True):
    w = Writer(run_dir / f"rank{rank}.jsonl")
    w.write(
        "run",
        framework="torch",
        model="m",
        allreduce_schedule="overlap",
        allreduce_library="horovod",
        layout="best",
        timing="phased",
        nodes=1,
        ranks_per_node=2,
        batch_size=4,
        loader_workers=0,
        image_size=64,
        classes=10,
        threads_per_rank=1,
        precision="fp32",
        repeat=0,
        rank=rank,
        size=2,
        local_rank=rank,
        host="h",
        provenance={},
    )
    for it in range(steps):
        w.write(
            "step",
            rank=rank,
            iteration=it,
            warmup=it == 0,
            profiled=False,
            wall_s=0.6,
            loss=loss,
            **{k: 0.1 for k in PHASE_KEYS},
        )
    if end:
        w.write("end", rank=rank, iterations=steps, checksum=checksum, elapsed_s=1.0)
    w.close()


def test_good_run(tmp_path):
    write_rank(tmp_path, 0)
    write_rank(tmp_path, 1)
    assert checks.check_run(tmp_path, 2) == ([], [])


def test_each_problem_is_named(tmp_path):
    write_rank(tmp_path, 0, loss=float("nan"))
    write_rank(tmp_path, 1, checksum=1.5)
    write_rank(tmp_path, 2, end=False)
    with open(tmp_path / "rank2.jsonl", "a") as fh:
        fh.write("{broken\n")
    problems, errors = checks.check_run(tmp_path, 4)
    assert "rank 0: loss not finite at iterations [0, 1, 2]" in problems
    assert "rank 2 did not finish (no end record after 3 steps)" in problems
    assert "rank 3 wrote no records" in problems
    assert any(p.startswith("weights differ across ranks after training (ranks [1] vs rank 0)") for p in problems)
    assert errors == [f"{tmp_path}/rank2.jsonl:5: not valid JSON (Expecting property name enclosed in double quotes)"]


def test_a_native_run_without_a_rank_trace_is_caught(tmp_path):
    write_rank(tmp_path, 0)
    write_rank(tmp_path, 1)
    (tmp_path / "trace_rank0.json").write_text("{}")
    problems, _ = checks.check_run(tmp_path, 2, traced=True)
    assert problems == ["rank(s) [1] wrote no trace of the profiled iterations"]


# -- the first line of a failed job's log that says why ------------------------------------------------
# Logs as Open MPI 4.1.4 (Debian 12) printed them, each from the mpirun command above it. The box's
# rule is 74 dashes.

RULE = "-" * 74
# mpirun --host nosuchhost.invalid -np 1 true  (Open MPI drops the domain before it calls ssh)
UNRESOLVABLE = f"""ssh: Could not resolve hostname nosuchhost: Name or service not known
{RULE}
ORTE was unable to reliably start one or more daemons.
This usually is caused by:

* not finding the required libraries and/or binaries on
  one or more nodes. Please check your PATH and LD_LIBRARY_PATH
  settings, or configure OMPI with --enable-orterun-prefix-by-default

* lack of authority to execute on one or more specified nodes.
  Please verify your allocation and authorities.

* the inability to write startup files into /tmp (--tmpdir/orte_tmpdir_base).
  Please check with your sys admin to determine the correct location to use.

*  compilation of the orted with dynamic libraries when static are required
  (e.g., on Cray). Please check your configure cmd line and consider using
  one of the contrib/platform definitions for your system type.

* an inability to create a connection back to mpirun due to a
  lack of common network interfaces and/or no route found between
  them. Please check network connectivity (including firewalls
  and network routing requirements).
{RULE}
"""
# mpirun -np 4 --host localhost:1 true
TOO_FEW_SLOTS = f"""{RULE}
There are not enough slots available in the system to satisfy the 4
slots that were requested by the application:

  true

Either request fewer slots for your application, or make more slots
available for use.

A "slot" is the Open MPI term for an allocatable unit where we can
launch a process.  The number of slots available are defined by the
environment in which Open MPI processes are run:

  1. Hostfile, via "slots=N" clauses (N defaults to number of
     processor cores if not provided)
  2. The --host command line parameter, via a ":N" suffix on the
     hostname (N defaults to 1 if not provided)
  3. Resource manager (e.g., SLURM, PBS/Torque, LSF, etc.)
  4. If none of a hostfile, the --host command line parameter, or an
     RM is present, Open MPI defaults to the number of processor cores

In all the above cases, if you want Open MPI to default to the number
of hardware threads instead of the number of processor cores, use the
--use-hwthread-cpus option.

Alternatively, you can use the --oversubscribe option to ignore the
number of available slots when deciding the number of processes to
launch.
{RULE}
"""
# mpirun -np 1 /nonexistent/prog
CANNOT_EXECUTE = f"""{RULE}
mpirun was unable to launch the specified application as it could not access
or execute an executable:

Executable: /nonexistent/prog
Node: vm

while attempting to start process rank 0.
{RULE}
"""
# mpirun -np 1 nosuchprogram_xyz
NOT_FOUND = f"""{RULE}
mpirun was unable to find the specified executable file, and therefore
did not launch the job.  This error was first reported for process
rank 0; it may have occurred for other processes as well.

NOTE: A common cause for this error is misspelling a mpirun command
      line parameter option (remember that mpirun interprets the first
      unrecognized command line token as the executable).

Node:       vm
Executable: nosuchprogram_xyz
{RULE}
"""
# mpirun -np 2 python3 -c 'import sys; sys.exit(3)': only boxes that restate the exit
RANK_EXITED = f"""{RULE}
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
{RULE}
{RULE}
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[30144,1],0]
  Exit code:    3
{RULE}
"""
# mpirun -np 2 python3 -c 'import os, signal; os.kill(os.getpid(), 9)'
RANK_KILLED = f"""{RULE}
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
{RULE}
{RULE}
mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).
{RULE}
"""
# a warning box (Open MPI's help-mpi-btl-openib.txt, not seen here: no InfiniBand) before a rank's
# real error, with `mpirun --tag-output`'s tags: the warning is not the cause
WARNED = f"""{RULE}
WARNING: There was an error initializing an OpenFabrics device.

  Local host:   node01
{RULE}
[1,0]<stderr>:Traceback (most recent call last):
[1,0]<stderr>:  File "x.py", line 1, in <module>
[1,0]<stderr>:ModuleNotFoundError: No module named 'mxnet'
"""


def test_first_error_names_what_the_launcher_said():
    found = checks.first_error
    assert found(UNRESOLVABLE) == "ssh: Could not resolve hostname nosuchhost: Name or service not known"
    # through a pipe ssh ends its line with a carriage return
    assert found(UNRESOLVABLE.replace("known\n", "known\r\n", 1)) == found(UNRESOLVABLE)
    assert found(TOO_FEW_SLOTS) == (
        "There are not enough slots available in the system to satisfy the 4 slots "
        "that were requested by the application"
    )
    assert found(CANNOT_EXECUTE) == (
        "mpirun was unable to launch the specified application as it could not access "
        "or execute an executable (executable: /nonexistent/prog)"
    )
    assert found(NOT_FOUND) == (
        "mpirun was unable to find the specified executable file, and therefore did not "
        "launch the job (executable: nosuchprogram_xyz)"
    )
    assert found(RANK_EXITED) is None  # nothing said why: the exit code is all there is
    assert found(RANK_KILLED) == "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)"
    assert found(WARNED) == "ModuleNotFoundError: No module named 'mxnet'"
    # a box with no closing rule (the log was cut) still gives its sentence
    assert found(TOO_FEW_SLOTS.rsplit(RULE, 1)[0]).startswith("There are not enough slots")


def test_first_error_names_what_ssh_srun_and_the_shell_said():
    found = checks.first_error
    for line in [
        'mpirun: Error: unknown option "--no-such-opt"',  # mpirun -np 1 --no-such-opt true
        "ssh: connect to host localhost port 1: Connection refused",  # ssh -p 1 localhost
        "root@node01: Permission denied (publickey,password).",
        "Host key verification failed.",
        "srun: error: Unable to allocate resources: Invalid partition name specified",
        "bash: line 1: orted: command not found",
        "env: 'python3.11': No such file or directory",
    ]:
        assert found(f"starting\n{line}\n{RANK_EXITED}") == line, line
    # TensorFlow's warning about a missing library is not a launcher's error; the exception after it is
    tf = (
        "2026-11-25 10:00:00.123456: W tensorflow/tsl/platform/default/dso_loader.cc:78] Could not load dynamic "
        "library 'libcudart.so.12'; dlerror: libcudart.so.12: cannot open shared object file: No such file or "
        "directory\nValueError: bad batch size\n"
    )
    assert found(tf) == "ValueError: bad batch size"
    assert found("all fine\n") is None
