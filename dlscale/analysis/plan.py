"""`dlscale plan STUDY`: what candidate hardware (N devices per node x M nodes, compute and link measured or
stated: docs/guides/hardware.md) would give, predicted by the performance model from a finished study."""

import math
from pathlib import Path

import pandas as pd
import yaml

from dlscale.analysis import contention, prediction
from dlscale.analysis.model import Cost, Gradients, on_backward, predict, ring_cost, shared_rate
from dlscale.analysis.replayed import read_table
from dlscale.core.errors import ConfigError
from dlscale.core.paths import TABLES
from dlscale.core.vocabulary import BACKWARD_S, BASELINE_KEYS

# What the work is, whoever runs it (threads per rank are the device's): a device study's baseline
# stands in for this study's when these agree.
WORK = [k for k in BASELINE_KEYS if k != "threads_per_rank"]
FIELDS = {"name", "nodes", "devices_per_node", "threads_per_rank", "link", "link_study", "compute_factor"}
FIELDS |= {"device_study", "price", "contention"}
MEASURED = "measured"
COLUMNS = WORK + ["candidate", "nodes", "devices_per_node", "devices", "predicted_iteration_s", "predicted_img_per_s"]
COLUMNS += ["predicted_efficiency", "img_per_s_per_price", "model_error", "model_error_from", "compute_from"]
COLUMNS += ["compute_slowdown", "slowdown_from", "link_from"]


def load(folder):
    """A finished study's tables the model needs, by name; a missing one is named."""
    folder = Path(folder)
    needed = ("run_metrics", "runs", "tensors", "allreduce", "allreduce_fit", "model")
    missing = [TABLES[n] for n in needed if not (folder / TABLES[n]).is_file()]
    if missing:
        raise ValueError(f"{folder}: no {', '.join(missing)} (not a finished study's results folder)")
    path = {n: folder / TABLES[n] for n in needed}
    status = read_table(path["runs"])
    table, bases, _ = prediction.study_baselines(pd.read_csv(path["run_metrics"]), status, pd.read_csv(path["tensors"]))
    sweep, fits = pd.read_csv(path["allreduce"]), pd.read_csv(path["allreduce_fit"])
    contention_path = folder / TABLES["contention"]  # none in a study made before it had one
    return {
        "name": folder.name if folder.name != "results" else folder.resolve().parent.name,
        "bases": bases,
        "costs": prediction.costs(sweep, fits),
        "model": read_table(path["model"]),
        "runs": table,
        "slowdowns": contention.slowdowns(read_table(contention_path)) if contention_path.is_file() else {},
        "node_cpus": min((c for c in map(prediction.node_cpus, table.to_dict("records")) if c), default=None),
    }


def read_candidates(path, study):
    """(links, candidates) from a YAML file, each checked and with its defaults; else the study's placements."""
    if path is None:
        placements = sorted({(1, 1)} | {(n, r) for n, r, _ in study["costs"]})
        swept = [{"name": f"{n} node(s) x {r}", "nodes": n, "devices_per_node": r} for n, r in placements]
        return {}, [_candidate(c, {}) for c in swept]
    try:
        spec = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the candidates: {exc}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("candidates"), list) or not spec["candidates"]:
        raise ConfigError(f"{path}: needs `candidates:`, a list of candidates (docs/guides/hardware.md)")
    links = spec.get("links") or {}
    for name, link in links.items():
        if not (isinstance(link, dict) and _positive(link.get("gbit_s")) and _number(link.get("latency_us"))):
            raise ConfigError(f"{path}: link {name!r} needs gbit_s > 0 and latency_us >= 0")
    return links, [_candidate(c, links, path) for c in spec["candidates"]]


def _positive(x):
    return _number(x) and x > 0


def _number(x):
    return isinstance(x, int | float) and math.isfinite(x) and x >= 0


def _candidate(c, links, path="candidates"):
    """One candidate with its defaults, or a ConfigError naming what is wrong with it."""
    where = f"{path}: candidate {c.get('name', '?')!r}" if isinstance(c, dict) else f"{path}: candidate {c!r}"
    if not isinstance(c, dict) or not isinstance(c.get("name"), str):
        raise ConfigError(f"{where}: needs a `name`")
    if set(c) - FIELDS:
        raise ConfigError(f"{where}: unknown key(s) {sorted(set(c) - FIELDS)}; known: {sorted(FIELDS)}")
    out = {"nodes": 1, "devices_per_node": 1, "link": MEASURED, "compute_factor": 1.0, "price": None, **c}
    for key in ("nodes", "devices_per_node", "threads_per_rank"):
        if key in out and not (isinstance(out[key], int) and out[key] >= 1):
            raise ConfigError(f"{where}: {key} must be a whole number >= 1")
    if not _positive(out["compute_factor"]) or (out["price"] is not None and not _positive(out["price"])):
        raise ConfigError(f"{where}: compute_factor and price must be numbers > 0")
    if "contention" in c and not _positive(c["contention"]):
        raise ConfigError(f"{where}: contention (a rank's compute slowdown beside the others on its node) must be > 0")
    if "device_study" in c and "compute_factor" in c:
        raise ConfigError(f"{where}: give device_study or compute_factor, not both")
    if "link_study" in c and out["link"] != MEASURED:
        raise ConfigError(f"{where}: link_study is a measured sweep; leave `link` out or `measured`")
    if out["link"] != MEASURED and out["link"] not in links:
        raise ConfigError(f"{where}: link {out['link']!r} is neither `measured` nor one of `links`")
    return out


def _works(study):
    """{the work (WORK values): {threads per rank: its 1-rank baseline}} of a study."""
    out = {}
    for key, base in study["bases"].items():
        ident = dict(zip(BASELINE_KEYS, key))
        out.setdefault(tuple(ident[k] for k in WORK), {})[ident["threads_per_rank"]] = base
    return out


def predict_candidate(study, candidate, links, device=None, link_study=None):
    """One row per work with a 1-device baseline and a sweep at the candidate's placement: its predictions."""
    rows, source = [], device or study
    for work in _works(study):
        ident = dict(zip(WORK, work))
        compute = _compute(source, candidate, _works(source).get(work, {}))
        cost = _link(link_study or study, candidate, ident, links)
        if compute is None or cost is None:
            continue
        (base, phases, compute_from, threads), (cost_fn, link_from) = compute, cost
        ranks = candidate["nodes"] * candidate["devices_per_node"]
        # on the candidate's backward: a stated compute_factor shortens it, and its gradients come sooner
        ready = None if ident["allreduce_schedule"] == "sequential" else on_backward(base["ready"], phases[BACKWARD_S])
        slowdown, slowdown_from = _slowdown(source, candidate, {**ident, "threads_per_rank": threads})
        rate = _rate(source, candidate, threads, cost_fn, link_study)
        p = predict(phases, Gradients.of(base, ready), ranks, cost_fn, slowdown, rate)
        rate = ranks * ident["batch_size"] / p["iteration_s"]
        error, error_from = model_error(study, ident)
        row = {**ident, "candidate": candidate["name"], "devices": ranks, "predicted_iteration_s": p["iteration_s"]}
        row |= {k: candidate[k] for k in ("nodes", "devices_per_node")}
        row |= {"predicted_img_per_s": rate, "predicted_efficiency": sum(phases.values()) / p["iteration_s"]}
        row |= {"img_per_s_per_price": rate / candidate["price"] if candidate["price"] else math.nan}
        row |= {"model_error": error, "model_error_from": error_from, "compute_from": compute_from}
        rows.append(row | {"compute_slowdown": slowdown, "slowdown_from": slowdown_from, "link_from": link_from})
    return rows


def _compute(source, candidate, by_threads):
    """(baseline, phases, source, threads), or None without a 1-rank run at the candidate's threads (or fewest)."""
    threads = candidate.get("threads_per_rank") or min(by_threads, default=None)
    if threads not in by_threads:
        return None
    base, factor = by_threads[threads], candidate["compute_factor"]
    phases = {k: v / factor for k, v in base["base"].items()}
    per_rank = f"({threads} thread(s) per rank)"
    if factor == 1:
        return base, phases, f"measured: {source['name']}'s 1-rank runs {per_rank}", threads
    stated = f"assumed: {source['name']}'s 1-rank phases {per_rank} / {factor:g} (every phase, data I/O too)"
    return base, phases, stated, threads


def _slowdown(source, candidate, ident):
    """(a rank's compute slowdown beside its node's others, its source): stated, else measured on `source`, else 1."""
    per_node = candidate["devices_per_node"]
    if per_node == 1:
        return 1.0, "none: one device per node"
    if "contention" in candidate:
        return float(candidate["contention"]), f"stated: {candidate['contention']:g} at {per_node} per node"
    key = contention.key(ident, per_node)
    if candidate["compute_factor"] == 1 and key in source["slowdowns"]:
        return source["slowdowns"][key], f"measured: {source['name']}'s contention.csv, {per_node} ranks per node"
    return 1.0, f"assumed: 1 ({per_node} devices per node computing as fast as one alone; none measured or stated)"


def _rate(source, candidate, threads, cost, link_study=None):
    """model.shared_rate on the measured device's own node (`link_study`'s CPUs there), else 1 (assumed)."""
    if candidate["compute_factor"] != 1:
        return 1.0
    cpus = (link_study or source).get("node_cpus")
    return shared_rate(threads, candidate["devices_per_node"], cpus, cost.cores)


def _link(study, candidate, ident, links):
    """(the Cost of the candidate's allreduce, where it comes from), or None."""
    nodes, per_node = candidate["nodes"], candidate["devices_per_node"]
    if nodes * per_node == 1:
        return Cost(lambda m: 0.0), "none: one device"
    if candidate["link"] == MEASURED:
        found = study["costs"].get((nodes, per_node, prediction.library(ident, (nodes, per_node), study["costs"])))
        if found is None:
            return None
        return found, f"measured: {study['name']}'s allreduce sweep on {nodes} node(s) x {per_node}"
    link = links[candidate["link"]]
    alpha, beta = link["latency_us"] * 1e-6, 8 / (link["gbit_s"] * 1e9)
    stated = f"stated: {candidate['link']} ({link['gbit_s']:g} Gbit/s, {link['latency_us']:g} us), ring model"
    return Cost(ring_cost(nodes * per_node, alpha, beta)), stated


def model_error(study, ident):
    """(median |relative error| of iteration time over this configuration's runs, else the study's; what it is over)."""
    table = study["model"].dropna(subset=["error_iteration"])
    mine = table
    for k in WORK:
        if k in table:
            mine = mine[mine[k].astype(str) == str(ident[k])]
    if len(mine):
        return float(mine["error_iteration"].abs().median()), f"{len(mine)} predicted run(s) of this configuration"
    if len(table):
        return float(table["error_iteration"].abs().median()), f"all {len(table)} predicted runs of the study"
    return math.nan, "none: the study has no run of 2 or more ranks to check the model on"


def plan(folder, candidates_path=None):
    """The plan table of a finished study (results folder) and a candidates file (or none)."""
    study = load(folder)
    links, candidates = read_candidates(candidates_path, study)
    loaded, rows = {}, []
    for c in candidates:
        other = {}
        for key in ("device_study", "link_study"):
            if key in c:
                source = Path(c[key])
                if not source.is_absolute() and candidates_path:
                    source = Path(candidates_path).parent / source
                other[key] = loaded.setdefault(str(source), load(source))
        rows += predict_candidate(study, c, links, other.get("device_study"), other.get("link_study"))
    if not rows:
        raise ValueError(
            f"{folder}: no configuration could be predicted for any candidate (no 1-rank runs with phases?)"
        )
    return pd.DataFrame(rows, columns=COLUMNS), study


def report(table, study, out_path):
    """plan.md: per framework and network, the candidates by predicted throughput, error and inputs' sources."""
    intro = (
        "Predicted by the performance model from the study's measured 1-device phases, gradient sizes and "
        "allreduce sweep; each row says which inputs were measured and which assumed, and the model's measured error "
        "on the study."
    )
    lines = [f"# dlscale plan: {study['name']}", "", intro, ""]
    for (fw, model), g in table.groupby(["framework", "model"], sort=True):
        g = g.sort_values("predicted_img_per_s", ascending=False)
        best = g.iloc[0]
        lines += [f"## {model} in {fw}", "", _answer(g, best), ""]
        lines += [HEAD, "|" + " --- |" * HEAD.count(" | ") + " --- |"]
        for r in g.itertuples():
            per_price = "" if pd.isna(r.img_per_s_per_price) else f"{r.img_per_s_per_price:.3g}"
            lines.append(
                f"| {r.candidate} | {r.nodes} x {r.devices_per_node} | {r.predicted_img_per_s:.3g} | "
                f"{r.predicted_efficiency:.2f} | {per_price} | {_error(r)} | {r.compute_from} | "
                f"x{r.compute_slowdown:.3g} ({r.slowdown_from}) | {r.link_from} |"
            )
        lines.append("")
    Path(out_path).write_text("\n".join(lines))


HEAD = "| candidate | devices | img/s | efficiency | img/s per price | model error | compute | sharing a node | link |"


def _answer(g, best):
    others = g.iloc[1:]
    if others.empty:
        return f"{best.candidate}: {best.predicted_img_per_s:.3g} img/s predicted."
    second = others.iloc[0]
    ratio = best.predicted_img_per_s / second.predicted_img_per_s
    verdict = "within the 5% the model is checked to" if ratio < 1.05 else f"{ratio:.2f}x"
    return (
        f"{best.candidate} gives {best.predicted_img_per_s:.3g} img/s, {second.candidate} "
        f"{second.predicted_img_per_s:.3g} img/s ({verdict}; the model's error here: {_error(best)})."
    )


def _error(r):
    return "n/a" if pd.isna(r.model_error) else f"{r.model_error:.1%} ({r.model_error_from})"


def run(folder, candidates_path, out):
    """`dlscale plan`: plan.md and plan.csv in `out`."""
    table, study = plan(folder, candidates_path)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "plan.csv", index=False)
    report(table, study, out / "plan.md")
    return [out / "plan.md", out / "plan.csv"]
