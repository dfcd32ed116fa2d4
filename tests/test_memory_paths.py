"""The memory-lean paths of a fit (issue 22: at most 16 bytes a cell at 10^8 cells) give the results of the
plain computations they replace: integer scores, cell sums a block of item rows at a time, ability draws a few
at a time, and the default number of draws."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from irtexam.irt import design as design_module
from irtexam.irt.marginal import fit as mf
from irtexam.irt import model as mdl
from irtexam.irt import stats
from irtexam.irt.fit import default_draws
from irtexam.irt.simulate import simulate


def test_integer_scores_are_the_float_matrix_with_missing_as_zero():
    values = np.array([[0, 1, np.nan, 1], [np.nan, 0, 0, 1], [1, 1, 1, np.nan]], dtype=np.float32)
    y, mask = design_module.integer_scores(values, 1)
    assert y.dtype == np.int8 and mask.dtype == bool
    np.testing.assert_array_equal(mask, ~np.isnan(values))
    np.testing.assert_array_equal(y, np.where(mask, values, 0).astype(np.int8))
    wide, _ = design_module.integer_scores(np.array([[200.0, np.nan]]), 200)
    assert wide.dtype == np.int16 and wide.tolist() == [[200, 0]]


@pytest.mark.parametrize("kind", ["3pl", "grm"])
def test_cell_sums_by_blocks_of_item_rows_equal_one_block(kind, monkeypatch):
    """fit_statistics in blocks of 2 item rows (the last padded) equals the one-block sums, with held-out cells."""
    responses, truth = simulate(7, 60, model=kind, seed=4, missing=0.2)
    spec = mdl.ModelSpec(kind=kind)
    design = mdl.build_design(responses, spec)
    train, test = stats.heldout_split(design.mask, 0.2, seed=1)
    theta = np.random.default_rng(0).normal(size=60)
    params = {k: np.asarray(v, dtype=np.float64) for k, v in mdl.initial_params(spec, design).items()}
    whole = stats.fit_statistics(params, spec, design, train, test, theta=theta)
    blocks = stats.row_blocks
    monkeypatch.setattr(stats, "row_blocks", partial(blocks, max_cells=2 * 60))
    assert len(stats.row_blocks(7, 60)) == 4
    split = stats.fit_statistics(params, spec, design, train, test, theta=theta)
    for key in ("loglik", "rmse", "rmse_baseline", "heldout_loglik", "item_rmse_mean", "baseline"):
        assert split[key] == pytest.approx(whole[key], rel=1e-6), key
    np.testing.assert_allclose(list(split["item_rmse"].values()), list(whole["item_rmse"].values()), rtol=1e-6)
    # the baseline is the mean training score
    assert whole["baseline"] == pytest.approx(float(design.y[train].mean()))


def test_ability_draws_a_few_at_a_time_equal_one_draw_at_a_time():
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(21), size=300)
    nodes = np.linspace(-4, 4, 21)
    draws = mf.sample_abilities(weights, nodes, 700, np.random.default_rng(5))
    u = np.random.default_rng(5).uniform(size=(700, 300))
    one_by_one = np.stack([mf._inverse_cdf(weights, nodes, u[s]) for s in range(700)])
    assert draws.dtype == np.float32 and draws.shape == (700, 300)
    np.testing.assert_array_equal(draws, one_by_one.astype(np.float32))


def test_default_draws_keep_ability_draws_near_200_mb():
    assert default_draws("em", 2000) == 500 and default_draws("map", 10**6) == 500
    assert default_draws("em", 200_000) == 250 and default_draws("em", 10**7) == 100


@pytest.mark.parametrize("shape", [(500, 3000), (7, 4, 3), (1, 5), (3, 600000)])
def test_draw_summaries_by_blocks_of_columns_equal_numpys(shape):
    """The posterior sd and quantiles of float32 draws, a block of columns at a time (no float64 copy of all the
    draws), equal np.std / np.quantile of the float64 draws, NaN where any draw is NaN."""
    from irtexam.irt.result import draw_quantiles, draw_sd

    rng = np.random.default_rng(1)
    draws = rng.standard_normal(shape).astype(np.float32)
    flat = draws.reshape(shape[0], -1)
    flat[rng.integers(0, shape[0], 3), rng.integers(0, flat.shape[1], 3)] = np.nan
    low, high = draw_quantiles(draws, (0.05, 0.95))
    expected = np.quantile(draws.astype(np.float64), [0.05, 0.95], axis=0)
    assert low.shape == high.shape == shape[1:] and low.dtype == np.float64
    np.testing.assert_allclose(low, expected[0], rtol=1e-12, atol=1e-12)  # numpy's lerp rounds differently
    np.testing.assert_allclose(high, expected[1], rtol=1e-12, atol=1e-12)
    assert np.isnan(low).sum() == np.isnan(expected[0]).sum() > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.std(draws, axis=0, ddof=1, dtype=np.float64)
        np.testing.assert_allclose(draw_sd(draws), sd, rtol=1e-12)
