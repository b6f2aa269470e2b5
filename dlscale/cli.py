"""Command line: `dlscale <command>` (also `python -m dlscale <command>`).

A study is a folder: its config/config.yaml (over the package's defaults), hostfiles, results and
logs. STUDY is that folder (default: the working directory; the checkout is one).

init STUDY [--from NAME]                  make a study folder: a commented config (the defaults, or
                                          the shipped config NAME: emulated, slurm, gpu, ...) and hostfiles
run [STUDY] [--configfile F]... [--config K=V]... [-- SNAKEMAKE ARGS...]
                                          run the study: the packaged workflow, snakemake --cores all,
                                          in STUDY (a stale lock a killed snakemake left is removed first)
report [STUDY] [--configfile F]... [--config K=V]...
                                          the study's report.md and Snakemake's report.html
env build [--framework F] [--record FILE] [--link PATH [--dev]]
                                          build (once) or find the workload environment, or the
                                          environment of its own that framework F runs in
env check [--python P] [--framework F]    what each framework's Python has of what the study needs
env path [--framework F]                  print the environment's folder (exit 1 if not built)
check-config [CONFIG...] [--config K=V]... validate the study config/config.yaml and these
                                          overlays make (as snakemake --configfile ... --config ...)
launch [CONFIG...] KEY=VALUE...           run one run of that study by hand (framework=torch ...)
unlock [STUDY] [--force]                  remove the lock a killed snakemake left (none running)
example RESULTS [OUT]                     copy a finished study's report and figures to OUT (docs/example)
plan RESULTS [--candidates FILE] [-o DIR]  the model's predicted throughput, efficiency and throughput per
                                          price of candidate hardware, from a finished study: DIR/plan.md, plan.csv
compare STUDY... [-o DIR]                 finished studies (results folders) from several machines side by
                                          side: DIR/compare.md and compare.csv
retry [STUDY] [--configfile F]... [--config K=V]... [KEY=VALUE...] [-- SNAKEMAKE ARGS...]
                                          redo the study's failed runs (all, or those matching every
                                          KEY=VALUE, e.g. framework=mxnet model=alexnet) and the
                                          tables after them: snakemake --forcerun on their status.json
emulate run --nodes N [--rate-mbit R] [--delay-ms D] [--congestion-control C] [--slots S] -- COMMAND...
                                          make an emulated cluster, run COMMAND (e.g. mpirun ...)
                                          in its node 0 with $DLSCALE_HOSTFILE, then remove it
emulate up NAME --nodes N [...] [--hostfile FILE]   make a named emulated cluster and keep it
emulate down NAME | --all                 remove emulated clusters and every process in them
emulate list                              the emulated clusters that exist
slurm up --nodes N [--rate-mbit R] [--delay-ms D]
                                          a real Slurm cluster here (root): munge, slurmdbd, slurmctld,
                                          one slurmd per emulated node; kept until `slurm down`
slurm down                                remove it and everything running on it
"""

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from dlscale.core import paths, version
from dlscale.environment import build as env
from dlscale.environment import rerun

# `dlscale env build` runs on a bare python, before the environment with the runtime's packages exists
# (./bootstrap.sh, or a wheel installed into a site's python): commands import the runtime as they run.


def cmd_env(args):
    if args.action == "check":
        return _env_check(args)
    if len(args.framework) > 1:
        print(f"dlscale env {args.action}: one --framework at a time", file=sys.stderr)
        return 2
    own = args.framework[0] if args.framework else None  # its own environment, else the workload's
    if args.action == "path":
        path = env.env_dir(own=own)
        if not env.is_complete(path):
            how = f"python -m dlscale env build{f' --framework {own}' if own else ''}"
            print(f"no complete environment at {path}; run `{how}`", file=sys.stderr)
            return 1
        print(path)
        return 0
    if own and args.link:
        print("dlscale env build --link: the overlay is on the workload environment (no --framework)", file=sys.stderr)
        return 2
    if args.dev and not args.link:
        print("dlscale env build --dev: with --link (it adds the frameworks to that overlay)", file=sys.stderr)
        return 2
    path = env.build(own=own)
    if args.link:
        dev = args.dev or env.is_dev(args.link)
        env.link(path, args.link, frameworks=env.dev_frameworks() if dev else ())
    if args.record:
        Path(args.record).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path / env.RECORD, args.record)
    print(path)
    return 0


def _run_record(conf, framework):
    """The environment record a hand-launched run of `framework` runs in: the user's Python (checked), else its own."""
    from dlscale.runtime import environments  # bare python

    if framework in environments.user_pythons(conf):
        python = environments.python_of(conf, framework)
        return environments.admitted(python, framework, environments.needs(conf, framework))
    return env.own_record(framework)


def _prepared(manifest, form):
    """Whether the dataset at `manifest` exists with `form`'s files (a framework's own format)."""
    return manifest.exists() and (form is None or form.FORMAT in json.loads(manifest.read_text()))


def _env_check(args):
    """`dlscale env check`: what each framework's Python has of what the study's runs need; 1 where it lacks."""
    from dlscale.runtime import config as cfg  # bare python
    from dlscale.runtime import environments  # bare python

    conf = cfg.load(*args.configfile, items=args.config)
    users = environments.user_pythons(conf)
    lacking = 0
    for fw in args.framework or conf["framework"]:
        built = env.env_dir(own=fw)
        python = args.python or users.get(fw) or (env.load_record(built)["python"] if env.is_complete(built) else None)
        if python is None:  # built from its pins by the first study that runs it: nothing to lack
            print(f"{fw}: its own environment: not built yet ({built}; a study running {fw} builds it first,")
            print(f"  or `dlscale env build --framework {fw}`)")
            continue
        checked = environments.check(str(cfg.resolve(python)), fw, environments.needs(conf, fw))
        print(f"{fw}: {checked['python']}: {'ok' if not checked['missing'] else 'lacks what the study needs'}")
        wheels = checked["cuda"]["runtime_wheels"] or "none"
        print(f"  Python {checked['python_version']}; CUDA runtime wheels: {wheels}")
        for need in checked["needs"]:
            facts = checked["modules"][need["module"]]
            print(f"  {need['module']} {facts['version'] or '-'} ({need['why']})")
        for line in checked["missing"]:
            print(f"  missing: {line}")
        lacking += bool(checked["missing"])
    return 1 if lacking else 0


def cmd_check_config(args):
    from dlscale.runtime import config as cfg  # bare python

    conf = cfg.load(*args.configs, items=args.config)
    first = cfg.STUDY_CONFIG if Path(cfg.STUDY_CONFIG).is_file() else str(cfg.DEFAULT_CONFIG)
    name = " + ".join([first, *args.configs] + ([f"--config {' '.join(args.config)}"] if args.config else []))
    print(f"{name}: ok, {len(cfg.matrix(conf))} runs")
    for out in cfg.left_out(conf):
        print(f"left out: {out['framework']} with {out['allreduce_library']}: {out['reason']}")
    for warning in cfg.warnings(conf):
        print(f"warning: {warning}")
    return 0


def cmd_launch(args):
    from dlscale.runtime import config as cfg  # bare python
    from dlscale.runtime import dataset, launch  # bare python
    from dlscale.runtime.execution import Interrupted, interruptible  # bare python
    from dlscale.workloads import frameworks, images  # bare python

    conf = cfg.load(*[a for a in args.set if "=" not in a])
    run = dict(cfg.matrix(conf)[0])
    for item in (a for a in args.set if "=" in a):
        key, _, value = item.partition("=")
        if key not in run:
            raise cfg.ConfigError(f"unknown run key {key!r}; known: {', '.join(run)}")
        run[key] = int(value) if isinstance(run[key], int) else value
    given = {a.partition("=")[0] for a in args.set if "=" in a}
    if "allreduce_library" not in given:  # the chosen framework's first library in the study
        run["allreduce_library"] = cfg.libraries(conf, run["framework"])[0]
    why = frameworks.not_built(run["framework"], run["allreduce_library"])
    if why:
        raise cfg.ConfigError(f"run {run['framework']} with allreduce_library={run['allreduce_library']}: {why}")

    record = _run_record(conf, run["framework"])
    folder = cfg.dataset_folder(conf)
    form = images.formats().get(run["framework"])
    if folder and not _prepared(folder / images.MANIFEST, form):  # as the pipeline's dataset rule would
        print(f"preparing the training images in {folder} ...", file=sys.stderr)
        writers = {run["framework"]: record["python"]} if form else {}
        manifest, log = folder / images.MANIFEST, folder.parent / f"{folder.name}.log"
        dataset.prepare_rule(conf, env.load_record(env.build())["python"], manifest, log, writers)
    try:
        with interruptible():
            status = launch.launch(conf, run, record)
    except Interrupted as exc:
        print(f"run {exc}: its MPI job was stopped and the run left incomplete", file=sys.stderr)
        return 128 + exc.signum
    print(json.dumps(status, indent=2))
    return 0 if status["status"] == "ok" else 1


def _snakemake(args, *extra):
    """The packaged workflow, snakemake --cores all, with the study's overlays and items: its exit code."""
    argv = [sys.executable, "-m", "snakemake", "--snakefile", str(paths.WORKFLOW / "Snakefile")]
    # targets and Snakemake's own options first: --configfile and --config take every word after them
    argv += ["--workflow-profile", str(paths.WORKFLOW / "profiles" / "default"), "--cores", "all", *extra]
    argv += ["--configfile", *args.configfile] if args.configfile else []
    argv += ["--config", *args.config] if args.config else []
    return subprocess.run(argv).returncode


def cmd_init(args):
    """`dlscale init`: a study folder with its commented config, hostfiles and profiles; overwrites nothing."""
    from dlscale.runtime import config as cfg  # bare python

    folder = Path(args.study)
    config = folder / cfg.STUDY_CONFIG
    if config.exists():
        raise ValueError(f"{config} exists: {folder} is a study already; run it with `dlscale run {folder}`")
    text = cfg.study_template(args.sources)
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text)
    for part in ("hostfiles", "profiles"):
        shutil.copytree(
            paths.WORKFLOW / part, folder / part, dirs_exist_ok=True, ignore=shutil.ignore_patterns("default")
        )
    print(f"made the study {folder}: {config} ({', '.join(args.sources or ['the defaults'])}), hostfiles/, profiles/")
    print(f"check it with `cd {folder} && dlscale check-config`, run it with `dlscale run {folder}`")
    return 0


def _enter(args):
    """Resolve the overlays from where the command was typed, then work in the study folder (as Snakemake does)."""
    from dlscale.runtime import config as cfg  # bare python

    args.configfile = [str(Path(f).resolve()) for f in getattr(args, "configfile", [])]
    folder = Path(args.study)
    if not (folder / cfg.STUDY_CONFIG).is_file() and args.fn is not cmd_unlock:
        why = f"no {cfg.STUDY_CONFIG}"
        raise ValueError(f"{folder.resolve()} is not a study folder ({why}): make one with `dlscale init`")
    os.chdir(folder)


def cmd_run(args):
    from dlscale.runtime import config as cfg  # bare python

    cfg.load(*args.configfile, items=args.config)  # a bad key stops here, named, before snakemake starts
    locks, running = _locks(Path.cwd())
    if locks and not running:  # a killed snakemake's: the run would stop with a LockException
        for lock in locks:
            lock.unlink()
        stale = f"{len(locks)} file(s); no snakemake runs in {Path.cwd()}"
        print(f"dlscale: removed a stale Snakemake lock ({stale})", flush=True)
    return _snakemake(args, *args.command)


def _locks(folder):
    """(Snakemake's lock files in `folder`, the pids of the snakemakes running there besides this process)."""
    locks = sorted((folder / ".snakemake" / "locks").glob("*.lock"))
    return locks, [pid for pid in _snakemakes_in(folder) if pid != os.getpid()] if locks else []


def cmd_report(args):
    from dlscale.runtime import config as cfg  # bare python

    conf = cfg.load(*args.configfile, items=args.config)
    results = cfg.resolve(conf.get("results", "results"))
    # the target as the rules name it (the config's results folder as written): Snakemake does not
    # match an absolute path to a relative output
    rc = _snakemake(args, str(Path(conf.get("results", "results")) / paths.TABLES["report"]))
    if rc == 0:
        rc = _snakemake(args, "--report", str(results / paths.HTML_REPORT))
    if rc == 0:
        print(results / paths.TABLES["report"], results / paths.HTML_REPORT, sep="\n")
    return rc


def cmd_example(args):
    """Copy a finished study's report, figures and main tables as the docs' example."""
    from dlscale.runtime import example  # bare python

    for path in example.publish(args.results, args.out):
        print(path)
    return 0


def cmd_compare(args):
    """`dlscale compare`: the analysis's own program (dlscale/analysis/compare.py)."""
    from dlscale.analysis import compare  # pandas and matplotlib: only this command pays their import

    return compare.main([*args.studies, "--out", args.out])


def cmd_plan(args):
    """`dlscale plan`: the analysis's own program (dlscale/analysis/plan.py)."""
    from dlscale.analysis import plan  # bare python; pandas: only this command pays its import

    print(*plan.run(args.results, args.candidates, args.out), sep="\n")
    return 0


def cmd_retry(args):
    import pandas as pd  # deferred: only retry reads a table

    from dlscale.runtime import config as cfg  # bare python

    conf = cfg.load(*args.configfile, items=args.config)
    wanted = dict(item.partition("=")[::2] for item in args.set)
    unknown = set(wanted) - set(cfg.matrix(conf)[0])
    if unknown:
        raise cfg.ConfigError(f"unknown run key(s) {sorted(unknown)}; known: {', '.join(cfg.matrix(conf)[0])}")
    results = cfg.resolve(conf.get("results", "results"))  # from the checkout, where snakemake runs
    failed_in_table = set()
    if (results / paths.TABLES["runs"]).is_file():
        table = pd.read_csv(results / paths.TABLES["runs"], keep_default_na=False)
        failed_in_table = {str(Path(d).resolve()) for d in table.loc[table["status"] != "ok", "run_dir"]}
    redo = []
    for run in cfg.matrix(conf):
        if any(str(run[k]) != v for k, v in wanted.items()):
            continue
        path = results / paths.run_status(run)
        try:
            failed = json.loads(path.read_text())["status"] != "ok"
        except (OSError, ValueError, KeyError):
            continue  # not done yet: the next snakemake run does it anyway
        if failed or str(path.parent.resolve()) in failed_in_table:
            redo.append(str(path))
    if not redo:
        print("no failed runs" + (f" matching {' '.join(args.set)}" if args.set else ""))
        return 0
    print(f"redoing {len(redo)} failed run(s):", *redo, sep="\n  ")
    return _snakemake(args, *args.command, "--forcerun", *redo)


def _snakemakes_in(folder):
    """Pids of running snakemake processes whose working folder is `folder` (from /proc)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):  # a process that ended, or another user's
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if any(a.endswith(b"snakemake") for a in argv[:3]) and Path(os.readlink(proc / "cwd")) == folder:
                found.append(int(proc.name))
    return found


def cmd_unlock(args):
    """A killed snakemake (SIGKILL, power loss, out of memory) leaves its lock, and the next run stops with
    a LockException. The lock is stale only when no snakemake runs here, which this checks first."""
    locks, running = _locks(Path.cwd())
    if not locks:
        print(f"no lock in {Path.cwd() / '.snakemake' / 'locks'}: nothing to do")
        return 0
    if running and not args.force:
        print(
            f"snakemake is running in {Path.cwd()} (pid {', '.join(map(str, running))}): its lock is not stale. "
            "Wait for it or stop it (Ctrl-C), or pass --force if those processes are not this study's.",
            file=sys.stderr,
        )
        return 1
    held = sum(len(lock.read_text().splitlines()) for lock in locks)
    for lock in locks:
        lock.unlink()
    print(
        f"removed {len(locks)} stale lock file(s) over {held} path(s) left by a snakemake that did not end; "
        "the next snakemake redoes whatever it left incomplete"
    )
    return 0


def cmd_emulate(args):
    from dlscale.runtime import emulate  # bare python

    if args.action == "list":
        print("\n".join(emulate.clusters()))
        return 0
    if args.action == "down":
        names = emulate.clusters() if args.all else [f"{emulate.PREFIX}-{args.name}"]
        for name in names:
            print(f"removed {name}: {' '.join(emulate.down(name)) or 'nothing was there'}")
        return 0
    if not args.nodes:
        raise ValueError(f"emulate {args.action} needs --nodes")
    if args.action == "up":
        name, cc = f"{emulate.PREFIX}-{args.name}", args.congestion_control
        made = emulate.up(args.nodes, args.rate_mbit, args.delay_ms, name=name, congestion_control=cc)
        text = made.hostfile(args.slots)
        if args.hostfile:
            Path(args.hostfile).write_text(text)
        env = " ".join(f"{k}='{v}'" for k, v in made.launch_env().items())
        print(
            f"{text}# start jobs in node 0 with:\n{env} {' '.join(made.wrap(['mpirun', '...']))}\n"
            f"# remove with: python -m dlscale emulate down {args.name}"
        )
        return 0
    if not args.command:
        raise ValueError("emulate run needs a command after --")
    with emulate.cluster(args.nodes, args.rate_mbit, args.delay_ms, congestion_control=args.congestion_control) as made:
        hostfile = Path(f"/tmp/{made.name}.hostfile")
        hostfile.write_text(made.hostfile(args.slots))
        env = {**os.environ, **made.launch_env(), "DLSCALE_HOSTFILE": str(hostfile)}
        try:
            return subprocess.run(made.wrap(args.command), env=env).returncode
        finally:
            hostfile.unlink()


def cmd_slurm(args):
    from dlscale.runtime import slurm  # bare python

    if args.action == "down":
        stopped = slurm.down()
        print(f"removed the Slurm cluster: {' '.join(stopped) or 'nothing was running'}")
        return 0
    if not args.nodes:
        raise ValueError("slurm up needs --nodes")
    slurm.up(args.nodes, args.rate_mbit, args.delay_ms)
    sinfo = subprocess.run(["sinfo"], capture_output=True, text=True, env=slurm.environ()).stdout
    print(f"{sinfo}# Slurm's commands find it through SLURM_CONF={slurm.CONF}\n# remove with: dlscale slurm down")
    return 0


def _study_options(parser, configfile=True):
    if configfile:
        text = "an overlay on config/config.yaml (repeat for more, in order)"
        parser.add_argument("--configfile", action="append", default=[], metavar="FILE", help=text)
    text = "as snakemake --config (one item per --config)"
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help=text)


def parser():
    """The command line's parser (also what the docs' command-line reference is made from)."""
    parser = argparse.ArgumentParser(
        prog="dlscale", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    _init_command(sub)
    for name, fn, text in (
        ("run", cmd_run, "run the study (the packaged workflow, snakemake --cores all, in its folder)"),
        ("report", cmd_report, "make the study's report.md and Snakemake's report.html"),
    ):
        p = sub.add_parser(name, help=text, description=text)
        _study_folder(p)
        _study_options(p)
        p.set_defaults(fn=fn)
    _env_command(sub)
    _check_config_command(sub)
    p = sub.add_parser("launch", help="run one run of a study by hand")
    text = "overlays on config/config.yaml, and run keys differing from the first run"
    p.add_argument("set", nargs="*", metavar="CONFIG|KEY=VALUE", help=text)
    p.set_defaults(fn=cmd_launch)
    p = sub.add_parser("unlock", help="remove the lock a killed snakemake left behind")
    _study_folder(p)
    p.add_argument("--force", action="store_true", help="also when a snakemake process seems to run here")
    p.set_defaults(fn=cmd_unlock)
    p = sub.add_parser("retry", help="redo failed runs and the tables after them")
    _study_options(p)
    text = "the study folder (default: here), then only runs with these keys"
    p.add_argument("set", nargs="*", metavar="[STUDY] KEY=VALUE", help=text)
    p.set_defaults(fn=cmd_retry, study=".")
    p = sub.add_parser("compare", help="finished studies from several machines side by side")
    p.add_argument("studies", nargs="+", help="their results folders; the first is the reference")
    p.add_argument("-o", "--out", default="compare", help="where compare.md and compare.csv go (default: compare)")
    p.set_defaults(fn=cmd_compare)
    p = sub.add_parser("plan", help="the model's prediction for candidate hardware, from a finished study")
    p.add_argument("results", help="the study's results folder")
    p.add_argument("--candidates", metavar="FILE", help="candidate hardware (YAML); default: the study's placements")
    p.add_argument("-o", "--out", default="plan", help="where plan.md and plan.csv go (default: plan)")
    p.set_defaults(fn=cmd_plan)
    p = sub.add_parser("example", help="copy a finished study's report and figures as the docs' example")
    p.add_argument("results", help="the study's results folder")
    p.add_argument("out", nargs="?", default="docs/example", help="where (default docs/example, replaced)")
    p.set_defaults(fn=cmd_example)
    _emulate_command(sub)
    return parser


def _study_folder(parser):
    parser.add_argument("study", nargs="?", default=".", metavar="STUDY", help="the study folder (default: here)")


def _init_command(sub):
    p = sub.add_parser("init", help="make a study folder (config, hostfiles, profiles)")
    p.add_argument("study", metavar="STUDY", help="the folder to make (or an empty one)")
    shipped = ", ".join(paths.shipped_configs())
    text = f"start from this shipped config, over the defaults (repeat to layer several): {shipped}"
    p.add_argument("--from", dest="sources", action="append", default=[], metavar="NAME", help=text)
    p.set_defaults(fn=cmd_init)


def _env_command(sub):
    p = sub.add_parser("env", help="build, find or check the workload environments")
    text = "check: what each of the study's frameworks' Python has of what its runs need"
    p.add_argument("action", choices=["build", "path", "check"], help=text)
    p.add_argument("--python", help="check: this Python, for every framework asked")
    text = "build, path: the environment of its own this framework runs in; check: only this framework (repeatable)"
    p.add_argument("--framework", action="append", default=[], help=text)
    p.add_argument("--configfile", action="append", default=[], help="check: overlays on the study's config")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="check: as snakemake --config")
    p.add_argument("--record", help="copy the environment record (JSON) here")
    text = "make this path the checkout's overlay on the environment (e.g. .venv): "
    p.add_argument("--link", help=text + "the environment's packages and commands, this checkout installed editable")
    text = "with --link: also build the Horovod frameworks' own environments and add their packages to the overlay, "
    text += "so that one interpreter imports them all (the tests'); kept by a later --link"
    p.add_argument("--dev", action="store_true", help=text)
    p.set_defaults(fn=cmd_env)


def _check_config_command(sub):
    p = sub.add_parser("check-config", help="validate a study config (config/config.yaml and overlays)")
    p.add_argument("configs", nargs="*", metavar="CONFIG", help="overlays on config/config.yaml, in order")
    _study_options(p, configfile=False)
    p.set_defaults(fn=cmd_check_config)


def _emulate_command(sub):
    p = sub.add_parser("emulate", help="emulated multi-node clusters (network namespaces)")
    p.add_argument("action", choices=["run", "up", "down", "list"])
    p.add_argument("name", nargs="?", default="cli", help="cluster name for up/down (default: cli)")
    _link_options(p)
    p.add_argument("--congestion-control", default="cubic", help="TCP congestion control of the nodes (default: cubic)")
    p.add_argument("--slots", type=int, default=1, help="slots per node in the hostfile")
    p.add_argument("--hostfile", help="write the cluster's hostfile here (up)")
    p.add_argument("--all", action="store_true", help="remove every emulated cluster (down)")
    p.set_defaults(fn=cmd_emulate)
    p = sub.add_parser("slurm", help="a real Slurm cluster on this machine, over an emulated one (root)")
    p.add_argument("action", choices=["up", "down"])
    _link_options(p)
    p.set_defaults(fn=cmd_slurm)


def _link_options(parser):
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--rate-mbit", type=float, help="link rate in Mbit/s (default: unshaped)")
    parser.add_argument("--delay-ms", type=float, default=0, help="one-way link delay (needs netem)")


class _Version(argparse.Action):
    """`--version`: the version and the commit (asked of git or the package only when given)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print the version and commit, and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(version.line())
        parser.exit()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser().parse_args(argv[: len(argv) - len(command) - ("--" in argv)])
    args.command = command
    if args.fn is cmd_retry and args.set and "=" not in args.set[0]:
        args.study, args.set = args.set[0], args.set[1:]
    try:
        # all but `env build` and `env path` (which make and find it from a bare Python) import the runtime
        if not (args.fn is cmd_env and args.action in ("build", "path")) and rerun.missing():
            rerun.rerun(argv)  # replaces this process: an installed package's first command builds it
        if hasattr(args, "study") and args.fn is not cmd_init:
            _enter(args)
        return args.fn(args)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
