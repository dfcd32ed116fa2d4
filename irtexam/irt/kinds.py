"""One home for the item response functions of every model kind.

Everything that turns item parameters and abilities into probabilities lives here:
category probabilities, expected score, per-cell log-likelihood, Fisher information
and simulation, for binary items (1PL, 2PL, 3PL, 3PL with a fixed guessing
parameter) and Samejima's graded response model (GRM). The functions work on the
*reported* (constrained) parameters, bundled in :class:`ItemParams`:

* binary: P(X = 1 | theta) = c + (1 - c) sigmoid(a (theta - b))
  (2PL: c = 0; 1PL: a = 1; fixed guessing: c = the fixed value for every item);
* graded (scores 0..K): P(X >= k | theta) = sigmoid(a (theta - b_k)), k = 1..K,
  b_1 < ... < b_K, and P(X = k) = P(X >= k) - P(X >= k + 1).

They are written once for NumPy and JAX (``xp`` is picked from the inputs: any JAX
array or tracer gives JAX, so the functions can be jit-compiled, vmapped over
posterior draws and differentiated; plain NumPy avoids compilation for one-off
evaluations). Broadcasting convention: ``theta`` of shape (T...) against items of
shape (I,) gives outputs of shape (T..., I) (and (T..., I, K + 1) for category
probabilities); with ``pairwise=True`` theta must already broadcast against the
items (e.g. (I, E) cells).

The unconstrained parameterisation used by the estimators (log a, d = -a b, logit c,
log gaps), the priors and the ability scale live in :mod:`irtexam.irt.model`; the
fast fused likelihood and the alternating solver in :mod:`irtexam.irt.likelihood`
and :mod:`irtexam.irt.alternating` are tested against :func:`cell_loglik`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from ..errors import IrtexamError

KINDS = ("1pl", "2pl", "3pl", "grm")


class ItemParams(NamedTuple):
    """Reported item parameters (arrays over items).

    ``a``: discrimination (I,); ``b``: difficulty (I,) (GRM: mean threshold);
    ``c``: lower asymptote (I,) (zeros for 1PL/2PL, the fixed value for fixed guessing;
    None for the GRM); ``thresholds``: (I, K) ordered GRM thresholds (None for binary items).
    """

    a: Any
    b: Any
    c: Any = None
    thresholds: Any = None

    @property
    def graded(self) -> bool:
        """True for graded-response items."""
        return self.thresholds is not None

    @property
    def n_categories(self) -> int:
        """Number of response categories (2 for binary items)."""
        return 2 if self.thresholds is None else int(np.shape(self.thresholds)[-1]) + 1

    def subset(self, index: Any) -> "ItemParams":
        """The items at ``index`` (integer array, slice or boolean mask)."""
        return ItemParams(*(None if v is None else v[..., index] if k != "thresholds" else v[..., index, :]
                            for k, v in zip(self._fields, self)))


def _xp(*arrays: Any) -> Any:
    """jax.numpy when any input is a JAX array (or tracer), else NumPy."""
    return jnp if any(isinstance(x, jax.Array) for x in arrays if x is not None) else np


def _sigmoid(xp: Any, z: Any) -> Any:
    """1 / (1 + exp(-z)) in z's precision; NumPy without scipy (its import costs a CLI command ~0.25 s):
    exp(-z) overflowing to inf gives the right limit 0."""
    if xp is np:
        with np.errstate(over="ignore"):
            return 1.0 / (1.0 + np.exp(-z))
    return jax.nn.sigmoid(z)


def from_table(items: pd.DataFrame, kind: str | None = None) -> ItemParams:
    """Item parameters from a fit's items table (columns a, b, c or b_1..b_K).

    This is the one place that reads parameter columns: the GRM is recognised by
    ``b_1`` columns (or ``kind="grm"``); a missing ``a`` means 1 (1PL), a missing ``c`` 0.
    """
    n = len(items)
    a = items["a"].to_numpy(dtype=float) if "a" in items else np.ones(n)
    threshold_columns = sorted((col for col in items.columns if col.startswith("b_") and col[2:].isdigit()),
                               key=lambda col: int(col[2:]))
    if kind == "grm" or (kind is None and threshold_columns):
        if not threshold_columns:
            raise IrtexamError("graded items need threshold columns b_1..b_K in the items table")
        thresholds = items[threshold_columns].to_numpy(dtype=float)
        return ItemParams(a=a, b=thresholds.mean(axis=1), c=None, thresholds=thresholds)
    if "b" not in items:
        raise IrtexamError(f"the items table has no difficulty column 'b' (columns: {list(items.columns)})")
    c = items["c"].to_numpy(dtype=float) if "c" in items else np.zeros(n)
    return ItemParams(a=a, b=items["b"].to_numpy(dtype=float), c=np.nan_to_num(c))


def _outer(theta: Any, values: Any, xp: Any, pairwise: bool) -> tuple[Any, Any]:
    """theta (T...) against (I,) item values -> broadcastable pair of shape (T..., I)."""
    theta = xp.asarray(theta) * 1.0
    if pairwise:
        return theta, values
    return theta.reshape(theta.shape + (1,)), values


def cumulative_probs(theta: Any, items: ItemParams, pairwise: bool = False) -> Any:
    """P(X >= k | theta) for k = 1..K: (T..., I, K) (binary: K = 1, P(X >= 1) = P(X = 1))."""
    xp = _xp(theta, *items)
    if items.graded:
        th, a = _outer(theta, items.a, xp, pairwise)
        return _sigmoid(xp, a[..., None] * (th[..., None] - items.thresholds))
    return prob_correct(theta, items, pairwise)[..., None]


def prob_correct(theta: Any, items: ItemParams, pairwise: bool = False) -> Any:
    """Binary items: P(X = 1 | theta) = c + (1 - c) sigmoid(a (theta - b)), shape (T..., I).

    For graded items this is P(X >= 1), the probability of any credit.
    """
    xp = _xp(theta, *items)
    if items.graded:
        return cumulative_probs(theta, items, pairwise)[..., 0]
    th, a = _outer(theta, items.a, xp, pairwise)
    c = 0.0 if items.c is None else items.c
    return c + (1.0 - c) * _sigmoid(xp, a * (th - items.b))


def category_probs(theta: Any, items: ItemParams, pairwise: bool = False) -> Any:
    """P(X = k | theta) for k = 0..K, shape (T..., I, K + 1); binary items give (1 - P, P)."""
    xp = _xp(theta, *items)
    star = cumulative_probs(theta, items, pairwise)
    ones = xp.ones(star.shape[:-1] + (1,))
    zeros = xp.zeros(star.shape[:-1] + (1,))
    upper = xp.concatenate([ones, star], axis=-1)
    lower = xp.concatenate([star, zeros], axis=-1)
    return xp.maximum(upper - lower, 0.0)


def expected_score(theta: Any, items: ItemParams, pairwise: bool = False) -> Any:
    """E[X | theta] = sum_k P(X >= k) (binary: P(X = 1)), shape (T..., I)."""
    return cumulative_probs(theta, items, pairwise).sum(axis=-1)


def cell_loglik(y: Any, theta: Any, items: ItemParams, pairwise: bool = True) -> Any:
    """log P(X = y | theta) per cell, y an integer score (missing cells must be masked by the caller).

    Default ``pairwise=True``: theta and y are (I, E) or broadcast to it.
    """
    xp = _xp(y, theta, *items)
    if not items.graded:
        return _binary_cell_loglik(xp, xp.asarray(y), *_outer(theta, items.a, xp, pairwise), items)
    probs = category_probs(theta, items, pairwise)
    k = xp.clip(xp.asarray(y), 0, items.n_categories - 1).astype(np.int32)
    chosen = xp.take_along_axis(probs, k[..., None], axis=-1)[..., 0]
    return xp.log(xp.maximum(chosen, 1e-30))


def _binary_cell_loglik(xp: Any, y: Any, theta: Any, a: Any, items: ItemParams) -> Any:
    """log P(y | theta) of binary cells without cancellation, in the inputs' precision.

    With z = a (theta - b), r = 1 for a right answer (y > 0.5) else 0, and t = sigmoid((2r - 1) z):
    log P(1) = log(c + (1 - c) sigmoid(z)) and log P(0) = log((1 - c) sigmoid(-z)), i.e.
    log((1 - c) t + c r), floored at 1e-30; without c (``items.c`` None) r z - softplus(z), exact.
    Computing 1 - P as 1 - (c + (1 - c) s) instead loses every digit once s rounds to 1 (z > 17
    in float32, z > 37 in float64: -69 instead of about -z). Arithmetic with r instead of a
    select: NumPy's ``where`` costs as much as the rest together.
    """
    z = a * (theta - items.b)
    right = (y > 0.5).astype(z.dtype)
    if items.c is None:
        return right * z - (np.logaddexp(z, 0.0) if xp is np else jax.nn.softplus(z))
    t = _sigmoid(xp, (2.0 * right - 1.0) * z)
    return xp.log(xp.maximum((1.0 - items.c) * t + items.c * right, 1e-30))


def information(theta: Any, items: ItemParams, pairwise: bool = False) -> Any:
    """Fisher information about theta of each item, shape (T..., I).

    Binary (3PL): I(theta) = a^2 ((P - c)/(1 - c))^2 (1 - P)/P, computed stably as
    a^2 s^2 (1 - c)(1 - s) / (c + (1 - c) s) with s = sigmoid(a (theta - b))
    (c = 0: the 2PL's a^2 P (1 - P)).
    Graded: with P*_k = P(X >= k) (P*_0 = 1, P*_{K+1} = 0) and P_k = P*_k - P*_{k+1},
    I(theta) = sum_k (dP_k/dtheta)^2 / P_k = a^2 sum_k (P*_k (1 - P*_k) - P*_{k+1} (1 - P*_{k+1}))^2 / P_k.
    """
    xp = _xp(theta, *items)
    th, a = _outer(theta, items.a, xp, pairwise)
    if not items.graded:
        c = 0.0 if items.c is None else items.c
        s = _sigmoid(xp, a * (th - items.b))
        p = c + (1.0 - c) * s
        return a ** 2 * s ** 2 * (1.0 - c) * (1.0 - s) / xp.maximum(p, 1e-30)
    star = _sigmoid(xp, a[..., None] * (th[..., None] - items.thresholds))
    ones = xp.ones(star.shape[:-1] + (1,))
    zeros = xp.zeros(star.shape[:-1] + (1,))
    upper = xp.concatenate([ones, star], axis=-1)
    lower = xp.concatenate([star, zeros], axis=-1)
    prob = xp.maximum(upper - lower, 1e-30)
    slope = upper * (1.0 - upper) - lower * (1.0 - lower)
    return (a ** 2) * (slope ** 2 / prob).sum(axis=-1)


def simulate_responses(theta: Any, items: ItemParams, rng: np.random.Generator, pairwise: bool = False) -> np.ndarray:
    """Draw scores X ~ P(X = k | theta) per cell (NumPy), shape (T..., I).

    Inverse-CDF draw: X = #{k : U < P(X >= k)} with one uniform U per cell.
    """
    star = np.asarray(cumulative_probs(np.asarray(theta), ItemParams(*(None if v is None else np.asarray(v)
                                                                         for v in items)), pairwise))
    u = rng.uniform(size=star.shape[:-1] + (1,))
    return (u < star).sum(axis=-1).astype(float)


def check_kind(kind: str) -> str:
    """Lower-cased model kind, or a one-line error naming the allowed kinds."""
    value = str(kind).lower()
    if value not in KINDS:
        raise IrtexamError(f"unknown model '{kind}'; choose one of {', '.join(KINDS)}")
    return value
