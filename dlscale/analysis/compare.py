"""Finished studies from several machines side by side (`dlscale compare`): the throughput of each
framework x network at each scale on each machine, and each machine against the first one's (the
reference) with its 95% interval, per device too.

Two machines' runs share no blocks, so a ratio's interval is the delta method on the log scale."""

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dlscale.analysis import comparisons, metrics
from dlscale.core import hardware
from dlscale.core.paths import TABLES
from dlscale.core.vocabulary import CONFIG_KEYS, RENAMED_KEYS, TEXT_COLUMNS

# What a configuration is across machines: the work and its placement.
WORK = ["framework", "model", "allreduce_schedule", "allreduce_library", "layout", "timing", "nodes", "ranks_per_node"]
# Settings a study holds for all its runs, which two machines' studies may hold differently.
SETTINGS = [k for k in CONFIG_KEYS if k not in WORK + ["loader_workers"]] + ["loader_workers"]
# compare.csv: a configuration's keys (`keys`), then these.
RESULT_COLUMNS = ["study", "reference", "img_per_s", "img_per_s_ci_lo", "img_per_s_ci_hi", "img_per_s_per_device"]
RESULT_COLUMNS += ["repeats", "ratio", "ratio_ci_lo", "ratio_ci_hi", "verdict"]


def load(folder):
    """One study: its name, its summary's ok configurations, and its hosts' hardware and dates."""
    folder = Path(folder)
    summary_path, runs_path = folder / TABLES["summary"], folder / TABLES["runs"]
    for path in (summary_path, runs_path):
        if not path.is_file():
            raise ValueError(f"{folder}: no {path.name} (not a finished study's results folder)")
    # a study of before 0.3.0 has its columns under their old names
    summary = pd.read_csv(summary_path).rename(columns=RENAMED_KEYS)
    runs = pd.read_csv(runs_path, keep_default_na=False, na_values={"hardware": [""]}, dtype=TEXT_COLUMNS).rename(
        columns=RENAMED_KEYS
    )
    started = sorted(str(t) for t in runs.get("started", pd.Series(dtype=str)) if str(t))
    return {
        "name": folder.name if folder.name != "results" else folder.resolve().parent.name,
        "folder": str(folder),
        "summary": summary[summary["repeats_ok"] > 0],
        "hosts": hardware.hosts(runs.get("hardware", pd.Series(dtype=str))),
        "dates": (started[0][:10], started[-1][:10]) if started else ("", ""),
    }


def differing(studies):
    """{setting: [each study's values]} for the settings the studies do not all hold alike."""
    values = {k: [sorted(map(str, s["summary"][k].unique())) for s in studies] for k in SETTINGS}
    return {k: v for k, v in values.items() if len({tuple(x) for x in v}) > 1}


def keys(studies):
    """What a configuration is across these studies: the work, its placement, each setting a study varies, the ranks."""
    varied = [k for k in SETTINGS if any(s["summary"][k].nunique() > 1 for s in studies)]
    return WORK + varied + ["ranks"]


def table(studies):
    """One row per study x shared configuration: its throughput, and its ratio to the reference's (the first study)."""
    keys_ = keys(studies)
    sides = [s["summary"].groupby(keys_, as_index=False).first() for s in studies]
    shared = sides[0][keys_]
    for side in sides[1:]:
        shared = shared.merge(side[keys_], on=keys_)
    ref = sides[0].merge(shared, on=keys_)
    rows = []
    for study, side in zip(studies, sides):
        mine = side.merge(shared, on=keys_).merge(ref, on=keys_, suffixes=("", "_ref"))
        for r in mine.to_dict("records"):
            ratio, lo, hi = metrics.ratio_ci(
                metrics.Mean(r["throughput_img_per_s"], r["throughput_se"], r["repeats_ok"]),
                metrics.Mean(r["throughput_img_per_s_ref"], r["throughput_se_ref"], r["repeats_ok_ref"]),
            )
            row = {k: r[k] for k in keys_} | {"study": study["name"], "reference": studies[0]["name"]}
            row |= {f"img_per_s{end}": r[f"throughput_img_per_s{end}"] for end in ("", "_ci_lo", "_ci_hi")}
            row |= {"img_per_s_per_device": r["throughput_img_per_s"] / r["ranks"], "repeats": r["repeats_ok"]}
            row |= {"ratio": ratio, "ratio_ci_lo": lo, "ratio_ci_hi": hi, "_se": _se_log(r)}
            rows.append(row | {"_df": min(r["repeats_ok"], r["repeats_ok_ref"]) - 1})
    out = pd.DataFrame(rows, columns=keys_ + RESULT_COLUMNS + ["_se", "_df"])
    return _decide(out, studies[0]["name"]).reindex(columns=keys_ + RESULT_COLUMNS)


def _se_log(r):
    """The standard error of log(ratio) (NaN below 2 repeats on either side)."""
    if min(r["repeats_ok"], r["repeats_ok_ref"]) < 2:
        return math.nan
    rel, rel_ref = (r[f"throughput_se{side}"] / r[f"throughput_img_per_s{side}"] for side in ("", "_ref"))
    return math.sqrt(rel**2 + rel_ref**2)


def _decide(out, reference):
    """Verdicts against the reference (faster, slower, equal: within 0.95-1.05), Holm-adjusted over the table."""
    others = out["study"] != reference
    p = [comparisons.tests(math.log(r), s, d) for r, s, d in zip(out["ratio"], out["_se"], out["_df"])]
    p = np.array(p, dtype=float).reshape(-1, 2)
    p[~others.to_numpy()] = np.nan
    adjusted = comparisons.holm(p.ravel()).reshape(-1, 2)
    names = {"a faster": "faster", "b faster": "slower", "equal": "equal", "unresolved": "unresolved"}
    out["verdict"] = [
        names[comparisons.verdict(r, d, e)] if o else "reference"
        for r, d, e, o in zip(out["ratio"], adjusted[:, 0], adjusted[:, 1], others)
    ]
    return out


def not_shared(studies):
    """Per study, its configurations the others did not all measure ("torch alexnet ... 2 rank(s) on 1 node(s)")."""
    keys_ = keys(studies)
    sets = [set(map(tuple, s["summary"][keys_].astype(str).to_numpy())) for s in studies]
    common = set.intersection(*sets)
    return {s["name"]: sorted(_label(dict(zip(keys_, c))) for c in mine - common) for s, mine in zip(studies, sets)}


def _label(config):
    varied = [f"{k}={config[k]}" for k in config if k in SETTINGS]
    words = [config[k] for k in ("framework", "model", "allreduce_schedule", "allreduce_library")]
    return " ".join(words + varied + [f"{config['ranks']} rank(s) on {config['nodes']} node(s)"])


def report(studies, compared, out_path):
    """compare.md: the machines, the settings that differ, then the ratios, then what was not shared."""
    lines = ["# dlscale: studies compared", "", "## The studies", ""]
    for i, s in enumerate(studies):
        hosts = "; ".join(f"`{name}`: {hardware.summary(h)}" for name, h in sorted(s["hosts"].items()))
        role = " (the reference)" if i == 0 else ""
        lines.append(f"- **{s['name']}**{role} (`{s['folder']}`, runs {' to '.join(s['dates'])}): {hosts or 'n/a'}")
    differ = differing(studies)
    lines += ["", "## Settings that differ", ""]
    lines += [
        f"- {k}: " + "; ".join(f"{s['name']} {', '.join(v)}" for s, v in zip(studies, values))
        for k, values in differ.items()
    ] or ["- none: the studies ran the same settings"]
    if differ:
        lines += ["", "The ratios below compare the machines with these settings, not the machines alone."]
    varied = [k for k in keys(studies) if k in SETTINGS]
    if varied:
        shared = "is compared where the studies share its value"
        lines += [f"A setting a study varies itself ({', '.join(varied)}) {shared}."]
    lines += ["", "## Throughput on each machine", ""]
    if compared.empty:
        lines += ["No configuration was measured by every study: nothing to compare (below: what each measured)."]
    else:
        lines += [
            f"Throughput in images/s over all ranks [95% CI], per device (img/s / ranks), and each study against "
            f"{studies[0]['name']}: ratio [95% CI, delta method on the log scale], verdict Holm-adjusted over the "
            f"{int((compared['verdict'] != 'reference').sum())} comparisons (family-wise 5%; equal: within 0.95-1.05).",
            "",
            "| framework | network | library | " + "".join(f"{k} | " for k in varied) + "ranks | study | "
            "img/s [95% CI] | per device | ratio [95% CI] | verdict |",
            "|---|---|---|" + "---|" * len(varied) + "---|---|---|---|---|---|",
        ]
        for r in compared.to_dict("records"):
            ratio = "" if r["verdict"] == "reference" else _ci(r, "ratio")
            lines.append(
                f"| {r['framework']} | {r['model']} | {r['allreduce_library']} | "
                + "".join(f"{r[k]} | " for k in varied)
                + f"{r['ranks']} | {r['study']} | {_ci(r, 'img_per_s')} | {r['img_per_s_per_device']:.3g} | "
                f"{ratio} | {r['verdict']} |"
            )
    unshared = {k: v for k, v in not_shared(studies).items() if v}
    lines += ["", "## Measured by only some of the studies (not compared)", ""]
    lines += [f"- {name}: {', '.join(v)}" for name, v in unshared.items()] or ["- nothing"]
    Path(out_path).write_text("\n".join(lines) + "\n")
    return Path(out_path)


def _ci(r, col):
    lo, hi = r.get(f"{col}_ci_lo"), r.get(f"{col}_ci_hi")
    return f"{r[col]:.3g}" + (f" [{lo:.3g}, {hi:.3g}]" if pd.notna(lo) and pd.notna(hi) else "")


def run(folders, out):
    """`dlscale compare`: compare.md and compare.csv in `out`."""
    if len(folders) < 2:
        raise ValueError("compare needs two or more studies' results folders")
    studies = [load(f) for f in folders]
    names = [s["name"] for s in studies]
    if len(set(names)) < len(names):  # two folders of the same name: number them
        for i, s in enumerate(studies):
            s["name"] = f"{i + 1}:{s['name']}"
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    compared = table(studies)
    compared.to_csv(out / "compare.csv", index=False)
    return [out / "compare.csv", report(studies, compared, out / "compare.md")]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="dlscale compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("studies", nargs="+", help="finished studies' results folders; the first is the reference")
    parser.add_argument("-o", "--out", default="compare", help="where compare.md and compare.csv go (default: compare)")
    args = parser.parse_args(argv)
    try:
        for path in run(args.studies, args.out):
            print(path)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
