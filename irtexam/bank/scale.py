"""The linear map between two ability scales and the separate-calibration linking constants.

Two fits identify their ability scales separately; the linear map

    theta_old = A theta_new + B,   so   a_old = a_new / A,   b_old = A b_new + B,   c_old = c_new,

puts new-scale item parameters on the old scale (:func:`transform_items`, :func:`transformed_table`).

Separate calibration + transformation (anchors j = 1..J, new parameters transformed by (A, B)):

* mean-mean:    A = mean(a_new) / mean(a_old),  B = mean(b_old) - A mean(b_new);
* mean-sigma:   A = sd(b_old) / sd(b_new),       B = mean(b_old) - A mean(b_new);
* Haebara:      (A, B) = argmin sum_q w_q sum_j [P_j(x_q; old) - P_j(x_q; new -> A, B)]^2;
* Stocking-Lord:(A, B) = argmin sum_q w_q [sum_j P_j(x_q; old) - sum_j P_j(x_q; new -> A, B)]^2,

with x_q a grid on the old scale and w_q its N(0, 1) weights.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import optimize, stats

from ..irt import kinds

SEPARATE = ("mean-mean", "mean-sigma", "haebara", "stocking-lord")
_GRID = np.linspace(-4.0, 4.0, 41)
_WEIGHTS = stats.norm.pdf(_GRID) / stats.norm.pdf(_GRID).sum()


def transform_items(items: kinds.ItemParams, A: float, B: float) -> kinds.ItemParams:
    """New-scale item parameters on the old scale: a / A, A b + B, c unchanged."""
    return kinds.ItemParams(a=np.asarray(items.a) / A, b=A * np.asarray(items.b) + B, c=items.c)


def _moments(new: kinds.ItemParams, old: kinds.ItemParams, method: str) -> tuple[float, float]:
    """(A, B) of mean-mean or mean-sigma (module doc)."""
    b_new, b_old = np.asarray(new.b), np.asarray(old.b)
    if method == "mean-mean":
        A = float(np.mean(new.a) / np.mean(old.a))
    else:
        A = float(np.std(b_old) / max(np.std(b_new), 1e-12))
    return A, float(np.mean(b_old) - A * np.mean(b_new))


def _characteristic(new: kinds.ItemParams, old: kinds.ItemParams, method: str, start: tuple[float, float]
                    ) -> tuple[float, float]:
    """(A, B) of Haebara or Stocking-Lord (module doc): Nelder-Mead over (log A, B) from ``start``."""
    p_old = np.asarray(kinds.prob_correct(_GRID, old))                         # (Q, J)

    def loss(x: np.ndarray) -> float:
        A, B = np.exp(x[0]), x[1]
        p_new = np.asarray(kinds.prob_correct(_GRID, transform_items(new, A, B)))
        if method == "haebara":
            return float(_WEIGHTS @ ((p_old - p_new) ** 2).sum(axis=1))
        return float(_WEIGHTS @ (p_old.sum(axis=1) - p_new.sum(axis=1)) ** 2)

    x0 = np.array([np.log(max(start[0], 0.05)), start[1]])
    res = optimize.minimize(loss, x0, method="Nelder-Mead", options={"xatol": 1e-5, "fatol": 1e-10, "maxiter": 800})
    return float(np.exp(res.x[0])), float(res.x[1])


def linking_constants(new: kinds.ItemParams, old: kinds.ItemParams, method: str) -> tuple[float, float]:
    """(A, B) of one separate-calibration method from the anchors' new and old parameters (module doc)."""
    if method in ("mean-mean", "mean-sigma"):
        return _moments(new, old, method)
    start = _moments(new, old, "mean-sigma")
    if not (np.isfinite(start[0]) and start[0] > 0):
        start = (1.0, 0.0)
    return _characteristic(new, old, method, start)


def implied_link(new_items: kinds.ItemParams, linked_items: kinds.ItemParams) -> tuple[float, float]:
    """(A, B) implied by a calibration on the old scale: Stocking-Lord of NEWFIT's own estimates of the same
    items onto them (both fitted to the same responses, so only the scale differs)."""
    return linking_constants(new_items, linked_items, "stocking-lord")


def transformed_table(items: pd.DataFrame, A: float, B: float) -> pd.DataFrame:
    """An items.csv table mapped to the old scale: a columns / A; b (and b_k) columns A x + B; c and sds kept
    consistent (a_sd / A, b_sd * A)."""
    out = items.copy()
    for col in out.columns:
        base = col[:-3] if col.endswith("_sd") else col.rsplit("_", 1)[0] if col.endswith(("_low", "_high")) else col
        if base == "a":
            out[col] = items[col] / A
        elif base == "b" or (base.startswith("b_") and base[2:].isdigit()):
            out[col] = items[col] * A if col.endswith("_sd") else A * items[col] + B
    return out
