"""Gaussian (Laplace) item draws of a MAP fit, formed in place (:func:`irtexam.irt.draws.laplace_draws`).

A leaderboard-sized fit draws 500 times each of 12,032 items' (log a, d, logit c): a (500, 12,032, 3) float32 array of
69 MB. Formed as ``roots @ noise`` it took the noise and the product at once (138 MB), and its reported a, b, c, d
(92 MB more) were made beside it. Here each item's root is applied to its noise a block of items at a time, in place,
and a binary kind's a = exp(log a) and c = sigmoid(logit c) are written over their unconstrained draws, d kept as
it is and b = -d / a the only new array: the same numbers in 92 MB instead of 230.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..memory import row_blocks

BINARY_ITEM_KEYS = frozenset({"a", "d", "c"})


def roots_applied_in_place(roots: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """``noise`` (N, I, k) overwritten with roots (I, k, k) applied to it, out[n, i] = roots[i] @ noise[n, i], a
    block of items at a time (each block one batched matmul, (B, k, k) @ (B, k, N)); returns ``noise``."""
    n_draws, n_items, width = noise.shape
    for items in row_blocks(n_items, n_draws * width, max_cells=1 << 20):
        block = noise[:, items]
        block[...] = np.moveaxis(np.matmul(roots[items], np.moveaxis(block, 0, -1)), -1, 0)
    return noise


def binary_items_in_place(item_draws: np.ndarray, keys: Sequence[str], slices: Mapping[str, slice],
                          kind: Any) -> dict[str, np.ndarray] | None:
    """The reported draws a, b, c, d of binary items from their unconstrained draws (N, I, k), whose columns
    ``slices[key]`` hold log a, d and logit c: a = exp(log a) and c = 1 / (1 + exp(-logit c)) written over their
    columns, d left in its own, b = -d / a a new array (1PL: a = 1; a fixed c: c = that value), the same operations
    as :meth:`irtexam.irt.kinds.BinaryKind.item_params` in float32. None where the items are not binary with those
    parameters (the caller transforms a copy then)."""
    if kind.graded or not set(keys) <= BINARY_ITEM_KEYS or "d" not in keys or any(
            slices[key].stop - slices[key].start != 1 for key in keys):
        return None
    column = {key: item_draws[..., slices[key].start] for key in keys}
    d = column["d"]
    if "a" in column:
        a = np.exp(column["a"], out=column["a"])
    else:
        a = np.ones_like(d)
    b = np.negative(d) / a
    if "c" in column:
        c = column["c"]
        np.negative(c, out=c)
        np.exp(c, out=c)
        c += np.float32(1.0)
        np.divide(np.float32(1.0), c, out=c)
    else:
        c = np.full_like(d, kind.fixed_c)
    return {"a": a, "b": b, "d": d, "c": c}
