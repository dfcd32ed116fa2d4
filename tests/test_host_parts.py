"""The parts of a marginal fit outside EM that issue 43 made scale (10^9 cells on a GPU): the examinees' ability
summaries and draws computed in one compiled pass (irt/marginal/abilities.py), the input checks in one pass over
the matrix (responses.cell_ranges), and the binary fit statistics from counts and the one pass over the cells.
Each is held to the plain computation it replaced."""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np
import pytest

from irtexam import responses as responses_module
from irtexam.irt import model as mdl
from irtexam.irt import stats
from irtexam.irt.marginal import abilities as ab
from irtexam.irt.marginal import fit as mf
from irtexam.irt.marginal.steps import quadrature
from irtexam.irt.simulate import simulate
from irtexam.responses import ResponseMatrix, _row_range, cell_ranges


# ----------------------------------------------------------------------------- ability summaries
def posterior_weights(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Normal-shaped posteriors over the default 61 nodes, of mixed widths, with a point mass, a posterior on the
    last node and one with empty nodes in the middle of its mass."""
    rng = np.random.default_rng(seed)
    nodes = np.asarray(quadrature(61), dtype=np.float64)
    mu, sd = rng.normal(size=n), rng.uniform(0.05, 0.9, size=n)
    w = np.exp(-0.5 * ((nodes[None, :] - mu[:, None]) / sd[:, None]) ** 2)
    w[0], w[1] = 0.0, 0.0
    w[0, 30], w[1, -1] = 1.0, 1.0
    w[2, 28:33] = [0.3, 0.0, 0.4, 0.0, 0.3]
    w[2, :28], w[2, 33:] = 0.0, 0.0
    return w / w.sum(axis=1, keepdims=True), nodes


def piecewise_cdf(weights: np.ndarray, nodes: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Each examinee's piecewise-linear posterior CDF (node q's mass spread over [theta_q - h/2, theta_q + h/2]) at
    x (S, E): the probability integral transform of draws from it is U(0, 1)."""
    h = nodes[1] - nodes[0]
    edges = nodes[0] - h / 2
    position = np.clip((x - edges) / h, 0.0, len(nodes))  # (S, E), in cells
    k = np.minimum(position.astype(int), len(nodes) - 1)
    cdf_before = np.concatenate([np.zeros((weights.shape[0], 1)), np.cumsum(weights, axis=1)], axis=1)
    rows = np.arange(weights.shape[0])[None, :]
    return cdf_before[rows, k] + weights[rows, k] * np.clip(position - k, 0.0, 1.0)


@pytest.mark.parametrize("max_values", [None, 1000])
def test_summary_equals_the_host_eap_sd_and_quantiles(max_values):
    """EAP, sd and quantiles of the compiled pass equal the NumPy ones to rounding, in one block and in several
    (the last padded)."""
    weights, nodes = posterior_weights(457)
    summary = ab.posterior_summary(weights, nodes, (0.05, 0.5, 0.95), 7, seed=1, max_values=max_values)
    mean, sd = mf.eap(weights, nodes)
    np.testing.assert_allclose(summary.mean, mean, atol=1e-12)
    np.testing.assert_allclose(summary.sd, sd, atol=1e-7)  # sqrt of a difference near 0 for the point mass
    np.testing.assert_allclose(summary.quantiles, mf.posterior_quantiles(weights, nodes, (0.05, 0.5, 0.95)), atol=1e-12)
    assert summary.draws.shape == (7, 457) and summary.draws.dtype == np.float32
    assert summary.quantiles[0, 1] == pytest.approx(0.0) and summary.quantiles[1, 1] == pytest.approx(nodes[-1])


def test_draws_follow_each_posterior():
    """The draws' mean and sd per examinee match the posterior's EAP and sd (the piecewise-linear posterior's
    variance is sd^2 + h^2 / 12), and their probability integral transform is uniform over all examinees."""
    weights, nodes = posterior_weights(400, seed=2)
    n = 2000
    draws = ab.posterior_summary(weights, nodes, (0.5,), n, seed=7, max_values=50_000).draws.astype(np.float64)
    mean, sd = mf.eap(weights, nodes)
    h = nodes[1] - nodes[0]
    spread = np.sqrt(sd ** 2 + h ** 2 / 12)
    z = (draws.mean(axis=0) - mean) / (spread / np.sqrt(n))
    assert np.abs(z).max() < 5 and abs(z.mean()) < 0.2 and 0.85 < z.std() < 1.15
    np.testing.assert_allclose(draws.std(axis=0), spread, rtol=0.1)
    # the point mass at node 30 spreads over its cell; the posterior on the last node stays in the last cell
    assert np.all(np.abs(draws[:, 0] - nodes[30]) <= h / 2 + 1e-6)
    assert np.all(draws[:, 1] >= nodes[-1] - h / 2 - 1e-6)
    # the empty nodes 29 and 31 of examinee 2 get no draw
    assert not np.any(np.abs(draws[:, 2] - nodes[29]) < h / 2 - 1e-6)
    u = np.sort(piecewise_cdf(weights, nodes, draws).ravel())
    ks = np.abs(u - (np.arange(1, u.size + 1) - 0.5) / u.size).max()
    assert ks < 1.63 / np.sqrt(u.size) * 1.5  # the 1% KS bound (a little slack for float32 draws)


def test_draws_match_the_host_sampler_in_distribution():
    """The compiled draws and NumPy's (sample_abilities) have the same per-examinee means and sds to sampling
    error: the move changed the random numbers, not the distribution."""
    weights, nodes = posterior_weights(300, seed=3)
    n = 3000
    device = ab.posterior_summary(weights, nodes, (0.5,), n, seed=11).draws.astype(np.float64)
    host = mf.sample_abilities(weights, nodes, n, np.random.default_rng(11)).astype(np.float64)
    spread = np.sqrt(0.5 * (device.var(axis=0) + host.var(axis=0)) + 1e-12)
    z = (device.mean(axis=0) - host.mean(axis=0)) / (spread * np.sqrt(2 / n))
    assert np.abs(z[3:]).max() < 5 and 0.8 < z[3:].std() < 1.2
    np.testing.assert_allclose(device.std(axis=0)[3:], host.std(axis=0)[3:], rtol=0.08)


def test_draws_repeat_with_the_seed_and_change_with_it():
    weights, nodes = posterior_weights(50)
    first = ab.posterior_summary(weights, nodes, (0.5,), 20, seed=3).draws
    again = ab.posterior_summary(weights, nodes, (0.5,), 20, seed=3).draws
    other = ab.posterior_summary(weights, nodes, (0.5,), 20, seed=4).draws
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    assert ab.posterior_summary(weights, nodes, (0.5,), 0, seed=3).draws is None


def test_block_size_bounds_draws_times_examinees():
    assert ab.summary_block_size(1000, 500, max_values=1 << 22) == 1000
    assert ab.summary_block_size(200_000, 250) == ab.block_values() // 250 == (1 << 17) // 250  # the CPU
    assert ab.summary_block_size(200_000, 250, max_values=1 << 22) == (1 << 22) // 250
    assert ab.summary_block_size(10, 10**9, max_values=100) == 1


def test_fit_draws_agree_with_the_examinee_table():
    """In a whole marginal fit the ability draws centre on each examinee's reported EAP with its sd, and the
    reported interval is the posterior's 5% and 95% quantiles."""
    import irtexam

    responses, _ = simulate(15, 400, model="2pl", seed=5, missing=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = irtexam.fit(responses, model="2pl", method="em", draws=400)
    draws = np.asarray(fit.samples["theta"], dtype=np.float64)
    table = fit.examinees
    assert draws.shape == (400, 400)
    h = 12 / (fit.fit_stats["optimizer"]["nodes"] - 1)  # the grid on [-6, 6]
    spread = np.sqrt(table["theta_sd"].to_numpy() ** 2 + h ** 2 / 12)
    z = (draws.mean(axis=0) - table["theta"].to_numpy()) / (spread / np.sqrt(400))
    assert np.abs(z).max() < 5 and abs(z.mean()) < 0.2
    np.testing.assert_allclose(draws.std(axis=0), spread, rtol=0.2)
    assert np.all(table["theta_low"] < table["theta"]) and np.all(table["theta"] < table["theta_high"])


# ----------------------------------------------------------------------------- input checks
def messy_matrix(seed: int = 0, graded: bool = False) -> np.ndarray:
    """A small matrix with missing cells, an all-missing row and column, constant rows and columns."""
    rng = np.random.default_rng(seed)
    top = 3 if graded else 1
    values = rng.integers(0, top + 1, size=(9, 13)).astype(np.float32)
    values[rng.random(values.shape) < 0.3] = np.nan
    values[0] = np.nan               # an item nobody answered
    values[:, 0] = np.nan            # an examinee who answered nothing
    values[1, 1:] = top              # all correct
    values[2, 1:] = 0                # all wrong
    values[3, 1:] = np.nan
    values[3, 5] = 1                 # one response only
    values[:, 2] = top               # an examinee right on every item they took
    values[[0, 2], 2] = np.nan
    values[:, 3] = np.where(np.isnan(values[:, 3]), np.nan, 0)  # and one wrong on every item
    values[1, 3] = np.nan
    return values


@pytest.mark.parametrize("graded", [False, True])
@pytest.mark.parametrize("max_cells", [1, 13 * 2, 1 << 22])
def test_cell_ranges_equal_the_row_and_column_reductions(graded, max_cells):
    """One pass by blocks of rows gives the per-row and per-column counts, minima and maxima of the reductions
    over each axis (NaN where a row or column has no response)."""
    values = messy_matrix(1, graded)
    ranges = cell_ranges(values, max_cells=max_cells)
    for got, axis_values in ((ranges.items, values), (ranges.examinees, values.T)):
        want = _row_range(axis_values)
        np.testing.assert_array_equal(got.count, want[0])
        np.testing.assert_array_equal(got.low, want[1])    # NaN in the same places
        np.testing.assert_array_equal(got.high, want[2])
    assert ranges.items.count[0] == 0 and np.isnan(ranges.items.low[0])
    assert ranges.examinees.count[0] == 0 and np.isnan(ranges.examinees.high[0])


def reference_constant(values: np.ndarray, ids: tuple, max_score: int) -> dict[str, list[str]]:
    """The checks as they were: one reduction over the rows of ``values`` per call."""
    count, low, high = _row_range(values)
    constant = (count > 0) & (low == high)
    return {"all_correct": [ids[k] for k in np.flatnonzero(constant & (high == max_score))],
            "all_wrong": [ids[k] for k in np.flatnonzero(constant & (low == 0))],
            "unanswered": [ids[k] for k in np.flatnonzero(count == 0)]}


@pytest.mark.parametrize("graded", [False, True])
def test_checks_equal_the_former_per_axis_reductions(graded):
    values = messy_matrix(2, graded)
    rm = ResponseMatrix(values=values, items=[f"i{k}" for k in range(9)], examinees=[f"e{m}" for m in range(13)],
                        max_score=3 if graded else 1)
    assert rm.constant_items() == reference_constant(values, rm.items, rm.max_score)
    assert rm.constant_examinees() == reference_constant(values.T, rm.examinees, rm.max_score)
    _, low, high = _row_range(values)
    assert rm.separating_items() == [rm.items[k] for k in np.flatnonzero(high > low)]
    assert rm.constant_items()["unanswered"] == ["i0"] and "i1" in rm.constant_items()["all_correct"]
    examinees = rm.constant_examinees()
    assert examinees["unanswered"] == ["e0"] and "e2" in examinees["all_correct"] and "e3" in examinees["all_wrong"]
    text = " ".join(map(str, rm.warnings()))
    assert all(name in text for name in ("i0", "i1", "i2", "e0", "e2", "e3"))


def test_checks_make_one_pass_over_the_matrix(monkeypatch):
    """warnings() reduces the matrix once (cell_ranges), not once per check."""
    values = messy_matrix(3)
    rm = ResponseMatrix(values=values, items=[f"i{k}" for k in range(9)], examinees=[f"e{m}" for m in range(13)])
    calls = []
    real = responses_module.cell_ranges
    monkeypatch.setattr(responses_module, "cell_ranges", lambda v, *a, **k: calls.append(1) or real(v, *a, **k))
    rm.warnings()
    assert len(calls) == 1


# ----------------------------------------------------------------------------- fit statistics
def reference_binary_statistics(y: np.ndarray, train: np.ndarray, test: np.ndarray, theta: np.ndarray,
                                a: np.ndarray, d: np.ndarray, c: np.ndarray) -> dict[str, float]:
    """The binary fit statistics by their definitions, in float64 over full matrices."""
    y = y.astype(np.float64)
    p = c[:, None] + (1 - c[:, None]) / (1 + np.exp(-(a[:, None] * theta[None, :] + d[:, None])))
    ll = y * np.log(p) + (1 - y) * np.log1p(-p)
    baseline = y[train].mean()
    n_item = train.sum(axis=1)
    item_rmse = np.sqrt(np.where(train, (y - p) ** 2, 0).sum(axis=1) / n_item)
    item_base = np.sqrt(np.where(train, (y - baseline) ** 2, 0).sum(axis=1) / n_item)
    out = {"loglik": ll[train].sum(), "baseline": baseline, "n_observed": int(train.sum()),
           "rmse": np.sqrt(((y - p) ** 2)[train].mean()), "rmse_baseline": np.sqrt(((y - baseline) ** 2)[train].mean()),
           "item_rmse_mean": item_rmse.mean(), "item_rmse_baseline_mean": item_base.mean(),
           "item_rmse_baseline_sd": item_base.std()}
    if test.any():
        out.update({"heldout_loglik": ll[test].mean(), "heldout_rmse": np.sqrt(((y - p) ** 2)[test].mean()),
                    "heldout_rmse_baseline": np.sqrt(((y - baseline) ** 2)[test].mean()),
                    "heldout_loglik_baseline": stats.bernoulli_mean_loglik(y, test, baseline),
                    "heldout_cells": int(test.sum())})
    return out


@pytest.mark.parametrize("heldout", [0.0, 0.2])
def test_binary_statistics_equal_their_definitions(heldout, monkeypatch):
    """From the int8 scores, blocks of item rows and the score counts: the statistics of the float64 formulas
    (float32 cells: to 1e-5), with missing and held-out cells, in several blocks."""
    responses, _ = simulate(9, 70, model="3pl", seed=6, missing=0.25)
    spec = mdl.ModelSpec(kind="3pl")
    design = mdl.build_design(responses, spec)
    train, test = stats.heldout_split(design.mask, heldout, seed=2)
    rng = np.random.default_rng(1)
    theta = rng.normal(size=70)
    params = {k: np.asarray(v, dtype=np.float64) for k, v in mdl.initial_params(spec, design).items()}
    params.update(a=rng.normal(0, 0.3, size=9), d=rng.normal(size=9), c=rng.normal(-1.5, 0.5, size=9))
    monkeypatch.setattr(stats, "row_blocks", partial(stats.row_blocks, max_cells=2 * 70))
    got = stats.fit_statistics(params, spec, design, train, test if heldout else None, theta=theta)
    constrained = mdl.constrain(params, spec, design)
    a, d, c = (np.broadcast_to(np.asarray(constrained[k], dtype=np.float64), (9,)) for k in ("a", "d", "c"))
    want = reference_binary_statistics(design.y, train, test, theta, a, d, c)
    assert ("heldout_loglik" in got) == bool(heldout) and ("heldout_loglik" in want) == bool(heldout)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


def test_baseline_formulas_from_counts():
    y = np.array([1, 0, 1, 1, 0, 1], dtype=np.float64)
    b = 0.3
    assert stats.binary_squared_errors(6, 4, b) == pytest.approx(((y - b) ** 2).sum())
    mask = np.ones(6, dtype=bool)
    assert stats.binary_mean_loglik(6, 4, b) == pytest.approx(stats.bernoulli_mean_loglik(y, mask, b))
    assert stats.binary_mean_loglik(6, 6, 1.0) == pytest.approx(stats.bernoulli_mean_loglik(np.ones(6), mask, 1.0))
