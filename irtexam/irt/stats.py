"""Fit statistics: log-likelihood, RMSE against the mean-prediction baseline, held-out log-likelihood.

The paper's Table 5 compares, per item, the RMSE of the fitted P(X = 1) against the
RMSE of a constant prediction equal to the average exam performance.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax.numpy as jnp
import numpy as np

from . import model as mdl


def heldout_split(mask: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split observed cells into (train, test) masks; ``fraction`` of observed cells go to test.

    Every item and examinee keeps at least one training cell where possible.
    """
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"heldout fraction must be in [0, 1), got {fraction}")
    if fraction == 0.0:
        return mask.copy(), np.zeros_like(mask)
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


def rmse_table(y: np.ndarray, mask: np.ndarray, predicted: np.ndarray, baseline: float) -> dict[str, np.ndarray]:
    """Per-item RMSE of the model and of a constant baseline over observed cells.

    RMSE_i = sqrt(mean_m (y_im - p_im)^2),  RMSE_i^base = sqrt(mean_m (y_im - ybar)^2).
    """
    counts = np.maximum(mask.sum(axis=1), 1)
    model = np.sqrt(np.where(mask, (y - predicted) ** 2, 0.0).sum(axis=1) / counts)
    base = np.sqrt(np.where(mask, (y - baseline) ** 2, 0.0).sum(axis=1) / counts)
    return {"rmse": model, "rmse_baseline": base}


def bernoulli_mean_loglik(y: np.ndarray, mask: np.ndarray, p: np.ndarray | float) -> float:
    """Mean per-cell log-likelihood of predictions ``p`` on the cells in ``mask``."""
    p = np.clip(np.broadcast_to(p, y.shape), 1e-9, 1 - 1e-9)
    cells = np.where(mask, y * np.log(p) + (1 - y) * np.log1p(-p), 0.0)
    return float(cells.sum() / max(mask.sum(), 1))


def fit_statistics(params: Mapping[str, np.ndarray], spec: mdl.ModelSpec, design: mdl.Design,
                   train_mask: np.ndarray, test_mask: np.ndarray | None) -> dict[str, Any]:
    """Log-likelihood, RMSE vs mean baseline (overall and per item), held-out log-likelihood."""
    from .fit import expected_scores

    jparams = {k: jnp.asarray(v, dtype=jnp.float32) for k, v in params.items()}
    y = design.y.astype(np.float64)
    cells = np.asarray(mdl.cell_loglik(jparams, spec, design, jnp.asarray(design.y)), dtype=np.float64)
    loglik = float(np.where(train_mask, cells, 0.0).sum())
    predicted = expected_scores(params, spec, design)
    scale = max(design.max_score, 1)
    baseline = float(y[train_mask].mean())
    per_item = rmse_table(y / scale, train_mask, predicted / scale, baseline / scale)
    n_params = int(sum(np.size(v) for v in params.values()))
    n_obs = int(train_mask.sum())
    stats: dict[str, Any] = {
        "loglik": loglik,
        "n_observed": n_obs,
        "n_parameters": n_params,
        "aic": 2 * n_params - 2 * loglik,
        "bic": n_params * np.log(max(n_obs, 1)) - 2 * loglik,
        "rmse": float(np.sqrt(np.where(train_mask, (y - predicted) ** 2, 0.0).sum() / max(n_obs, 1)) / scale),
        "rmse_baseline": float(np.sqrt(np.where(train_mask, (y - baseline) ** 2, 0.0).sum() / max(n_obs, 1)) / scale),
        "item_rmse_mean": float(per_item["rmse"].mean()),
        "item_rmse_sd": float(per_item["rmse"].std()),
        "item_rmse_baseline_mean": float(per_item["rmse_baseline"].mean()),
        "item_rmse_baseline_sd": float(per_item["rmse_baseline"].std()),
        "item_rmse": dict(zip(design.items, per_item["rmse"].tolist())),
        "item_rmse_baseline": dict(zip(design.items, per_item["rmse_baseline"].tolist())),
        "baseline": baseline,
    }
    if test_mask is not None and test_mask.any():
        stats["heldout_cells"] = int(test_mask.sum())
        stats["heldout_loglik"] = float(np.where(test_mask, cells, 0.0).sum() / test_mask.sum())
        if spec.kind != "grm":
            stats["heldout_loglik_baseline"] = bernoulli_mean_loglik(y, test_mask, baseline)
            stats["heldout_rmse"] = float(np.sqrt(np.where(test_mask, (y - predicted) ** 2, 0.0).sum()
                                                  / test_mask.sum()))
            stats["heldout_rmse_baseline"] = float(np.sqrt(np.where(test_mask, (y - baseline) ** 2, 0.0).sum()
                                                           / test_mask.sum()))
    return stats
