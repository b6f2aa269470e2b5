# Names shared by the rule files.
import json
import sys

from harness import config as cfg
from harness import launch
from analysis import report

RESULTS = config.get("results", "results")
LOGS = config.get("logs", "logs")
ENV_RECORD = f"{RESULTS}/environment.json"
RUNS = [f"{RESULTS}/runs/{cfg.run_path(run)}/status.json" for run in cfg.matrix(config)]
FIGURES = expand(f"{RESULTS}/figures/{{name}}.{{ext}}", name=["throughput", "efficiency", "phases"],
                 ext=["pdf", "png"])
