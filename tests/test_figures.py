"""What a reader can read in a figure (dlscale/analysis/figures.py `problems`): every panel has data,
and a legend's line stands for a line that is drawn. Checked on the committed example study's own
tables (docs/example), every study figure; a real study's are checked by tests/test_pipeline.py."""

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from dlscale.analysis import figures
from dlscale.core import paths
from tests.conftest import ROOT

EXAMPLE = ROOT / "docs" / "example"


def test_a_line_figure_of_single_points_and_an_empty_panel_are_named():
    """The input figure as it was drawn to 2026-11-27: one x value, so every 'line' is one point, with
    a legend of lines."""
    one_x = {"loader_workers": [1, 1], "rate": [400.0, 12.0], "kind": ["loader alone", "training"]}
    one_x = pd.DataFrame({**one_x, "model": ["alexnet"] * 2})
    grid = sns.relplot(data=one_x, kind="line", x="loader_workers", y="rate", style="kind", col="model", markers=True)
    found = figures.problems(grid.figure)
    assert "legend entry 'training' is a line, but no line is drawn" in found
    fig, (full, empty) = plt.subplots(1, 2)
    full.plot([1, 2], [3, 4])
    empty.set_title("resnet50")
    assert figures.problems(fig) == ["panel 'resnet50' has no data"]
    plt.close("all")


def test_every_figure_of_the_example_has_data_in_every_panel_and_a_legend_of_what_is_drawn(tmp_path, capsys):
    summary = pd.read_csv(EXAMPLE / "summary.csv")
    pairs = pd.read_csv(EXAMPLE / "comparisons.csv", keep_default_na=False)
    drawn = figures.draw_all(summary, pairs, paths.figure_paths(tmp_path, paths.FIGURE_NAMES))
    assert sorted({p.stem for p in drawn}) == sorted(paths.FIGURE_NAMES)
    assert "figure " not in capsys.readouterr().err


def test_the_input_figure_answers_whether_each_loader_feeds_its_trainer(tmp_path, monkeypatch):
    """One row per configuration with both rates, markers only (the legend too), frameworks in their
    colours."""
    summary = pd.read_csv(EXAMPLE / "summary.csv")
    captured = {}  # the figure itself, kept open instead of written
    monkeypatch.setattr(figures, "_save", lambda fig, paths, name: captured.setdefault(name, fig) and [])
    figures.input_rate(summary, paths.figure_paths(tmp_path, ["input"]))
    fig = captured["input"]
    panels = [ax for ax in fig.axes if ax.axison]
    images = summary.dropna(subset=["loader_img_per_s"])
    assert [ax.get_title() for ax in panels] == list(dict.fromkeys(images["model"]))
    for ax, (_, rows) in zip(panels, images.groupby("model", sort=False)):
        assert len(ax.get_yticks()) == len(rows)  # a row per configuration
        colours = {line.get_color() for line in ax.get_lines() if line.get_marker() not in ("None", "")}
        assert colours == {figures.FRAMEWORK_COLOURS[f] for f in rows["framework"]}
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()][:2] == list(figures.INPUT_MARKS)
    assert figures.problems(fig) == []
    plt.close("all")


def test_the_model_figures_legend_lists_the_frameworks_in_the_registrys_order(tmp_path, monkeypatch):
    """The example's model.csv lists JAX first (its rows sort by name); the legend, like every other
    figure's, follows the registry (the palette's order)."""
    table = pd.read_csv(EXAMPLE / "model.csv")
    assert table["framework"].iloc[0] == "jax"
    captured = {}
    monkeypatch.setattr(figures, "_save", lambda fig, paths, name: captured.setdefault(name, fig) and [])
    figures.model_fit(table, {"median_abs_error_iteration": 0.1}, paths.figure_paths(tmp_path, ["model"]))
    labels = [t.get_text() for t in captured["model"].legends[0].get_texts()]
    frameworks = [label for label in labels if label in figures.FRAMEWORKS]
    assert frameworks == [f for f in figures.FRAMEWORKS if f in set(table["framework"])]
    assert figures.problems(captured["model"]) == []
    plt.close("all")
