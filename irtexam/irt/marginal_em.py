"""The marginal estimator's driver: compiled kernels, the EM loop, the Newton polish and the information.

The maths (the model at the quadrature nodes, the E- and M-steps, the marginal log posterior) is in
:mod:`irtexam.irt.marginal`; this module runs it (:func:`em_estimate`) and returns a
:class:`MarginalResult`. :mod:`irtexam.irt.marginal_fit` turns that into a :class:`FitResult`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import IrtexamError
from . import model as mdl
from .marginal import (N_NODES, Groups, Layout, _e_step, _m_step_items, block_hessians, from_matrix, item_columns,
                       item_log_prior, louis_hessian, make_groups, marginal_log_posterior, population_moments,
                       quadrature, score_cross_product, to_matrix, update_hyper)

# The exact Hessian by Louis' identity (:func:`irtexam.irt.marginal.louis_hessian`) costs about
# nodes x ((K + 1) items)^2 x examinees operations and nodes x ((K + 1) items)^2 numbers of memory; below these
# budgets it is the information, above them the score cross-product, consistent but too wide where examinees
# are few for the parameters (standard errors 1.3x the observed information's at 150 items x 800: coverage of
# a 0.95-0.97 against 0.87-0.91; they agree at 3000 and more)
EXACT_HESSIAN_BUDGET = 2e11
EXACT_HESSIAN_MEMORY = 6e7


# ----------------------------------------------------------------------------- compiled kernels
@lru_cache(maxsize=16)
def kernels(columns: tuple, spec: mdl.ModelSpec, layout: Layout) -> dict[str, Callable]:
    """The jit-compiled steps for one model and layout (cached: a refit of the same shape traces nothing)."""
    target = partial(marginal_log_posterior, layout=layout, columns=columns, spec=spec)
    return {"e_step": jax.jit(partial(_e_step, columns=columns, spec=spec)),
            "m_step": jax.jit(partial(_m_step_items, columns=columns, spec=spec)),
            "hyper_step": jax.jit(partial(update_hyper, columns=columns, spec=spec)),
            "moments": jax.jit(population_moments, static_argnums=(2,)),
            "objective": jax.jit(target), "gradient": jax.jit(jax.grad(target)),
            "hessian": jax.jit(partial(louis_hessian, layout=layout, columns=columns, spec=spec)),
            "crossprod": jax.jit(partial(score_cross_product, layout=layout, columns=columns, spec=spec)),
            "prior_blocks": jax.jit(lambda X, hyper: block_hessians(
                partial(item_log_prior, columns=columns, spec=spec, hyper=hyper), X)[1])}


# ----------------------------------------------------------------------------- driver
@dataclass
class MarginalResult:
    """What :func:`em_estimate` found: parameters, posterior over the nodes, information, diagnostics."""

    X: np.ndarray                   # (I, p) unconstrained item parameters
    columns: tuple[str, ...]
    mean: np.ndarray                # (G,) group means
    log_sd: np.ndarray              # (G,) group log sds
    hyper: dict[str, float]
    groups: Groups
    layout: Layout
    nodes: np.ndarray
    weights: np.ndarray             # (E, Q) posterior over the nodes at the estimate
    loglik: float                   # marginal log-likelihood (no prior)
    log_posterior: float
    covariance: np.ndarray | None   # (P, P) of the free parameters (Layout order), None without se
    information: str | None         # "observed" (exact Hessian) or "crossprod" (empirical)
    info: dict[str, Any] = field(default_factory=dict)

    def item_dict(self) -> dict[str, np.ndarray]:
        """Unconstrained item parameters keyed as the joint estimator keys them."""
        return {k: np.asarray(v, dtype=np.float64) for k, v in from_matrix(self.X, self.columns).items()}


def one_hot_responses(y: np.ndarray, mask: np.ndarray, n_categories: int, dtype: Any = np.float64) -> np.ndarray:
    """[y_im = k] on observed cells, (K + 1, I, E)."""
    scores = np.where(mask, np.rint(y).astype(np.int64), -1)
    return np.stack([(scores == k) for k in range(n_categories)]).astype(dtype)


def start_values(spec: mdl.ModelSpec, y: np.ndarray, mask: np.ndarray, columns: Sequence[str],
                 max_score: int) -> np.ndarray:
    """Starting values from the items' proportions (the joint estimator's, :func:`irtexam.irt.model.initial_params`)."""
    design = mdl.Design(items=tuple(str(i) for i in range(y.shape[0])), examinees=tuple(str(m) for m in range(y.shape[1])),
                        y=y, mask=mask, max_score=max_score)
    return to_matrix(mdl.initial_params(spec, design), columns)


def em_estimate(spec: mdl.ModelSpec, y: np.ndarray, mask: np.ndarray, *, max_score: int = 1,
                groups: Groups | None = None, fixed: Mapping[int, np.ndarray] | None = None,
                start: np.ndarray | None = None, tol: float = 1e-4, max_cycles: int = 2000,
                se: bool = True, n_nodes: int = N_NODES, polish: bool | None = None,
                progress: Callable[[int, float, float], None] | None = None) -> MarginalResult:
    """Maximise the marginal log posterior of the item parameters by EM, then polish and take the information.

    Args:
        spec: model kind and priors (no facets); ``spec.item_prior == "none"`` is marginal ML.
        y, mask: (I, E) scores and the observed cells.
        groups: examinee groups (:func:`make_groups`); None is one N(0, 1) group (1PL: N(0, sigma^2)).
        fixed: anchor items held at given unconstrained rows of X (item position -> (p,) values).
        tol: EM stops when no parameter moved more than ``tol`` in a cycle.
        polish: Newton steps on the full marginal posterior after EM (default: when the exact
            Hessian is within :data:`EXACT_HESSIAN_BUDGET`).
    Returns a :class:`MarginalResult`.
    """
    if spec.facets:
        raise IrtexamError("the marginal estimator fits models without facets; use method 'map' or 'nuts' for facets")
    started = time.perf_counter()
    n_items, n_examinees = y.shape
    columns = item_columns(spec, max_score)
    groups = groups or make_groups(None, n_examinees, free_reference_sd=not spec.has_discrimination)
    free_rows = np.ones(n_items, dtype=bool)
    X0 = start_values(spec, y, mask, columns, max_score) if start is None else np.asarray(start, dtype=np.float64)
    for position, values in (fixed or {}).items():
        free_rows[position] = False
        X0[position] = np.asarray(values, dtype=np.float64)
    layout = Layout(free_rows=free_rows, n_columns=len(columns), free_mean=groups.free_mean, free_sd=groups.free_sd)
    hyper0 = {name: float(np.mean(X0[:, columns.index(name[3:])]))
              for name in mdl.hyper_names(spec) if name[3:] in columns}
    width = (max_score + 1) * n_items
    exact = (n_nodes * width ** 2 * n_examinees <= EXACT_HESSIAN_BUDGET
             and n_nodes * width ** 2 <= EXACT_HESSIAN_MEMORY)
    polish = exact if polish is None else polish
    with jax.enable_x64(True):
        nodes = jnp.asarray(quadrature(n_nodes))
        onehot = jnp.asarray(one_hot_responses(y, mask, max_score + 1))
        group = jnp.asarray(groups.index)
        X = jnp.asarray(X0)
        mean = jnp.zeros(groups.n)
        log_sd = jnp.zeros(groups.n)
        hyper = {k: jnp.asarray(v) for k, v in hyper0.items()}
        free = jnp.asarray(free_rows, dtype=X.dtype)
        compiled = kernels(columns, spec, layout)
        e_step, m_step, hyper_step = compiled["e_step"], compiled["m_step"], compiled["hyper_step"]
        converged, cycle, change, loglik = False, 0, np.inf, -np.inf
        history: list[float] = []
        for cycle in range(1, max_cycles + 1):
            w, counts, ll = e_step(X, mean, log_sd, onehot, group, nodes)
            loglik = float(ll)
            history.append(loglik)
            X_new, _ = m_step(X, counts, nodes, hyper, free)
            new_mean, new_log_sd = compiled["moments"](w, group, groups.n, nodes)
            new_mean = jnp.where(jnp.asarray(groups.free_mean), new_mean, mean)
            new_log_sd = jnp.where(jnp.asarray(groups.free_sd), new_log_sd, log_sd)
            change = float(max(jnp.abs(X_new - X).max(), jnp.abs(new_mean - mean).max(),
                               jnp.abs(new_log_sd - log_sd).max()))
            X, mean, log_sd = X_new, new_mean, new_log_sd
            hyper = hyper_step(X, hyper=hyper) if hyper else hyper
            if progress is not None:
                progress(cycle, loglik, change)
            if not np.isfinite(change):
                raise IrtexamError("the EM iterations diverged (non-finite parameters); try item_prior='fixed' "
                                   "or a model with fewer parameters")
            if change < tol:
                converged = True
                break
        em_seconds = time.perf_counter() - started
        objective = compiled["objective"]
        args = (X, mean, log_sd, onehot, group, nodes, hyper)
        newton_steps = 0
        hessian = None
        if polish and layout.size:
            # one exact Hessian at EM's answer: Newton steps with fresh gradients polish the mode (EM stopped
            # within tol of it, where the Hessian barely changes), and the same matrix is the information
            grad_fn = compiled["gradient"]
            flat = layout.flatten(X, mean, log_sd)
            hessian = compiled["hessian"](*args)
            value = objective(flat, *args)
            for _ in range(3):
                g = grad_fn(flat, *args)
                if float(jnp.abs(g).max()) < 1e-8:
                    break
                step = jnp.linalg.solve(-hessian, g)
                if not bool(jnp.all(jnp.isfinite(step))) or float(jnp.abs(step).max()) > 0.5:
                    break  # not near a well-defined mode: keep EM's answer
                trial = flat + step
                trial_value = objective(trial, *args)
                if not bool(trial_value >= value - 1e-9):
                    break
                flat, value = trial, trial_value
                newton_steps += 1
            X, mean, log_sd = layout.unflatten(flat, X, mean, log_sd)
            args = (X, mean, log_sd, onehot, group, nodes, hyper)
        w, counts, ll = e_step(X, mean, log_sd, onehot, group, nodes)
        loglik = float(ll)
        log_post = float(objective(layout.flatten(X, mean, log_sd), *args)) if layout.size else loglik
        covariance = None
        information = None
        if se and layout.size:
            if exact:
                if hessian is None:
                    hessian = compiled["hessian"](*args)
                info_matrix = -np.asarray(hessian, dtype=np.float64)
                information = "observed"
            else:
                info_matrix = np.array(compiled["crossprod"](X, mean, log_sd, onehot, group, nodes), dtype=np.float64)
                if spec.item_prior != "none":
                    info_matrix += _prior_curvature(np.asarray(compiled["prior_blocks"](X, hyper)), layout)
                information = "crossprod"
            covariance = _safe_inverse(0.5 * (info_matrix + info_matrix.T))
        result = MarginalResult(
            X=np.asarray(X, dtype=np.float64), columns=columns, mean=np.asarray(mean, dtype=np.float64),
            log_sd=np.asarray(log_sd, dtype=np.float64), hyper={k: float(v) for k, v in hyper.items()},
            groups=groups, layout=layout, nodes=np.asarray(nodes), weights=np.asarray(w, dtype=np.float64),
            loglik=loglik, log_posterior=log_post, covariance=covariance, information=information,
            info={"solver": "em", "converged": converged, "cycles": cycle, "max_change": change, "tol": tol,
                  "newton_steps": newton_steps, "em_seconds": em_seconds,
                  "seconds": time.perf_counter() - started, "nodes": n_nodes, "loglik_history_tail": history[-3:]})
    return result


def _prior_curvature(blocks: np.ndarray, layout: Layout) -> np.ndarray:
    """-d2/du2 of the item log prior over the free parameters, from its per-item Hessian blocks (I, p, p)."""
    size = layout.size
    out = np.zeros((size, size))
    H = blocks[layout.free_rows]
    p = layout.n_columns
    for r in range(H.shape[0]):
        out[r * p:(r + 1) * p, r * p:(r + 1) * p] = -H[r]
    return out


def _safe_inverse(matrix: np.ndarray) -> np.ndarray:
    """Inverse of a symmetric information matrix; a pseudo-inverse (eigenvalues floored) when it is singular."""
    values, vectors = np.linalg.eigh(matrix)
    floor = max(values.max(), 1.0) * 1e-10
    return (vectors / np.maximum(values, floor)) @ vectors.T
