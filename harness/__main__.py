"""Command line: `python -m harness <command>`.

  env build [--record FILE] [--link PATH]   build (once) or find the workload environment
  env path                                  print the environment's folder (exit 1 if not built)
  check-config CONFIG                       validate a study config and its hostfile
  launch CONFIG KEY=VALUE...                run one run of the study by hand (framework=torch ...)
"""

import argparse
import json
import shutil
import sys
from pathlib import Path


def cmd_env(args):
    from harness import env

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
    from harness import env, launch

    conf = cfg.load(args.config)
    run = dict(cfg.matrix(conf)[0])
    for item in args.set:
        key, _, value = item.partition("=")
        if key not in run:
            raise cfg.ConfigError(f"unknown run key {key!r}; known: {', '.join(run)}")
        run[key] = int(value) if isinstance(run[key], int) else value
    results = Path(conf.get("results", "results"))
    rel = cfg.run_path(run)
    status = launch.launch(conf, run, results / "runs" / rel, env.load_record(env.build()),
                           Path(conf.get("logs", "logs")) / "runs" / f"{rel}.log", results / "attempts" / rel)
    print(json.dumps(status, indent=2))
    return 0 if status["status"] == "ok" else 1


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
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
