"""Linking exam versions (issue 14): constants, drift, the CLI files and bad input."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import irtexam
from irtexam.bank.link import SEPARATE, drift_table, linking_constants, transform_items, transformed_table
from irtexam.cli import main
from irtexam.irt import kinds


def pool(n: int, seed: int) -> kinds.ItemParams:
    rng = np.random.default_rng(seed)
    return kinds.ItemParams(np.exp(rng.normal(0.2, 0.3, n)), rng.normal(0, 1, n), rng.uniform(0.05, 0.3, n))


@pytest.mark.parametrize("method", SEPARATE)
def test_exact_parameters_give_exact_constants(method):
    new = pool(25, 0)
    A, B = 1.3, -0.4
    old = transform_items(new, A, B)          # the same items on the old scale
    got = linking_constants(new, old, method)
    assert got == pytest.approx((A, B), abs=2e-3)


def test_transformed_table_and_drift_flag():
    items = pd.DataFrame({"a": [1.0, 2.0, 1.5], "a_sd": 0.1, "a_low": [0.8, 1.8, 1.3], "a_high": [1.2, 2.2, 1.7],
                          "b": [0.0, 1.0, -1.0], "b_sd": 0.1, "b_low": [-0.2, 0.8, -1.2], "b_high": [0.2, 1.2, -0.8],
                          "c": 0.2}, index=pd.Index(["x", "y", "z"], name="item"))
    out = transformed_table(items, 2.0, 1.0)
    assert list(out["a"]) == [0.5, 1.0, 0.75] and list(out["b"]) == [1.0, 3.0, -1.0]
    assert list(out["b_sd"]) == [0.2, 0.2, 0.2] and list(out["c"]) == [0.2, 0.2, 0.2]
    old = out.copy()
    old.loc["z", "b"] += 1.0                  # item z moved by 10 of its standard errors
    drift = drift_table(items, old, ["x", "y", "z"], 2.0, 1.0)
    assert list(drift["flag"]) == [False, False, True]


def simulated_forms(seed: int = 0, n_anchor: int = 20, n_unique: int = 15, n_examinees: int = 300):
    rng = np.random.default_rng(seed)
    n = n_anchor + 2 * n_unique
    items = pool(n, seed)
    ids = [f"q{j}" for j in range(n)]
    old_idx = np.r_[0:n_anchor + n_unique]
    new_idx = np.r_[0:n_anchor, n_anchor + n_unique:n]
    theta_old, theta_new = rng.normal(0, 1, n_examinees), rng.normal(0.5, 1.3, n_examinees)

    def form(theta, idx, prefix):
        y = kinds.simulate_responses(theta, items.subset(idx), rng)
        return irtexam.ResponseMatrix.from_wide(y, items=[ids[j] for j in idx],
                                                examinees=[f"{prefix}{m}" for m in range(len(theta))])

    return form(theta_old, old_idx, "o"), form(theta_new, new_idx, "n"), items


def true_link(fit_old, fit_new, items: kinds.ItemParams) -> tuple[float, float]:
    """The map between the two fits' scales implied by the generating item parameters: each fit is linked
    to the generating scale by Stocking-Lord over all its items, theta_gen = A_f theta_f + B_f, and
    theta_old = (A_new theta_new + B_new - B_old) / A_old."""
    def to_gen(fit):
        rows = np.array([int(i[1:]) for i in fit.items.index])
        return linking_constants(kinds.from_table(fit.items), items.subset(rows), "stocking-lord")
    (A_o, B_o), (A_n, B_n) = to_gen(fit_old), to_gen(fit_new)
    return A_n / A_o, (B_n - B_o) / A_o


@pytest.fixture(scope="module")
def fits(tmp_path_factory):
    old_rm, new_rm, items = simulated_forms()
    root = tmp_path_factory.mktemp("link")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old_fit, new_fit = (irtexam.fit(rm, model="3pl", draws=60) for rm in (old_rm, new_rm))
    old_fit.save(root / "old")
    new_fit.save(root / "new")
    return root / "new", root / "old", true_link(old_fit, new_fit, items)


def test_link_cli_files_and_recovery(fits, tmp_path, capsys):
    new, old, (A_true, B_true) = fits
    out = tmp_path / "sl"
    assert main(["link", str(new), str(old), "--method", "stocking-lord", "--draws", "60", "--out", str(out)]) == 0
    t = json.loads((out / "transform.json").read_text())
    for key in ("A", "B", "A_low", "A_high", "B_low", "B_high"):
        assert key in t
    assert t["A_low"] <= t["A"] <= t["A_high"] and t["B_low"] <= t["B"] <= t["B_high"]
    assert abs(t["A"] - A_true) < 0.15 and abs(t["B"] - B_true) < 0.15
    items = pd.read_csv(out / "items.csv", index_col="item")
    assert list(items.columns) == list(pd.read_csv(new / "items.csv", index_col="item").columns)
    assert len(items) == 35
    drift = pd.read_csv(out / "drift.csv")
    assert {"item", "a_old", "a_new", "b_old", "b_new", "drift", "flag"} <= set(drift.columns) and len(drift) == 20
    assert "A =" in capsys.readouterr().out


@pytest.mark.slow
def test_fixed_anchor_calibration(fits):
    new, old, (A_true, B_true) = fits
    res = irtexam.link(str(new), str(old), "fixed")
    assert abs(res.transform["A"] - A_true) < 0.15 and abs(res.transform["B"] - B_true) < 0.15
    anchors = res.transform["anchors"]
    old_items = pd.read_csv(old / "items.csv", index_col="item")
    assert np.allclose(res.items.loc[anchors, "b"], old_items.loc[anchors, "b"])   # held at their old values


def test_too_few_common_items(fits, tmp_path, capsys):
    new, old, _ = fits
    assert main(["link", str(new), str(old), "--anchors", "q0", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "at least 2 common" in err and "items.csv" in err and err.count("\n") == 1
