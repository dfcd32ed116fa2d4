"""The responses as the marginal estimator's kernels take them: one byte a cell, in blocks of examinees.

:func:`response_blocks` packs the (items x examinees) scores examinee-major as int8 (-1 missing) in
blocks of at most :data:`BLOCK_CELLS` cells; :func:`over_blocks` runs a computation block by block
(``lax.scan``: one block's temporaries in memory at a time) and adds up its sums; :func:`block_onehot`
is a block's [y_im = k] indicators. 10^8 binary cells take 100 MB this way instead of the 1.6 GB of a
float64 one-hot array (issue 22: at most 16 bytes a cell for the whole fit).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..memory import row_blocks
from .design import score_dtype

# The kernels take the responses a block of examinees at a time (:func:`response_blocks`): at most this many
# cells a block, so that a block's float64 one-hot array and its products with the nodes stay near 15 MB (2^21
# cells: 0.2 GB more at the information step and slower; 2^19: slower, little less memory; 500 x 50,000 3PL)
BLOCK_CELLS = 1 << 20


def block_size(n_items: int, n_examinees: int, max_cells: int | None = None, multiple: int = 1) -> int:
    """Examinees per block: all of them up to ``max_cells`` cells (default :data:`BLOCK_CELLS`, read at the call),
    else ``max_cells // n_items`` (at least 1); rounded up to a multiple of ``multiple`` (the devices that share
    the examinees, :mod:`irtexam.irt.devices`)."""
    max_cells = BLOCK_CELLS if max_cells is None else max_cells
    if n_items * n_examinees <= max_cells:
        size = max(n_examinees, 1)
    else:
        size = max(1, max_cells // max(n_items, 1))
    return -(-size // multiple) * multiple


def response_blocks(y: np.ndarray, mask: np.ndarray, group: np.ndarray, max_score: int = 1,
                    max_cells: int | None = None, multiple: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The responses as the kernels take them: scores (n_blocks, B, I), examinee-major, int8 (int16 above 126
    categories), -1 where missing, and the examinees' groups (n_blocks, B), int32; the last block is padded with
    examinees who answered nothing and group -1 (they add nothing to any sum, :func:`irtexam.irt.marginal.steps.posterior_over_nodes`).

    One byte a cell instead of the (K + 1) x 8 of a float64 one-hot array: 10^8 binary cells take 100 MB, not
    1.6 GB. ``y``, ``mask``: (I, E) scores and observed cells; ``group``: (E,) group of each examinee.
    ``multiple``: each block's examinee count a multiple of it (the devices that share them).
    """
    n_items, n_examinees = y.shape
    size = block_size(n_items, n_examinees, max_cells, multiple)
    n_blocks = -(-n_examinees // size)
    dtype = score_dtype(max_score)
    scores = np.full((n_blocks * size, n_items), -1, dtype=dtype)
    for rows in row_blocks(n_examinees, n_items):  # a few million cells at a time: no full float copy
        block = y[:, rows] if np.issubdtype(y.dtype, np.integer) else np.rint(y[:, rows])
        scores[rows] = np.where(mask[:, rows], block, -1).T.astype(dtype)
    groups = np.full(n_blocks * size, -1, dtype=np.int32)
    groups[:n_examinees] = group
    return scores.reshape(n_blocks, size, n_items), groups.reshape(n_blocks, size)


def block_onehot(scores: Any, n_categories: int, dtype: Any) -> Any:
    """[y_im = k] of one block of scores (B, I) (-1 missing), (K + 1, I, B)."""
    return (scores.T[None, :, :] == jnp.arange(n_categories, dtype=scores.dtype)[:, None, None]).astype(dtype)


def over_blocks(fn: Callable[[Any, Any], tuple[Any, Any]], responses: Any, groups: Any) -> tuple[Any, Any]:
    """Run ``fn(block_scores, block_groups) -> (sums, rows)`` on every block of examinees: the sums added over
    the blocks, the per-examinee rows concatenated (n_blocks * B, ...). ``lax.scan`` keeps one block's
    temporaries in memory at a time and ``jax.checkpoint`` stops reverse mode from storing them; one block is
    a plain call."""
    if responses.shape[0] == 1:
        return fn(responses[0], groups[0])
    zero = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(fn, responses[0], groups[0])[0])

    def step(total: Any, block: tuple[Any, Any]) -> tuple[Any, Any]:
        sums, rows = fn(*block)
        return jax.tree_util.tree_map(jnp.add, total, sums), rows

    total, rows = jax.lax.scan(jax.checkpoint(step), zero, (responses, groups))
    # the row count spelled out: reshape(-1, ...) of an array with a zero-size axis (a fit with no free population
    # parameter has (n_blocks, B, 0) of them) is a division by zero in jax
    return total, jax.tree_util.tree_map(lambda r: r.reshape(r.shape[0] * r.shape[1], *r.shape[2:]), rows)
