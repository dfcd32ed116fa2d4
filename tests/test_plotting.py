"""Every plot renders to a non-trivial PNG and returns the Axes it drew on."""

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from irtexam import plotting  # noqa: E402
from irtexam.analysis import information as inf  # noqa: E402

ITEMS = pd.DataFrame({"a": [0.5, 1.0, 1.8, 2.5], "b": [-1.0, 0.0, 0.5, 1.5], "c": [0.25, 0.2, 0.1, 0.0]},
                     index=["q1", "q2", "q3", "q4"])
ABIL = pd.Series({"m1": -0.5, "m2": 0.3, "m3": 1.2})


def _check(ax, path):
    assert ax is not None and hasattr(ax, "figure")
    out = plotting.save(ax, path)
    data = open(out, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_icc_and_information_curves(tmp_path):
    fig, ax = plt.subplots()
    got = plotting.plot_icc(ITEMS, ax=ax, abilities=ABIL, highlight=["q1"])
    assert got is ax and len(ax.lines) == 4
    _check(got, tmp_path / "icc.png")
    ax = plotting.plot_item_information(ITEMS, abilities=ABIL)
    assert len(ax.lines) == 5  # 4 items + mean
    ymax = max(l.get_ydata().max() for l in ax.lines)
    np.testing.assert_allclose(ymax, np.asarray(inf.item_information(inf.theta_grid(), ITEMS.a.values, ITEMS.b.values, ITEMS.c.values)).max(), rtol=1e-5)
    _check(ax, tmp_path / "info.png")


def test_category_and_band_and_pruning(tmp_path):
    labels = pd.Series({"q1": "remember", "q2": "apply|remember", "q3": "", "q4": "apply"})
    curves = inf.category_information(inf.theta_grid(), ITEMS, labels)
    ax = plotting.plot_category_information(curves, abilities=ABIL, title="Bloom")
    assert "remember (n=2)" in [t.get_text() for t in ax.get_legend().get_texts()]
    _check(ax, tmp_path / "cat.png")
    rng = np.random.default_rng(0)
    band = inf.information_band(inf.theta_grid(), ITEMS.a.values + 0.1 * rng.standard_normal((50, 4)),
                                np.tile(ITEMS.b.values, (50, 1)), np.tile(ITEMS.c.values, (50, 1)))
    _check(plotting.plot_information_band(band, abilities=ABIL), tmp_path / "band.png")
    steps = pd.DataFrame({0: curves["remember"], 1: curves["apply"]}, index=curves.index)
    ax = plotting.plot_pruning(steps, n_items={0: 4, 1: 3}, abilities=ABIL)
    assert "step 1 (3 items)" in [t.get_text() for t in ax.get_legend().get_texts()]
    _check(ax, tmp_path / "prune.png")


def test_forest_wright_ppc(tmp_path):
    facets = pd.DataFrame({"facet": ["llm", "llm", "retriever", "retriever", "retriever"],
                           "level": ["small", "big", "bm25", "dense", "closed"],
                           "theta": [-0.5, 0.6, 0.2, 0.4, -0.6],
                           "theta_low": [-0.9, 0.2, -0.1, 0.0, -1.0], "theta_high": [-0.1, 1.0, 0.5, 0.8, -0.2]})
    ax = plotting.plot_forest(facets)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "llm=small" and "" in labels and labels[-1] == "retriever=dense"
    _check(ax, tmp_path / "forest.png")
    _check(plotting.plot_wright_map(ITEMS, ABIL), tmp_path / "wright.png")
    many = pd.Series(np.random.default_rng(0).normal(size=100))
    _check(plotting.plot_wright_map(ITEMS, many), tmp_path / "wright_many.png")
    obs = np.arange(10.0); rep = obs[None] + np.random.default_rng(1).normal(size=(50, 10))
    _check(plotting.plot_ppc(obs, rep), tmp_path / "ppc.png")


def test_cat_trajectory_and_linking(tmp_path):
    steps = np.arange(1, 9)
    theta = -0.4 + 0.5 / steps
    trajectory = pd.DataFrame({"step": steps, "item": [f"q{i}" for i in steps], "response": steps % 2,
                               "theta": theta, "theta_low": theta - 1 / np.sqrt(steps),
                               "theta_high": theta + 1 / np.sqrt(steps), "accuracy": 0.4 + 0.01 * steps,
                               "accuracy_low": 0.3, "accuracy_high": 0.5})
    fig, (left, right) = plt.subplots(1, 2)
    assert plotting.plot_cat_trajectory(trajectory, ax=left) is left
    got = plotting.plot_cat_trajectory(trajectory, ax=right, what="accuracy", reference=0.42)
    assert got is right and right.get_ylabel() == "predicted whole-exam accuracy"
    _check(got, tmp_path / "cat.png")
    with pytest.raises(ValueError, match="theta, accuracy"):
        plotting.plot_cat_trajectory(trajectory, what="ability")
    drift = pd.DataFrame({"item": ["q1", "q2", "q3"], "b_old": [-1.0, 0.0, 1.0], "b_new": [-0.9, 0.1, 2.0],
                          "flag": [False, False, True]})
    ax = plotting.plot_linking(drift, {"A": 1.2, "B": 0.3, "method": "haebara"})
    # raw new difficulties recovered as (b_new - B) / A; the drifting anchor circled
    np.testing.assert_allclose(ax.collections[0].get_offsets()[:, 1], (drift["b_new"] - 0.3) / 1.2)
    assert len(ax.collections) == 3 and "haebara" in ax.get_title()
    _check(ax, tmp_path / "link.png")
