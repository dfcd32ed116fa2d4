"""Fit diagnostics on data simulated in the test (true probabilities known)."""

import numpy as np
import pytest

from irtexam.analysis import diagnostics as dg


def _sim(n_items=40, n_ex=300, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.8, 2.0, n_items); b = rng.normal(0, 1, n_items); c = np.full(n_items, 0.2)
    th = rng.normal(0, 1, n_ex)
    p = c[:, None] + (1 - c[:, None]) / (1 + np.exp(-a[:, None] * (th[None] - b[:, None])))
    x = (rng.random(p.shape) < p).astype(float)
    return x, p, th


def test_mean_squares_near_one_for_true_model_and_high_for_noise():
    x, p, _ = _sim()
    ms = dg.fit_mean_squares(x, p, axis=1)
    assert abs(ms["infit"].mean() - 1) < 0.05 and abs(ms["outfit"].mean() - 1) < 0.1
    # an item answered at random against a steep model curve misfits
    rng = np.random.default_rng(1)
    x2 = x.copy(); x2[0] = (rng.random(x.shape[1]) < 0.5)
    p2 = p.copy(); p2[0] = 0.2 + 0.8 / (1 + np.exp(-3 * (np.linspace(-2, 2, x.shape[1]))))
    ms2 = dg.fit_mean_squares(x2, p2, axis=1)
    assert ms2["outfit"].iloc[0] > 1.5
    per_ex = dg.fit_mean_squares(x, p, axis=0)
    assert len(per_ex) == x.shape[1]


def test_missing_cells_are_ignored():
    x, p, _ = _sim(10, 50)
    x[0, :25] = np.nan
    ms = dg.fit_mean_squares(x, p)
    assert ms["n"].iloc[0] == 25 and np.isfinite(ms["infit"]).all()


def test_rmse_beats_mean_baseline_under_true_model():
    x, p, _ = _sim()
    r = dg.item_rmse(x, p)
    assert (r["rmse"] < r["rmse_baseline"]).mean() > 0.8


def test_q3_flags_a_duplicated_item_pair():
    x, p, _ = _sim(20, 400)
    x[5] = x[4]  # item 5 copies item 4: local dependence
    p[5] = p[4]
    ld = dg.local_dependence(x, p, [f"i{k}" for k in range(20)])
    assert len(ld) >= 1
    assert {ld.iloc[0].item_1, ld.iloc[0].item_2} == {"i4", "i5"}
    q3 = dg.yen_q3(x, p)
    assert np.isnan(q3[0, 0]) and q3[4, 5] > 0.9


def test_ppc_calibrated_for_true_model_and_detects_shift():
    x, p, _ = _sim(30, 100)
    draws = np.repeat(p[None], 100, axis=0)
    out = dg.ppc_scores(x, draws)
    assert out["rep_examinee"].shape == (100, 100)
    assert (out["examinee"]["ppp"] < 0.05).mean() < 0.15
    out2 = dg.ppc_scores(x, np.clip(draws + 0.3, 0, 1))
    assert (out2["examinee"]["ppp"] < 0.05).mean() > 0.5


def test_wrong_key_and_low_discrimination_flags():
    import pandas as pd
    x, p, th = _sim(20, 60)
    x[3] = (th < np.quantile(th, 0.3)).astype(float)  # strong examinees all wrong: inverted key
    wk = dg.likely_wrong_key(x, th)
    assert wk["wrong_key_flag"].iloc[3] and wk["wrong_key_flag"].sum() <= 2
    items = pd.DataFrame({"a": [1.2, 0.05, 0.9], "a_low": [0.8, -0.4, 0.0]}, index=["x", "y", "z"])
    assert dg.item_flags(items)["low_discrimination"].tolist() == [False, True, True]


def test_q3_threshold_grows_for_small_samples_and_no_flags_under_true_model():
    assert dg.q3_threshold(10000, 100) == 0.2
    assert dg.q3_threshold(60, 4950) > 0.5
    x, p, _ = _sim(40, 60, seed=3)
    assert len(dg.local_dependence(x, p, [f"i{k}" for k in range(40)])) <= 1


def test_leaderboard_sized_diagnostics_stream_the_replicates_and_skip_q3(monkeypatch):
    """Replicates are taken one at a time (the same totals as the stacked array), the number of predictive
    draws shrinks to the cell budget, and Yen's Q3 is left out past Q3_MAX_ITEMS items, each said in a note."""
    import irtexam

    responses, _ = irtexam.simulate(30, 60, model="2pl", seed=4)
    fit = irtexam.fit(responses, model="2pl", method="map", draws=50)
    x = np.asarray(fit.responses.values, dtype=float)
    stacked = dg.ppc_scores(x, replicates=fit.replicate(n=40, seed=3))
    streamed = dg.ppc_scores(x, replicates=fit.replicates(n=40, seed=3))
    for unit in ("examinee", "item"):
        np.testing.assert_array_equal(stacked[f"rep_{unit}"], streamed[f"rep_{unit}"])
    full = dg.diagnose(fit, n_draws=40)
    assert full["summary"]["local_dependence_pairs"] is not None and full["ppc"]["rep_item"].shape[0] == 40
    monkeypatch.setattr(dg, "Q3_MAX_ITEMS", 20)
    monkeypatch.setattr(dg, "PPC_CELL_BUDGET", 30 * 60 * 25)
    big = dg.diagnose(fit, n_draws=40)
    assert big["ppc"]["rep_item"].shape[0] == 25 and big["ppc"]["rep_examinee"].shape == (25, 60)
    assert big["summary"]["local_dependence_pairs"] is None and big["summary"]["q3_threshold"] is None
    notes = " ".join(big["summary"]["notes"])
    assert "uses 25 of the 40 draws" in notes and "Yen's Q3) not computed: 30 items make 435 pairs" in notes
