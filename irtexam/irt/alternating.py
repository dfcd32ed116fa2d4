"""Fast MAP for binary IRT models without facets: alternating Fisher scoring.

Given the abilities the items are independent, and given the items the abilities
are; so the joint MAP can be found by alternating exact block updates, each a
vectorised Newton (Fisher scoring) step over every item or every examinee at once:

* items: for item i with unconstrained parameters u_i = (log a_i, d_i, logit c_i)
  (those the model has), the step is delta_i = (F_i + P_i)^-1 g_i, with the
  per-item expected information F_i = sum_m w_im J_im J_im^T, J_im = dp_im/du_i,
  w_im = 1 / (p_im (1 - p_im)), the prior precision P_i and the gradient g_i of the
  log posterior. An item whose step reverses direction from one sweep to the next
  has its step damped by half (3PL items with a weakly identified guessing
  parameter otherwise oscillate).
* abilities: the model reports theta = (raw - mean raw) / sd(raw), so at the MAP
  the likelihood gradient g in theta lies in span(1, theta) (the raw N(0, 1) prior
  and the scale anchor only fix the unreported raw location and scale). The step
  is the constrained Newton step delta = F^-1 (g - B lambda), B = [1, theta],
  F_m = sum_i w_im (dp_im/dtheta_m)^2, with lambda solving
  (B^T F^-1 B) lambda = B^T F^-1 g so that delta keeps mean 0 and sd 1 to first
  order, damped like the item steps; then re-standardisation, with items
  re-expressed so the likelihood is unchanged (a -> a sd, d -> d + a mean). In the
  1PL (a = 1 fixes the unit) the abilities keep their N(0, 1) prior and only their
  mean is constrained.

Near the optimum the sweeps converge linearly along one slow mode (successive changes
are parallel and shrink by a constant ratio rho); once that is seen, the state is
extrapolated by rho / (1 - rho) changes along it (Aitken's delta-squared), which on a
10000 x 1000 3PL cut 35 sweeps to 28. Each sweep costs two passes over the cells; it
stops when no parameter moved by more than ``tol`` of its (diagonal-information)
standard error. On simulated 3PL
data this reaches the joint MAP more precisely than float32 L-BFGS in a fraction
of the passes. Used by :func:`irtexam.irt.fit.map_estimate` for binary models
without facets; other models use L-BFGS.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import IrtexamError
from .cell_blocks import P_CEIL, P_FLOOR, ability_moments, item_moments_over_abilities, response_blocks, rows_per_block
from .model import (HYPER_KEYS, HYPER_OF, Design, ModelSpec, hyper_names, hyper_prior, item_prior_terms,
                    item_slopes_and_floors)

Array = jax.Array
RHO_MAX, FACTOR_MAX = 0.995, 100.0  # extrapolation: slowest convergence ratio trusted, largest jump
DRIFT_RHO_MAX, DRIFT_FACTOR = 1.05, 50.0  # parallel changes that neither shrink nor grow by 5%: a jump of 50 of them
# ... and when: changes at least this parallel, the last largest move below this many standard errors. 3PL 12,032 x
# 2,211: 33 sweeps with 0.995 and 0.1, 22 with 0.98 and 1.0; 2,000 x 1,000 17 -> 15; 2PL unchanged (6-7)
COSINE_MIN, EXTRAPOLATE_BELOW = 0.98, 1.0
LARGE_SWEEP_CELLS = 1 << 23  # from here the sweeps take XLA's default options (:func:`sweep_compiler_options`)


def supports(spec: ModelSpec) -> bool:
    """True for the models this solver handles: binary 1PL/2PL/3PL without facets."""
    return not spec.kind_object.graded and not spec.facets


def _item_columns(spec: ModelSpec) -> tuple[str, ...]:
    """The unconstrained item parameters in step order."""
    return (("a",) if spec.has_discrimination else ()) + ("d",) + (("c",) if spec.free_guessing else ())


def binary_item_information(a: Array, c: Array, s: Array, w: Array, slope: Array, theta: Array,
                            names: tuple[str, ...]) -> Array:
    """Per-item expected (Fisher) information of binary items, shape (n_items, k, k), from whole
    items x examinees arrays (the Laplace step): the moments of :func:`information_from_moments` by
    three matrix products. ``w`` is zero on missing cells."""
    powers = jnp.stack([jnp.ones_like(theta), theta, theta * theta], axis=1)  # (examinees, 3)
    s_bar = 1.0 - s
    return information_from_moments(a, c, (w * slope * slope) @ powers, (w * slope * s_bar) @ powers[:, :2],
                                    (w * s_bar * s_bar).sum(axis=1), names)


def information_from_moments(a: Array, c: Array, by_slope: Array, by_mixed: Array, by_guess: Array,
                             names: tuple[str, ...]) -> Array:
    """Per-item expected (Fisher) information of binary items, shape (n_items, k, k).

    In (log a, d, logit c) the Jacobian of p is (a slope theta, slope, c (1 - c) (1 - s)),
    slope = dp/dz = (1 - c) s (1 - s), and F_i = sum_m w_im J_im J_im^T with
    w = 1 / (p (1 - p)) (zero on missing cells). Every entry is a moment sum of
    w slope^2 (``by_slope``: against 1, theta, theta^2), w slope (1 - s) (``by_mixed``: 1, theta) or
    w (1 - s)^2 (``by_guess``). ``names`` picks and orders the parameters the model has.
    Shared by the MAP solver and the Laplace step.
    """
    cu = c * (1.0 - c)
    entries = {("a", "a"): a * a * by_slope[:, 2], ("a", "d"): a * by_slope[:, 1], ("d", "d"): by_slope[:, 0],
               ("a", "c"): a * cu * by_mixed[:, 1], ("d", "c"): cu * by_mixed[:, 0], ("c", "c"): cu * cu * by_guess}
    order = {"a": 0, "d": 1, "c": 2}
    return jnp.stack([jnp.stack([entries[(r, q) if order[r] <= order[q] else (q, r)] for q in names], axis=-1)
                      for r in names], axis=-2)


def firth_gradient(a: Array, by_slope: Array, by_skew: Array, names: tuple[str, ...]) -> Array:
    """Gradient of Firth's penalty 1/2 log det F_i in each item's (log a, d) (1PL: d), F_i the Fisher information
    of (a, d) for the linear predictor z = a theta + d (no guessing), from the moments of
    :func:`irtexam.irt.cell_blocks.item_moments` (``skew=True``).

    With v the cells' Fisher weight (s (1 - s)), v' = dv/dz, x = (theta, 1) and G = F^-1:
    d/dbeta_k 1/2 log det F = 1/2 sum_m v'_m x_mk (x_m^T G x_m), so with S_j = sum_m v'_m theta_m^j
    g_a = 1/2 (G_aa S_3 + 2 G_ad S_2 + G_dd S_1), g_d = 1/2 (G_aa S_2 + 2 G_ad S_1 + G_dd S_0), and on log a,
    a g_a (1PL: g_d = S_0 / (2 F_dd)). For the 2PL, a logistic regression on the abilities, the penalised
    likelihood removes the O(1 / n) bias of the maximum likelihood estimate (Firth 1993, canonical links);
    with the abilities given, 3,000 items x 200 examinees: slopes x1.027 -> x1.007.
    """
    if names == ("d",):
        return (0.5 * by_skew[:, 0] / by_slope[:, 0])[:, None]
    f_dd, f_ad, f_aa = by_slope[:, 0], by_slope[:, 1], by_slope[:, 2]
    det = f_aa * f_dd - f_ad * f_ad
    g_aa, g_ad, g_dd = f_dd / det, -f_ad / det, f_aa / det
    s0, s1, s2, s3 = (by_skew[:, j] for j in range(4))
    grad_a = 0.5 * (g_aa * s3 + 2.0 * g_ad * s2 + g_dd * s1)
    grad_d = 0.5 * (g_aa * s2 + 2.0 * g_ad * s1 + g_dd * s0)
    return jnp.stack([a * grad_a, grad_d], axis=-1)


def solve_small_spd(matrix: Array, rhs: Array) -> Array:
    """Solve a batch of small (k <= 3) symmetric positive definite systems in closed form.

    The system is first scaled to unit diagonal (D^-1/2 A D^-1/2), then solved by the
    adjugate: x = adj(A) b / det(A). Compiles far faster than a batched LU and is as
    accurate on these well-scaled systems.
    """
    k = matrix.shape[-1]
    scale = 1.0 / jnp.sqrt(jnp.diagonal(matrix, axis1=-2, axis2=-1))
    m = matrix * scale[..., :, None] * scale[..., None, :]
    b = rhs * scale
    if k == 1:
        x = b / m[..., 0, 0][..., None]
    elif k == 2:
        det = m[..., 0, 0] * m[..., 1, 1] - m[..., 0, 1] * m[..., 1, 0]
        x = jnp.stack([m[..., 1, 1] * b[..., 0] - m[..., 0, 1] * b[..., 1],
                       m[..., 0, 0] * b[..., 1] - m[..., 1, 0] * b[..., 0]], axis=-1) / det[..., None]
    elif k == 3:
        cof = [[m[..., (r + 1) % 3, (q + 1) % 3] * m[..., (r + 2) % 3, (q + 2) % 3]
                - m[..., (r + 1) % 3, (q + 2) % 3] * m[..., (r + 2) % 3, (q + 1) % 3] for q in range(3)]
               for r in range(3)]
        det = sum(m[..., 0, q] * cof[0][q] for q in range(3))
        # adj(A)[q, r] = cofactor[r][q]
        x = jnp.stack([sum(cof[r][q] * b[..., r] for r in range(3)) for q in range(3)], axis=-1) / det[..., None]
    else:
        x = jnp.linalg.solve(m, b[..., None])[..., 0]
    return x * scale


def _hyper_keys(items: Mapping[str, Array], names: tuple[str, ...]) -> tuple[str, ...]:
    """The learned prior centres present in ``items`` for the item parameters ``names``, in step order."""
    return tuple(HYPER_OF[name] for name in names if name in HYPER_OF and HYPER_OF[name] in items)


def hyper_gradient_and_precision(items: Mapping[str, Array], spec: ModelSpec,
                                 keys: tuple[str, ...]) -> tuple[Array, Array]:
    """Gradient and precision (diagonal: the centres do not interact) of
    f(mu) = sum_i log p(u_i | mu) + log p(mu) in each hyperparameter, the items fixed, in closed form:

    mu_d (normal): g = sum_i (d_i - mu) / s^2 - (mu - m0) / s0^2, h = I / s^2 + 1 / s0^2.
    mu_c, u_i = logit c_i, m = sigmoid(mu_c), kappa = c_concentration, ``spec.c_centre_rule`` "mode" (the
    exact logit-Beta density Beta(kappa m, kappa (1 - m)), v = m (1 - m)):
    df/dm = kappa sum_i u_i - I kappa (psi(kappa m) - psi(kappa (1 - m))),
    d2f/dm2 = -I kappa^2 (psi'(kappa m) + psi'(kappa (1 - m))),
    g = v df/dm - (mu - m0) / s0^2, h = -(v^2 d2f/dm2 + v (1 - 2 m) df/dm) + 1 / s0^2;
    "empirical" (the logit-Beta taken as the normal of its curvature at its mode, precision p = kappa m (1 - m) at
    the current centre, as the marginal estimator does, :func:`irtexam.irt.marginal.steps.update_centres`):
    g = p sum_i (u_i - mu) - (mu - m0) / s0^2, h = I p + 1 / s0^2.

    Why "empirical" for leaderboards: the logit-Beta's normaliser peaks at m = 1/2 (it is most concentrated
    there) and items whose c the data barely inform sit at their prior's mode, so the mode's centre climbs
    towards 1/2 with thousands of items: 3PL, 2,000 items x 1,000 examinees, c ~ Beta(5, 15) (mean 0.25):
    centre 0.29, a x1.104; "empirical" 0.262, x1.063; c = 0.1 for every item: "empirical" 0.115, x1.061
    (a centre held at 1/4: x1.247); with 200-250 models it sits a little low (c -0.011 to -0.015). On a small
    hard exam (150 items x 60) it drifts down (0.19 against a true 0.26), which is why the joint mode keeps
    "mode" outside the leaderboard rule. Tried and dropped: the logit-Beta's mean psi(kappa m) - psi(kappa (1 - m))
    against each item's posterior mean of logit c from a Beta matched to its mode and curvature (0.279, x1.087).
    """
    from jax.scipy.special import digamma, polygamma

    prior = hyper_prior(spec)
    item_of = {hyper: name for name, hyper in HYPER_OF.items()}
    grads, precisions = [], []
    for key in keys:
        mu = items[key]
        loc0, scale0 = prior[key]
        u = items[item_of[key]]
        n = u.shape[-1]
        if key == "mu_c" and spec.c_centre_rule == "empirical":
            m = jax.nn.sigmoid(mu)
            precision = spec.c_concentration * m * (1.0 - m)
            grads.append(precision * (u - mu).sum() - (mu - loc0) / scale0 ** 2)
            precisions.append(n * precision + 1.0 / scale0 ** 2)
        elif key == "mu_c":
            kappa = spec.c_concentration
            m = jax.nn.sigmoid(mu)
            v = m * (1.0 - m)
            d1 = kappa * u.sum() - n * kappa * (digamma(kappa * m) - digamma(kappa * (1.0 - m)))
            d2 = -n * kappa ** 2 * (polygamma(1, kappa * m) + polygamma(1, kappa * (1.0 - m)))
            grads.append(v * d1 - (mu - loc0) / scale0 ** 2)
            precisions.append(-(v * v * d2 + v * (1.0 - 2.0 * m) * d1) + 1.0 / scale0 ** 2)
        else:
            s2 = (spec.log_a_scale if key == "mu_a" else spec.b_scale) ** 2  # mu_a; mu_d, mu_b1
            grads.append((u - mu).sum() / s2 - (mu - loc0) / scale0 ** 2)
            precisions.append(jnp.asarray(n / s2 + 1.0 / scale0 ** 2, dtype=u.dtype))
    return jnp.stack(grads), jnp.diag(jnp.stack(precisions))


def _joint_hyper_step(items: Mapping[str, Array], spec: ModelSpec, names: tuple[str, ...], keys: tuple[str, ...],
                      info: Array, grad: Array, newton: Array) -> tuple[Array, dict[str, Array]]:
    """Newton step for the items and the hyperparameters of their priors together (abilities fixed).

    The precision of (u_1..u_I, mu) is arrowhead: per-item blocks D_i (information + prior
    precision), the hyperparameters' block E, and couplings B_i (k x h) of item parameter k
    with the hyperparameter that locates its prior: -1 / s^2 for normal priors
    (d2 log N(u | mu, s^2) / du dmu = 1 / s^2) and -kappa m (1 - m) for logit c
    (d2 / du dmu_c of the Beta-logit density). By the Schur complement
    (E - sum_i B_i^T D_i^-1 B_i) delta_mu = g_mu - sum_i B_i^T D_i^-1 g_i and
    delta_i = D_i^-1 (g_i - B_i delta_mu). Alternating item and hyperparameter updates instead
    converges along the common shift of all items and their centre at a rate close to 1
    (800 sweeps on an 80-item 2PL). E and g_mu: :func:`hyper_gradient_and_precision`.
    """
    n_items = grad.shape[0]
    g_mu, e_mu = hyper_gradient_and_precision(items, spec, keys)
    columns = []
    for key in keys:
        column = []
        for name in names:
            if HYPER_OF.get(name) != key:
                column.append(jnp.zeros(n_items, dtype=grad.dtype))
            elif name == "c":
                mean = jax.nn.sigmoid(items["mu_c"])
                column.append(jnp.full(n_items, -spec.c_concentration * mean * (1.0 - mean), dtype=grad.dtype))
            else:  # log a (mu_a), d (mu_d)
                scale = spec.log_a_scale if name == "a" else spec.b_scale
                column.append(jnp.full(n_items, -1.0 / scale ** 2, dtype=grad.dtype))
        columns.append(jnp.stack(column, axis=-1))                      # (I, k)
    coupling = jnp.stack(columns, axis=-1)                               # (I, k, h)
    solved = jnp.stack([solve_small_spd(info, coupling[..., j]) for j in range(len(keys))], axis=-1)  # D^-1 B
    schur = e_mu - jnp.einsum("ikh,ikl->hl", coupling, solved)
    rhs = g_mu - jnp.einsum("ikh,ik->h", coupling, newton)
    delta_mu = solve_small_spd(schur, rhs)  # h <= 2 hyperparameters; no LAPACK call in the compiled sweep
    return newton - jnp.einsum("ikh,h->ik", solved, delta_mu), dict(zip(keys, delta_mu))


def item_step(items: dict[str, Array], theta: Array, blocks: Array, spec: ModelSpec,
              damping: Array, previous: Array) -> tuple[dict[str, Array], Array, Array, Array]:
    """One Fisher-scoring step for every item (abilities fixed).

    Information from :func:`information_from_moments` plus the prior precision; the
    gradient is r J summed over examinees (r = dl/dp), the sums taken a block of items at a time
    (:func:`irtexam.irt.cell_blocks.item_moments`; ``blocks`` the int8 responses of
    :func:`irtexam.irt.cell_blocks.response_blocks`). ``damping`` (per item, 1 = full step) and
    ``previous`` (the last undamped steps in standard-error units) carry the oscillation
    guard between sweeps. Returns the new items, the new damping, this sweep's undamped
    steps in standard-error units and, per item, the move taken, max_k |delta_k| sqrt((F + P)_kk).
    """
    names = _item_columns(spec)
    a, c = item_slopes_and_floors(items, spec)
    c = c if "c" in items else jnp.full_like(items["d"], c)
    firth = spec.bias_reduction == "firth"
    sums = item_moments_over_abilities(a, c, items["d"], theta, blocks, "c" in names, spec.ability_nodes, skew=firth)
    cu = c * (1.0 - c)
    full_grad = {"a": a * sums.score_slope[:, 1], "d": sums.score_slope[:, 0], "c": cu * sums.score_guess}
    prior_grad, prior_precision = item_prior_terms(items, spec)
    info = information_from_moments(a, c, sums.by_slope, sums.by_mixed, sums.by_guess, names)
    info = info + jax.vmap(jnp.diag)(jnp.stack([prior_precision[r] for r in names], axis=-1))
    grad = jnp.stack([full_grad[r] + prior_grad[r] for r in names], axis=-1)
    if firth:
        grad = grad + firth_gradient(a, sums.by_slope, sums.by_skew, names)
    newton = solve_small_spd(info, grad)
    hyper_step = None
    keys = _hyper_keys(items, names)
    if keys:
        newton, hyper_step = _joint_hyper_step(items, spec, names, keys, info, grad, newton)
    newton = jnp.clip(newton, -2.0, 2.0)
    scaled = newton * jnp.sqrt(jnp.diagonal(info, axis1=1, axis2=2))  # in standard-error units
    # Oscillation guard: an item whose step reverses direction (3PL items with a weakly
    # identified guessing parameter can cycle under Fisher scoring) has its damping halved.
    reversed_ = jnp.sum(scaled * previous, axis=1) < 0.0
    damping = jnp.where(reversed_, 0.5 * damping, jnp.minimum(1.0, 1.5 * damping))
    step = damping[:, None] * newton
    new = {**items, **{name: items[name] + step[:, k] for k, name in enumerate(names)}}
    if hyper_step is not None:
        new.update({key: items[key] + jnp.clip(value, -1.0, 1.0) for key, value in hyper_step.items()})
    return new, damping, scaled, jnp.max(jnp.abs(damping[:, None] * scaled), axis=1)


def theta_step(items: dict[str, Array], theta: Array, blocks: Array, spec: ModelSpec,
               damping: Array, previous: Array) -> tuple[dict[str, Array], Array, Array, Array, Array]:
    """One projected Fisher-scoring step for every ability, then re-standardisation.

    ``damping`` and ``previous`` (last undamped steps) carry the same oscillation guard as
    :func:`item_step` (an examinee scoring at chance level sits where the information is
    nearly flat and would otherwise overshoot back and forth). Returns the items
    re-expressed on the new scale, the standardised abilities, the new damping, this
    sweep's undamped steps and the largest ability move in standard-error units.
    """
    a, c = item_slopes_and_floors(items, spec)
    c = c if "c" in items else jnp.full_like(items["d"], c)
    grad, fisher = ability_moments(a, c, items["d"], theta, blocks)
    fisher = fisher + 1e-6
    if not spec.has_discrimination:
        # 1PL: the unit is fixed by a = 1; abilities keep their N(0, theta_scale^2) prior and are only centred
        grad = grad - theta / spec.theta_scale ** 2
        fisher = fisher + 1.0 / spec.theta_scale ** 2
    # Constrained Newton step: delta = F^-1 (g - B lam) with B = [1, theta] (1PL: B = [1]) and lam
    # chosen so that delta is tangent to {mean 0, sd 1}: B^T delta = 0, i.e. (B^T F^-1 B) lam = B^T F^-1 g.
    basis = (jnp.stack([jnp.ones_like(theta), theta], axis=1) if spec.has_discrimination
             else jnp.ones_like(theta)[:, None])
    weighted = basis / fisher[:, None]
    lam = solve_small_spd(basis.T @ weighted, weighted.T @ grad)  # 2 x 2 (1PL: 1 x 1), closed form
    newton = jnp.clip((grad - basis @ lam) / fisher, -1.0, 1.0)
    damping = jnp.where(newton * previous < 0.0, 0.5 * damping, jnp.minimum(1.0, 1.5 * damping))
    moved = theta + damping * newton
    mean = moved.mean()
    sd = jnp.maximum(moved.std(), 1e-6) if spec.has_discrimination else jnp.ones((), dtype=moved.dtype)
    new_theta = (moved - mean) / sd
    new_items = dict(items)
    if "a" in items:
        new_items["a"] = items["a"] + jnp.log(sd)
    new_items["d"] = items["d"] + a * mean
    return new_items, new_theta, damping, newton, jnp.max(jnp.abs(new_theta - theta) * jnp.sqrt(fisher))


def _flat_state(items: Mapping[str, Array], theta: Array, names: tuple[str, ...]) -> np.ndarray:
    """Items (in step order), the hyperparameters of a learned item prior and the abilities as one
    float64 vector on the host."""
    hyper = [np.atleast_1d(np.asarray(items[k], dtype=np.float64)) for k in HYPER_KEYS if k in items]
    return np.concatenate([np.asarray(items[name], dtype=np.float64) for name in names] + hyper
                          + [np.asarray(theta, dtype=np.float64)])


def _unflatten_state(state: np.ndarray, items: dict[str, Array], names: tuple[str, ...], spec: ModelSpec,
                     dtype: Any) -> tuple[dict[str, Array], Array]:
    """Inverse of :func:`_flat_state`, re-standardising the abilities (items re-expressed to match)."""
    n_items = items["d"].shape[0]
    out = dict(items)
    for k, name in enumerate(names):
        out[name] = np.asarray(state[k * n_items:(k + 1) * n_items], dtype=dtype)
    position = len(names) * n_items
    for key in (k for k in HYPER_KEYS if k in items):
        out[key] = np.asarray(state[position], dtype=dtype)
        position += 1
    theta = state[position:]
    mean = theta.mean()
    sd = max(float(theta.std()), 1e-6) if spec.has_discrimination else 1.0
    a = np.exp(np.asarray(out["a"], dtype=np.float64)) if "a" in out else 1.0
    if "a" in out:
        out["a"] = np.asarray(np.asarray(out["a"], dtype=np.float64) + np.log(sd), dtype=dtype)
    out["d"] = np.asarray(np.asarray(out["d"], dtype=np.float64) + a * mean, dtype=dtype)
    return out, np.asarray((theta - mean) / sd, dtype=dtype)


def _successive_changes(previous: np.ndarray, current: np.ndarray) -> tuple[float, float]:
    """(cosine, rho = |current| / |previous|) of two successive sweep changes; (0, 0) if either is zero. Summed
    without BLAS: a numpy dot wakes OpenBLAS's threads, whose spinning takes a core from the next sweep's XLA
    threads (12,032 x 2,211 3PL: 0.146 -> 0.105 s a sweep)."""
    norm_prev, norm_cur = float(np.sqrt(np.sum(previous * previous))), float(np.sqrt(np.sum(current * current)))
    if norm_prev == 0.0 or norm_cur == 0.0:
        return 0.0, 0.0
    return float(np.sum(previous * current)) / (norm_prev * norm_cur), norm_cur / norm_prev


def _convergence_ratio(previous: np.ndarray | None, current: np.ndarray) -> float:
    """rho = |current| / |previous| when two successive changes are parallel (cosine >= 0.99), else 0;
    at most 0.999. Linear convergence at rate rho leaves current * rho / (1 - rho) to go."""
    if previous is None:
        return 0.0
    cosine, rho = _successive_changes(previous, current)
    return min(rho, 0.999) if cosine >= 0.99 else 0.0


def _extrapolation_factor(previous: np.ndarray, current: np.ndarray) -> float:
    """How far to extrapolate along ``current`` when successive sweeps move in one direction. Near the optimum the
    sweeps converge linearly along one slow mode (mostly a common shift of the discriminations against the ability
    spread): successive changes are parallel and shrink by a ratio rho, so the remaining distance is current * rho /
    (1 - rho) (Aitken's delta-squared along the mode). Returns that factor, or 0 when the changes are not parallel
    (cosine < COSINE_MIN) or rho is outside (0.5, DRIFT_RHO_MAX). With learned item-prior centres the common shift of
    the discriminations and their centre converges at rho ~ 0.99 (only the likelihood holds it), hence RHO_MAX = 0.995.
    From RHO_MAX to DRIFT_RHO_MAX the sweeps drift at a steady pace along a flat mode (the 3PL's c level with
    thousands of models: 0.12-0.39 standard errors a sweep for 15 sweeps) and the distance left is unknown:
    DRIFT_FACTOR changes, the sweeps coming back if that overshoots (12,032 x 2,211 3PL, three data sets: 45 / 40 /
    43 sweeps -> 34 / 29 / 43, the same optimum)."""
    cosine, rho = _successive_changes(previous, current)
    if cosine < COSINE_MIN or not 0.5 < rho < DRIFT_RHO_MAX:
        return 0.0
    return DRIFT_FACTOR if rho >= RHO_MAX else min(rho / (1.0 - rho), FACTOR_MAX)


def sweep_compiler_options(cells: int) -> dict | None:
    """XLA options of the sweeps for ``cells`` cells: the quick-compile ones (None, compiled_executable's default)
    below :data:`LARGE_SWEEP_CELLS`, where compiling is the cost; XLA's defaults ({}) from there, where running is
    (3PL 12,032 x 2,211: ability step 0.059 -> 0.043 s, item step 0.077-0.085 -> 0.070-0.072 s, compiles 0.8-1.0
    -> 1.1-1.3 s once per machine)."""
    return {} if cells >= LARGE_SWEEP_CELLS else None


def _compiled_step(name: str, step: Any, spec: ModelSpec, args: tuple, options: dict | None = None) -> Any:
    """``step`` with ``spec`` fixed, compiled for ``args``' shapes (with XLA ``options``,
    :func:`sweep_compiler_options`) through :func:`irtexam.irt.compile_cache.compiled_executable`: kept as a
    serialized executable that a warm process loads without tracing the sweep (~0.2 s with the learned prior
    centres' joint step). The sweeps' small solves are closed form (:func:`solve_small_spd`), so they hold no
    LAPACK custom call (an executable with one cannot be stored)."""
    from .compile_cache import compiled_executable

    def bound(items: Any, theta: Any, blocks: Any, damping: Any, previous: Any) -> Any:
        return step(items, theta, blocks, spec, damping, previous)

    return compiled_executable(name, (repr(spec),), jax.jit(bound), args, options)


PROGRESS_SECONDS = 2.0


def alternating_map(spec: ModelSpec, design: Design, mask: np.ndarray, init: Mapping[str, np.ndarray], *,
                    max_sweeps: int = 500, tol: float = 1e-3, precision: str = "float32",
                    extrapolate: bool = True, progress: bool = False) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Joint MAP of a binary model without facets by alternating Fisher scoring (module docstring).

    ``init`` holds unconstrained starting values (``a`` = log a, ``d``, ``c`` = logit c,
    ``theta_raw``). Stops when every parameter moved by less than ``tol`` standard
    errors in a sweep. Returns unconstrained parameters in the model's layout (raw
    abilities standardised) and solver info. ``progress``: a line on stderr every
    :data:`PROGRESS_SECONDS` (sweep, largest move in standard errors), for leaderboard-sized fits.
    """
    if not supports(spec):
        raise IrtexamError(f"the alternating MAP solver handles binary models without facets, not "
                           f"{spec.kind} with facets {spec.facets}")
    dtype = jnp.float64 if precision == "float64" else jnp.float32
    started = time.perf_counter()
    with jax.enable_x64(precision == "float64"):
        # host arrays in, device arrays out of the compiled steps: no eager JAX op (each would
        # dispatch, and on a first fit load, a kernel of its own)
        # on the device once, not at every sweep: int8 blocks of items (1 byte a cell; module cell_blocks)
        blocks = jax.device_put(response_blocks(design.y, mask, rows_per_block(design.n_items, design.n_examinees)))
        items = {k: np.asarray(init[k], dtype=dtype) for k in _item_columns(spec) + hyper_names(spec) if k in init}
        raw = np.asarray(init["theta_raw"], dtype=np.float64)
        if spec.has_discrimination and raw.std() < 1e-8:
            # every examinee starts alike (e.g. identical scores): any spread pattern must start somewhere
            raw = raw + np.linspace(-1.0, 1.0, raw.size)
        spread = float(raw.std()) if spec.has_discrimination and raw.size > 1 else 1.0
        theta = np.asarray((raw - raw.mean()) / spread, dtype=dtype)
        damping = np.ones(design.n_items, dtype=dtype)
        previous = np.zeros((design.n_items, len(_item_columns(spec))), dtype=dtype)
        theta_damping = np.ones(design.n_examinees, dtype=dtype)
        theta_previous = np.zeros(design.n_examinees, dtype=dtype)
        options = sweep_compiler_options(design.n_items * design.n_examinees)
        step_items = _compiled_step("alternating-items", item_step, spec, (items, theta, blocks, damping, previous),
                                    options)
        step_theta = _compiled_step("alternating-theta", theta_step, spec,
                                    (items, theta, blocks, theta_damping, theta_previous), options)
        names = _item_columns(spec)
        sweeps, largest, remaining, extrapolations, wait = 0, np.inf, np.inf, 0, 0
        shown = started
        history = []
        state = _flat_state(items, theta, names)
        change = None
        while sweeps < max_sweeps:
            sweeps += 1
            items, damping, previous, moved_items = step_items(items, theta, blocks, damping, previous)
            items, theta, theta_damping, theta_previous, moved_theta = step_theta(
                items, theta, blocks, theta_damping, theta_previous)
            largest = max(float(np.max(np.asarray(moved_items))), float(moved_theta))
            new_state = _flat_state(items, theta, names)
            new_change = new_state - state
            # along a slow mode (successive changes parallel, shrinking by rho) the optimum is still
            # largest * rho / (1 - rho) away: stop on that distance, not on the last move alone
            remaining = largest / (1.0 - _convergence_ratio(change, new_change))
            history.append(largest)
            if progress and time.perf_counter() - shown > PROGRESS_SECONDS:
                shown = time.perf_counter()
                print(f"joint mode: sweep {sweeps}, largest move {largest:.3g} standard errors "
                      f"({shown - started:.0f} s)", file=sys.stderr, flush=True)
            if remaining < tol:
                break
            state, wait = new_state, max(wait - 1, 0)
            if extrapolate and change is not None and wait == 0 and largest < EXTRAPOLATE_BELOW:
                factor = _extrapolation_factor(change, new_change)
                if factor > 0.0:
                    items, theta = _unflatten_state(state + factor * new_change, items, names, spec, dtype)
                    state, extrapolations, wait = _flat_state(items, theta, names), extrapolations + 1, 3
                    new_change = None
            change = new_change
        params = {k: np.asarray(v, dtype=np.float64) for k, v in items.items()}
        # float32 abilities have ~7 significant digits: of 20,000 examinees 8 shared an ability to 9 decimals with
        # another who answered differently (600 items, 2PL). One more ability step, added in float64, keeps the
        # digits the sweeps could not hold (its size is far below a standard error: the estimate does not move)
        _, _, last_damping, last_step, _ = step_theta(items, theta, blocks, theta_damping, theta_previous)
        params["theta_raw"] = (np.asarray(theta, dtype=np.float64)
                               + np.asarray(last_damping, dtype=np.float64) * np.asarray(last_step, dtype=np.float64))
    info = {"converged": bool(remaining < tol), "iterations": sweeps, "evaluations": 2 * sweeps,
            "message": f"alternating Fisher scoring: largest move {largest:.2g} standard errors after {sweeps} sweeps "
                       f"({extrapolations} extrapolations)",
            "max_move_se": largest, "seconds": time.perf_counter() - started, "precision": precision,
            "solver": "alternating", "history": [round(h, 4) for h in history]}
    return params, info
