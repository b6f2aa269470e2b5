"""Command line: `python -m harness <command>`.

  env build [--record FILE] [--link PATH]   build (once) or find the workload environment
  env path                                  print the environment's folder (exit 1 if not built)
  check-config CONFIG                       validate a study config and its hostfile
  launch CONFIG KEY=VALUE...                run one run of the study by hand (framework=torch ...)
  emulate run --nodes N [--rate-mbit R] [--delay-ms D] [--slots S] -- COMMAND...
                                            make an emulated cluster, run COMMAND (e.g. mpirun ...)
                                            in its node 0 with $DLSCALE_HOSTFILE, then remove it
  emulate up NAME --nodes N [...] [--hostfile FILE]   make a named emulated cluster and keep it
  emulate down NAME | --all                 remove emulated clusters and every process in them
  emulate list                              the emulated clusters that exist
"""

import argparse
import json
import shutil
import sys
from pathlib import Path


def cmd_env(args):
    from environment import build as env

    if args.action == "path":
        path = env.env_dir()
        if not env.is_complete(path):
            print(f"no complete environment at {path}; run `python -m harness env build`", file=sys.stderr)
            return 1
        print(path)
        return 0
    path = env.build()
    if args.link:
        env.link(path, args.link)
    if args.record:
        Path(args.record).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path / env.RECORD, args.record)
    print(path)
    return 0


def cmd_check_config(args):
    from harness import config as cfg

    conf = cfg.load(args.config)
    print(f"{args.config}: ok, {len(cfg.matrix(conf))} runs")
    return 0


def cmd_launch(args):
    from harness import config as cfg
    from environment import build as env
    from harness import launch

    conf = cfg.load(args.config)
    run = dict(cfg.matrix(conf)[0])
    for item in args.set:
        key, _, value = item.partition("=")
        if key not in run:
            raise cfg.ConfigError(f"unknown run key {key!r}; known: {', '.join(run)}")
        run[key] = int(value) if isinstance(run[key], int) else value
    status = launch.launch(conf, run, env.load_record(env.build()))
    print(json.dumps(status, indent=2))
    return 0 if status["status"] == "ok" else 1


def cmd_emulate(args):
    import os
    import subprocess

    from harness import emulate

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
        made = emulate.up(args.nodes, args.rate_mbit, args.delay_ms, name=f"{emulate.PREFIX}-{args.name}")
        text = made.hostfile(args.slots)
        if args.hostfile:
            Path(args.hostfile).write_text(text)
        env = " ".join(f"{k}='{v}'" for k, v in made.launch_env().items())
        print(f"{text}# start jobs in node 0 with:\n{env} {' '.join(made.wrap(['mpirun', '...']))}\n"
              f"# remove with: python -m harness emulate down {args.name}")
        return 0
    command = args.command
    if not command:
        raise ValueError("emulate run needs a command after --")
    with emulate.cluster(args.nodes, args.rate_mbit, args.delay_ms) as made:
        hostfile = Path(f"/tmp/{made.name}.hostfile")
        hostfile.write_text(made.hostfile(args.slots))
        env = {**os.environ, **made.launch_env(), "DLSCALE_HOSTFILE": str(hostfile)}
        try:
            return subprocess.run(made.wrap(command), env=env).returncode
        finally:
            hostfile.unlink()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("env", help="build or find the workload environment")
    p.add_argument("action", choices=["build", "path"])
    p.add_argument("--record", help="copy the environment record (JSON) here")
    p.add_argument("--link", help="make this path a symlink to the environment (e.g. .venv)")
    p.set_defaults(fn=cmd_env)
    p = sub.add_parser("check-config", help="validate a study config")
    p.add_argument("config")
    p.set_defaults(fn=cmd_check_config)
    p = sub.add_parser("launch", help="run one run of a study by hand")
    p.add_argument("config")
    p.add_argument("set", nargs="*", metavar="KEY=VALUE", help="run keys differing from the first run")
    p.set_defaults(fn=cmd_launch)
    p = sub.add_parser("emulate", help="emulated multi-node clusters (network namespaces)")
    p.add_argument("action", choices=["run", "up", "down", "list"])
    p.add_argument("name", nargs="?", default="cli", help="cluster name for up/down (default: cli)")
    p.add_argument("--nodes", type=int)
    p.add_argument("--rate-mbit", type=float, help="link rate in Mbit/s (default: unshaped)")
    p.add_argument("--delay-ms", type=float, default=0, help="one-way link delay (needs netem)")
    p.add_argument("--slots", type=int, default=1, help="slots per node in the hostfile")
    p.add_argument("--hostfile", help="write the cluster's hostfile here (up)")
    p.add_argument("--all", action="store_true", help="remove every emulated cluster (down)")
    p.set_defaults(fn=cmd_emulate)
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:len(argv) - len(command) - ("--" in argv)])
    args.command = command
    try:
        return args.fn(args)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
