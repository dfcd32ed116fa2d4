"""The marginal estimator's driver: compiled kernels, the EM loop, the Newton polish and the information.

The maths (the model at the quadrature nodes, the E- and M-steps, the marginal log posterior) is in
:mod:`irtexam.irt.marginal.steps`; this module runs it (:func:`em_estimate`) and returns a
:class:`MarginalResult`. :mod:`irtexam.irt.marginal.fit` turns that into a :class:`FitResult`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ...errors import DivergedError, IrtexamError
from .. import model as mdl
from ..devices import examinee_multiple, place_examinees
from ..examinee_blocks import response_blocks
from .steps import (N_NODES, Groups, Layout, _e_step, _m_step_items, block_hessians, expanded_scale_step, from_matrix,
                    item_columns,
                    item_log_prior, make_groups, marginal_log_posterior, population_moments, posterior_weights,
                    quadrature, to_matrix, update_centres)
from .information import louis_hessian, louis_low_rank_parts, marginal_scores, score_cross_product

# The exact Hessian by Louis' identity (:func:`irtexam.irt.marginal.information.louis_hessian`) costs about
# nodes x ((K + 1) items)^2 x examinees operations and nodes x ((K + 1) items)^2 numbers of memory; below these
# budgets it is the information, above them the score cross-product, consistent but too wide where examinees
# are few for the parameters (standard errors 1.3x the observed information's at 150 items x 800: coverage of
# a 0.95-0.97 against 0.87-0.91; they agree at 3000 and more)
EXACT_HESSIAN_BUDGET = 2e11
EXACT_HESSIAN_MEMORY = 6e7
# Above this many free parameters the covariance is kept in low-rank form (LowRankCovariance): a dense
# 30,000 x 30,000 covariance (10,000 3PL items) took 22 GB and crashed the process.
DENSE_COVARIANCE_PARAMETERS = 6000
# Where the exact information is too large, Louis' identity in low-rank form (each item's complete-data block
# minus the missing information to second order, two rows an examinee: LowRankCovariance with sign -1) while its
# rows take at most this many numbers (2 x examinees x free parameters; 320 MB); the score cross-product beyond.
# The cross-product is singular where the examinees are fewer than the parameters (its intervals were as wide as
# the prior: 2PL 3,000 items x 250, median a_sd 1.98 for an actual error of 0.2)
LOUIS_LOW_RANK_VALUES = 4e7
# ... where the examinees are fewer than this many times the free parameters (with more, the cross-product is
# well determined and cheaper: 150 items x 3,000 and beyond it agrees with the observed information)
LOUIS_EXAMINEE_RATIO = 10


# ----------------------------------------------------------------------------- compiled kernels
@lru_cache(maxsize=16)
def kernels(columns: tuple, spec: mdl.ModelSpec, layout: Layout, complete: bool = False) -> dict[str, Callable]:
    """The jit-compiled steps for one model and layout (cached: a refit of the same shape traces nothing);
    ``complete``: every cell observed (the information's faster route, :func:`irtexam.irt.marginal.information.missing_information`)."""
    target = partial(marginal_log_posterior, layout=layout, columns=columns, spec=spec)
    return {"e_step": jax.jit(partial(_e_step, columns=columns, spec=spec)),
            "posterior": jax.jit(partial(posterior_weights, columns=columns, spec=spec)),
            "m_step": jax.jit(partial(_m_step_items, columns=columns, spec=spec)),
            "objective": jax.jit(target), "gradient": jax.jit(jax.grad(target)),
            "hessian": jax.jit(partial(louis_hessian, layout=layout, columns=columns, spec=spec, complete=complete)),
            "crossprod": jax.jit(partial(score_cross_product, layout=layout, columns=columns, spec=spec)),
            "marginal_scores": jax.jit(partial(marginal_scores, layout=layout, columns=columns, spec=spec)),
            "louis_low_rank": jax.jit(partial(louis_low_rank_parts, layout=layout, columns=columns, spec=spec)),
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
    covariance: "np.ndarray | LowRankCovariance | None"  # (P, P) of the free parameters (Layout order), None without se
    covariance_root: np.ndarray | None                  # L L' = covariance (dense covariance only)
    information: str | None         # "observed" (exact Hessian) or "crossprod" (empirical)
    info: dict[str, Any] = field(default_factory=dict)

    def item_dict(self) -> dict[str, np.ndarray]:
        """Unconstrained item parameters keyed as the joint estimator keys them."""
        return {k: np.asarray(v, dtype=np.float64) for k, v in from_matrix(self.X, self.columns).items()}


def start_values(spec: mdl.ModelSpec, y: np.ndarray, mask: np.ndarray, columns: Sequence[str],
                 max_score: int) -> np.ndarray:
    """Starting values from the items' proportions (the joint estimator's, :func:`irtexam.irt.model.initial_params`)."""
    design = mdl.Design(items=tuple(str(i) for i in range(y.shape[0])), examinees=tuple(str(m) for m in range(y.shape[1])),
                        y=y, mask=mask, max_score=max_score)
    return to_matrix(mdl.initial_params(spec, design), columns)


def em_estimate(spec: mdl.ModelSpec, y: np.ndarray, mask: np.ndarray, *, max_score: int = 1,
                groups: Groups | None = None, fixed: Mapping[int, np.ndarray] | None = None,
                start: np.ndarray | None = None, tol: float = 1e-4, max_cycles: int = 2000,
                se: bool = True, n_nodes: int = N_NODES, polish: bool = False,
                progress: Callable[[int, float, float], None] | None = None,
                refine: Callable[[np.ndarray, np.ndarray], int] | None = None) -> MarginalResult:
    """Maximise the marginal log posterior of the item parameters by EM, then polish and take the information.

    Args:
        spec: model kind and priors (no facets); ``spec.item_prior == "none"`` is marginal ML.
        y, mask: (I, E) scores and the observed cells.
        groups: examinee groups (:func:`make_groups`); None is one N(0, 1) group (1PL: N(0, sigma^2)).
        fixed: anchor items held at given unconstrained rows of X (item position -> (p,) values).
        tol: EM stops when no parameter moved more than ``tol`` in a cycle.
        refine: ``refine(weights, nodes) -> n`` after EM has converged: where n exceeds the node count, EM goes on
            from its answer on a grid of n nodes (:func:`irtexam.irt.marginal.fit.refined_nodes`: posteriors
            narrower than the spacing), before the information is taken.
        polish: Newton steps on the full marginal posterior after EM, with the exact Hessian (within
            :data:`EXACT_HESSIAN_BUDGET`). Off by default: EM stopped at ``tol`` = 1e-4 is within about
            1e-3 of the mode (3PL, 150 items x 3000: a 2e-4, b 1e-3, c 2e-5, log-likelihood 1e-3).
    Returns a :class:`MarginalResult`.
    """
    if spec.facets:
        raise IrtexamError("the marginal estimator fits models without facets; use method 'map' or 'nuts' for facets")
    started = time.perf_counter()
    n_items, n_examinees = y.shape
    columns = item_columns(spec, max_score)
    groups = groups or make_groups(None, n_examinees, free_reference_sd=not spec.has_discrimination)
    free_rows = np.ones(n_items, dtype=bool)
    X0 = start_values(spec, y, mask, columns, max_score) if start is None else np.array(start, dtype=np.float64)
    for position, values in (fixed or {}).items():
        free_rows[position] = False
        X0[position] = np.asarray(values, dtype=np.float64)
    layout = Layout(free_rows=free_rows, n_columns=len(columns), free_mean=groups.free_mean, free_sd=groups.free_sd)
    hyper0 = {name: float(np.mean(X0[:, columns.index(name[3:])]))
              for name in mdl.hyper_names(spec) if name[3:] in columns}
    width = (max_score + 1) * n_items
    exact = (n_nodes * width ** 2 * n_examinees <= EXACT_HESSIAN_BUDGET
             and n_nodes * width ** 2 <= EXACT_HESSIAN_MEMORY)
    polish = polish and exact
    with jax.enable_x64(True):
        # device_put, not jnp.asarray: no eager conversion program to look up
        nodes_host = np.asarray(quadrature(n_nodes), dtype=np.float64)
        nodes = jax.device_put(nodes_host)
        # the responses one byte a cell, in blocks of examinees (examinee_blocks.response_blocks)
        # (sharded over the examinees when several devices share the fit: irt/devices.py)
        blocks, block_groups = place_examinees(*response_blocks(y, mask, groups.index, max_score,
                                                                multiple=examinee_multiple()))
        X = jax.device_put(np.asarray(X0, dtype=np.float64))
        # the small state lives on the host: the EM and SQUAREM arithmetic on it in NumPy, not as eager JAX
        # operations (each one a compile-cache lookup, about 0.3 s of a 2000 x 200 3PL fit)
        mean = np.zeros(groups.n)
        log_sd = np.zeros(groups.n)
        hyper = {k: jnp.asarray(v) for k, v in hyper0.items()}
        free = jax.device_put(free_rows.astype(np.float64))
        complete = bool(np.all(mask))
        compiled = kernels(columns, spec, layout, complete)
        stored = _stored_kernels(compiled, spec, columns, layout, groups.n, (X, mean, log_sd, blocks, block_groups, nodes),
                                 hyper, free, max_score, information=exact and (se or polish) and layout.size > 0,
                                 complete=complete)
        e_step, m_step = stored["e_step"], stored["m_step"]
        free_mean, free_sd = np.asarray(groups.free_mean), np.asarray(groups.free_sd)

        hyper_keys = tuple(sorted(hyper))
        # on a refined grid (posteriors narrower than 61 nodes' spacing) the reference group's moments move into
        # the items each cycle (steps.expanded_scale_step); not with anchors, which fix the scale themselves
        expanded = n_nodes > N_NODES and not fixed
        expand_location = expanded and not bool(free_mean[0])
        expand_scale = expanded and not bool(free_sd[0]) and "a" in columns

        def em_map(state: tuple) -> tuple[tuple, float]:
            """One EM cycle from ``state`` = (X, mean, log_sd, h), h the learned prior centres in ``hyper_keys``
            order: the new state and the marginal log posterior at ``state`` (its E-step gives the
            log-likelihood there)."""
            X, mean, log_sd, h = state
            current = {k: h[j] for j, k in enumerate(hyper_keys)}
            counts, ll, mass, _ = e_step(X, mean, log_sd, blocks, block_groups, nodes)
            X_new, prior_value = m_step(X, counts, nodes, current, free)
            new_mean, new_log_sd = population_moments(np.asarray(mass), nodes_host)
            value = float(ll) + float(prior_value)
            if expand_location or expand_scale:
                X_new, new_mean, new_log_sd = expanded_scale_step(np.asarray(X_new), new_mean, new_log_sd, columns,
                                                                  expand_location, expand_scale)
            if hyper_keys:  # the learned prior centres, empirical Bayes
                stepped = update_centres(X_new, free_rows, current, columns=columns, spec=spec)
                h = np.array([stepped[k] for k in hyper_keys])
            return (np.asarray(X_new), np.where(free_mean, np.asarray(new_mean), mean),
                    np.where(free_sd, np.asarray(new_log_sd), log_sd), h), value

        def distance(a: tuple, b: tuple) -> float:
            return float(max(np.abs(u - v).max() if np.size(u) else 0.0 for u, v in zip(a, b)))

        # the centres are part of the state SQUAREM extrapolates and of the convergence test: with anchors held
        # fixed, updating them outside the extrapolation left them oscillating (the items within 0.1 of the mode,
        # mu_a between 0.16 and 0.42 after 5000 cycles)
        state = (np.asarray(X), mean, log_sd, np.array([float(hyper0[k]) for k in hyper_keys]))
        converged, cycle, change, value = False, 0, np.inf, -np.inf
        history: list[float] = []
        while cycle < max_cycles:
            # SQUAREM (Varadhan & Roland 2008, S3): two EM cycles, a step along their squared extrapolation,
            # one stabilising cycle; plain EM's second cycle is kept whenever the extrapolation lowers
            # the marginal posterior or leaves it non-finite
            one, value = em_map(state)
            two, _ = em_map(one)
            cycle += 2
            history.append(value)
            change = distance(two, one)
            if not np.isfinite(change):
                raise DivergedError("the EM iterations diverged (non-finite parameters); try item_prior='fixed' "
                                   "or a model with fewer parameters")
            if progress is not None:
                progress(cycle, value, change)
            if change < tol:
                state, converged = two, True
                break
            r = [u - v for u, v in zip(one, state)]
            v = [a - 2 * b + c for a, b, c in zip(two, one, state)]
            r_norm = float(np.sqrt(sum(float(np.sum(x ** 2)) for x in r)))
            v_norm = float(np.sqrt(sum(float(np.sum(x ** 2)) for x in v)))
            alpha = -max(r_norm / max(v_norm, 1e-300), 1.0)
            jumped = tuple(s0 - 2 * alpha * ri + alpha ** 2 * vi for s0, ri, vi in zip(state, r, v))
            landed, jumped_value = em_map(jumped)
            cycle += 1
            finite = np.isfinite(jumped_value) and all(bool(np.all(np.isfinite(x))) for x in landed)
            # the safeguard: with fixed prior centres EM climbs the marginal posterior, and a jump must too. With
            # learned centres it does not (they follow their own Laplace objective, and the posterior at the
            # current centres falls as they move), so almost every jump failed that test and EM crept at its
            # linear rate (3PL 200 x 2000: 56 cycles, 0.0009 from the fixed point). There a jump is kept where it
            # shrinks the fixed-point residual below that of the plain cycles (20 cycles, 0.0006 from it)
            improved = jumped_value >= value or (bool(hyper_keys) and distance(landed, jumped) < change)
            state = landed if finite and improved else two
        hyper = {k: jnp.asarray(state[3][j]) for j, k in enumerate(hyper_keys)}
        state = state[:3]
        X, mean, log_sd = (jax.device_put(x) for x in state)
        em_seconds = time.perf_counter() - started

        def posterior_at(X: Any, mean: Any, log_sd: Any) -> tuple[Any, Any, np.ndarray]:
            """(expected counts, marginal log-likelihood, posterior weights (E, Q) on the host) at the estimate."""
            if blocks.shape[0] == 1:  # one block: the E-step's own weights (no kernel more to load)
                counts, ll, _, w = e_step(X, mean, log_sd, blocks, block_groups, nodes)
            else:
                w, ll = stored["posterior"](X, mean, log_sd, blocks, block_groups, nodes)
                counts = np.zeros((nodes_host.shape[0], n_items, max_score + 1))  # the prior below needs none
            # the host copy only: 10^8 cells' posterior weights are 100 MB on the device
            return counts, ll, np.asarray(w, dtype=np.float64)[:n_examinees]

        counts, ll, weights = posterior_at(X, mean, log_sd)
        if refine is not None:
            finer = refine(weights, nodes_host)
            if finer > n_nodes:
                del counts, ll, weights  # the coarse grid's, not held while the finer fit runs
                refined = em_estimate(spec, y, mask, max_score=max_score, groups=groups, fixed=fixed,
                                      start=np.asarray(X), tol=tol, max_cycles=max_cycles, se=se, n_nodes=finer,
                                      polish=polish, progress=progress, refine=refine)
                refined.info["cycles"] += cycle
                refined.info["coarser_grids"] = [n_nodes] + refined.info.get("coarser_grids", [])
                refined.info["seconds"] = time.perf_counter() - started
                return refined
        objective = compiled["objective"]
        args = (X, mean, log_sd, blocks, block_groups, nodes, hyper)
        newton_steps = 0
        hessian = None
        if polish and layout.size:
            # one exact Hessian at EM's answer: Newton steps with fresh gradients polish the mode (EM stopped
            # within tol of it, where the Hessian barely changes), and the same matrix is the information
            grad_fn = compiled["gradient"]
            flat = layout.flatten(X, mean, log_sd)
            hessian = stored["hessian"](*args)
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
            args = (X, mean, log_sd, blocks, block_groups, nodes, hyper)
            counts, ll, weights = posterior_at(X, mean, log_sd)  # at the polished mode
        loglik = float(ll)
        log_post = loglik + float(m_step(X, counts, nodes, hyper, free)[1])
        covariance = root = None
        information = None
        if se and layout.size:
            if exact:
                if hessian is None:
                    hessian = stored["hessian"](*args)
                info_matrix = -np.asarray(hessian, dtype=np.float64)
                information = "observed"
            else:
                if (2 * n_examinees * layout.size <= LOUIS_LOW_RANK_VALUES and n_examinees < LOUIS_EXAMINEE_RATIO
                        * layout.size and not layout.free_mean.any() and not layout.free_sd.any()):
                    covariance = _louis_low_rank_covariance(compiled, args, layout)
                if covariance is not None:
                    information = "louis-low-rank"
                elif layout.size <= DENSE_COVARIANCE_PARAMETERS:
                    info_matrix = np.array(compiled["crossprod"](X, mean, log_sd, blocks, block_groups, nodes),
                                           dtype=np.float64)
                    if spec.item_prior != "none":
                        info_matrix += _prior_curvature(np.asarray(compiled["prior_blocks"](X, hyper)), layout)
                    information = "crossprod"
                else:
                    covariance = _low_rank_covariance(compiled, X, mean, log_sd, blocks, block_groups, nodes, hyper,
                                                      layout, spec, n_examinees)
                    information = "crossprod"
            if not isinstance(covariance, LowRankCovariance):
                covariance, root = _safe_inverse(0.5 * (info_matrix + info_matrix.T))
        result = MarginalResult(
            X=np.asarray(X, dtype=np.float64), columns=columns, mean=np.asarray(mean, dtype=np.float64),
            log_sd=np.asarray(log_sd, dtype=np.float64), hyper={k: float(v) for k, v in hyper.items()},
            groups=groups, layout=layout, nodes=np.asarray(nodes),
            weights=weights,
            loglik=loglik, log_posterior=log_post, covariance=covariance,
            covariance_root=root if covariance is not None else None, information=information,
            info={"solver": "em (SQUAREM-accelerated)", "converged": converged, "cycles": cycle, "max_change": change, "tol": tol,
                  "newton_steps": newton_steps, "em_seconds": em_seconds,
                  "seconds": time.perf_counter() - started, "nodes": n_nodes, "loglik_history_tail": history[-3:]})
    return result


def _stored_kernels(compiled: dict[str, Callable], spec: mdl.ModelSpec, columns: tuple, layout: Layout,
                    n_groups: int, data: tuple, hyper: dict, free: Any, max_score: int,
                    information: bool = False, complete: bool = False) -> dict[str, Callable]:
    """The kernels a fit runs, as executables kept on disk by :func:`irtexam.irt.compile_cache.compiled_executable`:
    a later process of the same shapes loads them without tracing (about 2 s of a 2000 x 200 3PL fit).
    ``information``: the fit takes the exact Hessian; it is stored too (tracing it took 0.5 s of a
    2000 x 200 3PL fit). Every loaded kernel is checked by its first call (``check=False``)."""
    import hashlib

    from ..compile_cache import compiled_executable, on_first_call

    X, mean, log_sd, blocks, block_groups, nodes = data
    parts = ("marginal", repr(spec), columns, n_groups, hashlib.sha256(repr(layout._key()).encode()).hexdigest(),
             complete)
    counts = np.zeros((nodes.shape[0], X.shape[0], max_score + 1), dtype=X.dtype)
    # XLA's defaults: these kernels run for a while. Each loaded executable is checked by its first call in the
    # fit (check=False: no separate trial run, which cost 0.06 s of a 2000 x 200 3PL fit); a broken file is deleted
    # there and the kernel traced afresh (compile_cache._FirstCallChecked)
    store = partial(compiled_executable, compiler_options={}, check=False)
    return {"e_step": store("em-e-step", parts, compiled["e_step"], data),
            "m_step": store("em-m-step", parts, compiled["m_step"], (X, counts, nodes, hyper, free)),
            "posterior": (store("em-posterior", parts, compiled["posterior"], data) if blocks.shape[0] > 1
                          else compiled["posterior"]),
            # on first use only: a fit whose grid is refined never takes the coarse grid's Hessian (its compile
            # was 3.9 s of the real run's 17.5 s cold start)
            "hessian": (on_first_call(lambda: store("em-hessian", parts, compiled["hessian"], (*data, hyper)))
                        if information else compiled["hessian"])}


@dataclass
class LowRankCovariance:
    """The covariance Q^-1 of the free item parameters with Q = B + sign V'V: B block-diagonal (one p x p block
    per item), V (r, P) low rank. Never formed densely.

    * ``sign=+1``, the score cross-product: B the prior's curvature, V = S (E, P) the examinees' marginal scores;
      by Woodbury Q^-1 = B^-1 - U C U' with U = B^-1 V' (P, r), C = (I_r + V B^-1 V')^-1;
    * ``sign=-1``, Louis' identity (:func:`irtexam.irt.marginal.information.louis_low_rank_parts`): B each item's
      complete-data information plus the prior's, V'V the missing information; Q^-1 = B^-1 + U C U' with
      C = (I_r - V B^-1 V')^-1 (positive definite where Q is).

    Exactly the dense inverse, in O(P r) memory. Used above :data:`DENSE_COVARIANCE_PARAMETERS` free parameters
    (crossprod) and, with Louis' parts, wherever the exact information is too large and the examinees are few.
    """

    inverse_blocks: np.ndarray   # (I, p, p): B^-1 per item
    root_blocks: np.ndarray      # (I, p, p): B^(1/2) per item (R R' = B)
    scores: np.ndarray           # (r, P): V
    U: np.ndarray                # (P, r)
    C: np.ndarray                # (r, r)
    sign: int = 1
    C_root: np.ndarray | None = None   # sign -1: lower Cholesky factor of C (its draws; its existence: Q is PD)
    # diag(Q^-1), computed on first use: P r^2 operations (about 1 s at 30,000 parameters x 1000 examinees), and
    # a fit reads it for the wide-interval check, the guessing share and the population table
    _diagonal: np.ndarray | None = field(default=None, init=False, repr=False)

    @classmethod
    def from_parts(cls, prior_blocks: np.ndarray, scores: np.ndarray, sign: int = 1) -> "LowRankCovariance":
        """From the blocks B_i (I, p, p) and the low-rank rows V (r, P), Q = B + sign V'V. Raises
        ``np.linalg.LinAlgError`` where a block B_i, or with ``sign=-1`` Q itself, is not positive definite (Q is iff
        C = (I - V B^-1 V')^-1 is, whose Cholesky factor the draws use)."""
        symmetric = 0.5 * (prior_blocks + np.swapaxes(prior_blocks, 1, 2))
        inverse_blocks = np.linalg.inv(symmetric)
        root_blocks = np.linalg.cholesky(symmetric)
        I, p = inverse_blocks.shape[:2]
        U = np.einsum("iab,ibe->iae", inverse_blocks, scores.T.reshape(I, p, -1)).reshape(I * p, -1)
        C = np.linalg.inv(np.eye(scores.shape[0]) + sign * (scores @ U))
        C_root = np.linalg.cholesky(0.5 * (C + C.T)) if sign < 0 else None
        return cls(inverse_blocks, root_blocks, scores, U, C, sign, C_root)

    def _solve_blocks(self, matrix: np.ndarray) -> np.ndarray:
        """B^-1 M for M of shape (P, k)."""
        I, p = self.inverse_blocks.shape[:2]
        return np.einsum("iab,ibk->iak", self.inverse_blocks, matrix.reshape(I, p, -1)).reshape(I * p, -1)

    def diagonal(self) -> np.ndarray:
        """diag(Q^-1) = diag(B^-1) - sign rowsum((U C) * U), computed once (read-only)."""
        if self._diagonal is None:
            diagonal = (np.diagonal(self.inverse_blocks, axis1=1, axis2=2).reshape(-1)
                        - self.sign * np.einsum("pe,pe->p", self.U @ self.C, self.U))
            diagonal.setflags(write=False)
            self._diagonal = diagonal
        return self._diagonal

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n draws (n, P) of N(0, Q^-1). sign +1: x = Q^-1 (B^(1/2) z1 + V' z2), z1 ~ N(0, I_P), z2 ~ N(0, I_r);
        sign -1: x = R^-T z1 + U L z2 (R R' = B, L L' = C), the sum of draws of B^-1 and of U C U'."""
        I, p = self.root_blocks.shape[:2]
        z1 = rng.standard_normal((I, p, n))
        z2 = rng.standard_normal((self.scores.shape[0], n))
        if self.sign < 0:
            first = np.linalg.solve(np.swapaxes(self.root_blocks, 1, 2), z1).reshape(I * p, n)
            return (first + self.U @ (self.C_root @ z2)).T
        v = np.einsum("iab,ibn->ian", self.root_blocks, z1).reshape(I * p, n) + self.scores.T @ z2
        x = self._solve_blocks(v) - self.U @ (self.C @ (self.U.T @ v))
        return x.T


def variances(result: "MarginalResult") -> np.ndarray:
    """The variances of the free parameters (Layout order) of a result with a covariance."""
    if isinstance(result.covariance, LowRankCovariance):
        return result.covariance.diagonal()
    return np.diag(result.covariance)


def sample_deviations(result: "MarginalResult", n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws (n, P) from N(0, covariance) of the free parameters."""
    if isinstance(result.covariance, LowRankCovariance):
        return result.covariance.sample(n, rng)
    return rng.standard_normal((n, result.layout.size)) @ result.covariance_root.T


def _low_rank_covariance(compiled: Mapping[str, Callable], X: Any, mean: Any, log_sd: Any, blocks: Any,
                         block_groups: Any, nodes: Any, hyper: Mapping[str, Any], layout: Layout,
                         spec: mdl.ModelSpec, n_examinees: int) -> LowRankCovariance:
    """The crossprod covariance of many free items without the dense P x P matrix (:class:`LowRankCovariance`).

    Needs a proper item prior (its curvature B is the invertible part; with ``item_prior="none"`` a ridge of
    1e-6 stands in) and one ability distribution (no free group means or sds: refused with a one-line error).
    """
    if layout.free_mean.any() or layout.free_sd.any():
        raise IrtexamError(f"standard errors for {layout.size} item parameters with estimated group means or sds "
                           f"would need a dense {layout.size} x {layout.size} matrix; fit with se=False, or fewer "
                           f"items at a time")
    items, _ = compiled["marginal_scores"](X, mean, log_sd, blocks, block_groups, nodes)
    scores = np.asarray(items, dtype=np.float64)[:n_examinees]  # the padding's rows are zero
    scores = scores.reshape(scores.shape[0], -1)
    p = layout.n_columns
    if spec.item_prior != "none":
        prior = -np.asarray(compiled["prior_blocks"](X, hyper), dtype=np.float64)[layout.free_rows]
    else:
        prior = np.broadcast_to(1e-6 * np.eye(p), (int(layout.free_rows.sum()), p, p)).copy()
    return LowRankCovariance.from_parts(prior, scores)


def _louis_low_rank_covariance(compiled: Mapping[str, Callable], args: tuple,
                               layout: Layout) -> "LowRankCovariance | None":
    """Louis' information in low-rank form (:func:`irtexam.irt.marginal.information.louis_low_rank_parts`) as a
    covariance, or None where its second-order missing information leaves it not positive definite (the caller
    then takes the score cross-product)."""
    blocks, rows = compiled["louis_low_rank"](*args)
    blocks = np.asarray(blocks, dtype=np.float64)[layout.free_rows]
    try:  # refused where B - V'V is not positive definite (from_parts)
        return LowRankCovariance.from_parts(blocks, np.asarray(rows, dtype=np.float64), sign=-1)
    except np.linalg.LinAlgError:
        return None


def _prior_curvature(blocks: np.ndarray, layout: Layout) -> np.ndarray:
    """-d2/du2 of the item log prior over the free parameters, from its per-item Hessian blocks (I, p, p)."""
    size = layout.size
    out = np.zeros((size, size))
    H = blocks[layout.free_rows]
    p = layout.n_columns
    for r in range(H.shape[0]):
        out[r * p:(r + 1) * p, r * p:(r + 1) * p] = -H[r]
    return out


def _safe_inverse(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(covariance, a square root L with L L' = covariance) of a symmetric information matrix: by Cholesky,
    or, when it is not positive definite, by eigenvalues floored at 1e-10 of the largest."""
    try:
        lower = np.linalg.cholesky(matrix)
        inverse_lower = np.linalg.solve(lower, np.eye(len(matrix)))   # L^-1; covariance = L^-T L^-1
        root = inverse_lower.T
        return root @ inverse_lower, root
    except np.linalg.LinAlgError:
        values, vectors = np.linalg.eigh(matrix)
        floor = max(values.max(), 1.0) * 1e-10
        root = vectors / np.sqrt(np.maximum(values, floor))
        return root @ root.T, root
