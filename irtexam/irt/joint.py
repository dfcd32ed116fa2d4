"""The joint posterior mode (method="map"): items and abilities together, with Laplace draws.

Accurate where every examinee answers many items and every item is answered by many examinees
(leaderboards, the real run's 202 items x 60 pipelines); where examinees answer few items the
abilities are incidental parameters and the item slopes are biased upward (use the marginal
estimator, :mod:`irtexam.irt.marginal.fit`). The mode is found by alternating Fisher scoring
(:mod:`irtexam.irt.alternating`, binary models without facets) or L-BFGS on the compiled log
posterior (:func:`lbfgs_map`); uncertainty from the Laplace approximation
(:mod:`irtexam.irt.laplace`), corrected item by item by importance sampling
(:mod:`irtexam.irt.draws`). :func:`assemble_result` builds the tables of a MAP or NUTS fit.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import IrtexamError
from ..memory import collect_cycles
from ..warning_types import ConvergenceWarning, Message, UncertaintyWarning
from ..responses import ResponseMatrix
from . import alternating
from . import model as mdl
from ..config import EstimatorOptions, OutputOptions
from .draws import laplace_draws
from .laplace import laplace_covariance
from .lbfgs import minimize_lbfgs
from .result import FitResult, examinee_table, facet_tables, item_table
from .stats import fit_statistics

# Below this many items the Laplace facet intervals under-cover (experiments/coverage.py --items 5 / 20, 3PL,
# 40 replications: 0.80 / 0.81 for facet levels, NUTS 0.92 at 5 items; 0.87 at 200 items)
SMALL_EXAM_ITEMS = 50
REPORTED = ("a", "b", "c", "thresholds", "theta", "sigma_resid")


def warm_start(init: "FitResult | Mapping[str, np.ndarray] | None", spec: mdl.ModelSpec,
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
        if key in mdl.ITEM_KEYS and rows and old.shape[1:] == value.shape[1:]:
            new_idx, old_idx = map(np.array, zip(*rows))
            value[new_idx] = old[old_idx]
        elif key in ("theta_raw", "resid") and cols:
            new_idx, old_idx = map(np.array, zip(*cols))
            value[new_idx] = old[old_idx]
        elif old.shape == value.shape and key.startswith(("z_", "sigma", "mu_")):
            value[...] = old
    return start


def map_estimate(spec: mdl.ModelSpec, design: mdl.Design, mask: np.ndarray,
                 init: Mapping[str, np.ndarray], max_iter: int = 5000, tol: float = 1e-6,
                 precision: str = "float32", solver: str = "auto",
                 progress: bool = False) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Maximise the log posterior: alternating Fisher scoring or L-BFGS.

    ``solver="auto"`` uses :func:`irtexam.irt.alternating.alternating_map` for binary
    models without facets (block-structured Fisher scoring, each parameter converged
    to 0.01 of its standard error; L-BFGS finishes if it does not converge) and L-BFGS otherwise; ``"lbfgs"`` forces L-BFGS.
    L-BFGS maximises the log posterior itself, so a spec with ``c_centre_rule="empirical"`` (an estimating equation
    for the c centre, not a term of that posterior) gets the centre as the posterior's mode there.
    """
    if solver not in ("auto", "lbfgs", "alternating"):
        raise IrtexamError(f"unknown MAP solver '{solver}'; choose 'auto', 'lbfgs' or 'alternating'")
    if solver == "alternating" or (solver == "auto" and alternating.supports(spec)):
        params, warm = alternating.alternating_map(spec, design, mask, init, max_sweeps=200, tol=0.01,
                                                   precision=precision, progress=progress)
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


def optimiser_warning(info: Mapping[str, Any]) -> str | None:
    """The warning of a MAP optimiser that stopped before converging (None when it converged)."""
    if info["converged"]:
        return None
    gradient = info.get("max_abs_gradient")
    return Message(f"the MAP optimiser stopped before converging ({info['message']}"
                   + (f", max |gradient| {gradient:.2g}" if gradient is not None else "")
                   + "); estimates may be off: raise max_iter", ConvergenceWarning)


def joint_mode(spec: mdl.ModelSpec, design: mdl.Design, train_mask: np.ndarray, options: EstimatorOptions,
               messages: list[str], progress: bool = False) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The MAP from the data-driven (or ``options.init``) start, with the optimiser's warning in ``messages``."""
    start = warm_start(options.init, spec, design)
    params, opt_info = map_estimate(spec, design, train_mask, start, max_iter=options.max_iter, progress=progress)
    warning = optimiser_warning(opt_info)
    if warning:
        messages.append(warning)
    return params, opt_info


COLLECT_CELLS = 1 << 22  # from here a fit's response blocks are worth a collection (0.07-0.2 s)


def fit_joint(responses: ResponseMatrix, spec: mdl.ModelSpec, design: mdl.Design, train_mask: np.ndarray,
              test_mask: np.ndarray | None, options: EstimatorOptions, output: OutputOptions,
              messages: list[str]) -> FitResult:
    """The joint posterior mode and its (importance-corrected) Laplace draws; ``messages`` collects warnings."""
    params, opt_info = joint_mode(spec, design, train_mask, options, messages, progress=output.progress)
    large = design.n_items * design.n_examinees >= COLLECT_CELLS
    if large:  # JAX's calls leave reference cycles holding the response blocks (25 MB at 12,032 x 2,211)
        collect_cycles()
    cov = draw_diagnostics = None
    posterior: dict[str, np.ndarray] | None = None
    point = reported(params, spec, design)
    if options.se:
        mode = options.se if isinstance(options.se, str) else "auto"
        cov = laplace_covariance(params, spec, design, train_mask, mode=mode)
        if large:
            collect_cycles()
        if cov.mode == "blockwise":
            messages.append(Message("standard errors ignore the item/ability coupling (blockwise Laplace, chosen "
                                    "for size); they are somewhat too small", UncertaintyWarning))
        posterior, draw_diagnostics = laplace_draws(params, spec, design, train_mask, cov, n_draws=output.draws,
                                                    seed=options.seed, correct=options.correct_draws)
        warning = draw_diagnostics.warning(design.items)
        if warning:
            messages.append(Message(warning, UncertaintyWarning))
        if spec.facets and design.n_items < SMALL_EXAM_ITEMS:
            messages.append(Message(f"with {design.n_items} items the MAP fit's facet intervals are too narrow "
                                    "(simulation-based calibration: 90% intervals cover about 80% of true facet "
                                    "levels at 5-20 items); refit with method='nuts' (CLI: --method nuts) for "
                                    "calibrated intervals", UncertaintyWarning))
    return assemble_result("map", responses, spec, design, train_mask, test_mask, options, params, point, posterior,
                           opt_info, messages, laplace=cov, draw_diagnostics=draw_diagnostics)


def assemble_result(method: str, responses: ResponseMatrix, spec: mdl.ModelSpec, design: mdl.Design,
                    train_mask: np.ndarray, test_mask: np.ndarray | None, options: EstimatorOptions,
                    params: Mapping[str, np.ndarray], point: Mapping[str, np.ndarray],
                    posterior: Mapping[str, np.ndarray] | None, opt_info: Mapping[str, Any], messages: list[str],
                    **extra: Any) -> FitResult:
    """The tables, statistics and :class:`FitResult` of a joint-posterior fit (MAP or NUTS)."""
    items = item_table(point, posterior, spec, design)
    examinees = examinee_table(point, posterior, design, responses)
    facet_table, contrasts = facet_tables(point, posterior, spec, design)
    sampler_info = extra.pop("sampler_info", None)
    cov = extra.get("laplace")
    stats = fit_statistics(params, spec, design, train_mask, test_mask)
    stats.update({"method": method, "model": spec.kind, "abilities": "joint", "optimizer": opt_info,
                  **({"sampler": sampler_info} if sampler_info else {}),
                  "laplace": cov.mode if cov is not None else None, "heldout_fraction": options.heldout,
                  "item_prior": learned_item_prior(params, spec)})
    return FitResult(spec=spec, design=design, method=method, responses=responses, params=dict(params), items=items,
                     examinees=examinees, facets=facet_table, contrasts=contrasts, fit_stats=stats,
                     warnings=messages, samples=posterior, seed=options.seed,
                     chains=options.chains if method == "nuts" else 1, **extra)


def learned_item_prior(params: Mapping[str, np.ndarray], spec: mdl.ModelSpec) -> dict[str, Any]:
    """The centres of the item priors a fit used (:func:`irtexam.irt.model.item_prior_summary`), learned
    ("hierarchical") or fixed, from the hyperparameters in ``params``."""
    return mdl.item_prior_summary(spec, {k: params[k] for k in mdl.HYPER_KEYS if k in params})


def reported(params: Mapping[str, np.ndarray], spec: mdl.ModelSpec, design: mdl.Design) -> dict[str, np.ndarray]:
    """Reported-scale point estimates (a, b, c / thresholds, theta, theta_<facet>) of unconstrained ``params``."""
    # NumPy in, NumPy out: eager JAX here would dispatch (and on a first fit compile) a kernel per op
    constrained = mdl.constrain({k: np.asarray(v, dtype=np.float64) for k, v in params.items()}, spec, design)
    return {k: np.asarray(v, dtype=np.float64) for k, v in constrained.items()}
