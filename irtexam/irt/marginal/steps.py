"""Marginal estimation of item parameters (Bock-Aitkin EM), abilities by EAP or MAP afterwards.

The abilities are integrated out over their population distribution, N(mu_g, sigma_g^2) for the
examinees of group g (the reference group N(0, 1) fixes the scale), on a fixed grid of Q nodes
theta_q (61 equally spaced on [-6, 6]; weights pi_gq proportional to the normal density at the
nodes, as mirt and BILOG do):

    log L(items, pop) = sum_m log sum_q pi_{g(m) q} prod_{i observed} P(y_im | theta_q; item_i)

and the item parameters maximise log L + sum_i log prior(item_i) (``item_prior="none"``: log L
alone, marginal maximum likelihood). Bock and Aitkin's EM:

* E-step: each examinee's posterior over the nodes, w_mq = pi_gq L_m(theta_q) / sum_q' (...), and
  the expected counts r_qik = sum_m w_mq [y_im = k] over observed cells;
* M-step: item by item, a damped Newton step on sum_qk r_qik log P_k(theta_q; item_i) +
  log prior(item_i) (per-item 2x2 / 3x3 / (K+1)x(K+1) Hessian blocks from JAX), step-halving so
  that each item's objective never falls; each free group mean and sd moves to the posterior
  moments sum_m w_mq theta_q / N_g (the 1PL's reference sd is free: a = 1 fixes the unit);
* the learned centres of the item priors (log a by default, with ``item_prior="hierarchical"`` d or b_1 and c
  too) then move to the empirical-Bayes centre of the items' current values, in closed form
  (:func:`update_centres`).

After EM has converged (largest parameter change below ``tol``), Newton steps on the full
marginal log posterior with its exact Hessian (JAX, forward over reverse) polish the mode, and
the negative Hessian is the observed information (Louis' identity gives the same matrix),
whose inverse is the covariance of the unconstrained parameters (log a, d, logit c; GRM log a,
b_1, log gaps; free log sd and means). Above :data:`irtexam.irt.marginal.em.EXACT_HESSIAN_BUDGET`
(parameters x cells x nodes) the information is the cross-product of the examinees' score vectors (the empirical
information, consistent, cheaper) plus the prior's curvature, and EM stops at ``tol``.

The item parameters are the kind's own (:func:`irtexam.irt.model.item_params`); the response
probabilities come from :mod:`irtexam.irt.kinds`. Everything here is a pure function of arrays;
the driver (compiled kernels, the EM loop, the information) is :mod:`irtexam.irt.marginal.em`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from ...errors import IrtexamError
from .. import kinds
from .. import model as mdl
from ..examinee_blocks import block_onehot, over_blocks

N_NODES = 61
NODE_LIMIT = 6.0


# ----------------------------------------------------------------------------- layout
def item_columns(spec: mdl.ModelSpec, max_score: int) -> tuple[str, ...]:
    """The unconstrained parameters of one item, in column order.

    Binary: ("a",)? + ("d",) + ("c",)? (log a, intercept d = -a b, logit c); GRM: ("a", "b1", "gap1", ...)
    (log a, first threshold, log gaps between successive thresholds).
    """
    columns: list[str] = []
    for site in mdl.item_sites(spec, max_score):
        columns += [f"{site.name}{k}" for k in range(1, site.event_size + 1)] if site.event_size else [site.name]
    return tuple(columns)


def to_matrix(params: Mapping[str, Any], columns: Sequence[str]) -> np.ndarray:
    """Item parameter dict (unconstrained, as the joint estimator keeps them) -> (I, p) matrix."""
    out = []
    for name in columns:
        if name.startswith("gap"):
            out.append(np.asarray(params["gap"])[:, int(name[3:]) - 1])
        else:
            out.append(np.asarray(params[name]))
    return np.stack(out, axis=1).astype(np.float64)


def from_matrix(X: Any, columns: Sequence[str]) -> dict[str, Any]:
    """(..., I, p) matrix -> item parameter dict with the joint estimator's names (``gap`` as (..., I, K - 1))."""
    out: dict[str, Any] = {}
    gaps = []
    for j, name in enumerate(columns):
        if name.startswith("gap"):
            gaps.append(X[..., j])
        else:
            out[name] = X[..., j]
    if gaps:
        xp = jnp if isinstance(X, jax.Array) else np
        out["gap"] = xp.stack(gaps, axis=-1)
    return out


@dataclass(frozen=True)
class Groups:
    """Examinee groups and which population parameters are estimated.

    ``index``: group of each examinee (E,); ``names``: group labels; ``free_mean`` / ``free_sd``:
    (G,) booleans. The reference group (0) is N(0, 1) unless the scale is fixed otherwise (the 1PL
    frees its sd; anchor items free both).
    """

    index: np.ndarray
    names: tuple[str, ...]
    free_mean: np.ndarray
    free_sd: np.ndarray

    @property
    def n(self) -> int:
        return len(self.names)


def make_groups(labels: Sequence[Any] | None, n_examinees: int, *, free_reference_sd: bool = False,
                free_reference_mean: bool = False, reference: Any = None) -> Groups:
    """Groups from one label per examinee (None: one group); the first label seen, or ``reference``, is the reference."""
    if labels is None:
        names: list[str] = ["all"]
        index = np.zeros(n_examinees, dtype=np.int32)
    else:
        labels = [str(v) for v in labels]
        if len(labels) != n_examinees:
            raise IrtexamError(f"groups: {len(labels)} labels for {n_examinees} examinees")
        names = list(dict.fromkeys(labels))
        if reference is not None:
            if str(reference) not in names:
                raise IrtexamError(f"reference group '{reference}' is not among the groups {', '.join(names)}")
            names.remove(str(reference))
            names.insert(0, str(reference))
        position = {name: g for g, name in enumerate(names)}
        index = np.array([position[v] for v in labels], dtype=np.int32)
    free_mean = np.ones(len(names), dtype=bool)
    free_sd = np.ones(len(names), dtype=bool)
    free_mean[0], free_sd[0] = free_reference_mean, free_reference_sd
    return Groups(index=index, names=tuple(names), free_mean=free_mean, free_sd=free_sd)


def quadrature(n_nodes: int = N_NODES, limit: float = NODE_LIMIT) -> np.ndarray:
    """Equally spaced nodes on [-limit, limit] (the rectangle rule is exponentially accurate for Gaussian tails)."""
    return np.linspace(-limit, limit, n_nodes)


def population_log_weights(nodes: Any, mean: Any, log_sd: Any) -> Any:
    """log pi_gq: the N(mean_g, sd_g^2) density at the nodes, normalised over the nodes, (G, Q)."""
    xp = jnp if isinstance(mean, jax.Array) or isinstance(log_sd, jax.Array) else np
    z = (nodes[None, :] - mean[:, None]) / xp.exp(log_sd)[:, None]
    logd = -0.5 * z ** 2
    return logd - (logsumexp(logd, axis=1, keepdims=True) if xp is jnp
                   else np.log(np.exp(logd - logd.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True))
                   + logd.max(axis=1, keepdims=True))


# ----------------------------------------------------------------------------- the model at the nodes
def node_log_probs(X: Any, columns: Sequence[str], spec: mdl.ModelSpec, nodes: Any) -> Any:
    """log P(X_i = k | theta_q) for every node, item and category, (Q, I, K + 1) (binary: K = 1).

    Binary items through :func:`irtexam.irt.kinds.cell_loglik` (no cancellation in log(1 - P));
    graded items log of :func:`irtexam.irt.kinds.category_probs`, floored at 1e-300.
    """
    return kinds.category_logprobs(nodes, mdl.item_params(from_matrix(X, columns), spec))


def item_log_prior(X: Any, columns: Sequence[str], spec: mdl.ModelSpec, hyper: Mapping[str, Any]) -> Any:
    """log prior of each item's unconstrained parameters (I,): :func:`irtexam.irt.model.item_log_prior`; 0 for "none"."""
    if spec.item_prior == "none":
        return jnp.zeros(X.shape[0], dtype=X.dtype)
    return mdl.item_log_prior(from_matrix(X, columns), spec, hyper)


def examinee_node_loglik(logp: Any, onehot: Any) -> Any:
    """log L_m(theta_q) = sum_i sum_k [y_im = k] log P_ik(theta_q) over observed cells, (E, Q)."""
    return jnp.einsum("kie,qik->eq", onehot, logp)


def posterior_over_nodes(log_lik: Any, log_pi: Any, group: Any) -> tuple[Any, Any]:
    """(w (E, Q), log marginal likelihood per examinee (E,)): w_mq = pi L_m(theta_q) / sum_q' pi L_m(theta_q').

    Examinees of group -1 (a block's padding) get w = 0 and log-likelihood 0."""
    joint = log_lik + log_pi[group]
    marginal = logsumexp(joint, axis=1)
    valid = group >= 0
    return jnp.exp(joint - marginal[:, None]) * valid[:, None], jnp.where(valid, marginal, 0.0)


# ----------------------------------------------------------------------------- EM steps (jit-compiled)
def _e_step(X: Any, mean: Any, log_sd: Any, responses: Any, groups: Any, nodes: Any, *, columns: tuple,
            spec: mdl.ModelSpec) -> tuple[Any, Any, Any, Any]:
    """Expected counts r_qik (Q, I, K + 1), the marginal log-likelihood, each group's posterior mass at the
    nodes (G, Q) (what :func:`population_moments` needs), from the responses in blocks
    (:func:`irtexam.irt.examinee_blocks.response_blocks`), and the posterior weights w (E, Q) when the responses
    are one block (None for several: a cycle on a large matrix writes nothing per examinee;
    :func:`posterior_weights` gives them once)."""
    logp = node_log_probs(X, columns, spec, nodes)
    log_pi = population_log_weights(nodes, mean, log_sd)

    single = responses.shape[0] == 1

    def block(y: Any, group: Any) -> tuple[Any, Any]:
        onehot = block_onehot(y, logp.shape[-1], logp.dtype)
        w, marginal = posterior_over_nodes(examinee_node_loglik(logp, onehot), log_pi, group)
        sums = (jnp.einsum("kie,eq->qik", onehot, w), marginal.sum(), group_node_mass(w, group, mean.shape[0]))
        return sums, (w if single else None)

    (counts, loglik, mass), w = over_blocks(block, responses, groups)
    return counts, loglik, mass, w


def posterior_weights(X: Any, mean: Any, log_sd: Any, responses: Any, groups: Any, nodes: Any, *, columns: tuple,
                      spec: mdl.ModelSpec) -> tuple[Any, Any]:
    """Each examinee's posterior over the nodes, w (E, Q) (padded examinees: 0), and the marginal log-likelihood."""
    logp = node_log_probs(X, columns, spec, nodes)
    log_pi = population_log_weights(nodes, mean, log_sd)

    def block(y: Any, group: Any) -> tuple[Any, Any]:
        w, marginal = posterior_over_nodes(examinee_node_loglik(logp, block_onehot(y, logp.shape[-1], logp.dtype)),
                                           log_pi, group)
        return marginal.sum(), w

    loglik, w = over_blocks(block, responses, groups)
    return w, loglik


def item_objectives(X: Any, counts: Any, nodes: Any, hyper: Mapping[str, Any], *, columns: tuple,
                    spec: mdl.ModelSpec) -> Any:
    """The M-step objective of each item (I,): sum_qk r_qik log P_ik(theta_q) + log prior(item_i)."""
    logp = node_log_probs(X, columns, spec, nodes)
    return jnp.einsum("qik,qik->i", counts, logp) + item_log_prior(X, columns, spec, hyper)


def block_hessians(fun: Callable[[Any], Any], X: Any) -> tuple[Any, Any]:
    """Gradient (I, p) and per-row Hessian blocks (I, p, p) of ``fun(X).sum()`` when fun is separable by row.

    Row i of X only enters fun(X)[i], so one Hessian-vector product with the j-th column of
    ones gives column j of every row's block at once: p products instead of I p.
    """
    total = lambda Z: fun(Z).sum()  # noqa: E731
    grad = jax.grad(total)
    g = grad(X)
    columns = [jax.jvp(grad, (X,), (jnp.zeros_like(X).at[:, j].set(1.0),))[1] for j in range(X.shape[1])]
    return g, jnp.stack(columns, axis=-1)


def small_cholesky(A: Any) -> tuple[list[list[Any]], list[Any]]:
    """Cholesky factor L (as a p x p list of (n,) arrays, lower triangle) and the pivots A_jj - sum_k L_jk^2 of
    a batch of small symmetric matrices A (n, p, p), written out for the static p (no LAPACK call, so a
    compiled program using it can be stored and reloaded). A is positive definite iff every pivot is > 0."""
    p = A.shape[-1]
    L: list[list[Any]] = [[None] * p for _ in range(p)]
    pivots = []
    for j in range(p):
        pivot = A[:, j, j] - sum((L[j][k] ** 2 for k in range(j)), jnp.zeros_like(A[:, 0, 0]))
        pivots.append(pivot)
        L[j][j] = jnp.sqrt(jnp.maximum(pivot, 1e-300))
        for i in range(j + 1, p):
            L[i][j] = (A[:, i, j] - sum((L[i][k] * L[j][k] for k in range(j)), jnp.zeros_like(pivot))) / L[j][j]
    return L, pivots


def small_cholesky_solve(A: Any, b: Any) -> tuple[Any, Any]:
    """Solve A x = b for a batch of small symmetric matrices A (n, p, p), b (n, p) by :func:`small_cholesky`.

    Returns (x, the smallest pivot A_jj - sum_k L_jk^2 of each matrix: > 0 iff A is positive definite).
    """
    p = A.shape[-1]
    L, pivots = small_cholesky(A)
    z: list[Any] = []
    for i in range(p):
        z.append((b[:, i] - sum((L[i][k] * z[k] for k in range(i)), jnp.zeros_like(b[:, 0]))) / L[i][i])
    x: list[Any] = [None] * p
    for i in reversed(range(p)):
        x[i] = (z[i] - sum((L[k][i] * x[k] for k in range(i + 1, p)), jnp.zeros_like(b[:, 0]))) / L[i][i]
    return jnp.stack(x, axis=-1), jnp.min(jnp.stack(pivots, axis=-1), axis=-1)


LIFTS = (0.0, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)  # trial shifts, in units of the block's largest diagonal


def damped_newton_direction(g: Any, H: Any, max_step: float = 1.0) -> Any:
    """Per row: d = (-H + lambda I)^{-1} g with the smallest lambda of :data:`LIFTS` (times the block's scale)
    that makes -H + lambda I positive definite, else Gershgorin's shift (lambda >= -min_i (A_ii - sum_j |A_ij|),
    which always does); |d| capped at ``max_step``."""
    neg = -0.5 * (H + jnp.swapaxes(H, -1, -2))
    diagonal = jnp.diagonal(neg, axis1=-2, axis2=-1)
    scale = jnp.maximum(jnp.abs(diagonal).max(axis=-1), 1e-8)
    eye = jnp.eye(H.shape[-1], dtype=H.dtype)
    off = jnp.abs(neg).sum(axis=-1) - jnp.abs(diagonal)
    step, _ = small_cholesky_solve(neg + (jnp.maximum(0.0, -(diagonal - off).min(axis=-1)) + 1e-4 * scale)[:, None,
                                                                                                          None] * eye, g)
    # every lift at once (one batched solve keeps the compiled M-step small: it is stored and loaded
    # by each process); the smallest positive-definite shift wins
    lifts = jnp.asarray(LIFTS, dtype=H.dtype)
    trials, smallest = jax.vmap(lambda lift: small_cholesky_solve(neg + (lift * scale)[:, None, None] * eye, g))(lifts)
    for k in reversed(range(len(LIFTS))):
        step = jnp.where((smallest[k] > 1e-10 * scale)[:, None], trials[k], step)
    longest = jnp.abs(step).max(axis=-1, keepdims=True)
    return step * jnp.minimum(1.0, max_step / jnp.maximum(longest, 1e-300))


STEP_SIZES = (1.0, 0.5, 0.25, 0.1, 0.0)


def best_fraction(objective: Callable[[Any], Any], x: Any, direction: Any) -> Any:
    """The fraction t in :data:`STEP_SIZES` that maximises ``objective(x + t direction)`` (0: stay), for each
    entry of the objective's value (the M-step: one per item) or for a scalar one; non-finite values lose."""
    sizes = jnp.asarray(STEP_SIZES, dtype=x.dtype)
    values = jax.vmap(lambda t: objective(x + t * direction))(sizes)
    values = jnp.where(jnp.isfinite(values), values, -jnp.inf)
    return sizes[jnp.argmax(values, axis=0)]


def _m_step_items(X: Any, counts: Any, nodes: Any, hyper: Mapping[str, Any], free_rows: Any, *, columns: tuple,
                  spec: mdl.ModelSpec) -> tuple[Any, Any]:
    """One damped Newton step per item with step halving (each item's objective never falls); anchors stay.
    Returns the new X and the item log prior at X, sum_i log prior(item_i) (the EM's objective needs it)."""
    fun = partial(item_objectives, counts=counts, nodes=nodes, hyper=hyper, columns=columns, spec=spec)
    g, H = block_hessians(fun, X)
    direction = damped_newton_direction(g, H) * free_rows[:, None]
    best = best_fraction(fun, X, direction)  # (I,)
    return X + best[:, None] * direction, item_log_prior(X, columns, spec, hyper).sum()


def group_node_mass(w: Any, group: Any, n_groups: int) -> Any:
    """sum over the examinees of group g of w_mq, (G, Q) (group -1, the padding, counts in none)."""
    return jax.nn.one_hot(group, n_groups, dtype=w.dtype).T @ w


def population_moments(mass: Any, nodes: Any) -> tuple[Any, Any]:
    """Posterior mean and log sd of the abilities of each group from its mass at the nodes (G, Q)
    (:func:`group_node_mass`): sum_m w_mq theta_q / N_g; NumPy (the EM's host state)."""
    total = mass.sum(axis=1)
    mean = mass @ nodes / total
    var = mass @ nodes ** 2 / total - mean ** 2
    return mean, 0.5 * np.log(np.maximum(var, 1e-6))


def expanded_scale_step(X: np.ndarray, mean: np.ndarray, log_sd: np.ndarray, columns: Sequence[str],
                        location: bool, scale: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parameter-expanded EM (Liu, Rubin & Wu 1998): re-express a cycle's answer on the reference group's scale.

    The M-step's posterior moments of the reference group (``mean[0]``, ``log_sd[0]``: mu, log sigma) are moved
    into the items, theta = mu + sigma theta', so that the likelihood is unchanged and the reference group stays
    N(0, 1): binary items a' = a sigma (log a + log sigma), d' = d + a mu (1PL: a = 1); graded items
    a' = a sigma, b1' = (b1 - mu) / sigma, log gap' = log gap - log sigma; every other group
    mean_g' = (mean_g - mu) / sigma, log sd_g' = log sd_g - log sigma. ``location`` / ``scale`` say which of the
    two the reference group holds fixed (its free moments are left as they are).

    Why: where every posterior is narrow (thousands of items per examinee) plain EM moves the common location
    and unit of the abilities by about (posterior var / prior var) of the remaining distance a cycle, so it
    stops far from the mode (3PL 3,000 items x 250: every ability 0.15 low after 73 cycles); with this step
    that mode is solved each cycle.
    """
    X = np.array(X, dtype=np.float64)
    mean, log_sd = np.array(mean, dtype=np.float64), np.array(log_sd, dtype=np.float64)
    mu = mean[0] if location else 0.0
    log_sigma = log_sd[0] if scale else 0.0
    sigma = float(np.exp(log_sigma))
    index = {name: k for k, name in enumerate(columns)}
    slope = np.exp(X[:, index["a"]]) if "a" in index else np.ones(X.shape[0])
    if "d" in index:
        X[:, index["d"]] += slope * mu
    if "b1" in index:
        X[:, index["b1"]] = (X[:, index["b1"]] - mu) / sigma
    for name, k in index.items():
        if name.startswith("gap"):
            X[:, k] -= log_sigma
    if "a" in index:
        X[:, index["a"]] += log_sigma
    mean = (mean - mu) / sigma
    log_sd = log_sd - log_sigma
    return X, mean, log_sd


def centre_update(values: np.ndarray, precision: float, hyper_loc: float, hyper_scale: float) -> float:
    """The empirical-Bayes centre of a normal item prior given the free items' current values u_i (unconstrained):
    the mode in mu of sum_i log N(u_i | mu, 1 / tau) + log N(mu | m0, s0^2),

        mu = (tau sum_i u_i + m0 / s0^2) / (n tau + 1 / s0^2),

    with tau = ``precision`` (the prior's precision, 1 / s^2), m0, s0 = ``hyper_loc``, ``hyper_scale`` (the
    centre's hyperprior). Iterated with EM's M-step it is BILOG's floating prior; its fixed point is the
    normal-normal marginal likelihood's (each item's mode lies between its own estimate and mu in the ratio of
    the two precisions, so mu = mean of the modes holds exactly where mu is the precision-weighted mean of the
    estimates)."""
    values = np.asarray(values, dtype=np.float64)
    hyper_precision = 1.0 / hyper_scale ** 2
    return float((precision * values.sum() + hyper_loc * hyper_precision) / (precision * values.size + hyper_precision))


def update_centres(X: np.ndarray, free_rows: np.ndarray, current: Mapping[str, float], *, columns: Sequence[str],
                   spec: mdl.ModelSpec) -> dict[str, float]:
    """The learned centres of the item priors (``current``: mu_a, mu_d, mu_b1, mu_c, those the spec learns), each
    by :func:`centre_update` from the free items' current values, once per EM cycle (NumPy, nothing compiled).

    Each prior is taken as the normal of its curvature at its mode: log a, d and b_1 are normal already
    (precision 1 / s^2); the logit-Beta prior of c, Beta(kappa m, kappa (1 - m)) with m = sigmoid(mu_c), has its
    mode at logit c = mu_c and there the precision kappa m (1 - m), taken at the current centre. Left out on
    purpose: the logit-Beta's normaliser, whose peak is highest at m = 1/2 and drew the joint mode's centre
    towards it, and the items' own curvature, which a Laplace step over the items adds. Tried and not kept: a
    correction for the skew of logit c (its mean lies psi(kappa m) - psi(kappa (1 - m)) - logit m = -0.069 from
    its mode under Beta(5, 15)), weighting each item by the data's share of its complete-data precision: it
    moved 10 x 2000 3PL's mean c from -0.023 to -0.005 over 10 replications (-0.008 without it over 30, so that
    was noise) and spoiled 150 x 800 (+0.014 against -0.001; c ~ U(0.05, 0.30): +0.025 against +0.006).
    """
    X = np.asarray(X, dtype=np.float64)
    free_rows = np.asarray(free_rows, dtype=bool)
    hyperprior = mdl.hyper_prior(spec)
    out = {}
    for site in mdl.item_sites(spec):
        if site.hyper is None or site.hyper not in current:
            continue
        centre = float(current[site.hyper])
        precision = float(np.asarray(site.prior.terms(np.float64(centre), site.prior.location(centre), np)[1]))
        out[site.hyper] = centre_update(X[free_rows, columns.index(site.name)], precision, *hyperprior[site.hyper])
    return out


# ----------------------------------------------------------------------------- the full marginal posterior
@dataclass(frozen=True, eq=False)
class Layout:
    """Which entries of (X, mean, log_sd) are free, and their order in the flat vector (hashable by content,
    so compiled kernels are reused by every fit of the same shape)."""

    free_rows: np.ndarray   # (I,) bool: items estimated (False: anchors held at their bank values)
    n_columns: int
    free_mean: np.ndarray   # (G,) bool
    free_sd: np.ndarray     # (G,) bool

    def _key(self) -> tuple:
        return (self.free_rows.tobytes(), self.n_columns, self.free_mean.tobytes(), self.free_sd.tobytes())

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and self._key() == other._key()

    @property
    def size(self) -> int:
        return int(self.free_rows.sum()) * self.n_columns + int(self.free_mean.sum()) + int(self.free_sd.sum())

    def flatten(self, X: Any, mean: Any, log_sd: Any) -> Any:
        xp = jnp if isinstance(X, jax.Array) else np
        return xp.concatenate([X[self.free_rows].reshape(-1), mean[self.free_mean], log_sd[self.free_sd]])

    def unflatten(self, flat: Any, X: Any, mean: Any, log_sd: Any) -> tuple[Any, Any, Any]:
        rows = np.flatnonzero(self.free_rows)
        n_item = len(rows) * self.n_columns
        n_mean = int(self.free_mean.sum())
        X = X.at[rows].set(flat[:n_item].reshape(len(rows), self.n_columns))
        mean = mean.at[np.flatnonzero(self.free_mean)].set(flat[n_item:n_item + n_mean])
        log_sd = log_sd.at[np.flatnonzero(self.free_sd)].set(flat[n_item + n_mean:])
        return X, mean, log_sd


def marginal_log_posterior(flat: Any, X: Any, mean: Any, log_sd: Any, responses: Any, groups: Any, nodes: Any,
                           hyper: Mapping[str, Any], *, layout: Layout, columns: tuple,
                           spec: mdl.ModelSpec) -> Any:
    """log L(items, pop) + sum_i log prior(item_i), as a function of the free parameters ``flat``; the
    responses in blocks (:func:`irtexam.irt.examinee_blocks.response_blocks`)."""
    X, mean, log_sd = layout.unflatten(flat, X, mean, log_sd)
    logp = node_log_probs(X, columns, spec, nodes)
    log_pi = population_log_weights(nodes, mean, log_sd)

    def block(y: Any, group: Any) -> tuple[Any, None]:
        onehot = block_onehot(y, logp.shape[-1], logp.dtype)
        return posterior_over_nodes(examinee_node_loglik(logp, onehot), log_pi, group)[1].sum(), None

    return over_blocks(block, responses, groups)[0] + item_log_prior(X, columns, spec, hyper).sum()
