"""The information of the marginal estimator: the examinees' marginal score vectors, their cross-product (the
empirical information) and the exact Hessian of the marginal log posterior by Louis' identity, each summed a
block of examinees at a time (:mod:`irtexam.irt.examinee_blocks`). The driver is
:mod:`irtexam.irt.marginal.em`; the model at the nodes and the E-/M-steps are :mod:`irtexam.irt.marginal.steps`.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .. import model as mdl
from ..examinee_blocks import block_onehot, over_blocks
from .steps import (Layout, block_hessians, examinee_node_loglik, item_objectives, marginal_log_posterior,
                    node_log_probs, population_log_weights, posterior_over_nodes, small_cholesky)


def _block_scores(X: Any, mean: Any, log_sd: Any, y: Any, group: Any, nodes: Any, logp: Any, dlogp: Sequence[Any],
                  layout: Layout) -> tuple[Any, Any]:
    """One block's marginal score vectors: items (B, I_free, p) and population parameters (B, n_pop)."""
    onehot = block_onehot(y, logp.shape[-1], logp.dtype)
    w, _ = posterior_over_nodes(examinee_node_loglik(logp, onehot), population_log_weights(nodes, mean, log_sd), group)
    rows = np.flatnonzero(layout.free_rows)
    items = jnp.stack([jnp.einsum("eq,kie,qik->ei", w, onehot, d)[:, rows] for d in dlogp], axis=-1)
    pop = []
    n_groups = mean.shape[0]
    member = jax.nn.one_hot(group, n_groups, dtype=w.dtype)
    sd = jnp.exp(log_sd)
    z = (nodes[None, :] - mean[:, None]) / sd[:, None]            # (G, Q)
    pi = jnp.exp(population_log_weights(nodes, mean, log_sd))
    # d log pi_gq / d mean_g and / d log sd_g (the normaliser's derivative included)
    d_mean = z / sd[:, None] - (pi * z / sd[:, None]).sum(axis=1, keepdims=True)
    d_logsd = z ** 2 - (pi * z ** 2).sum(axis=1, keepdims=True)
    for g in np.flatnonzero(layout.free_mean):
        pop.append(member[:, g] * (w @ d_mean[g]))
    for g in np.flatnonzero(layout.free_sd):
        pop.append(member[:, g] * (w @ d_logsd[g]))
    return items, (jnp.stack(pop, axis=1) if pop else jnp.zeros((w.shape[0], 0), dtype=w.dtype))


def _node_derivatives(X: Any, columns: tuple, spec: mdl.ModelSpec, nodes: Any) -> tuple[Any, list[Any]]:
    """log P (Q, I, K + 1) and its derivative along each column of X, one forward-mode pass a column (the node
    log-probabilities are separable by item)."""
    logp_fn = lambda Z: node_log_probs(Z, columns, spec, nodes)  # noqa: E731
    return logp_fn(X), [jax.jvp(logp_fn, (X,), (jnp.zeros_like(X).at[:, j].set(1.0),))[1] for j in range(X.shape[1])]


def marginal_scores(X: Any, mean: Any, log_sd: Any, responses: Any, groups: Any, nodes: Any, *,
                    layout: Layout, columns: tuple, spec: mdl.ModelSpec) -> tuple[Any, Any]:
    """The examinees' marginal score vectors: items (E, I_free, p) and population parameters (E, n_pop)
    (padded examinees of :func:`irtexam.irt.examinee_blocks.response_blocks`: zero rows).

    s_m = sum_q w_mq d/du log p(y_m, theta_q): for item i, sum_q w_mq sum_k [y_im = k] d log P_ik(theta_q) / du_i.
    """
    logp, dlogp = _node_derivatives(X, columns, spec, nodes)
    return over_blocks(lambda y, group: ((), _block_scores(X, mean, log_sd, y, group, nodes, logp, dlogp, layout)),
                       responses, groups)[1]


def score_cross_product(X: Any, mean: Any, log_sd: Any, responses: Any, groups: Any, nodes: Any, *,
                        layout: Layout, columns: tuple, spec: mdl.ModelSpec) -> Any:
    """Empirical information sum_m s_m s_m^T of the marginal score vectors (:func:`marginal_scores`), (P, P),
    added up a block of examinees at a time."""
    logp, dlogp = _node_derivatives(X, columns, spec, nodes)

    def block(y: Any, group: Any) -> tuple[Any, None]:
        items, pop = _block_scores(X, mean, log_sd, y, group, nodes, logp, dlogp, layout)
        S = jnp.concatenate([items.reshape(items.shape[0], -1), pop], axis=1)
        return S.T @ S, None

    return over_blocks(block, responses, groups)[0]


def node_pair_products(basis: Any, w: Any) -> Any:
    """N_q[(k, i), (l, j)] = sum_m w_mq B_kim B_ljm at every node q, (Q, K', I, K', I), for indicator rows
    ``basis`` (K', I, E): one (K' I x E) @ (E x K' I) matrix product a node (``lax.map`` over the nodes keeps
    one node's weighted copy in memory; a single einsum over q, k, i, l, j ran 2-3x slower on a CPU)."""
    n_k, n_i, n_e = basis.shape
    flat = basis.reshape(n_k * n_i, n_e)
    return jax.lax.map(lambda w_q: ((flat * w_q[None, :]) @ flat.T).reshape(n_k, n_i, n_k, n_i), w.T)


def contract_pairs(left: Any, pairs: Any, right: Any) -> Any:
    """sum_q sum_kl left[q, i, k, a] pairs[q, k, i, l, j] right[q, j, l, b], (I, p, I, p), in two steps (XLA
    contracted the three-operand einsum about 10x slower)."""
    half = jnp.einsum("qkilj,qjlb->qkijb", pairs, right)
    return jnp.einsum("qika,qkijb->iajb", left, half)


def missing_information(D: Any, onehot: Any, w: Any, complete: bool = False) -> Any:
    """sum_q sum_kl D_qika N_q[(k, i), (l, j)] D_qjlb with N_q[(k, i), (l, j)] = sum_m w_mq [y_im = k][y_jm = l],
    (I, p, I, p): the cross-item part of Louis' identity (:func:`louis_hessian`).

    Taken in the basis B_0 = [y_im observed], B_k = [y_im = k] (k >= 1), since [y_im = 0] = B_0 - sum_k B_k
    moves D to D'_0 = D_0, D'_k = D_k - D_0. With ``complete`` data (B_0 = 1) the terms with B_0 are node
    counts, c_qik = sum_m w_mq B_kim and n_q = sum_m w_mq, so only the K^2 category products run over the
    examinees instead of (K + 1)^2 (a quarter for binary items):

        sum_q [D'_0 n_q D'_0' + D'_0 s_q' + s_q D'_0'] + sum_{k,l >= 1} ...,   s_qia = sum_{k >= 1} c_qik D'_qika.
    """
    D_basis = jnp.concatenate([D[:, :, :1], D[:, :, 1:] - D[:, :, :1]], axis=2)       # (Q, I, K + 1, p)
    categories = onehot[1:]
    if not complete:
        basis = jnp.concatenate([onehot.sum(axis=0, keepdims=True), categories], axis=0)
        return contract_pairs(D_basis, node_pair_products(basis, w), D_basis)
    inner = contract_pairs(D_basis[:, :, 1:], node_pair_products(categories, w), D_basis[:, :, 1:])
    d0 = D_basis[:, :, 0]                                                               # (Q, I, p)
    s = jnp.einsum("kie,eq,qika->qia", categories, w, D_basis[:, :, 1:])
    total = w.sum(axis=0)                                                               # (Q,)
    return inner + jnp.einsum("qia,qjb->iajb", d0, total[:, None, None] * d0 + s) \
        + jnp.einsum("qia,qjb->iajb", s, d0)


def louis_hessian(X: Any, mean: Any, log_sd: Any, responses: Any, groups: Any, nodes: Any, hyper: Mapping[str, Any], *,
                  layout: Layout, columns: tuple, spec: mdl.ModelSpec, complete: bool = False) -> Any:
    """The exact Hessian of :func:`irtexam.irt.marginal.steps.marginal_log_posterior` over the free parameters, by Louis' identity.

    With w_mq the posterior over the nodes, g_mq the complete-data score of examinee m at node q and
    s_m = sum_q w_mq g_mq (the examinee's marginal score), the items' block is
    H = sum_qk r_qik d2 log P_ik(theta_q) + prior  (block diagonal by item)
      + sum_q sum_kl D_qik N_q[(k, i), (l, j)] D_qjl'  -  sum_m s_m s_m',
    where D_qik = d log P_ik(theta_q) / du_i and N_q[(k, i), (l, j)] = sum_m w_mq [y_im = k][y_jm = l]:
    batched products of (K + 1) I x E matrices, far cheaper than differentiating the marginal
    likelihood P times (:func:`missing_information`, where ``complete`` data need K^2 of them instead of
    (K + 1)^2). The population parameters' columns (few) are Hessian-vector products.
    """
    logp, derivatives = _node_derivatives(X, columns, spec, nodes)
    p = X.shape[1]
    D = jnp.stack(derivatives, axis=-1)                                                 # (Q, I, K + 1, p)
    log_pi = population_log_weights(nodes, mean, log_sd)

    def block(y: Any, group: Any) -> tuple[tuple[Any, Any, Any], None]:
        onehot = block_onehot(y, logp.shape[-1], logp.dtype)
        w, _ = posterior_over_nodes(examinee_node_loglik(logp, onehot), log_pi, group)
        score = jnp.einsum("eq,kie,qika->eia", w, onehot, D).reshape(w.shape[0], -1)  # (B, I p)
        return (jnp.einsum("kie,eq->qik", onehot, w), missing_information(D, onehot, w, complete),
                score.T @ score), None

    (counts, missing, cross), _ = over_blocks(block, responses, groups)                    # missing: (I, p, I, p)
    _, blocks = block_hessians(partial(item_objectives, counts=counts, nodes=nodes, hyper=hyper, columns=columns,
                                       spec=spec), X)                                  # (I, p, p)
    n_items = X.shape[0]
    eye = jnp.eye(n_items, dtype=X.dtype)
    items = (jnp.einsum("iab,ij->iajb", blocks, eye) + missing).reshape(n_items * p, n_items * p) - cross
    rows = np.flatnonzero(np.repeat(layout.free_rows, p))
    items = items[np.ix_(rows, rows)]
    n_pop = int(layout.free_mean.sum() + layout.free_sd.sum())
    if not n_pop:
        return items
    flat = layout.flatten(X, mean, log_sd)
    grad = jax.grad(partial(marginal_log_posterior, layout=layout, columns=columns, spec=spec))
    args = (X, mean, log_sd, responses, groups, nodes, hyper)
    size = flat.shape[0]
    pop_columns = jnp.stack([jax.jvp(lambda f: grad(f, *args), (flat,),
                                     (jnp.zeros(size, dtype=flat.dtype).at[size - n_pop + j].set(1.0),))[1]
                             for j in range(n_pop)], axis=1)                           # (P, n_pop)
    top = jnp.concatenate([items, pop_columns[:-n_pop]], axis=1)
    bottom = pop_columns.T
    return jnp.concatenate([top, bottom], axis=0)


def louis_low_rank_parts(X: Any, mean: Any, log_sd: Any, responses: Any, groups: Any, nodes: Any,
                         hyper: Mapping[str, Any], *, layout: Layout, columns: tuple, spec: mdl.ModelSpec) -> tuple[Any, Any]:
    """The observed information of the free item parameters as each item's own block minus a low-rank part,
    -H = C - V'V, without a dense P x P matrix (:class:`irtexam.irt.marginal.em.LowRankCovariance`, ``sign=-1``).

    Louis' identity per examinee: C = sum_m E_w[-d2 log p(y_m | theta)] + prior information, block diagonal by
    item (the complete-data information, from the expected counts; returned as the negative Hessian blocks
    (I, p, p)), and the missing information sum_m Cov_w(g_m(theta)) of the complete-data score g_m over the
    examinee's posterior. The latter is taken to second order in theta - E_w theta: g_m regressed under w_m on
    phi_1 = theta - E_w theta and phi_2 = phi_1^2 - Var_w theta gives Cov_w(g_m) ~ G_m Sigma_m^-1 G_m', with G_m
    (P, 2) the cross-moments E_w[g phi'] and Sigma_m = E_w[phi phi'], exact where g_m is quadratic in theta over
    the posterior (narrow posteriors: many items per examinee, where the score cross-product is singular).
    Returns (C blocks (I, p, p), V rows (2 E, P_free)); padded examinees give zero rows."""
    logp, derivatives = _node_derivatives(X, columns, spec, nodes)
    D = jnp.stack(derivatives, axis=-1)                                                 # (Q, I, K + 1, p)
    log_pi = population_log_weights(nodes, mean, log_sd)
    rows = np.flatnonzero(layout.free_rows)

    def block(y: Any, group: Any) -> tuple[Any, Any]:
        onehot = block_onehot(y, logp.shape[-1], logp.dtype)
        w, _ = posterior_over_nodes(examinee_node_loglik(logp, onehot), log_pi, group)
        centre = w @ nodes
        phi1 = nodes[None, :] - centre[:, None]                                         # (B, Q)
        phi2 = phi1 ** 2 - (w * phi1 ** 2).sum(axis=1, keepdims=True)
        basis = jnp.stack([phi1, phi2], axis=-1)                                        # (B, Q, 2)
        sigma = jnp.einsum("eq,eqa,eqb->eab", w, basis, basis)
        sigma = sigma + (1e-12 + 1e-9 * jnp.trace(sigma, axis1=1, axis2=2))[:, None, None] * jnp.eye(2)
        # contracted over the nodes first, as one matrix product ((B 2) x Q) @ (Q x (I (K + 1) p)); the three-operand
        # einsum built a (B, Q, I, p) temporary (1.5 GB and 24 s at 2,000 items x 200 examinees on 241 nodes)
        moments = jnp.einsum("eqc,qika->ecika", w[:, :, None] * basis, D)
        cross = jnp.einsum("kie,ecika->eiac", onehot, moments)[:, rows]                  # (B, I_free, p, 2)
        # Sigma^-1 = L^-T L^-1 (L lower Cholesky): G Sigma^-1 G' = (G L^-T)(G L^-T)'
        L, _ = small_cholesky(sigma)
        first = cross[..., 0] / L[0][0][:, None, None]
        second = (cross[..., 1] - L[1][0][:, None, None] * first) / L[1][1][:, None, None]
        factor = jnp.stack([first, second], axis=1)                                     # (B, 2, I_free, p)
        counts = jnp.einsum("kie,eq->qik", onehot, w)
        return counts, factor.reshape(factor.shape[0] * 2, -1)

    counts, factor = over_blocks(block, responses, groups)
    _, blocks = block_hessians(partial(item_objectives, counts=counts, nodes=nodes, hyper=hyper, columns=columns,
                                       spec=spec), X)
    return -blocks, factor
