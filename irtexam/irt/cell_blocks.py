"""Per-cell sums of binary IRT models, a block of items at a time.

The joint mode's sweeps need, for every item, sums over its examinees (the gradient and
the Fisher information of the item's parameters) and, for every examinee, sums over the
items. Written as whole-matrix expressions, XLA on the CPU materialises each per-cell
factor (z, s, p, w, the products fed to the reductions) as an items x examinees float32
array: at 12,032 x 2,211 that was about 600 MB of temporaries per step and a memory-bound
0.5 s. Here the response matrix is held as int8 (1 = right, 0 = wrong, -1 = missing or
held out), split into blocks of rows (items) that fit the cache, and the sums are taken
block by block (``lax.map`` for the items' sums, ``lax.scan`` accumulating the examinees'
sums): the temporaries are one block's, and a 3PL sweep at that size is three times faster.

For a binary item with c the floor, s = sigmoid(a theta + d), p = c + (1 - c) s,
slope = dp/dz = (1 - c) s (1 - s), w = 1 / (p (1 - p)) and score = (y - p) w (both zero on
missing cells), the sums are

* items: sum_m score slope {1, theta}, sum_m score (1 - s); sum_m w slope^2 {1, theta, theta^2},
  sum_m w slope (1 - s) {1, theta}, sum_m w (1 - s)^2 (the moments the Fisher information of
  (log a, d, logit c) is built from, :func:`irtexam.irt.alternating.information_from_moments`);
* examinees: sum_i a score slope (the gradient in theta) and sum_i a^2 w slope^2 (its
  Fisher information).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..memory import row_blocks

Array = jax.Array
# cells a block holds on the CPU: 2^18 float32 temporaries are 1 MB each, within the caches (2^18 against 2^17 on a
# 2-core EPYC, 2 MB of L2 a core: the 3PL's item and ability steps at 12,032 x 2,211 0.057 and 0.044 s against 0.071
# and 0.050, 10-25% faster at 2,000 x 1,000 and 3,000 x 250 too; 2^19 and up slower again). Larger blocks on an
# accelerator, where one kernel over many cells is what is fast (and memory is the limit only past 2^26 cells)
CPU_BLOCK_CELLS, ACCELERATOR_BLOCK_CELLS = 1 << 18, 1 << 26
# Bounds on p in the Fisher weights w = 1 / (p (1 - p)): 1 - 1e-7 is the largest bound below 1 that float32
# represents (1 - 1e-9 rounds to 1.0, and w = inf meets slope = 0 as NaN)
P_FLOOR, P_CEIL = 1e-12, 1.0 - 1e-7
MISSING = -1


def rows_per_block(n_items: int, n_examinees: int, backend: str | None = None) -> int:
    """How many items a block holds: as many as keep it within the backend's block size (at least one)."""
    backend = backend or jax.default_backend()
    cells = CPU_BLOCK_CELLS if backend == "cpu" else ACCELERATOR_BLOCK_CELLS
    return int(max(1, min(n_items, cells // max(n_examinees, 1))))


def response_blocks(y: np.ndarray | None, mask: np.ndarray, rows: int) -> np.ndarray:
    """The responses as int8 blocks of shape (n_blocks, rows, n_examinees): y where ``mask``, else
    :data:`MISSING`; the last block padded with missing rows. ``y`` binary (items x examinees), or None where only
    which cells were observed matters (the information: 0 for every observed cell)."""
    n_items, n_examinees = mask.shape
    n_blocks = -(-n_items // rows)
    out = np.full((n_blocks * rows, n_examinees), MISSING, dtype=np.int8)
    for block in row_blocks(n_items, n_examinees):  # no temporary of the whole matrix
        out[block] = np.where(mask[block], 0 if y is None else y[block], MISSING)
    return out.reshape(n_blocks, rows, n_examinees)


def blocked(x: Array, n_blocks: int, rows: int, fill: float = 0.0) -> Array:
    """A per-item vector (or array with items first) padded with ``fill`` to n_blocks * rows and split
    into blocks: shape (n_blocks, rows, ...)."""
    pad = n_blocks * rows - x.shape[0]
    if pad:
        x = jnp.concatenate([x, jnp.full((pad,) + x.shape[1:], fill, dtype=x.dtype)])
    return x.reshape((n_blocks, rows) + x.shape[1:])


def unblocked(x: Array, n_items: int) -> Array:
    """Inverse of :func:`blocked`: (n_blocks, rows, ...) to (n_items, ...)."""
    return x.reshape((-1,) + x.shape[2:])[:n_items]


class ItemMoments(NamedTuple):
    """Per-item sums over examinees (module docstring); ``by_mixed`` and ``by_guess`` only with a free c."""
    score_slope: Array   # (I, 2): sum score slope {1, theta}
    score_guess: Array   # (I,):   sum score (1 - s)
    by_slope: Array      # (I, 3): sum w slope^2 {1, theta, theta^2}
    by_mixed: Array      # (I, 2): sum w slope (1 - s) {1, theta}
    by_guess: Array      # (I,):   sum w (1 - s)^2
    by_skew: Array       # (I, 4): sum v' {1, theta, theta^2, theta^3}, v' = d(w slope^2)/dz (with ``skew``; else 0)


def _cell_terms(a: Array, c: Array, d: Array, theta: Array, y: Array) -> tuple[Array, Array, Array, Array]:
    """s, slope, w and score of one block (rows x examinees); w and score zero on missing cells."""
    s = jax.nn.sigmoid(a[:, None] * theta[None, :] + d[:, None])
    cc = c[:, None]
    p = jnp.clip(cc + (1.0 - cc) * s, P_FLOOR, P_CEIL)
    observed = y != MISSING
    w = jnp.where(observed, 1.0 / (p * (1.0 - p)), 0.0)
    score = jnp.where(observed, y.astype(p.dtype) - p, 0.0) * w
    return s, (1.0 - cc) * s * (1.0 - s), w, score


def item_moments(a: Array, c: Array, d: Array, theta: Array, blocks: Array, free_guessing: bool,
                 skew: bool = False) -> ItemMoments:
    """:class:`ItemMoments` of every item, a block at a time (a, c, d per item; ``blocks`` from
    :func:`response_blocks`). ``skew``: also the moments of v' = d(w slope^2)/dz, the change of each cell's
    Fisher weight along the linear predictor, v' = w slope^2 (2 (1 - 2 s) - slope w (1 - 2 p)) (s (1 - s) (1 - 2 s)
    without guessing), which the gradient of Firth's penalty 1/2 log det F takes
    (:func:`irtexam.irt.alternating.firth_gradient`)."""
    n_items = a.shape[0]
    n_blocks, rows = blocks.shape[:2]
    t, t2 = theta[None, :], (theta * theta)[None, :]

    def one(block: tuple[Array, Array, Array, Array]) -> ItemMoments:
        a_, c_, d_, y = block
        s, slope, w, score = _cell_terms(a_, c_, d_, theta, y)
        ss, ws2 = score * slope, w * slope * slope
        zero = jnp.zeros_like(a_)
        if free_guessing:
            s_bar = 1.0 - s
            wsm = w * slope * s_bar
            guess = ((score * s_bar).sum(1), jnp.stack([wsm.sum(1), (wsm * t).sum(1)], axis=-1),
                     (w * s_bar * s_bar).sum(1))
        else:
            guess = (zero, jnp.stack([zero, zero], axis=-1), zero)
        if skew:
            p = c_[:, None] + (1.0 - c_[:, None]) * s
            v1 = ws2 * (2.0 * (1.0 - 2.0 * s) - slope * w * (1.0 - 2.0 * p))
            v1t = v1 * t
            by_skew = jnp.stack([v1.sum(1), v1t.sum(1), (v1t * t).sum(1), (v1t * t2).sum(1)], axis=-1)
        else:
            by_skew = jnp.zeros(a_.shape + (4,), dtype=a_.dtype)
        return ItemMoments(jnp.stack([ss.sum(1), (ss * t).sum(1)], axis=-1), guess[0],
                           jnp.stack([ws2.sum(1), (ws2 * t).sum(1), (ws2 * t2).sum(1)], axis=-1), guess[1], guess[2],
                           by_skew)

    out = jax.lax.map(one, (blocked(a, n_blocks, rows), blocked(c, n_blocks, rows), blocked(d, n_blocks, rows), blocks))
    return ItemMoments(*(unblocked(x, n_items) for x in out))


def ability_moments(a: Array, c: Array, d: Array, theta: Array, blocks: Array) -> tuple[Array, Array]:
    """Every examinee's sum_i a score slope (gradient in theta) and sum_i a^2 w slope^2 (Fisher
    information), accumulated over the blocks of items."""
    n_blocks, rows = blocks.shape[:2]

    def add(carry: tuple[Array, Array], block: tuple[Array, Array, Array, Array]) -> tuple[tuple[Array, Array], None]:
        a_, c_, d_, y = block
        _, slope, w, score = _cell_terms(a_, c_, d_, theta, y)
        return (carry[0] + (a_[:, None] * score * slope).sum(0),
                carry[1] + ((a_ * a_)[:, None] * w * slope * slope).sum(0)), None

    zeros = jnp.zeros_like(theta)
    (grad, fisher), _ = jax.lax.scan(add, (zeros, zeros), (blocked(a, n_blocks, rows), blocked(c, n_blocks, rows),
                                                           blocked(d, n_blocks, rows), blocks))
    return grad, fisher


def item_moments_over_abilities(a: Array, c: Array, d: Array, theta: Array, blocks: Array, free_guessing: bool,
                                nodes: int, skew: bool = False) -> ItemMoments:
    """:func:`item_moments` with each ability integrated over its Gaussian approximation instead of plugged in
    (``nodes`` > 1; 1: :func:`item_moments` itself): theta_m ~ N(theta_m, s_m^2), s_m = (F_m + 1)^(-1/2) with F_m
    the ability's Fisher information (:func:`ability_moments`) and 1 its N(0, 1) prior's precision, by ``nodes``
    Gauss-Hermite points, sums = sum_q w_q item_moments(theta + x_q s). The item step then maximises the items'
    expected log posterior under the abilities' posteriors, as the marginal estimator's M-step does on its grid
    (an adaptive-quadrature EM step, Schilling & Bock 2005), at ``nodes`` passes over the cells instead of one.
    An option, not the default: why is in the estimator guide (docs/guide/fit.md) and beside
    :data:`irtexam.irt.fit.FIRTH_MAX_RESPONSES`."""
    if nodes <= 1:
        return item_moments(a, c, d, theta, blocks, free_guessing, skew)
    points, weights = np.polynomial.hermite_e.hermegauss(nodes)
    weights = (weights / weights.sum()).tolist()
    sd = jax.lax.rsqrt(ability_moments(a, c, d, theta, blocks)[1] + 1.0)
    at_nodes = [item_moments(a, c, d, theta + x * sd, blocks, free_guessing, skew) for x in points.tolist()]
    return jax.tree_util.tree_map(lambda *sums: sum(w * s for w, s in zip(weights, sums)), *at_nodes)
