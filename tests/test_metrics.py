import math

import pandas as pd
import pytest

from dlscale.analysis import comparisons, metrics
from dlscale.core import paths, samples
from dlscale.core.vocabulary import PHASES
from dlscale.workloads import frameworks


def test_mean_ci_known_values():
    mean, lo, hi = metrics.mean_ci([1.0, 2.0, 3.0])
    # t(0.975, 2) = 4.302653; s = 1; half width = 4.302653 / sqrt(3)
    assert mean == 2.0
    assert hi - mean == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert mean - lo == pytest.approx(hi - mean)
    m, lo, hi = metrics.mean_ci([5.0])
    assert m == 5.0 and math.isnan(lo) and math.isnan(hi)


def tidy_rows(ranks, walls_by_rank, phase_s=0.1, repeat=0, batch=8, library="horovod"):
    """Rows of one run; walls_by_rank[rank] lists the measured iterations' wall times."""
    rows = []
    ident = {
        "framework": "torch",
        "model": "m",
        "allreduce_schedule": "overlap",
        "allreduce_library": library,
        "layout": "best",
        "timing": "phased",
        "nodes": 1,
        "ranks_per_node": ranks,
        "batch_size": batch,
        "loader_workers": 0,
        "image_size": 64,
        "classes": 10,
        "threads_per_rank": 1,
        "precision": "fp32",
        "repeat": repeat,
    }
    for rank, walls in enumerate(walls_by_rank):
        rows.append(
            {
                **ident,
                "rank": rank,
                "host": "h",
                "iteration": 0,
                "warmup": True,
                "profiled": False,
                "phase": "wall",
                "seconds": 100.0,
            }
        )  # warm-up must be ignored
        for it, wall in enumerate(walls, start=1):
            base = {**ident, "rank": rank, "host": "h", "iteration": it, "warmup": False, "profiled": False}
            rows.append({**base, "phase": "wall", "seconds": wall})
            rows += [{**base, "phase": p, "seconds": phase_s} for p in PHASES]
    return rows


def test_throughput_speedup_efficiency_on_known_numbers():
    rows = []
    for rep in range(2):
        rows += tidy_rows(1, [[0.5, 0.5]], repeat=rep)  # 8 img / 0.5 s = 16 img/s
        rows += tidy_rows(2, [[0.5, 0.8], [0.8, 0.5]], repeat=rep)  # slowest rank: 0.8 s -> 20 img/s
    runs = metrics.run_table(pd.DataFrame(rows))
    assert sorted(runs["throughput_img_per_s"].round(9)) == [16.0, 16.0, 20.0, 20.0]
    assert (runs["forward_s"] == 0.1).all()
    summary = metrics.summarize(runs)
    two = summary[summary["ranks"] == 2].iloc[0]
    assert two["iteration_s"] == pytest.approx(0.8)
    assert two["speedup"] == pytest.approx(20 / 16)
    assert two["efficiency"] == pytest.approx(20 / 32)
    assert two["repeats_ok"] == 2
    one = summary[summary["ranks"] == 1].iloc[0]
    assert one["efficiency"] == pytest.approx(1.0)


def test_failed_runs_are_counted_with_reasons():
    runs = metrics.run_table(pd.DataFrame(tidy_rows(1, [[0.5]])))
    keys = dict(runs[metrics.RUN_KEYS].iloc[0])
    status = pd.DataFrame(
        [
            {**keys, "status": "ok", "reasons": ""},
            {**keys, "ranks_per_node": 2, "status": "failed", "reasons": "mpirun exited with code 1"},
        ]
    )
    summary = metrics.summarize(runs, status)
    failed = summary[summary["ranks_per_node"] == 2].iloc[0]
    assert failed["repeats_ok"] == 0 and failed["repeats_failed"] == 1
    assert failed["failure_reasons"] == "mpirun exited with code 1"
    assert math.isnan(failed["throughput_img_per_s"])


def test_study_where_every_run_failed_still_summarizes_and_draws(tmp_path):
    from dlscale.analysis import figures, tidy

    empty = pd.DataFrame(columns=tidy.TIDY_COLUMNS)
    keys = dict(zip(metrics.RUN_KEYS, ["torch", "m", "overlap", "best", "native", 1, 1, 8, 0, 64, 10, 1, "fp32", 0]))
    status = pd.DataFrame([{**keys, "status": "failed", "reasons": "timed out after 1 s; job killed"}])
    summary = metrics.summarize(metrics.run_table(empty), status)
    assert summary[["repeats_ok", "repeats_failed", "failure_reasons"]].values.tolist() == [
        [0, 1, "timed out after 1 s; job killed"]
    ]
    drawn = figures.draw_all(
        summary, comparisons.study(summary, metrics.run_table(empty)), paths.figure_paths(tmp_path, paths.FIGURE_NAMES)
    )
    assert sorted(p.name for p in drawn) == sorted(
        f"{n}.{e}" for n in ("throughput", "efficiency", "phases", "input", "comparisons") for e in ("pdf", "png")
    )
    assert all(p.stat().st_size > 0 for p in drawn)


def test_speedup_and_efficiency_intervals_by_the_delta_method_on_the_log_scale():
    rows = []
    for rep, (one_wall, two_wall) in enumerate([(0.5, 0.8), (0.4, 0.8), (0.5, 1.0)]):
        rows += tidy_rows(1, [[one_wall]], repeat=rep)
        rows += tidy_rows(2, [[two_wall], [two_wall]], repeat=rep)
    summary = metrics.summarize(metrics.run_table(pd.DataFrame(rows)))
    two = summary[summary["ranks"] == 2].iloc[0]
    a = [16 / 0.8, 16 / 0.8, 16 / 1.0]  # 2-rank throughputs
    b = [8 / 0.5, 8 / 0.4, 8 / 0.5]
    sd = lambda x: pd.Series(x).std(ddof=1) / math.sqrt(len(x))  # noqa: E731
    ma, mb = sum(a) / 3, sum(b) / 3
    ratio = ma / mb
    half = 4.302653 * math.sqrt((sd(a) / ma) ** 2 + (sd(b) / mb) ** 2)  # t(0.975, 2) x se(log a/b)
    lo, hi = ratio * math.exp(-half), ratio * math.exp(half)
    assert two["speedup"] == pytest.approx(ratio)
    assert (two["speedup_ci_lo"], two["speedup_ci_hi"]) == pytest.approx((lo, hi), rel=1e-6)
    assert (two["efficiency_ci_lo"], two["efficiency_ci_hi"]) == pytest.approx((lo / 2, hi / 2), rel=1e-6)
    one = summary[summary["ranks"] == 1].iloc[0]
    assert one["speedup"] == 1.0 and math.isnan(one["speedup_ci_lo"])
    # with one repeat there is no interval
    single = metrics.summarize(metrics.run_table(pd.DataFrame(tidy_rows(1, [[0.5]]) + tidy_rows(2, [[0.8], [0.8]]))))
    assert single["speedup_ci_lo"].isna().all()


def test_libraries_are_compared_by_their_throughput_ratio_with_its_interval(tmp_path):
    """native / horovod of the same configuration, paired by block: the geometric mean of the blocks'
    ratios with its log-scale t interval; the report shows it and the pairs the study left out, with why."""
    rows = []
    walls = {"horovod": (0.8, 0.8, 1.0), "native": (0.4, 0.5, 0.4)}
    for rep in range(3):
        for lib in walls:
            rows += tidy_rows(2, [[walls[lib][rep]]] * 2, repeat=rep, library=lib)
    rows += tidy_rows(2, [[0.9]] * 2, library="horovod") + tidy_rows(2, [[0.9]] * 2, library="native")
    for row in rows[-2 * len(rows) // 8 :]:  # one repeat of another network: no interval
        row["model"] = "other"
    runs = metrics.run_table(pd.DataFrame(rows))
    summary = metrics.summarize(runs)
    table = comparisons.study(summary, runs)
    ratios = table[table["dimension"] == "allreduce_library"].set_index("model")
    logs = [math.log(h / n) for n, h in zip(walls["native"], walls["horovod"])]  # throughput native / horovod
    mean, se = sum(logs) / 3, pd.Series(logs).std(ddof=1) / math.sqrt(3)
    ratio = math.exp(mean)
    lo, hi = math.exp(mean - 4.302653 * se), math.exp(mean + 4.302653 * se)
    assert ratios.loc["m", "ratio_paired"] == pytest.approx(ratio)
    assert (ratios.loc["m", "ratio_paired_ci_lo"], ratios.loc["m", "ratio_paired_ci_hi"]) == pytest.approx((lo, hi))
    # alone it differs from 1 (p < 0.05); Holm's adjustment over the family (its 2 hypotheses) does not resolve it
    assert ratios.loc["m", "p_paired"] < 0.05 < ratios.loc["m", "p_holm_paired"] and ratios.loc["m", "blocks"] == 3
    assert ratios.loc["m", "verdict_paired"] == "unresolved" and ratios.loc["m", "blocks_needed_paired"] > 3
    assert ratios.loc["other", "verdict_paired"] == "unresolved" and ratios.loc["other", "ratio"] == pytest.approx(1.0)
    # two cells in 3 complete blocks: the block model is the paired t test, its family this one pair
    assert ratios.loc["m", "ratio"] == pytest.approx(ratio) and ratios.loc["m", "p_tukey"] == pytest.approx(
        ratios.loc["m", "p_paired"]
    )
    assert (ratios.loc["m", "ratio_ci_lo"], ratios.loc["m", "ratio_ci_hi"]) == pytest.approx((lo, hi))
    assert ratios.loc["m", "verdict"] == ("a faster" if lo > 1 else "b faster" if hi < 1 else "unresolved")
    assert ratios.loc["other", "verdict"] == "unresolved"  # one block, nothing to pool with

    from dlscale.analysis import report

    config = {"framework": ["torch", "mxnet", "jax"], "allreduce_library": ["horovod", "native"]}
    lines = "\n".join(report._library_lines(table, config))
    assert "| torch: native / horovod | m | 2 |" in lines and f"{ratio:.3g} [{lo:.3g}, {hi:.3g}]" in lines
    assert "mxnet with native: MXNet's own distributed path is a parameter server" in lines
    assert "jax with horovod: Horovod has no JAX binding" in lines
    assert report._library_lines(table[table["dimension"] == "framework"], {"framework": ["torch"]}) == []


def test_noisy_configurations_are_flagged():
    rows = []
    for rep, wall in enumerate([0.50, 0.60, 0.40]):  # CV 20%
        rows += tidy_rows(1, [[wall]], repeat=rep)
    for rep, wall in enumerate([0.50, 0.51, 0.49]):  # CV 2%
        rows += tidy_rows(2, [[wall], [wall]], repeat=rep)
    with pytest.warns(UserWarning, match="run-to-run CV of iteration time 20.0% > 5%"):
        summary = metrics.summarize(metrics.run_table(pd.DataFrame(rows)))
    noisy = dict(zip(summary["ranks"], summary["noise_warning"]))
    assert noisy[1].startswith("run-to-run CV of iteration time 20.0%") and noisy[2] == ""
    by = summary.set_index("ranks")
    assert by["iteration_s_cv"][2] == pytest.approx(0.02)
    # 3 repeats: t(0.975, 2) = 4.303, so +-4.303 x CV / sqrt(3): 49.7% of the mean at CV 20%, 4.97% at 2%
    assert by["iteration_s_ci_rel"][1] == pytest.approx(4.303 * 0.2 / 3**0.5, rel=1e-3)
    assert "95% interval of the iteration time +-49.7% of the mean > 5%: about 64 repeats" in noisy[1]
    assert by["repeats_needed"][1] == 64 and by["repeats_needed"][2] == 3  # 1.96 x 20% / 5% = 7.8, squared
    assert metrics.repeats_needed(0.0) == 2 and metrics.repeats_needed(float("nan")) != metrics.repeats_needed(0.0)


def test_figure_lines_never_merge_two_configurations():
    from dlscale.analysis import figures

    rows = []
    for nodes, rpn in [(1, 1), (1, 2), (2, 1), (2, 2)]:
        for batch in (8, 16):
            for workers in (1, 2):
                rows.append(
                    {
                        "framework": "torch",
                        "model": "m",
                        "allreduce_schedule": "overlap",
                        "allreduce_library": "horovod",
                        "layout": "best",
                        "timing": "native",
                        "nodes": nodes,
                        "ranks_per_node": rpn,
                        "ranks": nodes * rpn,
                        "batch_size": batch,
                        "loader_workers": workers,
                        "image_size": 64,
                        "classes": 10,
                        "threads_per_rank": 1,
                        "precision": "fp32",
                    }
                )
    summary = pd.DataFrame(rows)
    got = figures.lines(summary)
    assert len(got) == len(summary)  # every configuration drawn
    assert not got.duplicated(["model", "framework", "setting", "ranks"]).any()  # no point is two configurations
    assert sorted(got["setting"].unique()) == sorted(
        f"library: horovod, batch_size: {b}, loader_workers: {w}, ranks per node: {r}"  # each dimension named
        for b in (8, 16)
        for w in (1, 2)
        for r in (1, 2)
    )


def test_loader_utilisation_is_training_demand_over_the_loaders_rate():
    one = metrics.run_table(pd.DataFrame(tidy_rows(1, [[0.5, 0.5]])))  # 8 images per 0.5 s: 16 img/s
    two = metrics.run_table(pd.DataFrame(tidy_rows(2, [[0.5, 0.5], [0.5, 0.5]])))  # 32 img/s, 16 per rank
    runs = pd.concat([one, two])
    status = runs[metrics.RUN_KEYS].assign(status="ok", reasons="", loader_img_per_s=[64.0, 20.0])
    summary = metrics.summarize(runs, status).set_index("ranks")
    assert summary.loc[1, "loader_img_per_s"] == 64.0 and summary.loc[1, "loader_utilisation"] == pytest.approx(0.25)
    assert summary.loc[2, "loader_utilisation"] == pytest.approx(0.8)  # near input-bound
    synthetic = metrics.summarize(runs, runs[metrics.RUN_KEYS].assign(status="ok", reasons=""))
    assert "loader_utilisation" not in synthetic


def test_phase_figure_of_a_one_network_study_with_long_labels(tmp_path):
    """One network (one facet) and labels longer than the facet is wide: the legend must not squeeze
    the axes away (seaborn's add_legend made 'left cannot be >= right' of the emulated AlexNet study)."""
    from dlscale.analysis import figures

    rows = [
        {
            "framework": fw,
            "model": "alexnet",
            "allreduce_schedule": "sequential",
            "allreduce_library": frameworks.default_library(fw),
            "layout": "best",
            "timing": "native",
            "nodes": nodes,
            "ranks_per_node": 1,
            "ranks": nodes,
            "batch_size": 8,
            "loader_workers": 0,
            "image_size": 64,
            "classes": 1000,
            "threads_per_rank": 1,
            "precision": "fp32",
            "repeats_ok": 2,
            **{f"{p}_s": 0.1 * (i + 1) for i, p in enumerate(PHASES)},
        }
        for fw in ("torch", "tensorflow", "mxnet")
        for nodes in (1, 2)
    ]
    drawn = figures.phases(pd.DataFrame(rows), paths.figure_paths(tmp_path, ["phases"]))
    assert sorted(p.name for p in drawn) == ["phases.pdf", "phases.png"]
    assert all(p.stat().st_size > 0 for p in drawn)


def test_throughput_is_the_harmonic_mean_of_the_repeats_rates():
    """Rule 3: rates by the harmonic mean. Repeats at 0.1 s and 0.3 s per iteration (8 images): 80
    and 26.7 img/s, whose arithmetic mean (53.3) no study ran at; 8 / 0.2 = 40 img/s is right."""
    rows = tidy_rows(1, [[0.1]], repeat=0) + tidy_rows(1, [[0.3]], repeat=1)
    summary = metrics.summarize(metrics.run_table(pd.DataFrame(rows)))
    (row,) = summary.to_dict("records")
    assert row["throughput_img_per_s"] == pytest.approx(40.0)
    # the rate's interval is the iteration time's, carried through 8 / time; two repeats' plain
    # Student-t interval of the time reaches below zero (0.2 +- 12.7 x 0.1), so the time's is made on
    # the log scale: positive, and the rate's bounded on both sides (it was infinite above)
    assert 0.2 - 12.706 * 0.1 < 0
    assert row["throughput_img_per_s_ci_lo"] == pytest.approx(8 / row["iteration_s_ci_hi"])
    assert row["throughput_img_per_s_ci_hi"] == pytest.approx(8 / row["iteration_s_ci_lo"])
    assert 0 < row["iteration_s_ci_lo"] < 0.2 < row["iteration_s_ci_hi"]
    assert math.isfinite(row["throughput_img_per_s_ci_hi"]) and "log scale" in row["iteration_s_ci_method"]
    assert metrics.harmonic_rate(8, 0.2, 0.1, 0.4) == pytest.approx((40.0, 20.0, 80.0))


def test_skewed_repeats_get_a_bootstrap_interval_normal_ones_student_t():
    skewed = [1.0] * 9 + [3.0]  # one repeat three times the others: Shapiro-Wilk rejects normality
    mean, lo, hi, method = metrics.interval(skewed)
    assert method.startswith("bootstrap (Shapiro-Wilk p=") and mean == pytest.approx(1.2)
    assert 1.0 <= lo < mean < hi <= 1.6  # within what resampling ten values can give
    assert (lo, hi) != pytest.approx(metrics.mean_ci(skewed)[1:])
    normal = [0.98, 1.0, 1.02, 0.99, 1.01]
    mean, lo, hi, method = metrics.interval(normal)
    assert method.startswith("t (Shapiro-Wilk p=") and (lo, hi) == pytest.approx(metrics.mean_ci(normal)[1:])
    assert metrics.interval([2.0])[3] == "none (1 repeat)" and math.isnan(metrics.interval([2.0])[1])
    assert metrics.interval([2.0, 2.0, 2.0])[1:3] == pytest.approx((2.0, 2.0))
    # skewed but too few to resample (3 values have 10 distinct means): t on the log scale, named so
    few = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 3.0, 1.0]
    mean, lo, hi, method = metrics.interval(few)
    assert method.startswith("t on the log scale (Shapiro-Wilk p=") and "too few repeats" in method
    assert (mean, lo, hi) == pytest.approx(metrics.log_ci(few)) and lo * hi == pytest.approx(mean**2)


def test_a_planted_garbage_collection_is_kept_counted_and_shown_beside_the_median():
    walls = [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.3]  # one 200 ms collection in ten iterations
    runs = metrics.run_table(pd.DataFrame(tidy_rows(1, [walls])))
    (run,) = runs.to_dict("records")
    assert run["outlier_iterations"] == 1
    assert run["iteration_s"] == pytest.approx(0.12)  # kept in the mean
    assert run["iteration_s_median"] == pytest.approx(0.1)
    assert run["iteration_s_p95"] == pytest.approx(0.21)
    (row,) = metrics.summarize(runs).to_dict("records")
    assert row["outlier_iterations"] == 1 and row["iteration_s_median"] == pytest.approx(0.1)
    assert metrics.outliers([0.1, 0.11, 0.12, 0.13]) == 0


def test_the_report_says_how_it_meets_each_of_the_twelve_rules():
    from dlscale.analysis import report

    rows = []
    for rep, walls in enumerate([[0.1] * 9 + [0.5], [0.1] * 10, [0.1] * 10]):
        rows += tidy_rows(1, [walls], repeat=rep)
    summary = metrics.summarize(metrics.run_table(pd.DataFrame(rows)))
    config = {"warmup": 2, "iterations": 10, "repeats": 3, "threads_per_rank": 1, "timing": ["phased"]}
    runs = metrics.run_table(pd.DataFrame(rows))
    text = "\n".join(report._rules_lines(summary, config, comparisons.study(summary, runs)))
    assert [line.split(".")[0] for line in text.splitlines() if line[:2].rstrip(".").isdigit()] == [
        str(i) for i in range(1, 13)
    ]
    # one skewed configuration of 3 repeats: too few to resample, t on the log scale
    assert "Student-t in 1 configuration(s)" in text and "percentile bootstrap in 0 (from 10 repeats)" in text
    assert "Warm-up iterations (2) are excluded; each run measures 10 iterations" in text and "timing `phased`" in text
    assert "interquartile ranges): 1, kept" in text and "within ±5% of it in 0 of 1 configurations" in text


def test_each_pair_of_frameworks_is_compared_by_a_ratio_with_its_interval():
    rows = []
    for rep, (fast, slow) in enumerate([(0.10, 0.20), (0.11, 0.21), (0.09, 0.19)]):
        rows += tidy_rows(1, [[fast]], repeat=rep)
        for row in tidy_rows(1, [[slow]], repeat=rep):
            rows.append({**row, "framework": "mxnet"})
        for row in tidy_rows(1, [[fast + 0.001 * (rep - 1)]], repeat=rep):
            rows.append({**row, "framework": "tensorflow"})
    runs = metrics.run_table(pd.DataFrame(rows))
    summary = metrics.summarize(runs)
    table = comparisons.study(summary, runs)
    ratios = table[table["dimension"] == "framework"].set_index(["a", "b"])
    assert list(ratios.index) == [("mxnet", "tensorflow"), ("mxnet", "torch"), ("tensorflow", "torch")]
    assert ratios.loc[("mxnet", "torch"), "ratio_independent"] == pytest.approx(0.10 / 0.20)  # harmonic means'
    assert ratios.loc[("mxnet", "torch"), "verdict"] == "b faster"
    assert ratios.loc[("tensorflow", "torch"), "verdict"] not in ("a faster", "b faster")
    from dlscale.analysis import report

    text = "\n".join(report._framework_lines(table))
    assert "## Framework comparisons" in text and "| mxnet (horovod) / torch (horovod) | m |" in text


def test_a_planted_warm_up_is_found_and_left_out_a_steady_run_keeps_every_iteration():
    slow_start = [0.5, 0.3, 0.2] + [0.1, 0.102, 0.098, 0.101, 0.099, 0.1, 0.1, 0.101, 0.099]
    assert samples.steady_start(slow_start) == 3
    assert samples.steady_start([0.1, 0.102, 0.098, 0.101, 0.099, 0.1]) == 0
    assert samples.steady_start([0.1] * 10) == 0 and samples.steady_start([0.3, 0.1]) == 0  # too short to judge
    assert samples.steady_start([1.0] * 5 + [0.1] * 5) == 5  # never more than half
    (run,) = metrics.run_table(pd.DataFrame(tidy_rows(1, [slow_start]))).to_dict("records")
    assert run["unsteady_iterations"] == 3 and run["iterations"] == 9
    assert run["iteration_s"] == pytest.approx(0.1)


def test_the_report_names_the_commit_that_launched_the_runs_where_it_is_not_its_own():
    """A study resumed or analysed again after a change: its report says which code ran the runs
    (runs.csv `dlscale_commit`, recorded at launch) beside the code that made it."""
    from dlscale.analysis import report
    from dlscale.core import version

    this = version.commit()
    same = pd.DataFrame({"dlscale_commit": [this, this]})
    assert report._commits(same) == f"dlscale commit `{this}`"
    older = pd.DataFrame({"dlscale_commit": ["1492cf7", "", None, "0f0f0f0-dirty"]})
    assert report._commits(older) == (
        f"dlscale commit `{this}` (this report); the runs launched by `0f0f0f0-dirty`, `1492cf7`"
    )
    assert report._commits(pd.DataFrame({"status": ["ok"]})) == f"dlscale commit `{this}`"  # runs before it


def test_a_commit_of_digits_alone_reads_back_as_the_commit(tmp_path):
    """A short hash is hex: 3759273, 0123456 and 1234e56 are commits, not numbers (read as a number, a
    suite run's commit compared unequal to itself; 0123456 would name 123456, 1234e56 a float)."""
    from dlscale.analysis import replayed, report, steps

    commits = ["3759273", "0123456", "1234e56"]
    path = tmp_path / "runs.csv"
    pd.DataFrame({"status": ["ok"] * 3, "dlscale_commit": commits}).to_csv(path, index=False)
    for read in (replayed.read_table, steps._runs):  # the report's reader and the analysis steps'
        assert list(read(path)["dlscale_commit"]) == commits
    assert report._commits(replayed.read_table(path)).endswith("`0123456`, `1234e56`, `3759273`")
