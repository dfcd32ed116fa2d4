"""Pure JAX item response functions and log-likelihoods.

All functions broadcast: ``theta`` of shape (n_examinees,) against item parameters
of shape (n_items, 1) gives (n_items, n_examinees). They are numerically stable in
log space, so they can be differentiated and jit-compiled freely.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

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

    Written for speed on large matrices (this is the inner loop of every fit):
    2PL: y z - softplus(z); 3PL: log P = log(c + (1 - c) sigmoid(z)) and
    log(1 - P) = log((1 - c) sigmoid(-z)), picking one per cell (2 exp + 1 log),
    with probabilities floored at 1e-30 so that no branch is infinite.
    """
    z = a * (theta - b)
    if isinstance(c, (int, float)) and c == 0.0:
        return y * z - jax.nn.softplus(z)
    correct = c + (1.0 - c) * jax.nn.sigmoid(z)
    wrong = (1.0 - c) * jax.nn.sigmoid(-z)
    return jnp.log(jnp.maximum(jnp.where(y > 0.5, correct, wrong), 1e-30))


def bernoulli_loglik(y: Array, mask: Array, theta: Array, a: Array, b: Array, c: Array | float = 0.0) -> Array:
    """Total log-likelihood over observed cells (paper eq. 2).

    L = sum_{i, m observed} r_im log p_i(theta_m) + (1 - r_im) log(1 - p_i(theta_m)).
    ``y`` and ``mask`` are (n_items, n_examinees); missing cells have mask 0.
    """
    return jnp.sum(jnp.where(mask, bernoulli_loglik_cells(y, theta, a, b, c), 0.0))


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
