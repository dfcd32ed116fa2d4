"""Fit IRT models: MAP (L-BFGS on the pure JAX log-posterior + Laplace) and NUTS (NumPyro).

Both estimators return a :class:`FitResult` with the same tables and an arviz
InferenceData with the same variable names and dims; MAP is one draw.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jax.flatten_util import ravel_pytree
from scipy import optimize

from ..errors import IrtexamError
from ..responses import ResponseMatrix
from . import alternating
from . import model as mdl
from .laplace import LaplaceCovariance, laplace_covariance
from .stats import fit_statistics, heldout_split

Z90 = 1.6448536269514722  # standard normal 95% quantile: 90% central intervals
DEFAULT_FACETS = ("llm", "retriever", "icl")


@dataclass
class FitResult:
    """A fitted IRT model: point estimates, uncertainty, tables and InferenceData.

    Tables (pandas DataFrames):
      ``items``: index item; a, b, c (GRM: a, b = mean threshold, b_1..b_K) with _sd, _low, _high (90%).
      ``examinees``: index examinee; theta, theta_sd, theta_low, theta_high, facet columns.
      ``facets``: facet, level, theta, theta_sd, theta_low, theta_high, n_examinees (None without facets).
      ``contrasts``: every pair of levels within a facet: facet, level, reference, diff, sd, low, high.
    """

    spec: mdl.ModelSpec
    design: mdl.Design
    method: str
    responses: ResponseMatrix
    params: dict[str, np.ndarray]
    items: pd.DataFrame
    examinees: pd.DataFrame
    facets: pd.DataFrame | None
    contrasts: pd.DataFrame | None
    fit_stats: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    samples: dict[str, np.ndarray] | None = None  # NUTS: constrained draws, (chains * draws, ...)
    laplace: LaplaceCovariance | None = None
    diagnostics: pd.DataFrame | None = None
    chains: int = 1  # NUTS: samples are stored chain-major, (chains * draws, ...)
    seed: int = 0
    _idata: Any = None

    @property
    def model(self) -> str:
        """Model kind: '1pl', '2pl', '3pl' or 'grm'."""
        return self.spec.kind

    @property
    def idata(self) -> Any:
        """arviz InferenceData (built on first access)."""
        if self._idata is None:
            from .idata import to_inference_data
            self._idata = to_inference_data(self)
        return self._idata

    def summary(self) -> pd.DataFrame:
        """One table of every estimated quantity: name, index, estimate, sd, low, high."""
        rows = []
        for name in self.spec.item_param_names() + (("b",) if self.spec.kind == "grm" else ()):
            if name not in self.items:
                continue
            for item, row in self.items.iterrows():
                rows.append(("item", name, item, row[name], row[f"{name}_sd"], row[f"{name}_low"], row[f"{name}_high"]))
        for examinee, row in self.examinees.iterrows():
            rows.append(("examinee", "theta", examinee, row["theta"], row["theta_sd"], row["theta_low"],
                         row["theta_high"]))
        if self.facets is not None:
            for _, row in self.facets.iterrows():
                rows.append(("facet", f"theta_{row['facet']}", row["level"], row["theta"], row["theta_sd"],
                             row["theta_low"], row["theta_high"]))
        return pd.DataFrame(rows, columns=["kind", "parameter", "id", "estimate", "sd", "low", "high"])

    def predict(self) -> np.ndarray:
        """Expected score per cell (n_items, n_examinees): P(X = 1) or E[X] for the GRM."""
        return expected_scores(self.params, self.spec, self.design)

    def draws(self, name: str, n: int = 200, seed: int = 0) -> np.ndarray:
        """Posterior draws (n, ...) of 'a', 'b', 'c', 'theta' or 'theta_<facet>'.

        NUTS: a random subset of the MCMC draws. MAP: draws from the Laplace
        approximation (Gaussian in unconstrained space, items and persons drawn from
        their marginals; the item/person cross-covariance is not propagated).
        """
        rng = np.random.default_rng(seed)
        if self.samples is not None:
            if name not in self.samples:
                raise IrtexamError(f"no draws of '{name}'; available: {sorted(self.samples)}")
            values = self.samples[name]
            pick = rng.choice(values.shape[0], size=min(n, values.shape[0]), replace=values.shape[0] < n)
            return values[pick]
        if self.laplace is None:
            raise IrtexamError("this fit has no uncertainty estimate (fit with se=True)")
        return laplace_draws(self, name, n, rng)

    def save(self, directory: str | Path) -> Path:
        """Write items.csv, examinees.csv, facets.csv, contrasts.csv, fit.nc, meta.json, responses.csv.gz."""
        from .io import save_fit
        return save_fit(self, directory)


# ----------------------------------------------------------------------------- helpers
def expected_scores(params: Mapping[str, Any], spec: mdl.ModelSpec, design: mdl.Design) -> np.ndarray:
    """E[X_im] under the fitted parameters: P for binary models, sum_k k P(X=k) for the GRM."""
    jparams = {k: jnp.asarray(v) for k, v in params.items()}
    if spec.kind == "grm":
        from . import likelihood as lk
        theta = mdl.examinee_theta(jparams, spec, design)
        logp = lk.graded_category_logprobs(theta[None, :], jnp.exp(jparams["a"])[:, None],
                                           mdl.grm_thresholds(jparams))
        return np.asarray(jnp.exp(logp) @ jnp.arange(design.max_score + 1, dtype=logp.dtype))
    constrained = mdl.constrain(jparams, spec, design)
    from .likelihood import prob_correct
    return np.asarray(prob_correct(constrained["theta"][None, :], constrained["a"][:, None],
                                   constrained["b"][:, None], constrained["c"][:, None]))


def _warm_start(init: "FitResult | Mapping[str, np.ndarray] | None", spec: mdl.ModelSpec,
                design: mdl.Design) -> dict[str, np.ndarray]:
    """Starting values: data-driven, overwritten by a previous fit's values where ids match."""
    start = mdl.initial_params(spec, design)
    if init is None:
        return start
    if isinstance(init, FitResult):
        previous, item_ids, examinee_ids = init.params, init.design.items, init.design.examinees
    else:
        previous, item_ids, examinee_ids = dict(init), design.items, design.examinees
    item_pos = {item: i for i, item in enumerate(item_ids)}
    ex_pos = {e: m for m, e in enumerate(examinee_ids)}
    rows = [(i, item_pos[item]) for i, item in enumerate(design.items) if item in item_pos]
    cols = [(m, ex_pos[e]) for m, e in enumerate(design.examinees) if e in ex_pos]
    for key, value in start.items():
        if key not in previous:
            continue
        old = np.asarray(previous[key])
        if key in ("a", "d", "c", "b1", "gap") and rows and old.shape[1:] == value.shape[1:]:
            new_idx, old_idx = map(np.array, zip(*rows))
            value[new_idx] = old[old_idx]
        elif key in ("theta_raw", "resid") and cols:
            new_idx, old_idx = map(np.array, zip(*cols))
            value[new_idx] = old[old_idx]
        elif old.shape == value.shape and key.startswith(("z_", "sigma")):
            value[...] = old
    return start


def _validate_facets(responses: ResponseMatrix, facets: Sequence[str] | str | None) -> tuple[str, ...]:
    if facets is None:
        return ()
    if isinstance(facets, str):
        facets = [f.strip() for f in facets.split(",") if f.strip()]
    missing = [f for f in facets if f not in responses.facet_names]
    if missing:
        raise IrtexamError(f"facet(s) {missing} not found: the responses{' from ' + responses.source if responses.source else ''} "
                           f"have facet columns {responses.facet_names or 'none'}; add them to the long table or "
                           f"omit --facets")
    for facet in facets:
        if len(responses.facet_levels(facet)) < 2:
            raise IrtexamError(f"facet '{facet}' has a single level; it cannot be separated from the overall "
                               f"ability: drop it from the facet list")
    return tuple(facets)


# ----------------------------------------------------------------------------- MAP
def map_estimate(spec: mdl.ModelSpec, design: mdl.Design, mask: np.ndarray,
                 init: Mapping[str, np.ndarray], max_iter: int = 5000, tol: float = 1e-6,
                 precision: str = "float32", solver: str = "auto") -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Maximise the log posterior: alternating Fisher scoring or L-BFGS.

    ``solver="auto"`` uses :func:`irtexam.irt.alternating.alternating_map` for binary
    models without facets (block-structured Fisher scoring, each parameter converged
    to 0.01 of its standard error; L-BFGS finishes if it does not converge) and L-BFGS otherwise; ``"lbfgs"`` forces L-BFGS.
    """
    if solver not in ("auto", "lbfgs", "alternating"):
        raise IrtexamError(f"unknown MAP solver '{solver}'; choose 'auto', 'lbfgs' or 'alternating'")
    if solver == "alternating" or (solver == "auto" and alternating.supports(spec)):
        params, warm = alternating.alternating_map(spec, design, mask, init, max_sweeps=200, tol=0.01,
                                                   precision=precision)
        finite = all(np.all(np.isfinite(v)) for v in params.values())
        if finite and (warm["converged"] or solver == "alternating"):
            warm["max_abs_gradient"] = float("nan")
            return params, warm
        # not converged in 200 sweeps, or numerically broken: L-BFGS finishes (from the start values if broken)
        params, info = lbfgs_map(spec, design, mask, params if finite else init, max_iter=max_iter, tol=tol,
                                 precision=precision)
        info.update(solver="alternating+lbfgs", warm_start=warm["message"], warm_seconds=warm["seconds"])
        return params, info
    return lbfgs_map(spec, design, mask, init, max_iter=max_iter, tol=tol, precision=precision)


def lbfgs_map(spec: mdl.ModelSpec, design: mdl.Design, mask: np.ndarray,
              init: Mapping[str, np.ndarray], max_iter: int = 5000, tol: float = 1e-6,
              precision: str = "float32") -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Maximise the log posterior with L-BFGS (scipy) on jit-compiled JAX value-and-gradient.

    The objective is the negative log posterior divided by the number of observed
    cells. float32 (the default) suffices because the ability scale is fixed exactly
    (no flat scale ridge is left); ``precision="float64"`` computes inside a scoped
    ``jax.enable_x64`` (about 3x slower, same estimates to 1e-4 in our tests). Stops
    when the largest gradient component is below ``tol`` or the objective stops
    decreasing at machine precision. Returns (unconstrained params, optimiser info).
    """
    dtype = jnp.float64 if precision == "float64" else jnp.float32
    scale = 1.0 / max(float(mask.sum()), 1.0)
    with jax.enable_x64(precision == "float64"):
        flat0, unravel = ravel_pytree({k: jnp.asarray(v, dtype=dtype) for k, v in init.items()})
        y = jnp.asarray(design.y, dtype=dtype)
        m = jnp.asarray(mask)

        @jax.jit
        def objective(flat: jax.Array, y: jax.Array, m: jax.Array) -> tuple[jax.Array, jax.Array]:
            return jax.value_and_grad(lambda f: -mdl.log_posterior(unravel(f), spec, design, y, m) * scale)(flat)

        def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
            value, grad = objective(jnp.asarray(x, dtype=dtype), y, m)
            return float(value), np.asarray(grad, dtype=np.float64)

        started = time.perf_counter()
        result = optimize.minimize(fun, np.asarray(flat0, dtype=np.float64), jac=True, method="L-BFGS-B",
                                   options={"maxiter": max_iter, "maxcor": 20,
                                            "ftol": 0.0 if precision == "float64" else 1e-9, "gtol": tol})
        max_gradient = float(np.abs(result.jac).max())
        params = {k: np.asarray(v, dtype=np.float64) for k, v in unravel(jnp.asarray(result.x, dtype=dtype)).items()}
    info = {"solver": "lbfgs", "converged": bool(result.success) or max_gradient < 100 * tol, "iterations": int(result.nit),
            "evaluations": int(result.nfev), "message": str(result.message), "objective": float(result.fun),
            "max_abs_gradient": max_gradient, "seconds": time.perf_counter() - started, "precision": precision}
    return params, info


# ----------------------------------------------------------------------------- NUTS
def nuts_samples(spec: mdl.ModelSpec, design: mdl.Design, mask: np.ndarray, init: Mapping[str, np.ndarray],
                 *, chains: int, warmup: int, samples: int, seed: int, target_accept: float,
                 progress: bool) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Run NUTS on :func:`numpyro_model`; chains start from jittered ``init`` values.

    Returns constrained draws keyed by site name with shape (chains, draws, ...) and
    sampler info (divergences, step sizes, seconds).
    """
    import numpyro
    from numpyro.infer import MCMC, NUTS

    rng = np.random.default_rng(seed)
    init_params = {k: jnp.asarray(np.asarray(v)[None] + 0.1 * rng.standard_normal((chains,) + np.shape(v)),
                                  dtype=jnp.float32) for k, v in init.items()}
    y = jnp.asarray(design.y, dtype=jnp.float32)
    kernel = NUTS(mdl.numpyro_model, target_accept_prob=target_accept)
    mcmc = MCMC(kernel, num_warmup=warmup, num_samples=samples, num_chains=chains,
                chain_method="vectorized" if chains > 1 else "sequential", progress_bar=progress)
    started = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(seed), spec, design, y, jnp.asarray(mask), init_params=init_params,
             extra_fields=("diverging",))
    draws = {k: np.asarray(v, dtype=np.float64) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    diverging = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["diverging"])
    info = {"divergences": int(diverging.sum()), "divergences_per_chain": diverging.sum(axis=1).tolist(),
            "seconds": time.perf_counter() - started, "chains": chains, "warmup": warmup, "samples": samples,
            "target_accept": target_accept}
    del numpyro
    return draws, info


def unconstrain_draws(draws: Mapping[str, np.ndarray], spec: mdl.ModelSpec) -> dict[str, np.ndarray]:
    """Constrained NUMPyro draws -> unconstrained site values (log a, logit c, log gap, ...)."""
    out = {}
    for key, value in draws.items():
        if key == "a" and spec.has_discrimination:
            out[key] = np.log(value)
        elif key == "c" and spec.free_guessing:
            out[key] = np.log(value) - np.log1p(-value)
        elif key in ("gap", "sigma_resid"):
            out[key] = np.log(value)
        elif key in ("d", "b1", "theta_raw", "resid") or key.startswith("z_"):
            out[key] = value
    return out


# ----------------------------------------------------------------------------- tables
def _interval_table(estimate: np.ndarray, sd: np.ndarray, low: np.ndarray, high: np.ndarray,
                    name: str) -> dict[str, np.ndarray]:
    return {name: estimate, f"{name}_sd": sd, f"{name}_low": low, f"{name}_high": high}


def _tables_from_samples(result_draws: Mapping[str, np.ndarray], spec: mdl.ModelSpec,
                         design: mdl.Design) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, np.ndarray]]:
    def stats(values: np.ndarray, name: str) -> dict[str, np.ndarray]:
        return _interval_table(values.mean(axis=0), values.std(axis=0, ddof=1), np.quantile(values, 0.05, axis=0),
                               np.quantile(values, 0.95, axis=0), name)

    columns: dict[str, np.ndarray] = {}
    for name in ("a", "b", "c"):
        if name in result_draws:
            columns.update(stats(result_draws[name], name))
    if spec.kind == "grm":
        thresholds = result_draws["thresholds"]
        columns.update(stats(thresholds.mean(axis=-1), "b"))
        for k in range(thresholds.shape[-1]):
            columns.update(stats(thresholds[..., k], f"b_{k + 1}"))
    items = pd.DataFrame(columns, index=pd.Index(design.items, name="item"))
    examinees = pd.DataFrame(stats(result_draws["theta"], "theta"), index=pd.Index(design.examinees, name="examinee"))
    return items, examinees, {k: v for k, v in result_draws.items()}


def _map_tables(params: Mapping[str, np.ndarray], spec: mdl.ModelSpec, design: mdl.Design,
                cov: LaplaceCovariance | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tables from a MAP estimate; intervals are Laplace intervals mapped through the transforms."""
    n_items = design.n_items
    nan = np.full(n_items, np.nan)

    def transformed(key: str, forward, column: int | None = None) -> tuple[np.ndarray, ...]:
        u = np.asarray(params[key]) if column is None else np.asarray(params[key])[:, column]
        sd_u = (cov.item_sd(key) if column is None else cov.item_sd(key)[:, column]) if cov is not None else nan
        value = forward(u)
        eps = 1e-4
        derivative = (forward(u + eps) - forward(u - eps)) / (2 * eps)
        return value, np.abs(derivative) * sd_u, forward(u - Z90 * sd_u), forward(u + Z90 * sd_u)

    columns: dict[str, np.ndarray] = {}
    if "a" in params:
        columns.update(_interval_table(*transformed("a", np.exp), "a"))
    else:
        columns.update(_interval_table(np.ones(n_items), np.zeros(n_items), np.ones(n_items), np.ones(n_items), "a"))
    if spec.kind == "grm":
        thresholds = np.asarray(mdl.grm_thresholds({k: jnp.asarray(v) for k, v in params.items()}))
        # Delta method for b_k = b1 + sum_{j<k} exp(gap_j), ignoring the covariance between b1 and gaps.
        b1_sd = cov.item_sd("b1") if cov is not None else nan
        gap_sd = cov.item_sd("gap") if cov is not None and "gap" in params else None
        sds = [b1_sd]
        for k in range(1, thresholds.shape[1]):
            gaps = np.exp(np.asarray(params["gap"])[:, :k])
            gsd = (gap_sd if gap_sd.ndim == 2 else gap_sd[:, None])[:, :k] if gap_sd is not None else 0.0
            sds.append(np.sqrt(b1_sd ** 2 + np.sum((gaps * gsd) ** 2, axis=1)))
        mean_sd = np.sqrt(np.mean(np.square(sds), axis=0))
        mean_b = thresholds.mean(axis=1)
        columns.update(_interval_table(mean_b, mean_sd, mean_b - Z90 * mean_sd, mean_b + Z90 * mean_sd, "b"))
        for k in range(thresholds.shape[1]):
            columns.update(_interval_table(thresholds[:, k], sds[k], thresholds[:, k] - Z90 * sds[k],
                                           thresholds[:, k] + Z90 * sds[k], f"b_{k + 1}"))
    else:
        # b = -d / a: delta method with the joint (log a, d) covariance of each item.
        a_values = np.exp(np.asarray(params["a"])) if "a" in params else np.ones(n_items)
        b = -np.asarray(params["d"]) / a_values
        if cov is None:
            b_sd = nan
        else:
            jd = cov.item_slices["d"].start
            var_d = cov.item_cov[:, jd, jd]
            if "a" in params:
                ja = cov.item_slices["a"].start
                # db/dlog a = -b, db/dd = -1/a
                var = (b ** 2 * cov.item_cov[:, ja, ja] + var_d / a_values ** 2
                       + 2 * (b / a_values) * cov.item_cov[:, ja, jd])
            else:
                var = var_d
            b_sd = np.sqrt(np.maximum(var, 0.0))
        columns.update(_interval_table(b, b_sd, b - Z90 * b_sd, b + Z90 * b_sd, "b"))
        if "c" in params:
            sigmoid = lambda x: 1.0 / (1.0 + np.exp(-x))  # noqa: E731
            columns.update(_interval_table(*transformed("c", sigmoid), "c"))
        else:
            c = np.full(n_items, spec.fixed_c)
            columns.update(_interval_table(c, np.zeros(n_items), c, c, "c"))
    items = pd.DataFrame(columns, index=pd.Index(design.items, name="item"))

    theta = np.asarray(mdl.examinee_theta({k: jnp.asarray(v) for k, v in params.items()}, spec, design),
                       dtype=np.float64)
    theta_sd = np.sqrt(np.maximum(np.diag(cov.theta_cov()), 0.0)) if cov is not None else np.full_like(theta, np.nan)
    examinees = pd.DataFrame(_interval_table(theta, theta_sd, theta - Z90 * theta_sd, theta + Z90 * theta_sd, "theta"),
                             index=pd.Index(design.examinees, name="examinee"))
    return items, examinees


def _facet_tables(spec: mdl.ModelSpec, design: mdl.Design, responses: ResponseMatrix,
                  level_draws: Mapping[str, np.ndarray] | None, params: Mapping[str, np.ndarray] | None,
                  cov: LaplaceCovariance | None) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """Facet level abilities and all pairwise contrasts, from draws (NUTS) or the Laplace covariance (MAP)."""
    if not spec.facets:
        return None, None
    level_rows, contrast_rows = [], []
    for facet in spec.facets:
        levels = design.facet_levels[facet]
        counts = responses.examinee_facets[facet].value_counts()
        if level_draws is not None:
            draws = level_draws[f"theta_{facet}"]  # (n, K)
            mean, sd = draws.mean(axis=0), draws.std(axis=0, ddof=1)
            low, high = np.quantile(draws, 0.05, axis=0), np.quantile(draws, 0.95, axis=0)
        else:
            mean, level_cov = _facet_level_moments(facet, spec, design, params, cov)
            sd = np.sqrt(np.maximum(np.diag(level_cov), 0.0))
            low, high = mean - Z90 * sd, mean + Z90 * sd
        for k, level in enumerate(levels):
            level_rows.append({"facet": facet, "level": level, "theta": mean[k], "theta_sd": sd[k],
                               "theta_low": low[k], "theta_high": high[k], "n_examinees": int(counts.get(level, 0))})
        for j, reference in enumerate(levels):
            for k, level in enumerate(levels):
                if j == k:
                    continue
                if level_draws is not None:
                    diff = draws[:, k] - draws[:, j]
                    row = {"diff": diff.mean(), "sd": diff.std(ddof=1), "low": np.quantile(diff, 0.05),
                           "high": np.quantile(diff, 0.95), "prob_greater": float((diff > 0).mean())}
                else:
                    d = mean[k] - mean[j]
                    s = float(np.sqrt(max(level_cov[k, k] + level_cov[j, j] - 2 * level_cov[j, k], 0.0)))
                    from scipy.stats import norm
                    row = {"diff": d, "sd": s, "low": d - Z90 * s, "high": d + Z90 * s,
                           "prob_greater": float(norm.cdf(d / s)) if s > 0 else float(d > 0)}
                contrast_rows.append({"facet": facet, "level": level, "reference": reference, **row})
    return pd.DataFrame(level_rows), pd.DataFrame(contrast_rows)


def _facet_level_moments(facet: str, spec: mdl.ModelSpec, design: mdl.Design, params: Mapping[str, np.ndarray],
                         cov: LaplaceCovariance | None) -> tuple[np.ndarray, np.ndarray]:
    """Level abilities of one facet and their Laplace covariance (delta method through the scaling)."""
    tree = {k: jnp.asarray(v) for k, v in params.items()}
    mean = np.asarray(mdl.facet_thetas(tree, spec, design)[facet], dtype=np.float64)
    if cov is None:
        return mean, np.full((len(mean), len(mean)), np.nan)
    keys = cov.person_keys

    def levels(phi: jax.Array) -> jax.Array:
        local = dict(tree)
        for key in keys:
            sl = cov.person_slices[key]
            local[key] = phi[sl].reshape(np.shape(params[key]))
        return mdl.facet_thetas(local, spec, design)[facet]

    phi0 = jnp.concatenate([tree[k].reshape(-1) for k in keys])
    jac = np.asarray(jax.jacfwd(levels)(phi0), dtype=np.float64)
    return mean, jac @ cov.person_cov @ jac.T


def laplace_draws(result: FitResult, name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Draws from the Laplace approximation of a MAP fit, mapped to the constrained scale."""
    cov, spec, design = result.laplace, result.spec, result.design
    params = result.params
    draws: dict[str, np.ndarray] = {}
    # Items: each item's unconstrained vector from its marginal Gaussian.
    if cov.item_keys:
        mean = np.concatenate([np.asarray(params[k]).reshape(design.n_items, -1) for k in cov.item_keys], axis=1)
        chol = np.linalg.cholesky(cov.item_cov + 1e-12 * np.eye(cov.item_cov.shape[1]))
        noise = rng.standard_normal((n,) + mean.shape)
        sample = mean[None] + np.einsum("ijk,nik->nij", chol, noise)
        for key in cov.item_keys:
            sl = cov.item_slices[key]
            draws[key] = sample[:, :, sl] if key == "gap" else sample[:, :, sl][..., 0]
    if cov.person_keys:
        mean = np.concatenate([np.asarray(params[k]).reshape(-1) for k in cov.person_keys])
        sample = rng.multivariate_normal(mean, cov.person_cov, size=n, method="eigh")
        for key in cov.person_keys:
            sl = cov.person_slices[key]
            draws[key] = sample[:, sl].reshape((n,) + np.shape(params[key]))
    out = []
    for s in range(n):
        tree = {k: jnp.asarray(v[s]) for k, v in draws.items()}
        constrained = mdl.constrain(tree, spec, design)
        if name not in constrained:
            raise IrtexamError(f"no draws of '{name}'; available: {sorted(constrained)}")
        out.append(np.asarray(constrained[name]))
    return np.stack(out)


# ----------------------------------------------------------------------------- warnings
def _convergence_warnings(diagnostics: pd.DataFrame, info: Mapping[str, Any]) -> list[str]:
    messages = []
    bad_rhat = diagnostics[diagnostics["r_hat"] > 1.01]
    if len(bad_rhat):
        worst = bad_rhat.sort_values("r_hat", ascending=False).head(5)
        names = ", ".join(f"{r.parameter}[{r.id}] ({r.r_hat:.3f})" for r in worst.itertuples())
        messages.append(f"R-hat above 1.01 for {len(bad_rhat)} parameter(s), worst: {names}. The chains disagree: "
                        f"run more warmup and samples (e.g. --warmup 1000 --samples 1000) or more chains before "
                        f"trusting these estimates")
    low_ess = diagnostics[diagnostics["ess_bulk"] < 100 * max(int(info.get("chains", 1)), 1) / 4]
    if len(low_ess):
        worst = low_ess.sort_values("ess_bulk").head(5)
        names = ", ".join(f"{r.parameter}[{r.id}] ({r.ess_bulk:.0f})" for r in worst.itertuples())
        messages.append(f"low effective sample size for {len(low_ess)} parameter(s), worst: {names}: intervals are "
                        f"noisy; draw more samples")
    if info.get("divergences", 0):
        messages.append(f"{info['divergences']} divergent transition(s) after warmup: the sampler missed part of the "
                        f"posterior. Raise target_accept (e.g. 0.95), fix the guessing parameter (--guessing 0.25) "
                        f"or use a 2PL")
    return messages


def _mcmc_diagnostics(draws: Mapping[str, np.ndarray], design: mdl.Design, spec: mdl.ModelSpec) -> pd.DataFrame:
    """Split R-hat and bulk ESS per scalar parameter (numpyro.diagnostics)."""
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    rows = []
    names = [k for k in ("a", "b", "c", "theta") if k in draws] + [f"theta_{f}" for f in spec.facets]
    if spec.kind == "grm":
        names.append("thresholds")
    for name in names:
        values = draws[name]
        if values.shape[1] < 4:
            continue
        if name in ("a", "c") and np.allclose(values.std(axis=(0, 1)), 0):
            continue  # fixed parameter
        rhat = np.atleast_1d(np.asarray(split_gelman_rubin(values)))
        ess = np.atleast_1d(np.asarray(effective_sample_size(values)))
        ids = (design.items if name in ("a", "b", "c", "thresholds") else design.examinees if name == "theta"
               else design.facet_levels[name[len("theta_"):]])
        rhat, ess = rhat.reshape(len(ids), -1).max(axis=1), ess.reshape(len(ids), -1).min(axis=1)
        for k, identifier in enumerate(ids):
            rows.append({"parameter": name, "id": identifier, "r_hat": float(rhat[k]), "ess_bulk": float(ess[k])})
    return pd.DataFrame(rows, columns=["parameter", "id", "r_hat", "ess_bulk"])


# ----------------------------------------------------------------------------- entry point
def fit(responses: ResponseMatrix | str | Path, model: str = "3pl", facets: Sequence[str] | str | None = None,
        method: str = "map", seed: int = 0, *, guessing: float | None = None, n_choices: int = 4,
        identify: str = "sum-to-zero", residual: bool = False, init: FitResult | Mapping | None = None,
        heldout: float = 0.0, se: bool | str = True, chains: int = 4, warmup: int = 500, samples: int = 500,
        target_accept: float = 0.9, progress: bool = False, max_iter: int = 5000,
        spec: mdl.ModelSpec | None = None) -> FitResult:
    """Fit an IRT model to a response matrix.

    Model: P(X=1 | theta, a, b, c) = c + (1 - c) / (1 + exp(-a (theta - b))) ("3pl";
    "2pl": c = 0 or ``guessing``; "1pl": a = 1; "grm": Samejima's graded response model
    for 0..K scores). With ``facets`` the ability of examinee m is
    theta_m = sum_f theta_f[level_f(m)] (+ residual), identified by sum-to-zero levels
    (or a reference level) and a unit prior scale.

    Args:
        responses: a ResponseMatrix or a path to a long response table.
        model: "1pl", "2pl", "3pl" or "grm".
        facets: examinee facet columns for the hierarchical model (e.g. ["llm", "retriever", "icl"]).
        method: "map" (L-BFGS + Laplace) or "nuts" (NumPyro, ``chains`` chains).
        seed: seeds the held-out split, NUTS, and Laplace draws.
        guessing: fix c for every item (e.g. 0.25); None lets the 3PL estimate it.
        n_choices: answer choices per item; centres the prior on c at 1 / n_choices.
        init: a previous FitResult (or unconstrained parameter dict) to warm-start from; matched by id.
        heldout: fraction of observed cells hidden from the fit and scored afterwards.
        se: compute Laplace standard errors for MAP (True, "full", "blockwise", False).
    """
    if isinstance(responses, (str, Path)):
        responses = ResponseMatrix.read(responses, graded=model == "grm")
    method = method.lower()
    if method not in ("map", "nuts"):
        raise IrtexamError(f"unknown method '{method}'; choose 'map' or 'nuts'")
    facet_names = _validate_facets(responses, facets)
    if spec is None:
        spec = mdl.ModelSpec(kind=model, guessing=guessing, n_choices=n_choices, facets=facet_names,
                             identify=identify, residual=residual)
    else:
        spec = replace(spec, facets=facet_names or spec.facets)
    design = mdl.build_design(responses, spec)
    if design.mask.sum() == 0:
        raise IrtexamError("the response matrix has no observed responses")
    train_mask, test_mask = heldout_split(design.mask, heldout, seed)
    start = _warm_start(init, spec, design)
    messages = list(responses.warnings())

    map_params, opt_info = map_estimate(spec, design, train_mask, start, max_iter=max_iter)
    if not opt_info["converged"]:
        messages.append(f"the MAP optimiser stopped before converging ({opt_info['message']}, "
                        f"max |gradient| {opt_info['max_abs_gradient']:.2g}); estimates may be off: raise max_iter")

    posterior_draws = diagnostics = None
    cov = None
    sampler_info: dict[str, Any] = {}
    if method == "map":
        params = map_params
        if se:
            mode = se if isinstance(se, str) else "auto"
            cov = laplace_covariance(params, spec, design, train_mask, mode=mode)
            if cov.mode == "blockwise":
                messages.append("standard errors ignore the item/ability coupling (blockwise Laplace, chosen for "
                                "size); they are somewhat too small")
        items, examinees = _map_tables(params, spec, design, cov)
        facet_table, contrasts = _facet_tables(spec, design, responses, None, params, cov)
    else:
        grouped, sampler_info = nuts_samples(spec, design, train_mask, map_params, chains=chains, warmup=warmup,
                                             samples=samples, seed=seed, target_accept=target_accept,
                                             progress=progress)
        diagnostics = _mcmc_diagnostics(grouped, design, spec)
        messages.extend(_convergence_warnings(diagnostics, sampler_info))
        flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in grouped.items()}
        items, examinees, posterior_draws = _tables_from_samples(flat, spec, design)
        params = {k: v.mean(axis=0) for k, v in unconstrain_draws(flat, spec).items()}
        facet_table, contrasts = _facet_tables(spec, design, responses, flat, None, None)

    for facet in responses.facet_names:
        examinees[facet] = responses.examinee_facets[facet].reindex(examinees.index).to_numpy()

    stats = fit_statistics(params, spec, design, train_mask, test_mask if heldout > 0 else None)
    stats.update({"method": method, "model": spec.kind, "optimizer": opt_info, **({"sampler": sampler_info}
                                                                                   if sampler_info else {}),
                  "laplace": cov.mode if cov is not None else None, "heldout_fraction": heldout})
    for message in messages:
        warnings.warn(message, stacklevel=2)
    return FitResult(spec=spec, design=design, method=method, responses=responses, params=params, items=items,
                     examinees=examinees, facets=facet_table, contrasts=contrasts, fit_stats=stats,
                     warnings=messages, samples=posterior_draws, laplace=cov, diagnostics=diagnostics,
                     chains=chains if method == "nuts" else 1, seed=seed)
