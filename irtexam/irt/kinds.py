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

from dataclasses import dataclass, replace
from typing import Any, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from ..errors import IrtexamError
from . import fused
from .parameters import EXP, IDENTITY, SIGMOID, LogitBeta, Normal, Site, _xp


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

    def column(self) -> "ItemParams":
        """The items with a trailing examinee axis ((..., I, 1); thresholds (..., I, 1, K)), so they
        broadcast against abilities of shape (E,) into (I, E) cells."""
        return ItemParams(*(None if v is None else v[..., None, :] if k == "thresholds" else v[..., None]
                            for k, v in zip(self._fields, self)))

    def subset(self, index: Any) -> "ItemParams":
        """The items at ``index`` (integer array, slice or boolean mask)."""
        return ItemParams(*(None if v is None else v[..., index] if k != "thresholds" else v[..., index, :]
                            for k, v in zip(self._fields, self)))


def _sigmoid(xp: Any, z: Any) -> Any:
    """1 / (1 + exp(-z)) in z's precision; NumPy without scipy (its import costs a CLI command ~0.25 s):
    exp(-z) overflowing to inf gives the right limit 0."""
    if xp is np:
        with np.errstate(over="ignore"):
            return 1.0 / (1.0 + np.exp(-z))
    return jax.nn.sigmoid(z)


def from_table(items: pd.DataFrame, graded: bool | None = None) -> ItemParams:
    """Item parameters from a fit's items table (columns a, b, c or b_1..b_K).

    This is the one place that reads parameter columns: graded items are recognised by
    ``b_1`` columns (or ``graded=True``); a missing ``a`` means 1 (1PL), a missing ``c`` 0.
    """
    n = len(items)
    a = items["a"].to_numpy(dtype=float) if "a" in items else np.ones(n)
    threshold_columns = sorted((col for col in items.columns if col.startswith("b_") and col[2:].isdigit()),
                               key=lambda col: int(col[2:]))
    if graded or (graded is None and threshold_columns):
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
    if pairwise or xp.ndim(values) == 0:  # scalar item parameters: plain broadcasting
        return theta, values
    return theta.reshape(theta.shape + (1,)), values


def cumulative_probs(theta: Any, items: ItemParams, pairwise: bool = False) -> Any:
    """P(X >= k | theta) for k = 1..K: (T..., I, K) (binary: K = 1, P(X >= 1) = P(X = 1))."""
    xp = _xp(theta, *items)
    if items.graded:
        th, a = _outer(theta, items.a, xp, pairwise)
        return _sigmoid(xp, a[..., None] * (th[..., None] - items.thresholds))
    return prob_correct(theta, items, pairwise=pairwise)[..., None]


def prob_correct(theta: Any, items: Any, b: Any = None, c: Any = None, pairwise: bool = False) -> Any:
    """Binary items: P(X = 1 | theta) = c + (1 - c) sigmoid(a (theta - b)), shape (T..., I).

    ``items`` is an :class:`ItemParams`, or the discriminations ``a`` with ``b`` (and ``c``)
    given as arrays. ``pairwise=False`` (default): theta (T...) against items (I,) gives
    (T..., I); ``pairwise=True``: theta already broadcasts against the items. For graded items
    this is P(X >= 1), the probability of any credit. This is ``irtexam.prob_correct``.
    """
    if not isinstance(items, ItemParams):
        items = ItemParams(a=items, b=b, c=c)
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


def category_logprobs(theta: Any, items: ItemParams, pairwise: bool = False) -> Any:
    """log P(X = k | theta) for k = 0..K, shape (T..., I, K + 1).

    Binary items through :func:`cell_loglik` of 0 and 1 (no cancellation in log(1 - P)); graded
    items the log of :func:`category_probs`, floored at 1e-300.
    """
    xp = _xp(theta, *items)
    if items.graded:
        return xp.log(xp.maximum(category_probs(theta, items, pairwise), 1e-300))
    wrong = cell_loglik(xp.zeros(()), theta, items, pairwise=pairwise)
    right = cell_loglik(xp.ones(()), theta, items, pairwise=pairwise)
    return xp.stack([wrong, right], axis=-1)


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


# ----------------------------------------------------------------------------- kind objects
@dataclass(frozen=True)
class Kind:
    """A model kind: its item parameter sites, their reported values, starting values and likelihood.

    The response functions are this module's (:func:`prob_correct`, :func:`category_probs`,
    :func:`cell_loglik`, :func:`information`, :func:`simulate_responses`), one definition for every
    kind; a kind object says which parameters its items have (:meth:`item_sites`, declared once
    in :mod:`irtexam.irt.parameters`) and how they map to :class:`ItemParams`. Subclasses:
    :class:`BinaryKind` (1PL, 2PL, 3PL, 3PL with fixed guessing) and :class:`GradedKind` (GRM).
    Registered by name in :data:`REGISTRY` (the CLI's ``--model`` choices come from it).
    """

    name: str
    graded: bool = False
    has_discrimination: bool = True
    free_guessing: bool = False
    fixed_c: float = 0.0

    #: the reported per-item parameters of a fit's tables and draws
    reported_names: tuple[str, ...] = ("a", "b", "c")
    #: the unconstrained item parameter that every kind has (shape reference)
    location_key: str = "d"

    @property
    def logistic_regression(self) -> bool:
        """Binary with no lower asymptote (1PL, 2PL): given the abilities each item is a logistic regression, whose
        canonical link is what Firth's penalty corrects (``ModelSpec.bias_reduction``)."""
        return not self.graded and not self.free_guessing and self.fixed_c == 0.0

    def with_guessing(self, guessing: float | None) -> "Kind":
        """This kind with every item's lower asymptote fixed at ``guessing`` (None: unchanged)."""
        if guessing is None:
            return self
        raise IrtexamError("a fixed guessing parameter applies to binary models only")

    def max_score(self, responses: Any) -> int:
        """The highest score the kind models, after checking the responses suit it."""
        raise NotImplementedError

    def item_sites(self, spec: Any, max_score: int) -> tuple[Site, ...]:
        """The item parameter sites (prior, bijector, hyperparameter) of this kind under ``spec``'s priors."""
        raise NotImplementedError

    def item_params(self, u: Mapping[str, Any]) -> ItemParams:
        """Reported item parameters from unconstrained ones (NumPy or JAX, leading draw axes kept)."""
        raise NotImplementedError

    def initial_items(self, y: np.ndarray, mask: np.ndarray, max_score: int, c0: float) -> dict[str, np.ndarray]:
        """Data-driven starting values of the unconstrained item parameters (see the subclasses)."""
        raise NotImplementedError

    def unconstrained_items(self, items: ItemParams) -> dict[str, np.ndarray]:
        """The inverse of :meth:`item_params`: unconstrained values of reported items (NumPy)."""
        raise NotImplementedError

    def log_likelihood(self, u: Mapping[str, Any], theta: Any, y: Any, mask: Any) -> Any:
        """Total log-likelihood over observed cells of (n_items, n_examinees) ``y`` (JAX, differentiable)."""
        raise NotImplementedError

    def cell_loglik(self, u: Mapping[str, Any], theta: Any, y: Any) -> Any:
        """Per-cell log-likelihood (n_items, n_examinees), unmasked, of unconstrained items ``u``."""
        return cell_loglik(y, theta[..., None, :], self.item_params(u).column(), pairwise=True)

    def reported_from_table(self, items: pd.DataFrame) -> ItemParams:
        """Item parameters of this kind from a fit's items table (:func:`from_table`)."""
        return from_table(items, True if self.graded else None)


def _proportions(y: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Each item's mean observed score."""
    return (y * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1)


def _discrimination_site(spec: Any) -> Site:
    """log a ~ N(log_a_loc, log_a_scale^2); centred on the learned mu_a with ``spec.learn_a_centre`` (under the
    "fixed" item prior too: the slope centre is the only one learned there)."""
    learned = spec.learn_a_centre and spec.item_prior != "none"
    return Site("a", EXP, Normal(spec.log_a_loc, spec.log_a_scale), hyper="mu_a" if learned else None)


def _hyper(spec: Any, name: str) -> str | None:
    """The hyperparameter name that locates a site's prior, under ``item_prior="hierarchical"`` only."""
    return name if spec.item_prior == "hierarchical" else None


@dataclass(frozen=True)
class BinaryKind(Kind):
    """0/1 items: P(X = 1 | theta) = c + (1 - c) sigmoid(a theta + d), b = -d / a (slope-intercept form).

    Sites: log a ~ N(log_a_loc, log_a_scale^2) (not in the 1PL, a = 1), d ~ N(mu_d, b_scale^2),
    logit c with c ~ Beta(kappa m, kappa (1 - m)) (free guessing only; otherwise c = ``fixed_c``).
    """

    def with_guessing(self, guessing: float | None) -> "Kind":
        """This kind with c fixed at ``guessing`` for every item (the fixed-guessing 3PL, or a 1PL/2PL floor)."""
        if guessing is None:
            return self
        return replace(self, free_guessing=False, fixed_c=float(guessing))

    def max_score(self, responses: Any) -> int:
        """1, after checking the scores are 0/1."""
        if not responses.is_binary:
            raise IrtexamError(f"model '{self.name}' needs 0/1 responses but the scores go up to "
                               f"{responses.max_score}; use model='grm' for graded scores")
        return 1

    def item_sites(self, spec: Any, max_score: int) -> tuple[Site, ...]:
        """log a (unless 1PL), d, logit c (free guessing only)."""
        sites = [_discrimination_site(spec)] if self.has_discrimination else []
        sites.append(Site("d", IDENTITY, Normal(0.0, spec.b_scale), hyper=_hyper(spec, "mu_d")))
        if self.free_guessing:
            sites.append(Site("c", SIGMOID, LogitBeta(spec.c_concentration, 1.0 / spec.n_choices),
                              hyper=_hyper(spec, "mu_c") if spec.learn_c_centre else None))
        return tuple(sites)

    def item_params(self, u: Mapping[str, Any]) -> ItemParams:
        """a = exp(log a) (1PL: 1), b = -d / a, c = sigmoid(logit c) or the fixed c."""
        xp = _xp(*u.values())
        a = xp.exp(u["a"]) if "a" in u else xp.ones_like(u["d"])
        c = 1.0 / (1.0 + xp.exp(-u["c"])) if "c" in u else xp.full_like(u["d"], self.fixed_c)
        return ItemParams(a=a, b=-u["d"] / a, c=c)

    def initial_items(self, y: np.ndarray, mask: np.ndarray, max_score: int, c0: float) -> dict[str, np.ndarray]:
        """log a = 0; d = logit((p - c0) / (1 - c0)) from the proportion correct p (a = 1), clipped to +-3."""
        p = np.clip((_proportions(y, mask) - c0) / (1 - c0), 0.05, 0.95)
        return {"d": np.clip(np.log(p / (1 - p)), -3, 3)}

    def unconstrained_items(self, items: ItemParams) -> dict[str, np.ndarray]:
        """log a, d = -a b, logit c (c clamped to [1e-6, 1 - 1e-6]; every key, the model picks its own)."""
        a = np.asarray(items.a, dtype=float)
        c = np.zeros_like(a) if items.c is None else np.clip(np.asarray(items.c, dtype=float), 1e-6, 1 - 1e-6)
        return {"a": np.log(a), "d": -a * np.asarray(items.b, dtype=float), "c": np.log(c) - np.log1p(-c)}

    def slopes_and_floors(self, u: Mapping[str, Any]) -> tuple[Any, Any]:
        """(a, c) for the fused kernels (JAX): a = exp(log a) (1PL: ones), c = sigmoid(logit c) per item or the
        fixed c (a float) without free guessing."""
        a = jnp.exp(u["a"]) if "a" in u else jnp.ones_like(u["d"])
        c: Any = jax.nn.sigmoid(u["c"]) if "c" in u else self.fixed_c
        return a, c

    def log_likelihood(self, u: Mapping[str, Any], theta: Any, y: Any, mask: Any) -> Any:
        """The fused binary kernel :func:`irtexam.irt.fused.binary_loglik` (value and gradients in one pass)."""
        a, c = self.slopes_and_floors(u)
        return fused.binary_loglik(y, mask, theta, a, u["d"], c if "c" in u or c else None)

    def cell_loglik(self, u: Mapping[str, Any], theta: Any, y: Any) -> Any:
        """Per-cell log-likelihood; without free c the 2PL's exact r z - softplus(z)."""
        items = self.item_params(u)
        if "c" not in u and not self.fixed_c:
            items = items._replace(c=None)
        return cell_loglik(y, theta[..., None, :], items.column(), pairwise=True)


@dataclass(frozen=True)
class GradedKind(Kind):
    """Samejima's graded response model for scores 0..K: P(X >= k) = sigmoid(a (theta - b_k)).

    Sites: log a ~ N(log_a_loc, log_a_scale^2), b_1 ~ N(mu_b1, b_scale^2), and K - 1 log gaps
    ~ N(0, 1) with b_{k+1} = b_k + exp(gap_k), so the thresholds are ordered.
    """

    graded: bool = True
    reported_names: tuple[str, ...] = ("a", "thresholds")
    location_key: str = "b1"

    def max_score(self, responses: Any) -> int:
        """The highest observed score (at least 1)."""
        if responses.max_score < 1:
            raise IrtexamError("graded responses need at least two categories")
        return int(responses.max_score)

    def item_sites(self, spec: Any, max_score: int) -> tuple[Site, ...]:
        """log a, b_1, and the K - 1 log gaps between thresholds (one event per item)."""
        sites = [_discrimination_site(spec), Site("b1", IDENTITY, Normal(0.0, spec.b_scale), hyper=_hyper(spec, "mu_b1"))]
        if max_score > 1:
            sites.append(Site("gap", EXP, Normal(0.0, 1.0), event_size=max_score - 1))
        return tuple(sites)

    def item_params(self, u: Mapping[str, Any]) -> ItemParams:
        """a = exp(log a); thresholds b_1 + cumulative exp(gap); b = their mean."""
        xp = _xp(*u.values())
        thresholds = graded_thresholds(u, xp)
        return ItemParams(a=xp.exp(u["a"]), b=thresholds.mean(axis=-1), c=None, thresholds=thresholds)

    def initial_items(self, y: np.ndarray, mask: np.ndarray, max_score: int, c0: float) -> dict[str, np.ndarray]:
        """b_1 = -logit(mean score / K) - (K - 1) / 2 (mean score clipped to [0.05, 0.95]), gaps log 1 = 0."""
        p = np.clip(_proportions(y, mask) / max(max_score, 1), 0.05, 0.95)
        out = {"b1": -np.log(p / (1 - p)) - 0.5 * (max_score - 1)}
        if max_score > 1:
            out["gap"] = np.zeros((len(p), max_score - 1))
        return out

    def unconstrained_items(self, items: ItemParams) -> dict[str, np.ndarray]:
        """log a, b_1 and log gaps (gaps floored at 1e-6)."""
        thresholds = np.asarray(items.thresholds, dtype=float)
        return {"a": np.log(np.asarray(items.a, dtype=float)), "b1": thresholds[..., 0],
                "gap": np.log(np.maximum(np.diff(thresholds, axis=-1), 1e-6))}

    def log_likelihood(self, u: Mapping[str, Any], theta: Any, y: Any, mask: Any) -> Any:
        """Sum over observed cells of :meth:`cell_loglik`."""
        return jnp.sum(jnp.where(mask, self.cell_loglik(u, theta, y), 0.0))

    def cell_loglik(self, u: Mapping[str, Any], theta: Any, y: Any) -> Any:
        """log P(X = y) from :func:`irtexam.irt.fused.graded_category_logprobs` (log space)."""
        logp = fused.graded_category_logprobs(theta[None, :], jnp.exp(u["a"])[:, None], graded_thresholds(u, jnp))
        k = jnp.clip(y, 0, logp.shape[-1] - 1).astype(jnp.int32)
        return jnp.take_along_axis(logp, k[..., None], axis=-1)[..., 0]


def graded_thresholds(u: Mapping[str, Any], xp: Any = None) -> Any:
    """Ordered GRM thresholds b_1 < ... < b_K from unconstrained b_1 and log gaps: b_1 then cumulative exp(gap)."""
    xp = xp or _xp(*u.values())
    b1 = u["b1"][..., None]
    if "gap" not in u:
        return b1
    steps = xp.cumsum(xp.exp(u["gap"]), axis=-1)
    return xp.concatenate([b1, b1 + steps], axis=-1)


REGISTRY: dict[str, Kind] = {
    "1pl": BinaryKind("1pl", has_discrimination=False),
    "2pl": BinaryKind("2pl"),
    "3pl": BinaryKind("3pl", free_guessing=True),
    "grm": GradedKind("grm"),
}
KINDS = tuple(REGISTRY)


def register(kind: Kind) -> Kind:
    """Add a kind to :data:`REGISTRY` (its name becomes a ``model=`` / ``--model`` choice)."""
    REGISTRY[kind.name] = kind
    return kind


def check_kind(kind: str) -> str:
    """Lower-cased model kind, or a one-line error naming the allowed kinds."""
    value = str(kind).lower()
    if value not in REGISTRY:
        raise IrtexamError(f"unknown model '{kind}'; choose one of {', '.join(REGISTRY)}")
    return value


def get_kind(name: str, guessing: float | None = None) -> Kind:
    """The kind object of a model name (with every c fixed at ``guessing`` when given)."""
    return REGISTRY[check_kind(name)].with_guessing(guessing)
