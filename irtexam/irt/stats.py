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

# cells a block of the binary fit statistics: the compiled sums' float temporaries are a few times the block (at
# 2^22 cells they added 50 MB to a 12,032 x 2,211 fit's peak; at 2^20 the 27 calls take the same time)
STATS_BLOCK_CELLS = 1 << 20


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
def _binary_cell_sums(y: jax.Array, train: jax.Array, test: jax.Array | None, theta: jax.Array, a: jax.Array,
                      d: jax.Array, c: jax.Array) -> dict[str, jax.Array]:
    """One pass over a block of item rows of a binary matrix (``y`` int8, the masks bool; ``test`` None without
    held-out cells): per item, the log-likelihood sum, the squared errors sum_m (y_im - P_im)^2, the observed
    count n_i and the score sum s_i = sum_m y_im, over the training cells and (totals) over the test cells.
    The scores enter as bytes and become floats here (on the device), not on the host."""
    items = kinds.ItemParams(a=a[:, None], b=(-d / a)[:, None], c=c[:, None])
    yf = y.astype(jnp.float32)
    p = kinds.prob_correct(theta[None, :], items, pairwise=True)
    ll = kinds.cell_loglik(yf, theta[None, :], items)
    model_sq = (yf - p) ** 2
    out = {"ll_train_item": jnp.where(train, ll, 0.0).sum(axis=1),
           "sq_train_item": jnp.where(train, model_sq, 0.0).sum(axis=1),
           "n_train_item": train.sum(axis=1, dtype=jnp.int32),
           "y_train_item": jnp.where(train, y, 0).sum(axis=1, dtype=jnp.int32)}
    if test is not None:
        out.update({"ll_test": jnp.where(test, ll, 0.0).sum(), "sq_test": jnp.where(test, model_sq, 0.0).sum(),
                    "n_test": test.sum(dtype=jnp.int32), "y_test": jnp.where(test, y, 0).sum(dtype=jnp.int32)})
    return out


def _add_up(parts: Mapping[str, list[Any]]) -> dict[str, np.ndarray]:
    """The cell sums of the blocks of item rows joined: per-item arrays concatenated, totals added."""
    return {k: np.concatenate(v) if np.ndim(v[0]) else np.sum(v) for k, v in parts.items()}


def binary_squared_errors(n: Any, s: Any, baseline: float) -> Any:
    """sum over n binary scores y (s of them 1) of (y - baseline)^2 = s (1 - 2 baseline) + n baseline^2 (y^2 = y)."""
    return s * (1.0 - 2.0 * baseline) + n * baseline ** 2


def binary_mean_loglik(n: int, s: int, p: float) -> float:
    """Mean log-likelihood of the constant prediction ``p`` (clipped to [1e-9, 1 - 1e-9]) over n binary scores, s of
    them 1: (s log p + (n - s) log(1 - p)) / n (what :func:`bernoulli_mean_loglik` gives, from two counts)."""
    p = float(np.clip(p, 1e-9, 1 - 1e-9))
    return float((s * np.log(p) + (n - s) * np.log1p(-p)) / max(n, 1))


def _binary_sums(params: Mapping[str, np.ndarray], spec: mdl.ModelSpec, design: mdl.Design, train: np.ndarray,
                 test: np.ndarray | None, theta: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The sums :func:`_binary_cell_sums` takes, a block of item rows at a time (blocks of equal shape, the last
    padded with unobserved rows: one compilation; no full-size temporaries), joined; plus the training score sum
    and count, whose ratio is the baseline, and the baseline's squared errors from the counts
    (:func:`binary_squared_errors`)."""
    # transforms in NumPy (no eager JAX dispatch)
    constrained = mdl.constrain({k: np.asarray(v, dtype=np.float64) for k, v in params.items()}, spec, design)
    theta = constrained["theta"] if theta is None else theta
    f32 = (lambda v: np.asarray(v, dtype=np.float32))  # noqa: E731
    a, d, c = (np.broadcast_to(f32(constrained[k]), (design.n_items,)) for k in ("a", "d", "c"))
    blocks = row_blocks(design.n_items, design.n_examinees, max_cells=STATS_BLOCK_CELLS)
    size = blocks[0].stop - blocks[0].start
    y_all = design.y if design.y.dtype == np.int8 else np.clip(design.y, 0, 1).astype(np.int8)
    totals: dict[str, list[np.ndarray]] = {}
    for rows in blocks:
        n = rows.stop - rows.start
        pad = (lambda v, fill: v[rows] if n == size else  # noqa: E731
               np.concatenate([v[rows], np.full((size - n,) + v.shape[1:], fill, dtype=v.dtype)]))
        args = (pad(y_all, 0), pad(train, False), None if test is None else pad(test, False), f32(theta),
                pad(a, 1.0), pad(d, 0.0), pad(c, 0.0))
        # kept as a serialized executable: a later process loads it without tracing (0.11 s -> 0.03 s at 2000 x 200)
        sums = compiled_executable("binary-cell-sums", (), _binary_cell_sums, args)(*args)
        for k, v in sums.items():
            totals.setdefault(k, []).append(np.asarray(v)[:n] if np.ndim(v) else np.asarray(v))
    out = _add_up(totals)
    out = {k: v.astype(np.int64) if k.startswith(("n_", "y_")) else v.astype(np.float64) for k, v in out.items()}
    n_train, s_train = int(out["n_train_item"].sum()), int(out["y_train_item"].sum())
    baseline = s_train / n_train if n_train else 0.0
    out.update({"baseline": baseline, "ll_train": out["ll_train_item"].sum(),
                "base_train_item": binary_squared_errors(out["n_train_item"], out["y_train_item"], baseline)})
    if test is not None:
        out["base_test"] = binary_squared_errors(out["n_test"], out["y_test"], baseline)
    return out


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
    graded = spec.kind_object.graded
    if graded:
        test = test_mask if test_mask is not None else np.zeros(train_mask.shape, dtype=bool)
        n_train = int(np.count_nonzero(train_mask))
        baseline = float(np.sum(design.y, where=train_mask, dtype=np.float64)) / n_train if n_train else 0.0
        sums = _graded_sums(params, spec, design, train_mask, test, baseline, theta)
        counts = np.maximum(train_mask.sum(axis=1), 1)
        n_test = int(test.sum())
    else:  # counts, score sums and the baseline come from the one pass over the cells
        test = test_mask if test_mask is not None and test_mask.any() else None
        sums = _binary_sums(params, spec, design, train_mask, test, theta)
        baseline = float(sums["baseline"])
        counts = np.maximum(sums["n_train_item"], 1)
        n_test = int(sums["n_test"]) if test is not None else 0
    item_rmse = np.sqrt(sums["sq_train_item"] / counts)
    item_base = np.sqrt(sums["base_train_item"] / counts)
    loglik = float(sums["ll_train"])
    n_params = int(sum(np.size(v) for v in params.values()))
    n_obs = int(sums["n_train_item"].sum()) if not graded else int(train_mask.sum())
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
    if n_test:
        stats["heldout_cells"] = n_test
        stats["heldout_loglik"] = float(sums["ll_test"]) / n_test
        if not graded:
            stats["heldout_loglik_baseline"] = binary_mean_loglik(n_test, int(sums["y_test"]), baseline)
            stats["heldout_rmse"] = float(np.sqrt(sums["sq_test"] / n_test))
            stats["heldout_rmse_baseline"] = float(np.sqrt(sums["base_test"] / n_test))
    return stats
