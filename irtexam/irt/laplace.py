"""Laplace (Fisher-information) covariance of a MAP fit, using the model's structure.

Given the abilities, items are independent; given the items, examinees are. The
information matrix of the unconstrained parameters therefore has the block form

    H = [[A, B], [B^T, D]]

with A block-diagonal (one k x k block per item), D the person-side block and B
the item/person cross terms. With per-cell expected Fisher information
F_im = sum_x grad p_x grad p_x^T / p_x (x over response categories) taken with
respect to (u_i, eta_m) (item parameters, examinee ability) and the chain rule
eta = M phi for the person parameters phi (phi = theta, or facet coordinates):

    A_i = sum_m F_im[u, u] + prior precision,
    G_im = F_im[u, eta],   W_m = sum_i F_im[eta, eta],
    D = M^T diag(W) M + prior precision,   B_i = G_i M.

The exact marginal covariances follow from the Schur complement
S = D - sum_i B_i^T A_i^-1 B_i:  Cov(phi) = S^-1 and
Cov(u_i) = A_i^-1 + A_i^-1 B_i S^-1 B_i^T A_i^-1, costing
O(n_items k P^2) instead of inverting the whole (n_items k + P)^2 matrix.
Joint draws use the same blocks: phi ~ N(phi_hat, S^-1), then
u_i | phi ~ N(u_i_hat - A_i^-1 B_i (phi - phi_hat), A_i^-1) (``item_coupling`` holds
A_i^-1 B_i, ``item_cond_cov`` A_i^-1); see :mod:`irtexam.irt.draws`.
For very large problems ``mode="blockwise"`` drops the coupling (Cov(u_i) = A_i^-1,
Cov(phi) = D^-1); it understates uncertainty and is reported as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from . import kinds
from . import likelihood as lk
from .compile_cache import fast_compile_options, fast_jit
from .alternating import P_CEIL, P_FLOOR, binary_item_information, information_from_moments
from .cell_blocks import ability_moments, item_moments, response_blocks, rows_per_block
from .model import (HYPER_KEYS, ITEM_KEYS, Design, ModelSpec, examinee_theta, fixes_scale, grm_thresholds,
                    item_prior_terms)
from .model import item_params as mdl_item_params


@dataclass(frozen=True)
class StandardisedPersonPrecision:
    """The person block D = M^T diag(w) M + diag(prior) of a model without facets, kept in O(n) numbers.

    The reported abilities are the raw ones standardised, theta = M raw with M = (I - V V^T) / sd, V (n, r)
    orthonormal: 1 / sqrt(n) (1PL, sd = 1), and theta / sqrt(n) as well where the unit is fixed by sd(raw).
    So D = Delta + B C B^T with Delta = diag(w / sd^2 + prior), B = [V, diag(w) V] (n x 2r) and
    C = [[V^T diag(w) V, -I], [-I, 0]] / sd^2, and by Woodbury

        D^-1 x = Delta^-1 x - Delta^-1 B (C^-1 + B^T Delta^-1 B)^-1 B^T Delta^-1 x,
        C^-1 = sd^2 [[0, -I], [-I, -V^T diag(w) V]],

    O(n r^2) instead of the dense n x n inverse (and n x n matrices M and D: 3.2 GB each at 20,000 examinees).
    Draws: with D = A^T A, A = [diag(w)^1/2 M; diag(prior)^1/2], D^-1 A^T eps (eps ~ N(0, I_2n)) has
    covariance D^-1.
    """

    w: np.ndarray      # (n,) information of each examinee's ability (W_m)
    prior: np.ndarray  # (n,) prior precision of each raw ability
    V: np.ndarray      # (n, r) orthonormal directions the standardisation removes
    sd: float          # sd of the raw abilities

    @property
    def size(self) -> int:
        return int(self.w.shape[0])

    def _jacobian_apply(self, x: np.ndarray) -> np.ndarray:
        """M x = (x - V (V^T x)) / sd (M is symmetric)."""
        return (x - self.V @ (self.V.T @ x)) / self.sd

    def _woodbury(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Delta^-1 (n,), B (n, 2r), (C^-1 + B^T Delta^-1 B)^-1 (2r, 2r))."""
        r = self.V.shape[1]
        delta_inv = 1.0 / (self.w / self.sd ** 2 + self.prior)
        wv = self.w[:, None] * self.V
        B = np.concatenate([self.V, wv], axis=1)
        c_inv = self.sd ** 2 * np.block([[np.zeros((r, r)), -np.eye(r)], [-np.eye(r), -(self.V.T @ wv)]])
        return delta_inv, B, np.linalg.inv(c_inv + (B * delta_inv[:, None]).T @ B)

    def solve(self, x: np.ndarray) -> np.ndarray:
        """D^-1 x for x of shape (n,) or (n, m)."""
        delta_inv, B, inner = self._woodbury()
        delta_inv = delta_inv.reshape((-1,) + (1,) * (x.ndim - 1))  # over x's rows, (n,) or (n, m)
        scaled = x * delta_inv
        return scaled - (B @ (inner @ (B.T @ scaled))) * delta_inv

    def sample(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        """(n_draws, n) draws of N(0, D^-1): D^-1 (M diag(w)^1/2 eps_1 + diag(prior)^1/2 eps_2)."""
        first = rng.standard_normal((self.size, n_draws))
        second = rng.standard_normal((self.size, n_draws))
        rhs = self._jacobian_apply(np.sqrt(self.w)[:, None] * first) + np.sqrt(self.prior)[:, None] * second
        return self.solve(rhs).T

    def dense(self) -> np.ndarray:
        """D^-1 as a dense n x n matrix (small fits and tests)."""
        return self.solve(np.eye(self.size))

    def jacobian(self) -> np.ndarray:
        """M as a dense n x n matrix."""
        return self._jacobian_apply(np.eye(self.size))


@dataclass
class LaplaceCovariance:
    """Marginal covariances of a MAP fit in unconstrained space.

    item_keys/item_slices describe how each item's parameter vector u_i is laid out;
    ``item_cov`` is (n_items, k, k); ``person_cov`` is (P, P) over the person-side
    parameters in ``person_keys`` order; ``M`` maps person parameters to examinee
    abilities (n_examinees, P).
    """

    item_keys: tuple[str, ...]
    item_slices: dict[str, slice]
    item_cov: np.ndarray
    person_keys: tuple[str, ...]
    person_slices: dict[str, slice]
    person_cov: np.ndarray | None
    M: np.ndarray | None
    mode: str
    item_cond_cov: np.ndarray | None = None
    item_coupling: np.ndarray | None = None
    # blockwise fits without facets: D kept structured (person_cov and M None, built on demand)
    person_precision: StandardisedPersonPrecision | None = None

    def person_covariance(self) -> np.ndarray:
        """Cov(phi) as a dense matrix (built from ``person_precision`` where the fit kept it structured)."""
        return self.person_cov if self.person_cov is not None else self.person_precision.dense()

    def jacobian(self) -> np.ndarray:
        """M (abilities from person parameters) as a dense matrix."""
        return self.M if self.M is not None else self.person_precision.jacobian()

    @property
    def conditional_item_cov(self) -> np.ndarray:
        """Cov(u_i | phi) = A_i^-1 (the item's own information plus prior, persons held fixed)."""
        return self.item_cond_cov if self.item_cond_cov is not None else self.item_cov

    def item_sd(self, key: str) -> np.ndarray:
        """Standard deviation of an unconstrained item parameter, per item (and per column)."""
        sl = self.item_slices[key]
        diag = np.diagonal(self.item_cov, axis1=1, axis2=2)[:, sl]
        return np.sqrt(np.maximum(diag, 0.0)).squeeze(-1) if diag.shape[1] == 1 else np.sqrt(np.maximum(diag, 0.0))

    def theta_cov(self) -> np.ndarray:
        """Covariance of examinee abilities: M Cov(phi) M^T."""
        M = self.jacobian()
        return M @ self.person_covariance() @ M.T

    def person_block(self, key: str) -> np.ndarray:
        """Covariance block of one person-side parameter group (e.g. 'z_llm')."""
        sl = self.person_slices[key]
        return self.person_covariance()[sl, sl]


def prior_precision(params: Mapping[str, jax.Array], spec: ModelSpec) -> dict[str, np.ndarray]:
    """Diagonal of -d2 log prior / du2 for every unconstrained parameter (all priors are separable).

    Item parameters: :func:`irtexam.irt.model.item_prior_terms` (float64). Abilities and
    facet levels (N(0, theta_scale^2)): 1 / theta_scale^2; GRM residuals (N(0, 1)): 1;
    log sigma with sigma ~ HalfNormal(1): 2 sigma^2.
    """
    values = {key: np.asarray(value, dtype=np.float64) for key, value in params.items()}
    out = item_prior_terms({k: v for k, v in values.items() if k in ITEM_KEYS or k in HYPER_KEYS}, spec, xp=np)[1]
    for key, value in values.items():
        if key in out or key in HYPER_KEYS:  # hyperparameters are held at their mode (empirical Bayes)
            continue
        if key == "resid":
            out[key] = np.ones(value.shape)
        elif key == "sigma_resid":
            out[key] = np.asarray(2.0 * np.exp(2.0 * value))
        else:  # theta_raw, z_<facet>
            out[key] = np.full(value.shape, 1.0 / spec.theta_scale ** 2)
    return out


def _item_layout(params: Mapping[str, jax.Array]) -> tuple[tuple[str, ...], dict[str, slice], int]:
    keys = tuple(k for k in ITEM_KEYS if k in params)
    slices, start = {}, 0
    for key in keys:
        width = 1 if params[key].ndim == 1 else params[key].shape[1]
        slices[key] = slice(start, start + width)
        start += width
    return keys, slices, start


def _person_layout(params: Mapping[str, jax.Array]) -> tuple[tuple[str, ...], dict[str, slice], int]:
    keys = tuple(k for k in params if k not in ITEM_KEYS and k not in HYPER_KEYS)
    slices, start = {}, 0
    for key in keys:
        width = int(np.prod(params[key].shape)) if params[key].ndim else 1
        slices[key] = slice(start, start + width)
        start += width
    return keys, slices, start


def _category_probs_fn(spec: ModelSpec, keys: tuple[str, ...], slices: dict[str, slice]) -> Callable:
    """p(u_i, eta) -> probabilities of each response category for one cell."""

    def unpack(u: jax.Array) -> dict[str, jax.Array]:
        return {k: (u[slices[k]] if k == "gap" else u[slices[k]][0]) for k in keys}

    if spec.kind_object.graded:
        def probs(u: jax.Array, eta: jax.Array) -> jax.Array:
            item = unpack(u)
            thresholds = grm_thresholds({k: (v[None] if k != "gap" else v[None, :]) for k, v in item.items()})[0]
            logp = lk.graded_category_logprobs(eta[None], jnp.exp(item["a"])[None], thresholds[None, :])
            return jnp.exp(logp[0, 0])
        return probs

    def probs(u: jax.Array, eta: jax.Array) -> jax.Array:
        item = mdl_item_params({k: v[None] for k, v in unpack(u).items()}, spec)
        return jnp.clip(kinds.category_probs(eta[None], item, pairwise=True)[0], 1e-7, 1 - 1e-7)
    return probs


@partial(fast_jit, static_argnames=("item_keys", "need_cross"))
def _binary_fisher_kernel(a: jax.Array, d: jax.Array, c: jax.Array, eta: jax.Array, mask: jax.Array,
                          item_keys: tuple[str, ...], need_cross: bool) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    z = a[:, None] * eta[None, :] + d[:, None]
    s = jax.nn.sigmoid(z)
    cc = c[:, None]
    slope = (1.0 - cc) * s * (1.0 - s)
    p = jnp.clip(cc + (1.0 - cc) * s, P_FLOOR, P_CEIL)  # float32: 1 - 1e-9 would round to 1
    w = jnp.where(mask, 1.0 / (p * (1.0 - p)), 0.0)
    A = binary_item_information(a, c, s, w, slope, eta, item_keys)
    W = (a * a) @ (w * slope * slope)
    G = None
    if need_cross:
        wj = w * slope * a[:, None]  # w dp/deta
        columns = {"a": slope * a[:, None] * eta[None, :], "d": slope, "c": (c * (1.0 - c))[:, None] * (1.0 - s)}
        G = jnp.stack([wj * columns[key] for key in item_keys], axis=1)  # (items, k, examinees)
    return A, W, G


@partial(fast_jit, static_argnames=("item_keys",))
def _binary_fisher_blockwise(a: jax.Array, d: jax.Array, c: jax.Array, eta: jax.Array, blocks: jax.Array,
                             item_keys: tuple[str, ...]) -> tuple[jax.Array, jax.Array]:
    """A and W of :func:`_binary_fisher_kernel` (no cross block) a block of items at a time
    (:mod:`irtexam.irt.cell_blocks`): no items x examinees temporaries."""
    sums = item_moments(a, c, d, eta, blocks, "c" in item_keys)
    return (information_from_moments(a, c, sums.by_slope, sums.by_mixed, sums.by_guess, item_keys),
            ability_moments(a, c, d, eta, blocks)[1])


def _fisher_blocks_binary(params: Mapping[str, jax.Array], spec: ModelSpec, item_keys: tuple[str, ...],
                          eta: np.ndarray, mask: np.ndarray,
                          need_cross: bool = True) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Analytic per-cell Fisher information of binary items, summed into the A, G, W blocks.

    With z = a eta + d, s = sigmoid(z), p = c + (1 - c) s and w = 1 / (p (1 - p)):
      dp/dlog a = (1 - c) s (1 - s) a eta,   dp/dd = (1 - c) s (1 - s),
      dp/dlogit c = c (1 - c) (1 - s),       dp/deta = (1 - c) s (1 - s) a;
    F_im = w J J^T over (item parameters, eta). Computed in one jit-compiled pass (moment
    sums as matrix products); G, the (items, k, examinees) cross block, only when
    ``need_cross``; without it, a block of items at a time (:func:`_binary_fisher_blockwise`).
    """
    # transforms in NumPy (eager JAX would dispatch a kernel per op); one compiled pass for the sums
    items = spec.kind_object.item_params({k: np.asarray(params[k], dtype=np.float64) for k in item_keys})
    a, c, d = items.a, items.c, np.asarray(params["d"], dtype=np.float64)
    f32 = (lambda v: np.asarray(v, dtype=np.float32))  # noqa: E731
    if need_cross:
        A, W, G = _binary_fisher_kernel(f32(a), f32(d), f32(c), f32(eta), np.asarray(mask), tuple(item_keys), True)
    else:  # the information does not depend on the answers: the blocks carry only which cells were observed
        blocks = response_blocks(None, mask, rows_per_block(*mask.shape))
        (A, W), G = _binary_fisher_blockwise(f32(a), f32(d), f32(c), f32(eta), blocks, tuple(item_keys)), None
    return (np.asarray(A, dtype=np.float64), None if G is None else np.asarray(G, dtype=np.float64),
            np.asarray(W, dtype=np.float64))


def _fisher_blocks_autodiff(spec: ModelSpec, item_keys: tuple[str, ...], item_slices: dict[str, slice],
                            u: jax.Array, eta: jax.Array, mask: np.ndarray,
                            chunk_cells: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-cell Fisher information sum_x grad p_x grad p_x^T / p_x by autodiff (any item model)."""
    probs = _category_probs_fn(spec, item_keys, item_slices)
    k = u.shape[1]
    n_items, n_examinees = mask.shape

    def cell_fisher(u_i: jax.Array, eta_m: jax.Array) -> jax.Array:
        x = jnp.concatenate([u_i, eta_m[None]])
        p = probs(x[:-1], x[-1])
        jac = jax.jacfwd(lambda v: probs(v[:-1], v[-1]))(x)  # (n_categories, k + 1)
        return jnp.einsum("ci,cj->ij", jac / jnp.clip(p, 1e-12)[:, None], jac)

    fisher_row = jax.jit(jax.vmap(jax.vmap(cell_fisher, in_axes=(None, 0)), in_axes=(0, None)),
                         compiler_options=fast_compile_options() or None)
    A = np.zeros((n_items, k, k))
    G = np.zeros((n_items, k, n_examinees))
    W = np.zeros(n_examinees)
    rows_per_chunk = max(1, chunk_cells // max(n_examinees, 1))
    for start in range(0, n_items, rows_per_chunk):
        stop = min(start + rows_per_chunk, n_items)
        F = np.asarray(fisher_row(u[start:stop], eta), dtype=np.float64)  # (rows, ex, k+1, k+1)
        F *= mask[start:stop, :, None, None]
        A[start:stop] = F[:, :, :k, :k].sum(axis=1)
        G[start:stop] = np.transpose(F[:, :, :k, k], (0, 2, 1))
        W += F[:, :, k, k].sum(axis=0)
    return A, G, W


def ability_jacobian(params: Mapping[str, np.ndarray], spec: ModelSpec, design: Design,
                     person_keys: tuple[str, ...], person_slices: dict[str, slice]) -> np.ndarray:
    """d theta / d phi (examinees x person parameters) by the complex step, in NumPy.

    theta(phi) (:func:`irtexam.irt.model.examinee_theta`) is analytic, so for each coordinate j
    d theta / d phi_j = Im theta(phi + i h e_j) / h exactly up to rounding (no subtraction,
    h = 1e-20). All coordinates go in one call as a leading dimension: no JAX, nothing to compile.
    """
    h = 1e-20
    phi0 = np.concatenate([np.asarray(params[key], dtype=np.float64).reshape(-1) for key in person_keys])
    n_person = phi0.size
    perturbed = phi0[None, :] + 1j * h * np.eye(n_person)                            # (P, P)
    probe = {key: np.asarray(value, dtype=np.float64) for key, value in params.items() if key not in person_keys}
    for key in person_keys:
        probe[key] = perturbed[:, person_slices[key]].reshape((n_person,) + np.shape(params[key]))
    theta = examinee_theta(probe, spec, design)                                     # (P, E) complex
    return np.ascontiguousarray(np.imag(theta).T / h, dtype=np.float64)


def laplace_covariance(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design,
                       mask: np.ndarray, mode: str = "auto", chunk_cells: int = 2_000_000) -> LaplaceCovariance:
    """Marginal Laplace covariances at ``params`` (a MAP estimate); see the module docstring.

    mode: "full" (exact Schur complement), "blockwise" (no item/person coupling) or
    "auto" (full unless n_items * k * P^2 exceeds ~2e9 operations, e.g. 2000 items x 500 examinees).
    """
    # host float64 arrays: JAX runs only inside the compiled parts (no eager dispatch)
    params = {key: np.asarray(value, dtype=np.float64) for key, value in params.items()}
    item_keys, item_slices, k = _item_layout(params)
    person_keys, person_slices, n_person = _person_layout(params)
    n_items, n_examinees = design.n_items, design.n_examinees

    u = np.concatenate([params[key].reshape(n_items, -1) for key in item_keys], axis=1)
    eta = examinee_theta(params, spec, design)

    cost = n_items * k * float(max(n_examinees, n_person)) ** 2
    if mode == "auto":
        mode = "full" if cost <= 2e9 else "blockwise"
    # blockwise without facets: the person block stays structured, no n x n matrix (StandardisedPersonPrecision)
    structured = mode == "blockwise" and not spec.facets
    if not spec.facets:
        # theta = (raw - mean(raw)) / sd(raw): dtheta/draw = (I - V V^T) / sd with V = [1, theta] / sqrt(n), i.e.
        # (I - 11^T/n - theta theta^T/n) / sd; 1PL (the unit fixed by a = 1): theta = raw - mean(raw), V = 1 / sqrt(n)
        if fixes_scale(spec):
            raw = np.asarray(params["theta_raw"], dtype=np.float64)
            sd = np.sqrt(np.mean((raw - raw.mean()) ** 2) + 1e-12)
            directions = [np.ones(n_examinees), (raw - raw.mean()) / sd]
        else:
            sd, directions = 1.0, [np.ones(n_examinees)]
        V = np.stack(directions, axis=1) / np.sqrt(n_examinees)
        M = None if structured else (np.eye(n_examinees) - V @ V.T) / sd
    else:
        M = ability_jacobian(params, spec, design, person_keys, person_slices)
    if spec.kind_object.graded:  # the analytic binary kernel below is the fast path
        A, G, W = _fisher_blocks_autodiff(spec, item_keys, item_slices, u, eta, mask, chunk_cells)
    else:
        A, G, W = _fisher_blocks_binary(params, spec, item_keys, np.asarray(eta, dtype=np.float64), mask,
                                        need_cross=mode == "full")

    prior_diag = prior_precision(params, spec)
    item_prior = np.concatenate([np.asarray(prior_diag[key]).reshape(n_items, -1) for key in item_keys], axis=1)
    A[:, np.arange(k), np.arange(k)] += item_prior
    person_prior = np.concatenate([np.asarray(prior_diag[key]).reshape(-1) for key in person_keys]) \
        if person_keys else np.zeros(0)
    A_inv = np.linalg.inv(A)
    if structured:
        # D in O(n): no n x n matrix (StandardisedPersonPrecision)
        precision = StandardisedPersonPrecision(np.asarray(W, dtype=np.float64), person_prior, V, float(sd))
        return LaplaceCovariance(item_keys, item_slices, A_inv, person_keys, person_slices, None, None, "blockwise",
                                 item_cond_cov=A_inv, person_precision=precision)
    D = (M.T * W) @ M + np.diag(person_prior)
    if mode == "blockwise":
        return LaplaceCovariance(item_keys, item_slices, A_inv, person_keys, person_slices,
                                 np.linalg.inv(D), M, "blockwise", item_cond_cov=A_inv)
    # Schur complement on the person side. A_i^-1 = L_i L_i^T, H_i = L_i^T G_i.
    L = np.linalg.cholesky(A_inv)
    # per-item k x k products as einsum loops: thousands of tiny GEMM calls are slow in a threaded BLAS
    H = np.einsum("ilk,ilp->ikp", L, G).reshape(n_items * k, n_examinees)  # rows: L_i^T G_i
    Q = H.T @ H  # sum_i G_i^T A_i^-1 G_i  (n_examinees x n_examinees)
    S = D - M.T @ Q @ M
    S_inv = np.linalg.inv(S)
    n_person_params = M.shape[1]
    # (n_items, k, P): A_i^-1 B_i; stacked products reshaped to one (n_items k) x P matrix product
    E = (np.einsum("ikl,ilp->ikp", A_inv, G).reshape(-1, n_examinees) @ M).reshape(n_items, k, n_person_params)
    ES = (E.reshape(-1, n_person_params) @ S_inv).reshape(n_items, k, n_person_params)
    item_cov = A_inv + np.einsum("ijp,ilp->ijl", ES, E)
    return LaplaceCovariance(item_keys, item_slices, item_cov, person_keys, person_slices, S_inv, M, "full",
                             item_cond_cov=A_inv, item_coupling=E)
