"""The examinees' ability summaries of a marginal fit, computed where the posterior weights are (the device).

Each examinee m has a posterior over the quadrature nodes theta_1 < ... < theta_Q (spacing h), weights w_mq.
:func:`posterior_summary` turns the (E, Q) weights into everything the examinee table and the draws need, a block
of examinees at a time in one compiled program (``lax.map`` over the blocks: one block's temporaries in memory;
on a GPU the weights go to it once, the arithmetic and the random numbers stay there, only the results return):

* EAP and posterior sd: mu_m = sum_q w_mq theta_q, sd_m = sqrt(max(sum_q w_mq theta_q^2 - mu_m^2, 0));
* quantiles and draws by the inverse of the piecewise-linear CDF that spreads node q's mass evenly over its cell
  [theta_q - h/2, theta_q + h/2]: with F_mq = sum_{r <= q} w_mr and k = 1 + #{q < Q: F_mq < u} (at most Q),

      F_m^{-1}(u) = theta_k - h/2 + h clip((u - (F_mk - w_mk)) / w_mk, 0, 1);

  the draws take u ~ U(0, 1) from ``jax.random`` (one key a block), the quantiles u = p.

The host functions of :mod:`irtexam.irt.marginal.fit` (:func:`~irtexam.irt.marginal.fit.eap`,
:func:`~irtexam.irt.marginal.fit.posterior_quantiles`, :func:`~irtexam.irt.marginal.fit.sample_abilities`) compute
the same quantities in NumPy (the draws from NumPy's generator: statistically the same, not the same numbers);
the tests hold the two to each other. On a GPU the host versions took 37 s of a 10^9-cell fit (issue 43).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..compile_cache import compiled_executable

# draws x examinees of one block. A CPU wants the (S, B) uniforms and counts in its caches (2^17 values: 1 MB of
# float64; 500 draws x 50,000 examinees in blocks of 200 examinees 0.66 s, of 1,000 0.81 s, unblocked 1.2-2.5 s);
# a GPU wants few, large blocks (each block is a few kernel launches)
ABILITY_BLOCK_VALUES = {"cpu": 1 << 17}
DEVICE_BLOCK_VALUES = 1 << 22
UNROLL = 10  # nodes a pass of the count loop (fori_loop(unroll=10): 0.56 s; not unrolled 1.15 s; all 60: 2.0 s)


class AbilitySummary(NamedTuple):
    """Per examinee: EAP ``mean`` and posterior ``sd`` (E,), ``quantiles`` (E, P) at the requested probabilities,
    and ``draws`` (S, E) float32 (None when no draws were asked for)."""

    mean: np.ndarray
    sd: np.ndarray
    quantiles: np.ndarray
    draws: np.ndarray | None


def block_values() -> int:
    """Draws x examinees of one block on jax's default backend (:data:`ABILITY_BLOCK_VALUES`, else
    :data:`DEVICE_BLOCK_VALUES`)."""
    return ABILITY_BLOCK_VALUES.get(jax.default_backend(), DEVICE_BLOCK_VALUES)


def summary_block_size(n_examinees: int, n_draws: int, max_values: int | None = None) -> int:
    """Examinees a block: all of them when draws x examinees fit in ``max_values`` (default :func:`block_values`),
    else ``max_values // draws`` (at least 1)."""
    max_values = block_values() if max_values is None else max_values
    return max(1, min(max(n_examinees, 1), max_values // max(n_draws, 1)))


def inverse_cdf(weights: Any, cdf: Any, nodes: Any, u: Any) -> Any:
    """F_m^{-1}(u) of the piecewise-linear posterior CDF (module docstring) for ``u`` (S, B) and a block's
    ``weights`` and ``cdf`` (B, Q): (S, B). The node index k counts the CDF values below u over the first Q - 1
    nodes (the last takes whatever lies above them all): a loop over the nodes adding up comparisons on the
    (S, B) block (unrolled by :data:`UNROLL`: one fused pass over the block per UNROLL nodes), then w_k and F_k
    gathered. On a CPU this ran 10x faster than the same count as one reduction over a (Q, S, B) comparison
    (500 draws x 50,000 examinees: 0.6 s against 6-9 s, and NumPy's node-by-node count 6.6 s)."""
    h = nodes[1] - nodes[0]
    by_node, weight_by_node = cdf.T, weights.T                                    # (Q, B)
    k = jax.lax.fori_loop(0, by_node.shape[0] - 1,
                          lambda q, count: count + (by_node[q][None, :] < u).astype(jnp.int32),
                          jnp.zeros(u.shape, dtype=jnp.int32), unroll=UNROLL)
    w_k = jnp.take_along_axis(weight_by_node, k, axis=0)
    below = jnp.take_along_axis(by_node, k, axis=0) - w_k
    frac = jnp.clip((u - below) / jnp.maximum(w_k, 1e-300), 0.0, 1.0)
    return nodes[k] - h / 2 + frac * h


def _summary_blocks(weights: Any, nodes: Any, probs: Any, keys: Any, n_draws: int) -> tuple[Any, Any, Any, Any]:
    """:func:`posterior_summary` on the device: ``weights`` (n_blocks, B, Q) float64, ``probs`` (P,), ``keys``
    (n_blocks, 2) uint32; returns mean, sd (n_blocks * B,), quantiles (n_blocks * B, P), draws (S, n_blocks * B)
    float32."""

    def one(block: tuple[Any, Any]) -> tuple[Any, Any, Any, Any]:
        w, key = block
        cdf = jnp.cumsum(w, axis=1)
        mean = w @ nodes
        sd = jnp.sqrt(jnp.maximum(w @ nodes ** 2 - mean ** 2, 0.0))
        quantiles = inverse_cdf(w, cdf, nodes, jnp.broadcast_to(probs[:, None], (probs.shape[0], w.shape[0])))
        u = jax.random.uniform(key, (n_draws, w.shape[0]), dtype=w.dtype)
        draws = inverse_cdf(w, cdf, nodes, u).astype(jnp.float32)
        return mean, sd, quantiles.T, draws

    mean, sd, quantiles, draws = jax.lax.map(one, (weights, keys))
    n = weights.shape[0] * weights.shape[1]
    return (mean.reshape(n), sd.reshape(n), quantiles.reshape(n, probs.shape[0]),
            jnp.transpose(draws, (1, 0, 2)).reshape(n_draws, n))


def posterior_summary(weights: np.ndarray, nodes: np.ndarray, probs: Sequence[float], n_draws: int,
                      seed: int, max_values: int | None = None) -> AbilitySummary:
    """EAP, posterior sd, quantiles at ``probs`` and ``n_draws`` draws of every examinee's ability from its posterior
    ``weights`` (E, Q) over the equally spaced ``nodes`` (Q,), in one compiled program over blocks of examinees
    (:func:`summary_block_size`); the draws from ``jax.random`` with the key ``seed``. ``n_draws`` 0: no draws.
    The last block is padded with examinees whose weights are those of the first (dropped from the results)."""
    weights = np.asarray(weights, dtype=np.float64)
    n_examinees, n_nodes = weights.shape
    if n_examinees == 0:
        empty = np.zeros(0)
        return AbilitySummary(empty, empty, np.zeros((0, len(probs))),
                              np.zeros((n_draws, 0), dtype=np.float32) if n_draws else None)
    size = summary_block_size(n_examinees, max(n_draws, 1), max_values)
    n_blocks = -(-n_examinees // size)
    padded = weights if n_blocks * size == n_examinees else np.concatenate(
        [weights, np.broadcast_to(weights[:1], (n_blocks * size - n_examinees, n_nodes))])
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.PRNGKey(seed), n_blocks)
        args = (jax.device_put(padded.reshape(n_blocks, size, n_nodes)),
                jax.device_put(np.asarray(nodes, dtype=np.float64)),
                jax.device_put(np.asarray(probs, dtype=np.float64)), keys)
        # XLA's default options: slower to compile than the quick ones, the loop runs 2x faster
        run = compiled_executable("ability-summary", (n_draws,),
                                  lambda *a: _summary_blocks(*a, n_draws=n_draws), args, compiler_options={},
                                  check=False)
        mean, sd, quantiles, draws = (np.asarray(x) for x in run(*args))
    return AbilitySummary(mean[:n_examinees], sd[:n_examinees], quantiles[:n_examinees],
                          np.ascontiguousarray(draws[:, :n_examinees]) if n_draws else None)
