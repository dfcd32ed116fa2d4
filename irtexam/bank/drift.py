"""Anchor drift between two calibrations linked by (A, B).

Drift: each anchor's item characteristic curve on the old scale (new parameters mapped by
(A, B)) against its old one, through two moments over the pooled ability distribution of both
groups on the old scale (old group N(0, 1), new group N(B, A^2), weighted by group size): the
mean of P(correct) (the item's expected score; ``score_diff`` in drift.csv is new - old) and
the covariance of P with standardised ability (the curve's slope over the population). The
2 x 2 covariance of the difference is the sum of both fits' posterior covariances (from their
draws) plus, when the link's sds are given, the delta-method effect of (A, B) on the new curves;
the statistic d' V^-1 d is flagged above the 99% quantile of chi^2(2) (9.21). Curves,
not (a, b): in the 3PL, a and b trade off with c, so their marginal sds are wide where the
curve itself is well determined (experiments/link_simulated.py, b + 1 on 500 examinees a group:
88-96% of the drifting anchors flagged at 0.5-1.3% false flags, against about half with the
parameter statistic below). Given items tables without draws, the statistic falls back to
z_a^2 + z_b^2 with z_b = (A b_new + B - b_old) / sqrt((A sd_b_new)^2 + sd_b_old^2) and
z_a = (log(a_new / A) - log a_old) / sqrt((sd_a_new / a_new)^2 + (sd_a_old / a_old)^2) (both
columns are always reported); ``test`` in drift.csv says which.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from ..irt import kinds
from .scale import transform_items

DRIFT_CRITICAL = float(stats.chi2.ppf(0.99, 2))
_DRIFT_GRID = np.linspace(-6.0, 6.0, 61)


def _fit_parts(fit: Any) -> tuple[pd.DataFrame, Any]:
    """(items table, fit or None): drift_table takes FitResults (draws available) or bare items tables."""
    if isinstance(fit, pd.DataFrame):
        return fit, None
    return fit.items, (fit if getattr(fit, "samples", None) is not None else None)


def _drift_weights(A: float, B: float, n_old: float, n_new: float) -> tuple[np.ndarray, np.ndarray]:
    """Weights of the pooled ability distribution on the old scale (old group N(0, 1), new group
    N(B, A^2), by group size) on the drift grid, and the grid standardised under them."""
    w_old = stats.norm.pdf(_DRIFT_GRID)
    w_new = stats.norm.pdf(_DRIFT_GRID, B, max(A, 1e-6))
    w = n_old * w_old / w_old.sum() + n_new * w_new / w_new.sum()
    w = w / w.sum()
    mean = float(w @ _DRIFT_GRID)
    z = (_DRIFT_GRID - mean) / np.sqrt(float(w @ (_DRIFT_GRID - mean) ** 2))
    return w, z


def _icc_moments(items: kinds.ItemParams, w: np.ndarray, z: np.ndarray) -> np.ndarray:
    """(..., J) binary item parameters -> (..., J, 2): the item's mean P(correct) over the pooled ability
    distribution and the covariance of P with standardised ability (its slope over the population)."""
    cells = kinds.ItemParams(*(np.asarray(v)[..., None] for v in items[:3]))
    p = kinds.prob_correct(_DRIFT_GRID, cells, pairwise=True)                               # (..., J, Q)
    return np.stack([p @ w, p @ (w * z)], axis=-1)


def _draw_moments(fit: Any, anchors: Sequence[str], A: float, B: float, w: np.ndarray, z: np.ndarray,
                  n_draws: int, seed: int) -> np.ndarray:
    """(S, J, 2) ICC moments of the anchors over the fit's posterior draws, mapped by (A, B) (old fit: 1, 0)."""
    ids = list(map(str, fit.items.index))
    pos = np.array([ids.index(x) for x in anchors])
    d = fit.item_draws(n_draws, seed).values
    a, b = np.asarray(d["a"], float)[:, pos], np.asarray(d["b"], float)[:, pos]
    c = np.asarray(d["c"], float)[:, pos] if "c" in d else np.zeros_like(a)
    return _icc_moments(transform_items(kinds.ItemParams(a, b, c), A, B), w, z)


def _anchor_items(table: pd.DataFrame) -> kinds.ItemParams:
    """The (a, b, c) columns of an items table's anchor rows (c = 0 when the table has none)."""
    c = table["c"].to_numpy(float) if "c" in table else np.zeros(len(table))
    return kinds.ItemParams(table["a"].to_numpy(float), table["b"].to_numpy(float), c)


def _moment_covariance(m: np.ndarray) -> np.ndarray:
    """(S, J, 2) draws -> (J, 2, 2) covariance per anchor, over the draws finite for that anchor."""
    out = np.full((m.shape[1], 2, 2), np.nan)
    for j in range(m.shape[1]):
        ok = np.isfinite(m[:, j]).all(axis=1)
        if ok.sum() > 2:
            out[j] = np.cov(m[ok, j].T)
    return out


def drift_table(new: Any, old: Any, anchors: Sequence[str], A: float, B: float, n_draws: int = 200,
                seed: int = 0, link_sd: tuple[float, float] | None = None) -> pd.DataFrame:
    """Anchor drift (module doc): one row per anchor with old and new-on-old-scale a, b (c), z_a, z_b, score_diff,
    the drift statistic and its flag.

    ``new`` and ``old`` are FitResults (the statistic compares the anchors' item characteristic curves, with
    the covariance from both fits' posterior draws) or bare items tables (no draws: the marginal
    z_a^2 + z_b^2 of the parameters, weaker, see the module doc). ``link_sd``: sds of (A, B) (the link's
    ``A_sd``, ``B_sd``), whose effect on the mapped curves is added to the covariance.
    """
    new_table, new_fit = _fit_parts(new)
    old_table, old_fit = _fit_parts(old)
    anchors = list(anchors)
    new_t = new_table.loc[anchors]
    old_t = old_table.loc[anchors]
    raw_new, old_items = _anchor_items(new_t), _anchor_items(old_t)
    new_items = transform_items(raw_new, A, B)                                       # on the old scale
    a_new, b_new = new_items.a, new_items.b
    a_old, b_old = old_items.a, old_items.b

    def sd(table: pd.DataFrame, col: str) -> np.ndarray:
        return table[col].to_numpy(float) if col in table else np.zeros(len(table))

    sd_b = np.sqrt((A * sd(new_t, "b_sd")) ** 2 + sd(old_t, "b_sd") ** 2)
    sd_la = np.sqrt((sd(new_t, "a_sd") / raw_new.a) ** 2 + (sd(old_t, "a_sd") / a_old) ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        z_b = np.where(sd_b > 0, (b_new - b_old) / sd_b, 0.0)
        z_a = np.where(sd_la > 1e-9, (np.log(a_new) - np.log(a_old)) / sd_la, 0.0)
    frame = pd.DataFrame({"item": anchors, "a_old": a_old, "a_new": a_new, "b_old": b_old, "b_new": b_new})
    if "c" in new_t and "c" in old_t:
        frame["c_old"], frame["c_new"] = old_t["c"].to_numpy(float), new_t["c"].to_numpy(float)
    frame["z_a"], frame["z_b"] = z_a, z_b
    if new_fit is not None and old_fit is not None:
        w, z = _drift_weights(A, B, old_fit.design.n_examinees, new_fit.design.n_examinees)
        base = _icc_moments(new_items, w, z)
        diff = base - _icc_moments(old_items, w, z)                                                   # (J, 2)
        cov = (_moment_covariance(_draw_moments(new_fit, anchors, A, B, w, z, n_draws, seed))
               + _moment_covariance(_draw_moments(old_fit, anchors, 1.0, 0.0, w, z, n_draws, seed + 1)))
        if link_sd is not None and np.all(np.isfinite(link_sd)):
            # delta method: the new curves move with (A, B); sd_A, sd_B taken as independent
            h = 1e-4
            grad_A = (_icc_moments(transform_items(raw_new, A + h, B), w, z) - base) / h              # (J, 2)
            grad_B = (_icc_moments(new_items._replace(b=new_items.b + h), w, z) - base) / h
            cov = cov + (link_sd[0] ** 2 * grad_A[:, :, None] * grad_A[:, None, :]
                         + link_sd[1] ** 2 * grad_B[:, :, None] * grad_B[:, None, :])
        statistic = np.full(len(anchors), np.nan)
        for j in range(len(anchors)):
            if np.isfinite(cov[j]).all() and np.linalg.det(cov[j]) > 0:
                statistic[j] = float(diff[j] @ np.linalg.solve(cov[j], diff[j]))
        frame["score_diff"] = diff[:, 0]
        frame["score_diff_sd"] = np.sqrt(cov[:, 0, 0])
        frame["test"] = "icc"
    else:
        statistic = z_a ** 2 + z_b ** 2
        frame["test"] = "parameters"
    frame["drift"] = statistic
    frame["flag"] = statistic > DRIFT_CRITICAL
    return frame
