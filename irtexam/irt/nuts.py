"""NUTS (method="nuts"): the joint posterior of items and abilities sampled by NumPyro.

The model is :func:`irtexam.irt.model.numpyro_model`, derived from the same declared sites as the
MAP's log posterior (its potential energy is tested equal to it). Chains start from the MAP
(:func:`irtexam.irt.joint.map_estimate`) jittered; split R-hat, bulk ESS and divergences are
reported as warnings with what to do about them.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from ..responses import ResponseMatrix
from ..warning_types import ConvergenceWarning, Message
from . import model as mdl
from ..config import EstimatorOptions, OutputOptions
from .joint import REPORTED, assemble_result, joint_mode
from .result import FitResult


def fit_nuts(responses: ResponseMatrix, spec: mdl.ModelSpec, design: mdl.Design, train_mask: np.ndarray,
             test_mask: np.ndarray | None, options: EstimatorOptions, output: OutputOptions,
             messages: list[str]) -> FitResult:
    """Sample the joint posterior from the MAP; the point estimates are posterior means."""
    map_params, opt_info = joint_mode(spec, design, train_mask, options, messages)
    grouped, sampler_info = nuts_samples(spec, design, train_mask, map_params, chains=options.chains,
                                         warmup=options.warmup, samples=options.samples, seed=options.seed,
                                         target_accept=options.target_accept, progress=output.progress)
    sample_stats = sampler_info.pop("sample_stats")
    diagnostics = mcmc_diagnostics(grouped, design, spec)
    messages.extend(convergence_warnings(diagnostics, sampler_info))
    flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in grouped.items()}
    params = {k: v.mean(axis=0) for k, v in mdl.unconstrain(flat, spec, design).items()}
    posterior = {k: v for k, v in flat.items() if k in REPORTED or k.startswith("theta_")}
    point = {k: v.mean(axis=0) for k, v in posterior.items()}
    return assemble_result("nuts", responses, spec, design, train_mask, test_mask, options, params, point, posterior,
                           opt_info, messages, diagnostics=diagnostics, sample_stats=sample_stats,
                           sampler_info=sampler_info)


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


def convergence_warnings(diagnostics: pd.DataFrame, info: Mapping[str, Any]) -> list[str]:
    messages = []
    bad_rhat = diagnostics[diagnostics["r_hat"] > 1.01]
    if len(bad_rhat):
        worst = bad_rhat.sort_values("r_hat", ascending=False).head(5)
        names = ", ".join(f"{r.parameter}[{r.id}] ({r.r_hat:.3f})" for r in worst.itertuples())
        messages.append(_convergence(f"R-hat above 1.01 for {len(bad_rhat)} parameter(s), worst: {names}. The chains disagree: "
                        f"run more warmup and samples (e.g. warmup=1000, samples=1000; CLI --warmup 1000 --samples 1000) or more chains before "
                        f"trusting these estimates"))
    low_ess = diagnostics[diagnostics["ess_bulk"] < 100 * max(int(info.get("chains", 1)), 1) / 4]
    if len(low_ess):
        worst = low_ess.sort_values("ess_bulk").head(5)
        names = ", ".join(f"{r.parameter}[{r.id}] ({r.ess_bulk:.0f})" for r in worst.itertuples())
        messages.append(_convergence(f"low effective sample size for {len(low_ess)} parameter(s), worst: {names}: intervals are "
                        f"noisy; draw more samples"))
    if info.get("divergences", 0):
        messages.append(_convergence(f"{info['divergences']} divergent transition(s) after warmup: the sampler missed part of the "
                        f"posterior. Raise target_accept (e.g. 0.95), fix the guessing parameter (guessing=0.25, CLI --guessing 0.25) "
                        f"or use a 2PL"))
    return messages


def _convergence(text: str) -> Message:
    return Message(text, ConvergenceWarning)


def mcmc_diagnostics(draws: Mapping[str, np.ndarray], design: mdl.Design, spec: mdl.ModelSpec) -> pd.DataFrame:
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
