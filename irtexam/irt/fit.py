"""Fit IRT models: MAP (L-BFGS on the pure JAX log-posterior + Laplace) and NUTS (NumPyro).

Both estimators return a :class:`FitResult` with the same tables and an arviz
InferenceData with the same variable names and dims; MAP is one draw.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from ..errors import IrtexamError
from ..responses import ResponseMatrix
from . import alternating, kinds
from .lbfgs import minimize_lbfgs
from . import model as mdl
from .draws import laplace_draws
from .laplace import laplace_covariance
from .result import FitResult, examinee_table, facet_tables, item_table, load_fit
from .stats import fit_statistics, heldout_split

DEFAULT_FACETS = ("llm", "retriever", "icl")
METHODS = ("em", "map", "nuts")
__all__ = ["DEFAULT_FACETS", "FitResult", "fit", "load_fit", "map_estimate", "lbfgs_map", "nuts_samples"]


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
        elif old.shape == value.shape and key.startswith(("z_", "sigma", "mu_")):
            value[...] = old
    return start


def _validate_facets(responses: ResponseMatrix, facets: Sequence[str] | str | None) -> tuple[str, ...]:
    """Facet terms: column names, or interactions of columns joined by ':' (e.g. "llm:icl")."""
    if facets is None:
        return ()
    if isinstance(facets, str):
        facets = [f.strip() for f in facets.split(",") if f.strip()]
    facets = [str(f).strip() for f in facets]
    source = f" from {responses.source}" if responses.source else ""
    allowed = responses.facet_names
    for term in facets:
        parts = term.split(mdl.INTERACTION)
        unknown = [p for p in parts if p not in allowed]
        if unknown or len(set(parts)) != len(parts) or not all(parts):
            if not allowed:
                raise IrtexamError(f"unknown facet term '{term}': the responses{source} have no facet columns; "
                                   f"add them to the long table or omit --facets")
            raise IrtexamError(f"unknown facet term '{term}': the responses{source} have facet columns "
                               f"{', '.join(allowed)}; use those names, or interactions of two of them such as "
                               f"'{allowed[0]}:{allowed[-1]}'")
        for part in parts:
            if len(responses.facet_levels(part)) < 2:
                raise IrtexamError(f"facet '{part}' has a single level; it cannot be separated from the overall "
                                   f"ability: drop it from the facet list")
    if len(set(facets)) != len(facets):
        raise IrtexamError(f"facet terms repeat: {', '.join(facets)}")
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
            warm["max_abs_gradient"] = None  # alternating scoring stops on parameter changes, not gradients
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
    """Maximise the log posterior with L-BFGS on jit-compiled JAX value-and-gradient.

    The optimiser is :func:`irtexam.irt.lbfgs.minimize_lbfgs`, scipy's L-BFGS-B algorithm
    without bounds in NumPy (same iterates; importing scipy.optimize would cost ~0.5 s).

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
        flat0, unravel = _ravel_params(init, dtype)
        # the data as device arrays (host -> device once; no eager JAX ops)
        data = jax.device_put((np.asarray(design.y, dtype=dtype), np.asarray(mask),
                               {k: np.asarray(v, dtype=np.int32) for k, v in design.facet_index.items()},
                               {k: np.asarray(v, dtype=dtype) for k, v in design.facet_basis.items()},
                               np.asarray(scale, dtype=dtype)))
        objective = _objective(spec, design, init, unravel, flat0, data)

        def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
            value, grad = objective(np.asarray(x, dtype=dtype), *data)
            return float(value), np.asarray(grad, dtype=np.float64)

        started = time.perf_counter()
        result = minimize_lbfgs(fun, np.asarray(flat0, dtype=np.float64), maxiter=max_iter, maxcor=20,
                                ftol=0.0 if precision == "float64" else 1e-9, gtol=tol)
        max_gradient = float(np.abs(result.jac).max())
        params = {k: np.asarray(v, dtype=np.float64) for k, v in unravel(np.asarray(result.x, dtype=np.float64)).items()}
    info = {"solver": "lbfgs", "converged": bool(result.success) or max_gradient < 100 * tol, "iterations": int(result.nit),
            "evaluations": int(result.nfev), "message": str(result.message), "objective": float(result.fun),
            "max_abs_gradient": max_gradient, "seconds": time.perf_counter() - started, "precision": precision}
    return params, info


def _objective(spec: mdl.ModelSpec, design: mdl.Design, init: Mapping[str, np.ndarray], unravel: Any,
               flat0: np.ndarray, data: tuple) -> Any:
    """The compiled value and gradient of the scaled negative log posterior over the flat parameter vector.

    Called as ``objective(flat, y, mask, facet_index, facet_basis, scale)`` (``data`` is the
    tuple after ``flat``): the data (responses, mask, every examinee's facet levels, the
    identifying bases, 1 / n_observed) are arguments, not constants, so the compiled function
    depends only on the model configuration and the shapes, and
    :func:`irtexam.irt.compile_cache.compiled_executable` keeps it across fits and processes
    without tracing it again.
    """
    from .compile_cache import compiled_executable

    @jax.jit
    def objective(flat: jax.Array, y: jax.Array, m: jax.Array, index: dict, basis: dict,
                  scale: jax.Array) -> tuple[jax.Array, jax.Array]:
        layout = replace(design, facet_index=index, facet_basis=basis)
        return jax.value_and_grad(lambda f: -mdl.log_posterior(unravel(f), spec, layout, y, m) * scale)(flat)

    # the layout of the flat vector (unravel) is fixed by the parameters' names and shapes
    parts = (repr(spec), design.max_score, tuple((k, np.shape(v)) for k, v in sorted(init.items())))
    return compiled_executable("lbfgs-objective", parts, objective, (flat0, *data))


def _ravel_params(params: Mapping[str, Any], dtype: Any) -> tuple[np.ndarray, Any]:
    """(flat host vector, unravel): the parameters in sorted-key order, as ``ravel_pytree`` lays them out.

    ``unravel`` slices and reshapes, so it works on NumPy arrays (host, no JAX dispatch) and on
    tracers inside the jitted objective alike.
    """
    keys = sorted(params)
    shapes = [np.shape(params[k]) for k in keys]
    sizes = [int(np.prod(shape)) for shape in shapes]
    offsets = np.cumsum([0] + sizes)
    flat = np.concatenate([np.asarray(params[k], dtype=dtype).reshape(-1) for k in keys]) if keys \
        else np.zeros(0, dtype=dtype)

    def unravel(vector: Any) -> dict[str, Any]:
        return {k: vector[offsets[j]:offsets[j + 1]].reshape(shapes[j]) for j, k in enumerate(keys)}

    return flat, unravel


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
    if chains == 1:  # NumPyro batches init_params by chain only for several chains
        init_params = {k: v[0] for k, v in init_params.items()}
    y = jnp.asarray(design.y, dtype=jnp.float32)
    kernel = NUTS(mdl.numpyro_model, target_accept_prob=target_accept)
    mcmc = MCMC(kernel, num_warmup=warmup, num_samples=samples, num_chains=chains,
                chain_method="vectorized" if chains > 1 else "sequential", progress_bar=progress)
    started = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(seed), spec, design, y, jnp.asarray(mask), init_params=init_params,
             extra_fields=("diverging", "num_steps", "adapt_state.step_size"))
    draws = {k: np.asarray(v, dtype=np.float64) for k, v in mcmc.get_samples(group_by_chain=True).items()}
    extra = mcmc.get_extra_fields(group_by_chain=True)
    diverging = np.asarray(extra["diverging"])
    num_steps = np.asarray(extra["num_steps"])
    stats = {"diverging": diverging.reshape(-1), "tree_depth": np.floor(np.log2(np.maximum(num_steps, 1))).reshape(-1)
             .astype(np.int64) + 1, "n_steps": num_steps.reshape(-1),
             "step_size": np.asarray(extra["adapt_state.step_size"], dtype=np.float64).reshape(-1)}
    info = {"sample_stats": stats, "divergences": int(diverging.sum()),
            "divergences_per_chain": diverging.sum(axis=1).tolist(),
            "seconds": time.perf_counter() - started, "chains": chains, "warmup": warmup, "samples": samples,
            "target_accept": target_accept}
    del numpyro
    return draws, info


# ----------------------------------------------------------------------------- warnings
def _convergence_warnings(diagnostics: pd.DataFrame, info: Mapping[str, Any]) -> list[str]:
    messages = []
    bad_rhat = diagnostics[diagnostics["r_hat"] > 1.01]
    if len(bad_rhat):
        worst = bad_rhat.sort_values("r_hat", ascending=False).head(5)
        names = ", ".join(f"{r.parameter}[{r.id}] ({r.r_hat:.3f})" for r in worst.itertuples())
        messages.append(f"R-hat above 1.01 for {len(bad_rhat)} parameter(s), worst: {names}. The chains disagree: "
                        f"run more warmup and samples (e.g. warmup=1000, samples=1000; CLI --warmup 1000 --samples 1000) or more chains before "
                        f"trusting these estimates")
    low_ess = diagnostics[diagnostics["ess_bulk"] < 100 * max(int(info.get("chains", 1)), 1) / 4]
    if len(low_ess):
        worst = low_ess.sort_values("ess_bulk").head(5)
        names = ", ".join(f"{r.parameter}[{r.id}] ({r.ess_bulk:.0f})" for r in worst.itertuples())
        messages.append(f"low effective sample size for {len(low_ess)} parameter(s), worst: {names}: intervals are "
                        f"noisy; draw more samples")
    if info.get("divergences", 0):
        messages.append(f"{info['divergences']} divergent transition(s) after warmup: the sampler missed part of the "
                        f"posterior. Raise target_accept (e.g. 0.95), fix the guessing parameter (guessing=0.25, CLI --guessing 0.25) "
                        f"or use a 2PL")
    return messages


def _mcmc_diagnostics(draws: Mapping[str, np.ndarray], design: mdl.Design, spec: mdl.ModelSpec) -> pd.DataFrame:
    """Split R-hat and bulk ESS per scalar parameter (numpyro.diagnostics)."""
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

    rows = []
    names = [k for k in ("a", "b", "c", "theta") if k in draws] + [f"theta_{f}" for f in spec.facets]
    if spec.kind_object.graded:
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
# Below this many items the Laplace facet intervals under-cover (experiments/coverage.py --items 5 / 20, 3PL,
# 40 replications: 0.80 / 0.81 for facet levels, NUTS 0.92 at 5 items; 0.87 at 200 items)
SMALL_EXAM_ITEMS = 50


def resolve_method(method: str, facets: Sequence[str] | None, n_items: int) -> str:
    """The estimator that ``method`` names. "auto": the marginal estimator ("em") for a model without
    facets (item parameters consistent whatever the number of items per examinee); for a hierarchical
    fit (``facets``) "nuts" below :data:`SMALL_EXAM_ITEMS` items (MAP's facet intervals cover about 80%
    there, NUTS's 90%), else the joint mode "map"."""
    if method != "auto":
        return method
    if not facets:
        return "em"
    return "nuts" if n_items < SMALL_EXAM_ITEMS else "map"


# The marginal estimator's prior sd of log a. The joint mode's 0.5 anchors the common level of the discriminations
# (its ability scale is set by the estimated abilities); in the marginal estimator N(0, 1) abilities fix the scale,
# and 0.5 pulled the slopes of a spread-out group toward 1: 60 3PL items, 500 examinees from N(0.5, 1.3^2), mean
# log(a_hat / a*) -0.062 (8 reps), which biased linking constants A low by 0.03-0.06; with 1.0, +0.031 (the small-sample
# 3PL inflation, shared by both groups of a link). Recovery at 150 x 800 and 10 x 2000 is unchanged within noise.
MARGINAL_LOG_A_SCALE = 1.0


def default_item_prior(method: str) -> str:
    """The item prior each estimator uses unless told otherwise: "hierarchical" (learned centres of the
    priors on d and c) for the joint mode and NUTS, "fixed" (centred on d = 0, c = 1 / n_choices) for the
    marginal estimator. Learned centres are found as a joint mode with the item parameters; in the
    marginal estimator they compound the small-sample upward bias of weakly identified guessing
    parameters (simulated 3PL, 150 items x 800, true mean c 0.25: the learned centre went to 0.295,
    c +0.043, a x1.067, b slope 0.938; fixed centres: c +0.013, a x1.023, b slope 0.958)."""
    return "fixed" if method == "em" else "hierarchical"


def fit(responses: ResponseMatrix | str | Path, model: str = "3pl", facets: Sequence[str] | str | None = None,
        method: str = "auto", seed: int = 0, *, guessing: float | None = None, n_choices: int = 4,
        identify: str = "sum-to-zero", residual: bool = False, init: FitResult | Mapping | None = None,
        heldout: float = 0.0, se: bool | str = True, chains: int = 4, warmup: int = 500, samples: int = 500,
        target_accept: float = 0.9, progress: bool = False, max_iter: int = 5000, draws: int = 500,
        correct_draws: bool = True, item_prior: str | None = None, spec: mdl.ModelSpec | None = None,
        abilities: str = "eap", groups: Any = None, reference_group: Any = None,
        fixed_items: pd.DataFrame | None = None, tol: float = 1e-4) -> FitResult:
    """Fit an IRT model to a response matrix.

    Model: P(X=1 | theta, a, b, c) = c + (1 - c) / (1 + exp(-a (theta - b))) ("3pl";
    "2pl": c = 0 or ``guessing``; "1pl": a = 1; "grm": Samejima's graded response model
    for 0..K scores). With ``facets`` the ability of examinee m is
    theta_m = sum_f theta_f[level_f(m)] (+ residual), identified by sum-to-zero levels
    (or a reference level) and a fixed ability scale; a term "llm:icl" adds the
    interaction of two facets (levels sum to zero over each row and column).

    Estimators (``method``): "em" integrates the abilities out over their population distribution
    (N(0, 1), or one N(mu_g, sigma_g^2) per group) and maximises the marginal posterior of the item
    parameters by Bock-Aitkin EM (:mod:`irtexam.irt.marginal`); abilities follow by EAP or MAP given
    the items. "map" is the joint posterior mode of items and abilities (accurate when every examinee
    answers many items, as on leaderboards; biased slopes when examinees answer few, see the docs);
    "nuts" samples the joint posterior. "auto" (default): "em" without facets, else NUTS below 50 items
    and MAP above.

    Uncertainty: EM fits draw item parameters from the normal approximation with the inverse observed
    information (Wald intervals on the log a / d / logit c scale) and abilities from their posterior
    over the quadrature nodes; MAP fits draw ``draws`` joint samples from the Laplace approximation,
    corrected item by item by Pareto-smoothed importance sampling
    (:mod:`irtexam.irt.draws`; a one-line warning when an item's correction fails,
    k-hat > 0.7); NUTS fits use their MCMC draws. Every reported interval (items,
    examinees, facets, contrasts, prob_greater) comes from these draws.

    Args:
        responses: a ResponseMatrix, a path to a long response table, or a pandas DataFrame (wide: rows
            examinees, columns items; or long: item, examinee, response + facet columns), see
            :meth:`irtexam.responses.ResponseMatrix.coerce`.
        model: "1pl", "2pl", "3pl" or "grm".
        facets: examinee facet terms for the hierarchical model (e.g. ["llm", "retriever", "icl", "llm:icl"]).
        method: "auto" (default, :func:`resolve_method`), "em" (marginal), "map" (joint mode + corrected
            Laplace draws) or "nuts" (NumPyro, ``chains`` chains).
        seed: seeds the held-out split, NUTS, and the Laplace draws.
        guessing: fix c for every item (e.g. 0.25); None lets the 3PL estimate it.
        n_choices: answer choices per item; centres the prior on c at 1 / n_choices.
        identify: how facet levels are identified: "sum-to-zero" (default, the levels of each facet sum
            to 0) or "reference" (the first level is 0).
        residual: add a per-examinee residual term to the facet sum (sigma * e_m, sigma ~ HalfNormal(1)).
        init: a previous FitResult (or unconstrained parameter dict) to warm-start from; matched by id.
        heldout: fraction in (0, 0.5] of observed cells hidden from the fit and scored afterwards (0: none).
        se: uncertainty for MAP (True, "full", "blockwise"; False: point estimates only).
        chains: number of NUTS chains ("nuts" only).
        warmup: NUTS warm-up iterations per chain.
        samples: NUTS draws kept per chain.
        target_accept: NUTS target acceptance probability.
        progress: show the sampler's progress bar (NUTS).
        max_iter: iteration limit of the optimiser (MAP) or of the EM cycles ("em").
        draws: number of posterior draws of a MAP fit.
        correct_draws: importance-correct the MAP's Laplace draws (True) or keep them Gaussian.
        item_prior: "hierarchical" (the centres of the priors on d and c are learned from the exam,
            log a stays centred on 0; see :class:`irtexam.irt.model.ModelSpec`), "fixed" (centred
            on d = 0, c = 1 / n_choices) or "none" (flat: marginal maximum likelihood, as mirt; "em" only).
            Default (None): :func:`default_item_prior` of the method: "fixed" for "em", "hierarchical"
            for "map" and "nuts".
        spec: a complete :class:`irtexam.irt.model.ModelSpec`; when given it replaces ``model``,
            ``guessing``, ``n_choices``, ``identify``, ``residual`` and ``item_prior`` (``facets``, when
            given, still replace the spec's facets).
        abilities: "eap" (default) or "map": how an "em" fit estimates abilities given the items.
        groups: "em" only: examinee groups with their own ability mean and sd (a facet column name, one
            label per examinee, or a mapping examinee -> label); the first group (or ``reference_group``)
            is N(0, 1) unless ``fixed_items`` anchor the scale.
        reference_group: "em" only: the group whose ability distribution is fixed at N(0, 1) (default:
            the first group).
        fixed_items: "em" only: an items table (a, b, c or b_1..b_K, indexed by item id) whose items are
            held at these values (fixed-item calibration onto a bank's scale).
        tol: "em" only: stop when no parameter moves more than ``tol`` in a cycle.
    """
    model = kinds.check_kind(model)
    method = str(method).lower()
    choices = METHODS + ("auto",)
    if method not in choices:
        raise IrtexamError(f"unknown method '{method}'; choose one of {', '.join(choices)}")
    if not (heldout == 0 or 0 < heldout <= 0.5):
        raise IrtexamError(f"held-out fraction must be 0 (none) or in (0, 0.5], got {heldout}")
    responses = ResponseMatrix.coerce(responses, graded=model == "grm")  # path, DataFrame (wide/long), array
    facet_names = _validate_facets(responses, facets)
    method = resolve_method(method, facet_names or (spec.facets if spec is not None else None), responses.n_items)
    if method != "em" and (groups is not None or fixed_items is not None):
        raise IrtexamError("groups and fixed_items need the marginal estimator: method='em' (CLI: --method em)")
    item_prior = default_item_prior(method) if item_prior is None else item_prior
    if method != "em" and (spec.item_prior if spec is not None else item_prior) == "none":
        raise IrtexamError("item_prior='none' (marginal maximum likelihood) needs method='em'; the joint mode "
                           "and NUTS need proper item priors")
    if spec is None:
        spec = mdl.ModelSpec(kind=model, guessing=guessing, n_choices=n_choices, facets=facet_names,
                             identify=identify, residual=residual, item_prior=item_prior,
                             log_a_scale=MARGINAL_LOG_A_SCALE if method == "em" else mdl.ModelSpec.log_a_scale)
    else:
        spec = replace(spec, facets=facet_names or spec.facets)
    design = mdl.build_design(responses, spec)
    if design.mask.sum() == 0:
        raise IrtexamError("the response matrix has no observed responses")
    train_mask, test_mask = heldout_split(design.mask, heldout, seed)
    messages = list(responses.warnings())
    if method == "em":
        from .marginal_fit import fit_marginal
        result = fit_marginal(responses, spec, design, train_mask, test_mask if heldout > 0 else None, seed=seed,
                              se=bool(se), n_draws=draws, abilities=abilities, groups=groups,
                              reference_group=reference_group, fixed_items=fixed_items, init=init, tol=tol,
                              max_cycles=max_iter)
        result.warnings[:0] = messages
        for message in result.warnings:
            warnings.warn(message, stacklevel=2)
        return result
    start = _warm_start(init, spec, design)

    map_params, opt_info = map_estimate(spec, design, train_mask, start, max_iter=max_iter)
    if not opt_info["converged"]:
        gradient = opt_info.get("max_abs_gradient")
        messages.append(f"the MAP optimiser stopped before converging ({opt_info['message']}"
                        + (f", max |gradient| {gradient:.2g}" if gradient is not None else "")
                        + "); estimates may be off: raise max_iter")

    diagnostics = cov = draw_diagnostics = None
    posterior: dict[str, np.ndarray] | None = None
    sampler_info: dict[str, Any] = {}
    sample_stats = None
    if method == "map":
        params = map_params
        point = _reported(params, spec, design)
        if se:
            mode = se if isinstance(se, str) else "auto"
            cov = laplace_covariance(params, spec, design, train_mask, mode=mode)
            if cov.mode == "blockwise":
                messages.append("standard errors ignore the item/ability coupling (blockwise Laplace, chosen for "
                                "size); they are somewhat too small")
            posterior, _, draw_diagnostics = laplace_draws(params, spec, design, train_mask, cov, n_draws=draws,
                                                           seed=seed, correct=correct_draws)
            warning = draw_diagnostics.warning(design.items)
            if warning:
                messages.append(warning)
            if spec.facets and design.n_items < SMALL_EXAM_ITEMS:
                messages.append(f"with {design.n_items} items the MAP fit's facet intervals are too narrow "
                                "(simulation-based calibration: 90% intervals cover about 80% of true facet levels "
                                f"at 5-20 items); refit with method='nuts' (CLI: --method nuts) for calibrated intervals")
    else:
        grouped, sampler_info = nuts_samples(spec, design, train_mask, map_params, chains=chains, warmup=warmup,
                                             samples=samples, seed=seed, target_accept=target_accept,
                                             progress=progress)
        sample_stats = sampler_info.pop("sample_stats")
        diagnostics = _mcmc_diagnostics(grouped, design, spec)
        messages.extend(_convergence_warnings(diagnostics, sampler_info))
        flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in grouped.items()}
        params = {k: v.mean(axis=0) for k, v in mdl.unconstrain(flat, spec, design).items()}
        posterior = {k: v for k, v in flat.items() if k in _REPORTED or k.startswith("theta_")}
        point = {k: v.mean(axis=0) for k, v in posterior.items()}
    items = item_table(point, posterior, spec, design)
    examinees = examinee_table(point, posterior, design, responses)
    facet_table, contrasts = facet_tables(point, posterior, spec, design)

    stats = fit_statistics(params, spec, design, train_mask, test_mask if heldout > 0 else None)
    stats.update({"method": method, "model": spec.kind, "abilities": "joint", "optimizer": opt_info, **({"sampler": sampler_info}
                                                                                   if sampler_info else {}),
                  "laplace": cov.mode if cov is not None else None, "heldout_fraction": heldout,
                  "item_prior": learned_item_prior(params, spec)})
    for message in messages:
        warnings.warn(message, stacklevel=2)
    return FitResult(spec=spec, design=design, method=method, responses=responses, params=params, items=items,
                     examinees=examinees, facets=facet_table, contrasts=contrasts, fit_stats=stats,
                     warnings=messages, samples=posterior, laplace=cov, diagnostics=diagnostics,
                     chains=chains if method == "nuts" else 1, seed=seed, draw_diagnostics=draw_diagnostics,
                     sample_stats=sample_stats)


_REPORTED = ("a", "b", "c", "thresholds", "theta", "sigma_resid")


def learned_item_prior(params: Mapping[str, np.ndarray], spec: mdl.ModelSpec) -> dict[str, Any]:
    """The centres of the item priors a fit used (:func:`irtexam.irt.model.item_prior_summary`), learned
    ("hierarchical") or fixed, from the hyperparameters in ``params``."""
    return mdl.item_prior_summary(spec, {k: params[k] for k in mdl.HYPER_KEYS if k in params})


def _reported(params: Mapping[str, np.ndarray], spec: mdl.ModelSpec, design: mdl.Design) -> dict[str, np.ndarray]:
    """Reported-scale point estimates (a, b, c / thresholds, theta, theta_<facet>) of unconstrained ``params``."""
    # NumPy in, NumPy out: eager JAX here would dispatch (and on a first fit compile) a kernel per op
    constrained = mdl.constrain({k: np.asarray(v, dtype=np.float64) for k, v in params.items()}, spec, design)
    return {k: np.asarray(v, dtype=np.float64) for k, v in constrained.items()}
