"""Pure JAX item response functions and log-likelihoods.

All functions broadcast: ``theta`` of shape (n_examinees,) against item parameters
of shape (n_items, 1) gives (n_items, n_examinees). They are numerically stable in
log space, so they can be differentiated and jit-compiled freely.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from .kinds import ItemParams, cell_loglik

Array = jax.Array


def prob_correct(theta: Array, a: Array, b: Array, c: Array | float = 0.0, d: Array | float = 1.0) -> Array:
    """Four-parameter logistic item response function.

    P(X = 1 | theta) = c + (d - c) / (1 + exp(-a (theta - b)))

    with discrimination ``a``, difficulty ``b``, guessing (lower asymptote) ``c``
    and upper asymptote ``d``. c = 0, d = 1 gives the 2PL; additionally a = 1 the 1PL.
    """
    return c + (d - c) * jax.nn.sigmoid(a * (theta - b))


def log_prob_correct_and_wrong(theta: Array, a: Array, b: Array, c: Array | float = 0.0) -> tuple[Array, Array]:
    """Stable (log P, log(1 - P)) of the 3PL.

    log P     = logaddexp(log c, log(1 - c) + log sigmoid(z)),  z = a (theta - b)
    log (1-P) = log(1 - c) + log sigmoid(-z)
    With c = 0 (a Python/NumPy zero) this reduces to the 2PL's log sigmoid(+-z).
    """
    z = a * (theta - b)
    if isinstance(c, (int, float)) and c == 0.0:
        return jax.nn.log_sigmoid(z), jax.nn.log_sigmoid(-z)
    log_c = jnp.log(c)
    log_1mc = jnp.log1p(-c)
    return jnp.logaddexp(log_c, log_1mc + jax.nn.log_sigmoid(z)), log_1mc + jax.nn.log_sigmoid(-z)


def bernoulli_loglik_cells(y: Array, theta: Array, a: Array, b: Array, c: Array | float = 0.0) -> Array:
    """Per-cell log-likelihood y log P + (1 - y) log(1 - P) for 0/1 ``y`` (no masking).

    2PL (``c`` a Python zero): y z - softplus(z); 3PL: log P = log(c + (1 - c) sigmoid(z)) and
    log(1 - P) = log((1 - c) sigmoid(-z)), floored at 1e-30, z = a (theta - b). One implementation
    for NumPy and JAX, :func:`irtexam.irt.kinds.cell_loglik` (broadcast as given).
    """
    no_guessing = isinstance(c, (int, float)) and c == 0.0
    return cell_loglik(y, theta, ItemParams(a=a, b=b, c=None if no_guessing else c), pairwise=True)


def bernoulli_loglik(y: Array, mask: Array, theta: Array, a: Array, b: Array, c: Array | float = 0.0) -> Array:
    """Total log-likelihood over observed cells (paper eq. 2).

    L = sum_{i, m observed} r_im log p_i(theta_m) + (1 - r_im) log(1 - p_i(theta_m)).
    ``y`` and ``mask`` are (n_items, n_examinees); missing cells have mask 0.
    """
    return jnp.sum(jnp.where(mask, bernoulli_loglik_cells(y, theta, a, b, c), 0.0))


def _binary_cell_terms(right: Array, observed: Array, z: Array, c: Array | None) -> tuple[Array, Array, Array | None]:
    """Per-cell log-likelihood and its derivatives in z and c (zero on missing cells).

    With e = exp(-|z|), s = sigmoid(z) and 1 - s computed from e without cancellation:
      2PL (c None):  l = y z - softplus(z),            dl/dz = y - s.
      3PL, y = 1:    l = log(c + (1 - c) s),           dl/dz = (1 - c) s (1 - s) / p,  dl/dc = (1 - s) / p.
      3PL, y = 0:    l = log(1 - c) - softplus(z),     dl/dz = -s,                     dl/dc = -1 / (1 - c).
    ``c`` broadcasts against ``z`` (an (n_items, 1) column); per-item terms are computed once.
    """
    e = jnp.exp(-jnp.abs(z))
    inv = 1.0 / (1.0 + e)
    positive = z >= 0
    s = jnp.where(positive, inv, e * inv)
    s_bar = jnp.where(positive, e * inv, inv)  # 1 - s
    softplus = jnp.maximum(z, 0.0) + jnp.log1p(e)
    if c is None:
        ll = jnp.where(observed, jnp.where(right, z, 0.0) - softplus, 0.0)
        dz = jnp.where(observed, jnp.where(right, s_bar, -s), 0.0)
        return ll, dz, None
    one_minus_c, log_one_minus_c, minus_inv_one_minus_c = 1.0 - c, jnp.log1p(-c), -1.0 / (1.0 - c)
    p = jnp.maximum(c + one_minus_c * s, 1e-30)
    s_bar_over_p = s_bar / p
    ll = jnp.where(observed, jnp.where(right, jnp.log(p), log_one_minus_c - softplus), 0.0)
    dz = jnp.where(observed, jnp.where(right, one_minus_c * s * s_bar_over_p, -s), 0.0)
    dc = jnp.where(observed, jnp.where(right, s_bar_over_p, minus_inv_one_minus_c), 0.0)
    return ll, dz, dc


def _binary_sum_and_gradients(y: Array, mask: Array, theta: Array, a: Array, d: Array,
                              c: Array | None) -> tuple[Array, tuple[Array, ...]]:
    """Total log-likelihood and its gradients in (theta, a, d, c) from one pass over the cells.

    The per-cell derivative matrix D = dl/dz is contracted by matrix-vector products:
    dL/dtheta = a^T D, dL/da = D theta, dL/dd = D 1 (faster on CPU than fused reductions).
    """
    z = a[:, None] * theta[None, :] + d[:, None]
    ll, dz, dc = _binary_cell_terms(y > 0.5, mask, z, None if c is None else c[:, None])
    grad_theta = a @ dz
    grad_a = dz @ theta
    grad_d = jnp.sum(dz, axis=1)
    grad_c = jnp.zeros_like(d) if dc is None else jnp.sum(dc, axis=1)
    return jnp.sum(ll), (grad_theta, grad_a, grad_d, grad_c)


@jax.custom_jvp
def _binary_loglik_free_c(y: Array, mask: Array, theta: Array, a: Array, d: Array, c: Array) -> Array:
    return _binary_sum_and_gradients(y, mask, theta, a, d, c)[0]


@_binary_loglik_free_c.defjvp
def _binary_loglik_free_c_jvp(primals, tangents):
    y, mask, theta, a, d, c = primals
    value, grads = _binary_sum_and_gradients(y, mask, theta, a, d, c)
    _, _, t_theta, t_a, t_d, t_c = tangents
    return value, sum(jnp.vdot(g, t) for g, t in zip(grads, (t_theta, t_a, t_d, t_c)))


@jax.custom_jvp
def _binary_loglik_no_c(y: Array, mask: Array, theta: Array, a: Array, d: Array) -> Array:
    return _binary_sum_and_gradients(y, mask, theta, a, d, None)[0]


@_binary_loglik_no_c.defjvp
def _binary_loglik_no_c_jvp(primals, tangents):
    y, mask, theta, a, d = primals
    value, grads = _binary_sum_and_gradients(y, mask, theta, a, d, None)
    _, _, t_theta, t_a, t_d = tangents
    return value, sum(jnp.vdot(g, t) for g, t in zip(grads[:3], (t_theta, t_a, t_d)))


def binary_loglik(y: Array, mask: Array, theta: Array, a: Array, d: Array, c: Array | float | None = None) -> Array:
    """Total log-likelihood of a binary 1PL/2PL/3PL in slope-intercept form, with fused derivatives.

    L = sum_{i, m observed} log P(y_im | z_im),  z_im = a_i theta_m + d_i,
    P(1 | z) = c_i + (1 - c_i) sigmoid(z) (c None or 0: the 2PL).
    Shapes: y, mask (n_items, n_examinees); theta (n_examinees,); a, d, c (n_items,).

    The value and the gradients in (theta, a, d, c) come from a single pass over the
    cells (a custom JVP built from the analytic per-cell derivatives), 1.2-1.5x as
    fast as reverse-mode autodiff on large 3PL matrices in our measurements; higher derivatives
    (Hessians) still work because the JVP rule is itself differentiable.
    """
    if c is None or (isinstance(c, (int, float)) and c == 0.0):
        return _binary_loglik_no_c(y, mask, theta, a, d)
    c = jnp.broadcast_to(jnp.asarray(c, dtype=d.dtype), d.shape)
    return _binary_loglik_free_c(y, mask, theta, a, d, c)


def graded_category_logprobs(theta: Array, a: Array, thresholds: Array) -> Array:
    """Samejima graded response model: log P(X = k), k = 0..K, shape (..., K + 1).

    P(X >= k) = sigmoid(a (theta - b_k)) for k = 1..K with b_1 < ... < b_K;
    P(X = k) = P(X >= k) - P(X >= k + 1), with P(X >= 0) = 1 and P(X >= K + 1) = 0.
    ``thresholds`` has shape (n_items, K) and must be increasing along the last axis;
    ``theta`` broadcasts as (1, n_examinees), ``a`` as (n_items, 1).
    Computed in log space: log(s_k - s_{k+1}) with s = sigmoid, via
    log s_k + log1p(-exp(log s_{k+1} - log s_k)).
    """
    z = a[..., None] * (theta[..., None] - thresholds[:, None, :])  # (items, examinees, K)
    log_s = jax.nn.log_sigmoid(z)
    zeros = jnp.zeros(z.shape[:-1] + (1,), dtype=z.dtype)
    neg_inf = jnp.full(z.shape[:-1] + (1,), -jnp.inf, dtype=z.dtype)
    upper = jnp.concatenate([zeros, log_s], axis=-1)      # log P(X >= k), k = 0..K
    lower = jnp.concatenate([log_s, neg_inf], axis=-1)    # log P(X >= k + 1)
    diff = jnp.clip(lower - upper, max=-1e-12)
    return upper + jnp.log1p(-jnp.exp(diff))


def graded_loglik(y: Array, mask: Array, theta: Array, a: Array, thresholds: Array) -> Array:
    """Total log-likelihood of the graded response model over observed cells."""
    logp = graded_category_logprobs(theta, a, thresholds)
    k = jnp.clip(y, 0, thresholds.shape[-1]).astype(jnp.int32)
    picked = jnp.take_along_axis(logp, k[..., None], axis=-1)[..., 0]
    return jnp.sum(jnp.where(mask, picked, 0.0))


def normal_logpdf(x: Array, loc: float | Array, scale: float | Array) -> Array:
    """Elementwise log N(x | loc, scale^2)."""
    return -0.5 * ((x - loc) / scale) ** 2 - jnp.log(scale) - 0.5 * jnp.log(2 * jnp.pi)


def logit_beta_logpdf(u: Array, alpha: float, beta: float) -> Array:
    """Log density of u = logit(c) when c ~ Beta(alpha, beta) (Jacobian c (1 - c) included).

    log p(u) = alpha log c + beta log(1 - c) - log B(alpha, beta),  c = sigmoid(u).
    """
    log_beta_fn = gammaln(alpha) + gammaln(beta) - gammaln(alpha + beta)
    return alpha * jax.nn.log_sigmoid(u) + beta * jax.nn.log_sigmoid(-u) - log_beta_fn


def half_normal_log_logpdf(log_sigma: Array, scale: float) -> Array:
    """Log density of log(sigma) when sigma ~ HalfNormal(scale) (Jacobian sigma included)."""
    sigma = jnp.exp(log_sigma)
    return jnp.log(2.0) + normal_logpdf(sigma, 0.0, scale) + log_sigma
