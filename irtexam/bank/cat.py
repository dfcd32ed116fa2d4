"""The adaptive test's posterior engine, ability estimators and stopping rule.

Ability posterior (exact, on a grid): with prior theta ~ N(0, 1) (the fit's ability scale has mean 0 and
sd 1 across its examinees) and S joint posterior draws of the item parameters, the posterior after answers
y_1..y_n is

    p(theta, s | y) ∝ phi(theta) * prod_j P_j(y_j | theta, item_s),   s = 1..S,

on a grid of abilities, so the item-parameter uncertainty is integrated out (the marginal over s); the
per-answer factor is :func:`irtexam.irt.kinds.cell_loglik`. An :class:`Estimator` turns the marginal
posterior over the grid into the point estimate (``eap``: posterior mean; ``map``: posterior mode on the
grid); ``theta_sd`` is the posterior sd and the 90% interval its 5% and 95% quantiles, whatever the
estimator. A :class:`Stopper` ends the test (posterior sd <= ``se_target`` after ``min_items``, or
``max_items`` given). Item selection rules are in :mod:`.select`; :func:`irtexam.bank.adapt.run_cat`
composes the three, as catsim composes its ``Selector``, ``Estimator`` and ``Stopper``.

Predicted whole-exam accuracy (N bank items, administered set A):

    acc = (sum_{j in A} y_j + sum_{j not in A} X_j) / N,   X_j ~ Bernoulli(P_j(theta)),

whose predictive distribution mixes, over the posterior of (theta, s), the mean
m(theta, s) = (sum_A y_j + sum_{not A} P_j) / N and the binomial variance sum_{not A} P_j (1 - P_j) / N^2,
plus a misfit variance (:func:`irtexam.bank.adapt.misfit_curve`); the 90% interval is taken from draws of
that mixture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Protocol, runtime_checkable

import numpy as np

from ..errors import IrtexamError
from ..irt import kinds
from .itembank import ItemBank

LOW_Q, HIGH_Q = 0.05, 0.95


# ----------------------------------------------------------------------------- the posterior state
@dataclass
class CatState:
    """Posterior state on a (draw, grid) lattice; all arrays are NumPy.

    ``items``: the bank's (S, I) item-parameter draws, whose :func:`~irtexam.irt.kinds.cell_loglik` adds
    each answer to ``loglik``; ``p``: their P(correct) on the grid, for the predicted accuracy and the
    selection rules.
    """

    grid: np.ndarray                 # (Q,)
    log_prior: np.ndarray            # (Q,)
    p: np.ndarray                    # (S, Q, I) P(correct)
    loglik: np.ndarray               # (S, Q)
    items: kinds.ItemParams          # (S, I) item-parameter draws
    administered: list[int] = field(default_factory=list)
    responses: list[float] = field(default_factory=list)
    rest_total: np.ndarray | None = None   # (S, Q) sum of P over items not administered
    rest_noise: np.ndarray | None = None   # (S, Q) sum of P (1 - P) over items not administered

    def __post_init__(self) -> None:
        if self.rest_total is None:
            self.rest_total = self.p.sum(axis=-1)
            self.rest_noise = (self.p * (1.0 - self.p)).sum(axis=-1)

    def weights(self) -> np.ndarray:
        """Joint posterior weights over (draw, grid point), (S, Q), summing to 1."""
        logw = self.loglik + self.log_prior[None, :]
        w = np.exp(logw - logw.max())
        return w / w.sum()

    def marginal(self) -> np.ndarray:
        """Marginal posterior of theta over the grid, (Q,), summing to 1."""
        return self.weights().sum(axis=0)

    def update(self, j: int, y: float) -> None:
        """Add answer ``y`` (0/1) to item ``j``: loglik(s, q) += log P(y | grid_q, item_s) (kinds.cell_loglik)."""
        item = self.items.subset(np.array([j]))                                  # (S, 1)
        self.loglik += np.asarray(kinds.cell_loglik(np.asarray(float(y)), self.grid[None, :], item))
        pj = self.p[:, :, j]
        self.rest_total = self.rest_total - pj
        self.rest_noise = self.rest_noise - pj * (1.0 - pj)
        self.administered.append(j)
        self.responses.append(float(y))


def make_state(bank: ItemBank, grid: np.ndarray | None = None) -> CatState:
    """Initial state: P(correct) for every draw, grid point and item, flat likelihood, N(0, 1) prior."""
    grid = np.linspace(-5.0, 5.0, 161) if grid is None else np.asarray(grid, float)
    d = kinds.ItemParams(*(None if v is None else np.asarray(v, float) for v in bank.draws[:3]))  # binary items
    p = np.stack([np.asarray(kinds.prob_correct(grid, kinds.ItemParams(*(None if v is None else v[s] for v in d))))
                  for s in range(bank.n_draws)])
    return CatState(grid, -0.5 * grid ** 2, p, np.zeros((bank.n_draws, grid.size)), d)


# ----------------------------------------------------------------------------- estimators
@runtime_checkable
class Estimator(Protocol):
    """An ability estimator: the point estimate of theta from its marginal posterior on the grid."""

    name: str

    def point(self, grid: np.ndarray, marginal: np.ndarray) -> float:
        """The estimate from the grid (Q,) and the marginal posterior weights over it (Q,, sum 1)."""
        ...


@dataclass(frozen=True)
class EAP:
    """Expected a posteriori: theta_hat = sum_q w_q theta_q (the posterior mean)."""

    name: ClassVar[str] = "eap"

    def point(self, grid: np.ndarray, marginal: np.ndarray) -> float:
        """Posterior mean."""
        return float(marginal @ grid)


@dataclass(frozen=True)
class MAP:
    """Maximum a posteriori on the grid: theta_hat = theta_q with the largest w_q."""

    name: ClassVar[str] = "map"

    def point(self, grid: np.ndarray, marginal: np.ndarray) -> float:
        """Posterior mode on the grid."""
        return float(grid[int(np.argmax(marginal))])


ESTIMATOR_TYPES: dict[str, type] = {"eap": EAP, "map": MAP}
ESTIMATORS = tuple(ESTIMATOR_TYPES)

def resolve(rule: Any, registry: Mapping[str, type], what: str) -> Any:
    """The object for ``rule``: a registered name (a fresh default instance) or the object itself; a one-line
    error naming the choices for an unknown name."""
    if not isinstance(rule, str):
        return rule
    if rule not in registry:
        raise IrtexamError(f"unknown {what} '{rule}'; choose one of {', '.join(registry)}")
    return registry[rule]()


def rule_key(rule: Any, registry: Mapping[str, type]) -> Any:
    """Cache key of a rule: its name when it is the registered default (so a name and its default object
    share cached results), else the object itself (or its id when it is not hashable)."""
    name = getattr(rule, "name", None)
    if isinstance(name, str) and name in registry and registry[name]() == rule:
        return name
    try:
        hash(rule)
    except TypeError:
        return ("object", id(rule))
    return rule


def rule_name(rule: Any) -> str:
    """A rule's name for the summary: its ``name`` or its class name."""
    return str(getattr(rule, "name", type(rule).__name__))


def get_estimator(estimator: str | Estimator) -> Estimator:
    """The :class:`Estimator` for a name in :data:`ESTIMATORS` (or the object itself)."""
    return resolve(estimator, ESTIMATOR_TYPES, "estimator")


def ability(state: CatState, estimator: str | Estimator = "eap") -> dict[str, float]:
    """theta (the estimator's point), theta_sd (posterior sd), theta_low/high (90% posterior quantiles)."""
    marginal = state.marginal()
    mean = float(marginal @ state.grid)
    sd = float(np.sqrt(max(marginal @ (state.grid - mean) ** 2, 0.0)))
    cdf = np.cumsum(marginal)
    low, high = (float(np.interp(q, cdf, state.grid)) for q in (LOW_Q, HIGH_Q))
    theta = get_estimator(estimator).point(state.grid, marginal)
    return {"theta": theta, "theta_sd": sd, "theta_low": low, "theta_high": high}


def predicted_accuracy(state: CatState, n_samples: int = 4000, seed: int = 0, misfit_var: float = 0.0
                       ) -> dict[str, float]:
    """Predicted whole-exam accuracy (module doc): mean, sd and 90% predictive interval.

    ``misfit_var``: variance of the model-misfit error added to the predictive distribution (normal,
    independent of the rest); :func:`irtexam.bank.adapt.misfit_curve` estimates it from the calibration
    examinees.
    """
    w = state.weights().ravel()
    n_items = state.p.shape[-1]
    mean_cell = (sum(state.responses) + state.rest_total).ravel() / n_items
    var_cell = np.maximum(state.rest_noise.ravel(), 0.0) / n_items ** 2 + max(float(misfit_var), 0.0)
    mean = float(w @ mean_cell)
    sd = float(np.sqrt(max(w @ (var_cell + mean_cell ** 2) - mean ** 2, 0.0)))
    rng = np.random.default_rng(seed)
    pick = rng.choice(w.size, size=n_samples, p=w / w.sum())
    sample = np.clip(mean_cell[pick] + np.sqrt(var_cell[pick]) * rng.standard_normal(n_samples), 0.0, 1.0)
    low, high = np.quantile(sample, [LOW_Q, HIGH_Q])
    return {"accuracy": mean, "accuracy_sd": sd, "accuracy_low": float(low), "accuracy_high": float(high)}


# ----------------------------------------------------------------------------- stopping
@runtime_checkable
class StopRule(Protocol):
    """A stopping rule: ``max_items`` (the most items given; the selection rules plan their strata by it)
    and ``stop``, the reason to stop before the next item or None to go on."""

    max_items: int

    def stop(self, state: CatState, current: Mapping[str, float]) -> str | None:
        """Reason to stop now (given the state and the current :func:`ability`), or None."""
        ...


@dataclass(frozen=True)
class Stopper:
    """Stop at ``max_items`` items, or once the posterior sd <= ``se_target`` with at least
    max(``min_items``, 1) items given (the test also stops when no item is left)."""

    se_target: float = 0.3
    max_items: int = 30
    min_items: int = 5

    def check(self) -> None:
        """One-line errors for impossible settings."""
        if not (self.se_target > 0) or not math.isfinite(self.se_target):
            raise IrtexamError(f"--se-target must be a positive standard error (e.g. 0.3), got {self.se_target}")
        if self.max_items < 1 or self.min_items < 0 or self.min_items > self.max_items:
            raise IrtexamError(f"need 0 <= --min-items <= --max-items and --max-items >= 1, got min "
                               f"{self.min_items}, max {self.max_items}")

    def stop(self, state: CatState, current: Mapping[str, float]) -> str | None:
        """``"max_items"``, ``"se_target"`` or None."""
        n = len(state.administered)
        if n >= self.max_items:
            return "max_items"
        if n >= max(self.min_items, 1) and current["theta_sd"] <= self.se_target:
            return "se_target"
        return None
