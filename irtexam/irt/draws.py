"""Posterior draws for a MAP fit: joint Laplace draws, corrected item by item by
Pareto-smoothed importance sampling (PSIS).

The Laplace approximation of a MAP fit is a Gaussian in the unconstrained
parameters with the block structure of :mod:`irtexam.irt.laplace`:

    phi ~ N(phi_hat, S^-1)                                   (person side: abilities or facet coordinates)
    u_i | phi ~ N(u_i_hat - A_i^-1 B_i (phi - phi_hat), A_i^-1)   (item i's log a, d, logit c / GRM thresholds)

Drawing jointly this way keeps every correlation the Gaussian has: within an item,
between facet levels, and between items and persons. Pushed through the non-linear
transforms (a = exp(log a), b = -d / a, c = sigmoid(logit c)) a Gaussian in
unconstrained space is a poor description of items that nearly everybody (or
nobody) answers correctly: their posterior in (d, logit c) is skewed and banana
shaped, and independent Gaussian draws put too much mass on large c and extreme b,
which biases replicated scores upward.

The correction works on each item's *conditional* posterior given the persons at
their mode, p(u_i | y_i, theta_hat) ∝ L_i(u_i, theta_hat) p(u_i): a low-dimensional
(k <= 3) density that can be evaluated exactly. For every item, ``n_proposals``
draws v_ij from a multivariate Student-t (4 degrees of freedom, scale 2 x the
Laplace conditional covariance A_i^-1, heavier-tailed than the target) get
importance weights w_ij = L_i(v_ij) p(v_ij) / q(v_ij), smoothed by PSIS
(Vehtari, Simpson, Gelman, Yao & Gabry 2024), and ``n_draws`` of them are resampled
in proportion to the smoothed weights. The person-side variation is then added
through the Gaussian coupling: u_i^(s) = v_i^(s) - A_i^-1 B_i (phi^(s) - phi_hat).
So the item's own non-Gaussian shape is exact (up to Monte Carlo error), the
item/person coupling linear-Gaussian.

Each item's Pareto k-hat says whether its correction can be trusted (k-hat <= 0.7);
:meth:`DrawDiagnostics.warning` turns failures into one line that names the
remedy (``method="nuts"``). The same draws give every interval the fit reports
(items, examinees, facet levels, contrasts, prob_greater, information bands, the
posterior predictive check), so those numbers agree with each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from . import kinds
from . import model as mdl
from .compile_cache import fast_jit
from .gaussian_draws import binary_items_in_place, roots_applied_in_place
from .laplace import LaplaceCovariance

KHAT_THRESHOLD = 0.7
STUDENT_DF = 4.0
PROPOSAL_SCALE = 2.0
ADAPT_KHAT = 0.5  # any item above: adaptive moment-matched rounds (corrected_item_draws)
ADAPT_ROUNDS = 2
CELL_BUDGET = 4e7  # proposals x observed cells evaluated for the correction (>= 200 proposals, else Gaussian):
# the correction runs up to 2e5 observed cells (e.g. 1000 items x 200 examinees); above, every item has
# hundreds of responses and its posterior is close to Gaussian


@dataclass
class DrawDiagnostics:
    """How the draws of a MAP fit were made and whether their correction can be trusted.

    ``item_khat``: Pareto k-hat of each item's importance weights (NaN when uncorrected);
    ``item_ess``: effective number of proposals per item after smoothing;
    ``method``: "laplace+psis" or "laplace" (Gaussian only, with ``reason``).
    """

    method: str
    n_draws: int
    n_proposals: int = 0
    item_khat: np.ndarray | None = None
    item_ess: np.ndarray | None = None
    reason: str = ""

    @property
    def max_khat(self) -> float:
        """Largest item k-hat (NaN when the draws are not corrected)."""
        if self.item_khat is None or not np.isfinite(self.item_khat).any():
            return float("nan")
        return float(np.nanmax(self.item_khat))

    @property
    def n_unreliable(self) -> int:
        """Items whose correction cannot be trusted (k-hat > 0.7)."""
        return 0 if self.item_khat is None else int(np.sum(self.item_khat > KHAT_THRESHOLD))

    def warning(self, item_ids: tuple[str, ...] = ()) -> str | None:
        """One line when some items' draws cannot be trusted, naming the remedy; None otherwise."""
        if self.n_unreliable == 0:
            return None
        worst = np.argsort(-np.nan_to_num(self.item_khat, nan=-1.0))[:3]
        names = ", ".join(f"{item_ids[i] if item_ids else i} ({self.item_khat[i]:.2f})" for i in worst)
        return (f"posterior draws of {self.n_unreliable} item(s) are unreliable (Pareto k-hat > {KHAT_THRESHOLD}, "
                f"worst: {names}): their intervals may be off; refit with method='nuts' (CLI: --method nuts) for exact posterior draws")

    def as_dict(self) -> dict[str, Any]:
        """Summary for meta.json."""
        return {"method": self.method, "n_draws": self.n_draws, "n_proposals": self.n_proposals,
                "max_khat": self.max_khat, "items_khat_above_0.7": self.n_unreliable,
                "min_item_ess": (float(np.nanmin(self.item_ess)) if self.item_ess is not None
                                 and np.isfinite(self.item_ess).any() else None),
                "reason": self.reason}


# ----------------------------------------------------------------------------- PSIS
def gpd_fit(x: np.ndarray, prior_k: float = 10.0) -> tuple[np.ndarray, np.ndarray]:
    """Generalized Pareto fit (k, sigma) to exceedances ``x`` (..., M), sorted ascending, > 0.

    Zhang & Stephens (2009) empirical-Bayes estimator with the weakly informative prior
    of Vehtari et al. (k shrunk toward 0.5 with weight ``prior_k``), vectorised over the
    leading dimensions: for a grid of theta_j, k(theta) = mean(log(1 - theta x)),
    profile log-likelihood l_j = M (log(-theta_j / k_j) - k_j - 1), posterior-mean
    theta = sum_j theta_j softmax(l)_j, k = -mean(log(1 - theta x)) ... reported as
    k = mean(log1p(-theta x)) with the sign convention k > 0 for heavy tails.
    """
    n = x.shape[-1]
    m = 30 + int(np.sqrt(n))
    grid = 1.0 - np.sqrt(m / (np.arange(1, m + 1, dtype=float) - 0.5))
    quartile = x[..., int(n / 4 + 0.5) - 1]
    theta = grid / (3.0 * quartile[..., None]) + 1.0 / x[..., -1:]                     # (..., m)
    k_grid = np.log1p(-theta[..., :, None] * x[..., None, :]).mean(axis=-1)          # (..., m)
    profile = n * (np.log(-theta / k_grid) - k_grid - 1.0)
    weights = np.exp(profile - profile.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    theta_post = (theta * weights).sum(axis=-1)
    k = np.log1p(-theta_post[..., None] * x).mean(axis=-1)
    sigma = -k / theta_post
    k = (n * k + prior_k * 0.5) / (n + prior_k)
    return k, sigma


def psis(log_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pareto-smoothed importance weights along the last axis.

    The largest M = min(S / 5, 3 sqrt(S)) raw weights are replaced by the expected order
    statistics of a generalized Pareto distribution fitted to them, w_(S-M+j) =
    w_cut + F^-1((j - 1/2) / M), capped at the largest raw weight. Returns the
    normalised smoothed log weights and k-hat per row (k-hat > 0.7: unreliable).
    """
    lw = np.asarray(log_weights, dtype=np.float64)
    lw = lw - lw.max(axis=-1, keepdims=True)
    n = lw.shape[-1]
    tail = int(np.ceil(min(0.2 * n, 3.0 * np.sqrt(n))))
    # only the largest tail + 1 weights are smoothed or needed: select them, then sort only those
    top = np.argpartition(lw, n - tail - 1, axis=-1)[..., n - tail - 1:]
    top_lw = np.take_along_axis(lw, top, axis=-1)
    order = np.argsort(top_lw, axis=-1)
    top, top_lw = np.take_along_axis(top, order, axis=-1), np.take_along_axis(top_lw, order, axis=-1)
    cutoff = top_lw[..., 0]
    exceed = np.exp(top_lw[..., 1:]) - np.exp(cutoff)[..., None]
    finite_tail = np.all(exceed > 0, axis=-1) & np.isfinite(cutoff)
    safe = np.where(exceed > 0, exceed, 1e-300)
    k, sigma = gpd_fit(safe)
    probs = (np.arange(1, tail + 1) - 0.5) / tail
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        k_use = np.where(np.abs(k) < 1e-8, 1e-8, k)[..., None]
        quantiles = sigma[..., None] * np.expm1(-k_use * np.log1p(-probs)) / k_use
        smoothed_tail = np.log(np.exp(cutoff)[..., None] + quantiles)
    smoothed_tail = np.minimum(smoothed_tail, 0.0)
    smoothed_tail = np.where(finite_tail[..., None] & np.isfinite(smoothed_tail), smoothed_tail, top_lw[..., 1:])
    out = lw.copy()
    np.put_along_axis(out, top[..., 1:], smoothed_tail, axis=-1)
    out -= np.log(np.exp(out - out.max(axis=-1, keepdims=True)).sum(axis=-1, keepdims=True)) + \
        out.max(axis=-1, keepdims=True)
    k = np.where(finite_tail, k, np.inf)
    return out, k


# ----------------------------------------------------------------------------- draws
def _sqrt_psd(cov: np.ndarray) -> np.ndarray:
    """A square root R with R R^T = cov for a (batch of) symmetric PSD matrices.

    Cholesky (lower triangular) when every matrix of the batch is positive definite (the usual
    case, ~15x faster than eigh on a batch of 3x3 blocks); otherwise the symmetric root
    V diag(sqrt(max(lambda, 0))) from eigh, so singular and slightly indefinite blocks work too.
    """
    cov = np.asarray(cov, dtype=np.float64)
    cov = 0.5 * (cov + np.swapaxes(cov, -1, -2))
    cov = np.where(np.isfinite(cov), cov, 0.0)  # a non-finite block (degenerate item) gets no spread there
    try:
        root = np.linalg.cholesky(cov)
        if np.all(np.isfinite(root)):
            return root
    except np.linalg.LinAlgError:
        pass
    try:
        values, vectors = np.linalg.eigh(cov)
    except np.linalg.LinAlgError:  # LAPACK failed on some matrix of the batch: one at a time, diagonal fallback
        if cov.ndim == 2:
            return np.diag(np.sqrt(np.clip(np.diag(cov), 0.0, None)))
        return np.stack([_sqrt_psd(block) for block in cov])
    return vectors * np.sqrt(np.clip(values, 0.0, None))[..., None, :]


def _apply_roots(roots: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """roots (I, k, k) applied to noise (N, I, k): out[n, i] = roots[i] @ noise[n, i].

    One batched matmul over items, (I, k, k) @ (I, k, N), with the draws as the long inner axis.
    """
    return np.moveaxis(np.matmul(roots, np.moveaxis(noise, 0, -1)), -1, 0)


def _split_items(flat: np.ndarray, cov: LaplaceCovariance) -> dict[str, np.ndarray]:
    """(..., I, k) item vectors -> {key: (..., I) or (..., I, width)} unconstrained arrays."""
    out = {}
    for key in cov.item_keys:
        part = flat[..., cov.item_slices[key]]
        out[key] = part if key == "gap" else part[..., 0]
    return out


@partial(fast_jit, static_argnames=("spec",))
def _item_log_target(items: Mapping[str, jax.Array], theta: jax.Array, y: jax.Array, mask: jax.Array,
                     spec: mdl.ModelSpec, hyper: Mapping[str, jax.Array]) -> jax.Array:
    """log L_i(u_i, theta) + log p(u_i | hyper) for a chunk of proposals: items (C, I[, w]) -> (C, I)."""
    params = mdl.item_params(items, spec)
    cell_items = kinds.ItemParams(a=params.a[..., None], b=params.b[..., None],
                                  c=None if params.c is None else params.c[..., None],
                                  thresholds=None if params.thresholds is None else params.thresholds[..., None, :])
    cells = kinds.cell_loglik(y[None], theta[None, None, :], cell_items, pairwise=True)
    return jnp.where(mask[None], cells, 0.0).sum(axis=-1) + mdl.item_log_prior(items, spec, hyper)


def _student_t(rng: np.random.Generator, shape: tuple[int, ...], df: float) -> tuple[np.ndarray, np.ndarray]:
    """Standard multivariate-t draws (shape (..., k)) and their log density up to a constant."""
    z = rng.standard_normal(shape)
    scale = np.sqrt(rng.chisquare(df, size=shape[:-1]) / df)[..., None]
    t = z / scale
    return t, _student_t_log_density(t, df)


def _student_t_log_density(t: np.ndarray, df: float) -> np.ndarray:
    """log density of the standard multivariate t (df, dimension k = t.shape[-1]) up to a constant shared by
    every t of that df and k: -(df + k)/2 log(1 + |t|^2 / df)."""
    return -0.5 * (df + t.shape[-1]) * np.log1p((t ** 2).sum(axis=-1) / df)


def _whiten(x: np.ndarray, centre: np.ndarray, root: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """t = R_i^-1 (x - m_i) per item for x (N, I, k), centre (I, k), roots (I, k, k) lower triangular or
    symmetric; and log |det R_i| (I,), so a location-scale t has log q(x) = log q_std(t) - log |det R|."""
    solved = _apply_roots(np.linalg.inv(root), x - centre[None])  # one k x k inverse per item, batched matmul
    _, logdet = np.linalg.slogdet(root)
    return solved, logdet


def _log_target_of(proposals: np.ndarray, cov: LaplaceCovariance, theta: Any, y: Any, m: Any,
                   spec: mdl.ModelSpec, hyper: Mapping[str, np.ndarray], chunk: int) -> np.ndarray:
    """Exact conditional log posterior of every proposal (N, I, k) -> (N, I), in chunks of one compiled shape."""
    n_proposals, n_items = proposals.shape[:2]
    log_target = np.empty((n_proposals, n_items))
    for start in range(0, n_proposals, chunk):
        stop = min(start + chunk, n_proposals)
        block = proposals[start:stop]
        if stop - start < chunk:  # pad to the chunk shape: one compiled kernel per fit size
            block = np.concatenate([block, np.repeat(block[-1:], chunk - (stop - start), axis=0)])
        items = {k: np.asarray(v, dtype=np.float32) for k, v in _split_items(block, cov).items()}
        values = np.asarray(_item_log_target(items, theta, y, m, spec, hyper), dtype=np.float64)
        log_target[start:stop] = values[: stop - start]
    return np.where(np.isfinite(log_target), log_target, -np.inf)


def _weighted_moments(proposals: np.ndarray, log_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Self-normalised weighted mean (I, k) and covariance (I, k, k) of proposals (N, I, k), weights (I, N)."""
    w = np.exp(log_weights - log_weights.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    by_item = np.moveaxis(proposals, 0, 1)                                          # (I, N, k)
    mean = np.matmul(w[:, None, :], by_item)[:, 0]                                  # (I, k)
    centred = by_item - mean[:, None]
    return mean, np.matmul(np.swapaxes(centred * w[..., None], 1, 2), centred)


def _difficulty_coordinates(cov: LaplaceCovariance) -> tuple[int, int] | None:
    """Columns (log a, d) of the item vector when it has both (binary 2PL/3PL), else None."""
    keys = cov.item_keys
    if "a" in keys and "d" in keys and "gap" not in keys:
        return cov.item_slices["a"].start, cov.item_slices["d"].start
    return None


def _to_difficulty(u: np.ndarray, columns: tuple[int, int] | None) -> np.ndarray:
    """(log a, d, ...) -> (log a, b, ...) with b = -d / a (identity without a)."""
    if columns is None:
        return u
    ia, id_ = columns
    v = u.copy()
    v[..., id_] = -u[..., id_] * np.exp(-u[..., ia])
    return v


def _from_difficulty(v: np.ndarray, columns: tuple[int, int] | None) -> tuple[np.ndarray, np.ndarray]:
    """(log a, b, ...) -> (log a, d, ...) with d = -a b, and log |det du/dv| = log a (0 without a)."""
    if columns is None:
        return v, np.zeros(v.shape[:-1])
    ia, id_ = columns
    u = v.copy()
    u[..., id_] = -v[..., id_] * np.exp(v[..., ia])
    return u, v[..., ia]


def _log_t_density(points: np.ndarray, centre: np.ndarray, root: np.ndarray, log_jacobian: Any) -> np.ndarray:
    """log density (up to the constant shared by every t_4 in k dimensions) of t_4(centre, root root^T) at
    ``points`` (N, I, k) given in that t's own coordinates, minus ``log_jacobian`` (log |det du/dv| of the
    points, to express it as a density in u)."""
    whitened, logdet = _whiten(points, centre, root)
    return _student_t_log_density(whitened, STUDENT_DF) - logdet[None] - log_jacobian


def _adaptive_stages(proposals: np.ndarray, log_target: np.ndarray, log_q1: np.ndarray, smoothed: np.ndarray,
                     u0: np.ndarray, root: np.ndarray, cov: LaplaceCovariance, rng: np.random.Generator,
                     log_target_of: Any, rounds: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Adaptive rounds of :func:`corrected_item_draws`. Returns (proposals ((1 + rounds) N, I, k), smoothed
    log weights (I, (1 + rounds) N), k-hat (I,)). ``log_q1``: stage 1's proposal log density at its draws.

    Round r fits q_r = t_4(m_r, C_r), m_r and C_r the weighted mean and covariance of all draws so far in
    difficulty coordinates v = (log a, b = -d / a, logit c) (where the 3PL's weakly identified ridge, large a
    with d = -a b, is straight; GRM items stay in u), draws N more, and re-weights every draw against the
    equal mixture of q1 .. q_r (multiple importance sampling, balance heuristic). The density of q_r in
    u = (log a, d, logit c) is q_v(v(u)) / a, since |det du/dv| = |dd/db| = a. Each component's density
    is evaluated once per draw (kept between rounds).
    """
    n_proposals, n_items, k = proposals.shape
    columns = _difficulty_coordinates(cov)
    v_points = _to_difficulty(proposals, columns)
    log_jacobian = v_points[..., columns[0]] if columns is not None else np.zeros(v_points.shape[:-1])  # log a
    components: list[tuple[np.ndarray, np.ndarray]] = []                               # adaptive (centre, root) in v
    log_q = [log_q1 - np.linalg.slogdet(root)[1][None]]                               # per component, all draws
    for _ in range(rounds):
        mean, moment_cov = _weighted_moments(v_points, smoothed)
        ok = np.isfinite(moment_cov).all(axis=(1, 2)) & np.isfinite(mean).all(axis=1)
        moment_cov = np.where(ok[:, None, None], moment_cov, np.eye(k)) + 1e-6 * np.eye(k)
        mean = np.where(ok[:, None], mean, _to_difficulty(u0, columns))
        root_r = _sqrt_psd(moment_cov)
        t, log_t = _student_t(rng, (n_proposals, n_items, k), STUDENT_DF)
        new_v = mean[None] + _apply_roots(root_r, t)
        new_u, new_jacobian = _from_difficulty(new_v, columns)
        log_q[0] = np.concatenate([log_q[0], _log_t_density(new_u, u0, root, 0.0)])
        for n, (c, r) in enumerate(components, start=1):
            log_q[n] = np.concatenate([log_q[n], _log_t_density(new_v, c, r, new_jacobian)])
        log_q.append(np.concatenate([_log_t_density(v_points, mean, root_r, log_jacobian),
                                     log_t - np.linalg.slogdet(root_r)[1][None] - new_jacobian]))
        components.append((mean, root_r))
        proposals = np.concatenate([proposals, new_u], axis=0)
        v_points = np.concatenate([v_points, new_v], axis=0)
        log_jacobian = np.concatenate([log_jacobian, new_jacobian], axis=0)
        log_target = np.concatenate([log_target, log_target_of(new_u)])
        log_mix = np.logaddexp.reduce(np.stack(log_q), axis=0) - np.log(len(log_q))
        smoothed, khat = psis((log_target - log_mix).T)
    return proposals, smoothed, khat


def corrected_item_draws(params: Mapping[str, np.ndarray], spec: mdl.ModelSpec, design: mdl.Design,
                         mask: np.ndarray, cov: LaplaceCovariance, n_draws: int, rng: np.random.Generator,
                         n_proposals: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-item importance resampling of the conditional posterior p(u_i | y_i, theta_hat).

    Stage 1: ``n_proposals`` draws from q1 = t_4(u_hat_i, (2 R_i)(2 R_i)^T), R_i R_i^T = A_i^-1 (the
    Laplace conditional covariance), weighted by PSIS. If any item's k-hat exceeds :data:`ADAPT_KHAT`,
    :data:`ADAPT_ROUNDS` rounds of importance-weighted moment matching (after Paananen, Piironen, Buerkner
    & Vehtari 2021; :func:`_adaptive_stages`) add proposals fitted to the weighted draws, and every draw is
    weighted against the mixture of all proposals. On data/real_run's 3PL, 20 000 stage-1 proposals show
    posteriors with mass far along the (a, d) ridge that 1 000 stage-1 proposals miss while still reporting
    k-hat < 0.7; the rounds find that mass (mean error of the item posterior means against the 20 000-draw
    reference 0.049 -> 0.021) and report its k-hat honestly.

    Returns (draws (n_draws, I, k) of the unconstrained item vectors, k-hat (I,), ESS (I,)).
    """
    n_items = design.n_items
    u0 = np.concatenate([np.asarray(params[k], dtype=np.float64).reshape(n_items, -1) for k in cov.item_keys], axis=1)
    root = PROPOSAL_SCALE * _sqrt_psd(cov.conditional_item_cov)                       # (I, k, k)
    t, log_q1 = _student_t(rng, (n_proposals, n_items, u0.shape[1]), STUDENT_DF)
    proposals = u0[None] + _apply_roots(root, t)                                      # (N, I, k)
    theta = jax.device_put(np.asarray(mdl.examinee_theta({k: np.asarray(v, dtype=np.float64) for k, v in params.items()},
                                                         spec, design), dtype=np.float32))
    y = jax.device_put(np.asarray(design.y, dtype=np.float32))  # host -> device once, no eager JAX ops
    m = jax.device_put(np.asarray(mask))
    hyper = {k: np.asarray(params[k], dtype=np.float32) for k in mdl.HYPER_KEYS if k in params}  # held at the mode
    observed = max(int(mask.sum()), 1)
    chunk = int(max(1, min(n_proposals, 2e7 // max(observed, design.n_items))))
    log_target = _log_target_of(proposals, cov, theta, y, m, spec, hyper, chunk)
    log_weights = (log_target - log_q1).T                                                  # (I, N)
    smoothed, khat = psis(log_weights)
    if np.any(khat > ADAPT_KHAT):
        try:
            proposals, smoothed, khat = _adaptive_stages(
                proposals, log_target, log_q1, smoothed, u0, root, cov, rng,
                lambda x: _log_target_of(x, cov, theta, y, m, spec, hyper, chunk), ADAPT_ROUNDS)
        except np.linalg.LinAlgError:  # a singular proposal scale: keep stage 1 (its k-hat is reported)
            pass
    n_total = proposals.shape[0]
    weights = np.exp(smoothed)
    ess = 1.0 / np.sum(weights ** 2, axis=1)
    cumulative = np.cumsum(weights, axis=1)
    cumulative /= cumulative[:, -1:]
    u = (rng.uniform(size=(n_items, 1)) + np.arange(n_draws)[None, :]) / n_draws         # systematic resampling
    offset = np.arange(n_items)[:, None]  # one searchsorted over all items: row i lives in [i, i + 1]
    flat = np.searchsorted((cumulative + offset).ravel(), (np.minimum(u, 1.0 - 1e-12) + offset).ravel())
    picks = np.minimum(flat.reshape(n_items, n_draws) - offset * n_total, n_total - 1)
    picks = rng.permuted(picks, axis=1)
    chosen = proposals[picks.T, np.arange(n_items)[None, :]]                              # (S, I, k)
    return chosen, khat, ess


def _without_scale_direction(delta: np.ndarray, params: Mapping[str, np.ndarray], cov: LaplaceCovariance,
                             spec: mdl.ModelSpec) -> np.ndarray:
    """Remove the component of person-side draws along the raw-scale direction.

    Reported abilities are raw / sd(raw), invariant under raw -> lambda raw (lambda > 0):
    the direction v = d(lambda phi_hat)/d lambda (facet coordinates, raw abilities and
    residuals scaled together; log sigma fixed) is flat in the likelihood and only weakly
    held by the priors, so a Gaussian draw along it can reach lambda <= 0 and flip every
    ability. The fitted model pins the scale (reported sd exactly 1), so draws are taken
    conditionally on lambda = 1: delta - v (v . delta) / (v . v).
    """
    if not mdl.fixes_scale(spec):
        return delta
    v = np.concatenate([np.zeros(np.size(params[k])) if k == "sigma_resid" else np.asarray(params[k]).reshape(-1)
                        for k in cov.person_keys]).astype(np.float64)
    norm = float(v @ v)
    if norm <= 0:
        return delta
    return delta - np.outer(delta @ v, v) / norm


def _own_float32(values: np.ndarray) -> np.ndarray:
    """``values`` as float32, copied where it is a view of a larger array (which it would keep alive)."""
    values = np.asarray(values, dtype=np.float32)
    root = values
    while isinstance(root.base, np.ndarray):
        root = root.base
    return np.array(values, order="C") if root.nbytes > values.nbytes else values


def laplace_draws(params: Mapping[str, np.ndarray], spec: mdl.ModelSpec, design: mdl.Design, mask: np.ndarray,
                  cov: LaplaceCovariance, n_draws: int = 500, seed: int = 0, correct: bool = True,
                  n_proposals: int | None = None) -> tuple[dict[str, np.ndarray], DrawDiagnostics]:
    """Joint posterior draws of a MAP fit (see the module docstring).

    Returns (reported draws keyed by a, b, c / thresholds, theta, theta_<facet>, sigma_resid, each
    (n_draws, ...); diagnostics).
    """
    rng = np.random.default_rng(seed)
    n_items = design.n_items
    observed = max(int(mask.sum()), 1)
    if n_proposals is None:
        n_proposals = int(np.clip(CELL_BUDGET / observed, 0, 2 * n_draws))
    reason = ""
    if not correct:
        reason = "correction turned off"
    elif n_proposals < 200:
        reason = f"too large for the correction ({observed} observed cells); the Gaussian is accurate at this size"
    if cov.item_keys and not reason:
        item_draws, khat, ess = corrected_item_draws(params, spec, design, mask, cov, n_draws, rng, n_proposals)
        diagnostics = DrawDiagnostics("laplace+psis", n_draws, n_proposals, khat, ess)
    else:
        diagnostics = DrawDiagnostics("laplace", n_draws, reason=reason)
        if cov.item_keys:
            u0 = np.concatenate([np.asarray(params[k], dtype=np.float64).reshape(n_items, -1)
                                 for k in cov.item_keys], axis=1)
            # float32 noise and roots (the draws are kept as float32): at 12,032 3PL items a (500, I, 3) float64
            # array is 144 MB; the sum formed in place
            roots = _sqrt_psd(cov.conditional_item_cov).astype(np.float32)
            item_draws = roots_applied_in_place(roots, rng.standard_normal((n_draws,) + u0.shape, dtype=np.float32))
            item_draws += u0[None]
    unconstrained: dict[str, np.ndarray] = {}
    if cov.person_keys:
        phi0 = np.concatenate([np.asarray(params[k], dtype=np.float64).reshape(-1) for k in cov.person_keys])
        if cov.person_precision is not None:  # structured person block (blockwise fits without facets)
            delta = cov.person_precision.sample(n_draws, rng)
        else:
            delta = rng.standard_normal((n_draws, phi0.size)) @ _sqrt_psd(cov.person_cov).T
        delta = _without_scale_direction(delta, params, cov, spec)
        phi = phi0[None] + delta
        for key in cov.person_keys:
            unconstrained[key] = phi[:, cov.person_slices[key]].reshape(
                (n_draws,) + np.shape(params[key]))
        if cov.item_keys and cov.item_coupling is not None:
            n_items_, k = cov.item_coupling.shape[:2]
            shift = (cov.item_coupling.reshape(n_items_ * k, -1) @ delta.T).T.reshape(n_draws, n_items_, k)
            item_draws -= shift  # A_i^-1 B_i (phi - phi_hat), one BLAS product
            del shift
    # the draws are kept and written as float32 (7 digits, far below their spread): converted before the
    # transform to the reported scale, a float64 copy of 500 draws of 12,032 3PL items is 144 MB, each of a, b, c, d 48
    unconstrained = {key: value.astype(np.float32, copy=False) for key, value in unconstrained.items()}
    for key in [key for key in params if key not in cov.item_keys]:  # without uncertainty (none today): the mode
        unconstrained.setdefault(key, np.repeat(np.asarray(params[key], dtype=np.float32)[None], n_draws, axis=0))
    items = None
    if cov.item_keys:  # binary items: a and c written over their draws, d kept (irtexam.irt.gaussian_draws)
        item_draws = item_draws.astype(np.float32, copy=False)
        if {key for key in params if key in mdl.ITEM_KEYS} <= set(cov.item_keys):
            items = binary_items_in_place(item_draws, cov.item_keys, cov.item_slices, spec.kind_object)
        unconstrained.update(_split_items(item_draws, cov) if items is None else {})
        del item_draws
    transform = mdl.constrain if items is None else mdl.constrain_persons
    # each its own array: a reported d that is a view of the item draws would keep them all alive
    reported = {**(items or {}), **{k: _own_float32(v) for k, v in transform(unconstrained, spec, design).items()}}
    return reported, diagnostics
