"""The joint mode's per-cell sums taken a block of items at a time equal the whole-matrix sums (NumPy,
float64), with missing cells, a last block padded, one block and one item a block."""

import jax
import numpy as np
import pytest

from irtexam.irt import cell_blocks as cb
from irtexam.irt.alternating import binary_item_information, information_from_moments


def _problem(n_items=23, n_examinees=17, seed=0, missing=0.2):
    rng = np.random.default_rng(seed)
    a = np.exp(rng.normal(0.0, 0.4, n_items))
    c = rng.uniform(0.0, 0.3, n_items)
    d = rng.normal(0.0, 1.0, n_items)
    theta = rng.normal(0.0, 1.0, n_examinees)
    y = (rng.random((n_items, n_examinees)) < 0.6).astype(np.float32)
    mask = rng.random((n_items, n_examinees)) > missing
    return a, c, d, theta, y, mask


def _by_hand(a, c, d, theta, y, mask):
    s = 1.0 / (1.0 + np.exp(-(a[:, None] * theta[None, :] + d[:, None])))
    p = np.clip(c[:, None] + (1.0 - c[:, None]) * s, cb.P_FLOOR, cb.P_CEIL)
    w = np.where(mask, 1.0 / (p * (1.0 - p)), 0.0)
    score = np.where(mask, y - p, 0.0) * w
    slope = (1.0 - c[:, None]) * s * (1.0 - s)
    t = theta[None, :]
    return {"score_slope": np.stack([(score * slope).sum(1), (score * slope * t).sum(1)], -1),
            "score_guess": (score * (1.0 - s)).sum(1),
            "by_slope": np.stack([(w * slope ** 2 * t ** k).sum(1) for k in range(3)], -1),
            "by_mixed": np.stack([(w * slope * (1.0 - s) * t ** k).sum(1) for k in range(2)], -1),
            "by_guess": (w * (1.0 - s) ** 2).sum(1),
            "grad": (a[:, None] * score * slope).sum(0), "fisher": (a[:, None] ** 2 * w * slope ** 2).sum(0),
            "s": s, "w": w, "slope": slope}


@pytest.mark.parametrize("rows", [1, 4, 7, 23])
def test_blockwise_sums_equal_the_whole_matrix_sums(rows):
    a, c, d, theta, y, mask = _problem()
    blocks = cb.response_blocks(y, mask, rows)
    assert blocks.dtype == np.int8 and blocks.shape == (-(-23 // rows), rows, 17)
    with jax.enable_x64(True):
        sums = cb.item_moments(a, c, d, theta, blocks, free_guessing=True)
        grad, fisher = cb.ability_moments(a, c, d, theta, blocks)
    want = _by_hand(a, c, d, theta, y, mask)
    for name in ("score_slope", "score_guess", "by_slope", "by_mixed", "by_guess"):
        np.testing.assert_allclose(np.asarray(getattr(sums, name)), want[name], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.asarray(grad), want["grad"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.asarray(fisher), want["fisher"], rtol=1e-10, atol=1e-10)


def test_without_free_guessing_the_guessing_sums_are_zero_and_the_rest_unchanged():
    a, c, d, theta, y, mask = _problem(seed=1)
    c = np.zeros_like(c)
    with jax.enable_x64(True):
        sums = cb.item_moments(a, c, d, theta, cb.response_blocks(y, mask, 5), free_guessing=False)
    want = _by_hand(a, c, d, theta, y, mask)
    assert not np.any(np.asarray(sums.by_guess)) and not np.any(np.asarray(sums.by_mixed))
    np.testing.assert_allclose(np.asarray(sums.by_slope), want["by_slope"], rtol=1e-10)


def test_response_blocks_code_missing_and_held_out_cells_and_pad():
    y = np.array([[1, 0, 1], [0, 1, 1]], dtype=np.float32)
    mask = np.array([[True, False, True], [True, True, False]])
    blocks = cb.response_blocks(y, mask, rows=3)
    np.testing.assert_array_equal(blocks[0], [[1, -1, 1], [0, 1, -1], [-1, -1, -1]])


def test_information_from_block_moments_equals_the_whole_matrix_information():
    a, c, d, theta, y, mask = _problem(seed=2)
    with jax.enable_x64(True):
        sums = cb.item_moments(a, c, d, theta, cb.response_blocks(y, mask, 6), free_guessing=True)
        blockwise = information_from_moments(a, c, sums.by_slope, sums.by_mixed, sums.by_guess, ("a", "d", "c"))
        h = _by_hand(a, c, d, theta, y, mask)
        whole = binary_item_information(a, c, h["s"], h["w"], h["slope"], theta, ("a", "d", "c"))
    np.testing.assert_allclose(np.asarray(blockwise), np.asarray(whole), rtol=1e-10)
    # by hand for one item: F = sum_m w J J^T, J = (a slope theta, slope, c (1 - c) (1 - s))
    J = np.stack([a[0] * h["slope"][0] * theta, h["slope"][0], c[0] * (1 - c[0]) * (1 - h["s"][0])])
    np.testing.assert_allclose(np.asarray(blockwise)[0], (h["w"][0] * J) @ J.T, rtol=1e-10)


def test_rows_per_block_keeps_blocks_small_on_the_cpu_and_whole_elsewhere():
    assert cb.rows_per_block(12032, 2211, "cpu") * 2211 <= cb.CPU_BLOCK_CELLS
    assert cb.rows_per_block(10, 10 ** 6, "cpu") == 1          # one item a block at least
    assert cb.rows_per_block(50, 20, "cpu") == 50               # a small matrix is one block
    assert cb.rows_per_block(12032, 2211, "gpu") == 12032       # one kernel over every cell


def test_item_moments_over_abilities_average_the_plain_sums_over_each_abilitys_gaussian():
    """nodes = 1 is item_moments itself; nodes = 3 equals, by hand, the Gauss-Hermite average of the whole-matrix
    sums at theta + x_q s, s = (F + 1)^(-1/2) with F the ability's Fisher information (weights 1/6, 2/3, 1/6 at
    -sqrt 3, 0, sqrt 3); and with every ability's information huge the average is the plug-in sum again."""
    a, c, d, theta, y, mask = _problem()
    blocks = cb.response_blocks(y, mask, 4)
    with jax.enable_x64(True):
        one = cb.item_moments_over_abilities(a, c, d, theta, blocks, True, nodes=1)
        plain = cb.item_moments(a, c, d, theta, blocks, free_guessing=True)
        three = cb.item_moments_over_abilities(a, c, d, theta, blocks, True, nodes=3)
    for name in ("score_slope", "by_slope", "by_guess"):
        np.testing.assert_array_equal(np.asarray(getattr(one, name)), np.asarray(getattr(plain, name)))
    sd = 1.0 / np.sqrt(_by_hand(a, c, d, theta, y, mask)["fisher"] + 1.0)
    want = {}
    for x, w in zip((-np.sqrt(3.0), 0.0, np.sqrt(3.0)), (1 / 6, 2 / 3, 1 / 6)):
        at = _by_hand(a, c, d, theta + x * sd, y, mask)
        for name in ("score_slope", "score_guess", "by_slope", "by_mixed", "by_guess"):
            want[name] = want.get(name, 0.0) + w * at[name]
    for name, value in want.items():
        np.testing.assert_allclose(np.asarray(getattr(three, name)), value, rtol=1e-9, atol=1e-9)
    assert not np.allclose(np.asarray(three.by_slope), np.asarray(plain.by_slope), rtol=1e-3)  # the average moved
    many = np.repeat(y, 400, axis=0), np.repeat(mask, 400, axis=0)       # 9,200 items: s = 0.01-0.05
    big = [np.repeat(v, 400) for v in (a, c, d)]
    with jax.enable_x64(True):
        far = cb.item_moments_over_abilities(*big, theta, cb.response_blocks(*many, 920), True, nodes=3)
        near = cb.item_moments(*big, theta, cb.response_blocks(*many, 920), free_guessing=True)
    np.testing.assert_allclose(np.asarray(far.by_slope), np.asarray(near.by_slope), rtol=0.02)
