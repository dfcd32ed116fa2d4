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
    monkeypatch.setattr(stats, "row_blocks", partial(blocks, max_cells=2 * 60))  # the graded sums' blocks
    monkeypatch.setattr(stats, "STATS_BLOCK_CELLS", 2 * 60)  # the binary sums'
    assert len(stats.row_blocks(7, 60)) == len(blocks(7, 60, max_cells=stats.STATS_BLOCK_CELLS)) == 4
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


def test_default_draws_keep_ability_draws_near_200_mb_and_item_draws_near_12_mb():
    assert default_draws("em", 2000) == 500 and default_draws("map", 10**6) == 500
    assert default_draws("em", 200_000) == 250 and default_draws("em", 10**7) == 100
    # items: draws x items at most 3e6 (a parameter's float32 draws ~12 MB), at least 100 draws
    assert default_draws("map", 2211, 6000) == 500 and default_draws("map", 2211, 12032) == 249
    assert default_draws("em", 2211, 12032) == 249 and default_draws("map", 100, 10**6) == 100
    assert default_draws("em", 200_000, 12032) == 249 and default_draws("em", 200_000, 20_000) == 150


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


def test_integer_scores_of_codes_share_a_complete_matrix_and_copy_one_with_missing():
    """Codes (-1 missing) give the float matrix's y and mask; complete codes of the scores' type are y themselves,
    with a read-only all-True mask (no copy of a leaderboard's matrix)."""
    from irtexam.io_tables import missing_coded, whole_scores_fit

    codes = np.array([[0, 1, -1, 1], [-1, 0, 0, 1], [1, 1, 1, -1]], dtype=np.int8)
    y, mask = design_module.integer_scores(codes, 1)
    np.testing.assert_array_equal(mask, codes >= 0)
    np.testing.assert_array_equal(y, np.maximum(codes, 0))
    assert not np.shares_memory(y, codes)
    complete = np.abs(codes)
    y, mask = design_module.integer_scores(complete, 1)
    assert y is complete and mask.shape == complete.shape and mask.all() and not mask.flags.writeable
    y16, _ = design_module.integer_scores(complete, 200)  # int16 scores: converted, not shared
    assert y16.dtype == np.int16 and not np.shares_memory(y16, complete)
    assert missing_coded(codes, np.int8) is codes
    np.testing.assert_array_equal(missing_coded(codes, np.int16), codes)
    assert whole_scores_fit(codes, 1) and not whole_scores_fit(codes, 0)


def test_item_draws_formed_in_place_equal_the_plain_products():
    """roots applied to the noise a block of items at a time, in place, give exactly the one batched product; binary
    items' reported draws written over their unconstrained ones equal model.constrain's, and other kinds are left
    to it (None)."""
    from irtexam.irt import kinds
    from irtexam.irt.draws import _apply_roots
    from irtexam.irt.gaussian_draws import binary_items_in_place, roots_applied_in_place

    rng = np.random.default_rng(4)
    roots = rng.standard_normal((2100, 3, 3)).astype(np.float32)
    noise = rng.standard_normal((500, 2100, 3)).astype(np.float32)  # 3 blocks of items of 2^20 cells
    expected = _apply_roots(roots, noise.copy())
    out = roots_applied_in_place(roots, noise)
    assert out is noise
    np.testing.assert_array_equal(out, expected)
    for model, keys in [("3pl", ("a", "d", "c")), ("2pl", ("a", "d")), ("1pl", ("d",))]:
        spec = mdl.ModelSpec(kind=model)
        draws = rng.standard_normal((7, 5, len(keys))).astype(np.float32)
        slices = {key: slice(k, k + 1) for k, key in enumerate(keys)}
        generic = mdl.constrain({key: draws[..., k].copy() for k, key in enumerate(keys)}
                                | {"theta_raw": np.zeros((7, 3), np.float32)}, spec, None)
        items = binary_items_in_place(draws, keys, slices, spec.kind_object)
        assert list(items) == ["a", "b", "d", "c"]
        for key in items:
            np.testing.assert_array_equal(items[key], np.broadcast_to(generic[key], (7, 5)), err_msg=f"{model} {key}")
    graded = mdl.ModelSpec(kind="grm").kind_object
    assert isinstance(graded, kinds.Kind) and binary_items_in_place(
        np.zeros((2, 3, 2), np.float32), ("a", "b"), {"a": slice(0, 1), "b": slice(1, 2)}, graded) is None


def test_npz_and_netcdf_datasets_written_by_blocks_read_back_as_written(tmp_path):
    """draws.npz and responses.npz written a block at a time load as np.savez's would; an HDF5 dataset of a strided
    array written a block at a time holds the array."""
    import h5py

    from irtexam.irt.idata import _dataset_by_blocks
    from irtexam.irt.io import save_npz_by_blocks

    rng = np.random.default_rng(5)
    block = rng.standard_normal((50, 40, 3)).astype(np.float32)
    arrays = {"a": block[..., 0], "b": np.ascontiguousarray(block[..., 1]), "n": np.asarray(7),
              "empty": np.zeros((0, 3), np.float32), "ids": np.asarray(["q1", "q22"], dtype=str),
              "f": np.asfortranarray(rng.standard_normal((5, 7)))}
    save_npz_by_blocks(tmp_path / "x.npz", arrays, block_bytes=100)
    np.savez(tmp_path / "y.npz", **arrays)
    with np.load(tmp_path / "x.npz") as ours, np.load(tmp_path / "y.npz") as theirs:
        assert sorted(ours.files) == sorted(theirs.files)
        for name in arrays:
            assert ours[name].dtype == theirs[name].dtype
            np.testing.assert_array_equal(ours[name], theirs[name])
    with h5py.File(tmp_path / "x.h5", "w") as file:
        _dataset_by_blocks(file, "v", block[None, ..., 2], max_values=64)
    with h5py.File(tmp_path / "x.h5", "r") as file:
        np.testing.assert_array_equal(file["v"][()], block[None, ..., 2])
