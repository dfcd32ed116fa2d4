"""Fit statistics: log-likelihood, RMSE against the mean-prediction baseline, held-out log-likelihood.

The paper's Table 5 compares, per item, the RMSE of the fitted P(X = 1) against the
RMSE of a constant prediction equal to the average exam performance.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import IrtexamError
from ..memory import row_blocks

from . import kinds
from .compile_cache import compiled_executable, fast_jit
from . import model as mdl


def heldout_split(mask: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split observed cells into (train, test) masks; ``fraction`` of observed cells go to test.

    Every item and examinee keeps at least one training cell where possible.
    """
    if not (fraction == 0.0 or 0.0 < fraction <= 0.5):
        raise IrtexamError(f"held-out fraction must be 0 (none) or in (0, 0.5], got {fraction}")
    if fraction == 0.0:  # every observed cell trains (the mask itself, not a copy: callers only read it)
        return mask, np.zeros(mask.shape, dtype=bool)
    rng = np.random.default_rng(seed)
    observed = np.argwhere(mask)
    n_test = int(round(fraction * len(observed)))
    chosen = observed[rng.choice(len(observed), size=n_test, replace=False)]
    test = np.zeros_like(mask)
    test[chosen[:, 0], chosen[:, 1]] = True
    train = mask & ~test
    # Give back one cell to any item/examinee left without training data.
    for axis in (1, 0):
        empty = np.flatnonzero((train.sum(axis=axis) == 0) & (mask.sum(axis=axis) > 0))
        for k in empty:
            cells = np.flatnonzero(test[k] if axis == 1 else test[:, k])
            if len(cells):
                i, m = (k, cells[0]) if axis == 1 else (cells[0], k)
                test[i, m], train[i, m] = False, True
    return train, test


def bernoulli_mean_loglik(y: np.ndarray, mask: np.ndarray, p: np.ndarray | float) -> float:
    """Mean per-cell log-likelihood of predictions ``p`` on the cells in ``mask``."""
    p = np.clip(np.broadcast_to(p, y.shape), 1e-9, 1 - 1e-9)
    cells = np.where(mask, y * np.log(p) + (1 - y) * np.log1p(-p), 0.0)
    return float(cells.sum() / max(mask.sum(), 1))


@fast_jit
def _binary_cell_sums(y: jax.Array, train: jax.Array, test: jax.Array, theta: jax.Array, a: jax.Array,
                      d: jax.Array, c: jax.Array, baseline: jax.Array) -> dict[str, jax.Array]:
    """One pass over a binary matrix: log-likelihood and squared-error sums per item, train and test."""
    items = kinds.ItemParams(a=a[:, None], b=(-d / a)[:, None], c=c[:, None])
    p = kinds.prob_correct(theta[None, :], items, pairwise=True)
    ll = kinds.cell_loglik(y, theta[None, :], items)
    model_sq = (y - p) ** 2
    base_sq = (y - baseline) ** 2
    return {"ll_train": jnp.where(train, ll, 0.0).sum(), "ll_test": jnp.where(test, ll, 0.0).sum(),
            "sq_train_item": jnp.where(train, model_sq, 0.0).sum(axis=1),
            "base_train_item": jnp.where(train, base_sq, 0.0).sum(axis=1),
            "sq_test": jnp.where(test, model_sq, 0.0).sum(), "base_test": jnp.where(test, base_sq, 0.0).sum()}


def _add_up(parts: Mapping[str, list[Any]]) -> dict[str, np.ndarray]:
    """The cell sums of the blocks of item rows joined: per-item arrays concatenated, totals added."""
    return {k: np.concatenate(v) if np.ndim(v[0]) else np.sum(v) for k, v in parts.items()}


def _binary_sums(params: Mapping[str, np.ndarray], spec: mdl.ModelSpec, design: mdl.Design, train: np.ndarray,
                 test: np.ndarray, baseline: float, theta: np.ndarray | None = None) -> dict[str, np.ndarray]:
    # transforms in NumPy (no eager JAX dispatch); the cell sums in one compiled pass a block of item rows
    # (blocks of equal shape, the last padded with unobserved rows: one compilation; no full-size temporaries)
    constrained = mdl.constrain({k: np.asarray(v, dtype=np.float64) for k, v in params.items()}, spec, design)
    theta = constrained["theta"] if theta is None else theta
    f32 = (lambda v: np.asarray(v, dtype=np.float32))  # noqa: E731
    a, d, c = (np.broadcast_to(f32(constrained[k]), (design.n_items,)) for k in ("a", "d", "c"))
    blocks = row_blocks(design.n_items, design.n_examinees)
    size = blocks[0].stop - blocks[0].start
    totals: dict[str, list[np.ndarray]] = {}
    for rows in blocks:
        n = rows.stop - rows.start
        pad = (lambda v, fill: v[rows] if n == size else  # noqa: E731
               np.concatenate([v[rows], np.full((size - n,) + v.shape[1:], fill, dtype=v.dtype)]))
        args = (f32(pad(design.y, 0)), pad(train, False), pad(test, False), f32(theta), pad(a, 1.0), pad(d, 0.0),
                pad(c, 0.0), np.float32(baseline))
        # kept as a serialized executable: a later process loads it without tracing (0.11 s -> 0.03 s at 2000 x 200)
        sums = compiled_executable("binary-cell-sums", (), _binary_cell_sums, args)(*args)
        for k, v in sums.items():
            totals.setdefault(k, []).append(np.asarray(v, dtype=np.float64)[:n] if np.ndim(v) else
                                            np.asarray(v, dtype=np.float64))
    return _add_up(totals)


def _graded_sums(params: Mapping[str, np.ndarray], spec: mdl.ModelSpec, design: mdl.Design, train: np.ndarray,
                 test: np.ndarray, baseline: float, theta: np.ndarray | None = None) -> dict[str, np.ndarray]:
    jparams = {k: jnp.asarray(v, dtype=jnp.float32) for k, v in params.items() if k in mdl.ITEM_KEYS}
    items = mdl.item_params(jparams, spec)
    if theta is None:
        everything = {k: jnp.asarray(v, dtype=jnp.float32) for k, v in params.items()}
        theta = mdl.examinee_theta(everything, spec, design)
    theta = jnp.asarray(theta, dtype=jnp.float32)
    scale = float(max(design.max_score, 1)) ** 2
    parts: dict[str, list[Any]] = {}
    for rows in row_blocks(design.n_items, design.n_examinees):  # a block of item rows at a time
        column = kinds.ItemParams(a=items.a[rows, None], b=items.b[rows, None], thresholds=items.thresholds[rows, None, :])
        y = design.y[rows].astype(np.float64)
        cells = np.asarray(kinds.cell_loglik(jnp.asarray(design.y[rows], dtype=jnp.float32), theta[None, :], column),
                           dtype=np.float64)
        predicted = np.asarray(kinds.expected_score(theta[None, :], column, pairwise=True))
        model_sq, base_sq = (y - predicted) ** 2 / scale, (y - baseline) ** 2 / scale
        tr, te = train[rows], test[rows]
        for key, value in (("ll_train", np.where(tr, cells, 0.0).sum()), ("ll_test", np.where(te, cells, 0.0).sum()),
                           ("sq_train_item", np.where(tr, model_sq, 0.0).sum(axis=1)),
                           ("base_train_item", np.where(tr, base_sq, 0.0).sum(axis=1)),
                           ("sq_test", np.where(te, model_sq, 0.0).sum()), ("base_test", np.where(te, base_sq, 0.0).sum())):
            parts.setdefault(key, []).append(value)
    return _add_up(parts)


def fit_statistics(params: Mapping[str, np.ndarray], spec: mdl.ModelSpec, design: mdl.Design,
                   train_mask: np.ndarray, test_mask: np.ndarray | None,
                   theta: np.ndarray | None = None) -> dict[str, Any]:
    """Log-likelihood, RMSE vs mean baseline (overall and per item), held-out log-likelihood.

    RMSE = sqrt(mean over observed cells of (y - E[y])^2) (scores divided by the maximum
    score for graded models); the baseline predicts the mean training score everywhere.
    Binary models are summarised in one jit-compiled pass over the cells. ``theta``: the examinees'
    abilities (default: those in ``params``; a marginal fit passes its EAP or MAP abilities).
    """
    test = test_mask if test_mask is not None else np.zeros(train_mask.shape, dtype=bool)
    n_train = int(np.count_nonzero(train_mask))
    baseline = float(np.sum(design.y, where=train_mask, dtype=np.float64)) / n_train if n_train else 0.0
    sums = (_graded_sums if spec.kind_object.graded else _binary_sums)(params, spec, design, train_mask, test, baseline,
                                                                   theta)
    counts = np.maximum(train_mask.sum(axis=1), 1)
    item_rmse = np.sqrt(sums["sq_train_item"] / counts)
    item_base = np.sqrt(sums["base_train_item"] / counts)
    loglik = float(sums["ll_train"])
    n_params = int(sum(np.size(v) for v in params.values()))
    n_obs = int(train_mask.sum())
    stats: dict[str, Any] = {
        "loglik": loglik,
        "n_observed": n_obs,
        "n_parameters": n_params,
        "aic": 2 * n_params - 2 * loglik,
        "bic": n_params * np.log(max(n_obs, 1)) - 2 * loglik,
        "rmse": float(np.sqrt(sums["sq_train_item"].sum() / max(n_obs, 1))),
        "rmse_baseline": float(np.sqrt(sums["base_train_item"].sum() / max(n_obs, 1))),
        "item_rmse_mean": float(item_rmse.mean()),
        "item_rmse_sd": float(item_rmse.std()),
        "item_rmse_baseline_mean": float(item_base.mean()),
        "item_rmse_baseline_sd": float(item_base.std()),
        "item_rmse": dict(zip(design.items, item_rmse.tolist())),
        "item_rmse_baseline": dict(zip(design.items, item_base.tolist())),
        "baseline": baseline,
    }
    n_test = int(test.sum())
    if n_test:
        stats["heldout_cells"] = n_test
        stats["heldout_loglik"] = float(sums["ll_test"]) / n_test
        if not spec.kind_object.graded:
            stats["heldout_loglik_baseline"] = bernoulli_mean_loglik(design.y.astype(np.float64), test, baseline)
            stats["heldout_rmse"] = float(np.sqrt(sums["sq_test"] / n_test))
            stats["heldout_rmse_baseline"] = float(np.sqrt(sums["base_test"] / n_test))
    return stats
