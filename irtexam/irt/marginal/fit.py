"""A :class:`FitResult` from the marginal estimator: item draws from the information, abilities afterwards.

:mod:`irtexam.irt.marginal.steps` estimates the item parameters with the abilities integrated out; this
module turns its answer into the tables every consumer reads:

* item draws: the free unconstrained parameters (log a, d, logit c; GRM log a, b_1, log gaps)
  ~ N(estimate, inverse information), mapped to a, b, c / thresholds, so the reported 90%
  intervals are the Wald intervals on the unconstrained scale (and always contain the estimate);
* abilities given the items and each examinee's group distribution: EAP (default),
  theta = sum_q w_mq theta_q with posterior sd and quantiles from the posterior over the nodes;
  or MAP, the posterior mode with sd 1 / sqrt(-d2/dtheta2 log posterior);
* the marginal log-likelihood, AIC = 2k - 2 log L and BIC = k log N - 2 log L (k free item and
  population parameters, N examinees, as mirt counts them).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from ...warning_types import ConvergenceWarning, IdentificationWarning, Message, PriorWarning
from ...errors import IrtexamError
from ...memory import give_back_freed_memory
from ...responses import ResponseMatrix
from .. import kinds
from . import steps as mg
from . import em
from .abilities import posterior_summary
from .. import model as mdl
from ..result import LOW_Q, HIGH_Q, FitResult, item_table
from .guessing import (GUESSING_CENTRE_MIN_SHARE, GUESSING_SHARE_MIN, free_item_variances,
                                guessing_centre_by_size, guessing_complete_data_share, guessing_data_share,
                                guessing_message)
from ..stats import fit_statistics

ABILITY_METHODS = ("eap", "map")
__all__ = ["ABILITY_METHODS", "eap", "posterior_quantiles", "sample_abilities", "map_abilities", "fit_marginal"]


# ----------------------------------------------------------------------------- abilities
def eap(weights: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expected a posteriori abilities and posterior sds: sum_q w_mq theta_q and sqrt(sum_q w_mq (theta_q - EAP)^2)."""
    mean = weights @ nodes
    var = weights @ nodes ** 2 - mean ** 2
    return mean, np.sqrt(np.maximum(var, 0.0))


def _inverse_cdf(weights: np.ndarray, nodes: np.ndarray, u: np.ndarray, cdf: np.ndarray | None = None,
                 idx: np.ndarray | None = None) -> np.ndarray:
    """The u-quantile (u: (E,), or (S, E) for S draws at once) of each examinee's posterior over the nodes, the
    mass of node q spread evenly over its cell [theta_q - h/2, theta_q + h/2] (h the node spacing): a
    piecewise-linear CDF. ``idx``: the node each u falls in (the count of CDF values below it, at most Q - 1),
    where the caller has counted it already."""
    h = nodes[1] - nodes[0]
    cdf = np.cumsum(weights, axis=1) if cdf is None else cdf
    rows = np.arange(weights.shape[0])
    if idx is None:
        idx = np.minimum((cdf < u[..., None]).sum(axis=-1), len(nodes) - 1)
    below = cdf[rows, idx] - weights[rows, idx]
    frac = np.clip((u - below) / np.maximum(weights[rows, idx], 1e-300), 0.0, 1.0)
    return nodes[idx] - h / 2 + frac * h


def posterior_quantiles(weights: np.ndarray, nodes: np.ndarray, probs: Sequence[float]) -> np.ndarray:
    """Quantiles (E, len(probs)) of each examinee's posterior over the nodes (see :func:`_inverse_cdf`)."""
    n = weights.shape[0]
    return np.stack([_inverse_cdf(weights, nodes, np.full(n, float(p))) for p in probs], axis=1)


def sample_abilities(weights: np.ndarray, nodes: np.ndarray, n: int, rng: np.random.Generator,
                     block: int = 32) -> np.ndarray:
    """Draws (n, E), float32 (as a fit folder stores them), from each examinee's posterior over the nodes
    (inverse-CDF sampling as :func:`_inverse_cdf`, the same uniforms in the same order), ``block`` draws at a
    time: each draw's node index is the count of CDF values below its uniform, added up node by node over
    (block, E) arrays (no (n, E) float64 temporaries: 200,000 examinees x 500 draws would take 0.8 GB each;
    0.11 s instead of 0.20 s for one draw a pass at 2000 examinees x 500 draws)."""
    n_examinees, n_nodes = weights.shape
    out = np.empty((n, n_examinees), dtype=np.float32)
    cdf = np.cumsum(weights, axis=1)
    cdf_by_node = np.ascontiguousarray(cdf.T)
    for start in range(0, n, block):
        u = rng.uniform(size=(min(n, start + block) - start, n_examinees))
        idx = np.zeros(u.shape, dtype=np.intp)
        for q in range(n_nodes - 1):  # the last node takes whatever lies above every CDF value
            idx += cdf_by_node[q] < u
        out[start:start + u.shape[0]] = _inverse_cdf(weights, nodes, u, cdf, idx)
    return out


def map_abilities(X: np.ndarray, columns: Sequence[str], spec: mdl.ModelSpec, y: np.ndarray, mask: np.ndarray,
                  mean: np.ndarray, sd: np.ndarray, start: np.ndarray, steps: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """MAP abilities given the items, prior N(mean_m, sd_m^2) per examinee, and posterior sds
    1 / sqrt(-d2/dtheta2 log posterior) at the mode: Newton steps (capped at 1) on all examinees at once."""
    with jax.enable_x64(True):
        items = mdl.item_params(mg.from_matrix(jnp.asarray(X), columns), spec)
        row = kinds.ItemParams(*(None if v is None else v[None] for v in items))
        Y, M = jnp.asarray(np.rint(y)).T, jnp.asarray(mask).T
        mu, s = jnp.asarray(mean), jnp.asarray(sd)

        def total(theta: Any) -> Any:
            cells = kinds.cell_loglik(Y, theta[:, None], row, pairwise=True)
            return (jnp.where(M, cells, 0.0).sum(axis=1) - 0.5 * ((theta - mu) / s) ** 2).sum()

        grad = jax.jit(jax.grad(total))
        curvature = jax.jit(lambda t: jax.jvp(jax.grad(total), (t,), (jnp.ones_like(t),))[1])
        theta = jnp.asarray(start, dtype=jnp.float64)
        for _ in range(steps):
            step = jnp.clip(grad(theta) / jnp.maximum(-curvature(theta), 1e-6), -1.0, 1.0)
            theta = theta + step
            if float(jnp.abs(step).max()) < 1e-8:
                break
        return np.asarray(theta), np.asarray(1.0 / jnp.sqrt(jnp.maximum(-curvature(theta), 1e-12)))


# ----------------------------------------------------------------------------- the grid
# The rectangle rule on nodes h apart integrates a normal of sd sigma with relative error about 2 exp(-2 pi^2
# sigma^2 / h^2): 5e-9 at h = sigma, 1.4% at h = 2 sigma, 58% at h = 4 sigma. With thousands of items each
# ability posterior has sd 0.02-0.07 against the default spacing 0.2 (61 nodes on [-6, 6]), and the fit lost
# its scale (issue 42; 2PL 1,000 items x 1,000: slopes x0.949, b slope 1.059). The grid is refined until its
# spacing is at most the sd of the narrower posteriors (their first quartile), at most MAX_NODES nodes.
NARROW_QUANTILE = 0.25
# refine when the spacing exceeds REFINE_ABOVE x that sd (rectangle-rule error above ~3e-3; 2PL 500 items x 2,211 on
# 61 nodes, h = 2.2 sd: b slope 1.019); 3PL exams of 200-500 items (sd 0.12-0.19) keep the default grid
REFINE_ABOVE = 1.75
MAX_NODES = 601         # spacing 0.02 on [-6, 6]


def refined_nodes(weights: np.ndarray, nodes: np.ndarray) -> int:
    """The node count for a grid whose spacing is the :data:`NARROW_QUANTILE` quantile of the posterior sds over
    the current grid (at most :data:`MAX_NODES`), or the current count where that spacing is already within
    :data:`REFINE_ABOVE` of it. Posteriors the current grid cannot resolve look narrower than they are (their
    mass on one or two nodes), so the caller refines again until the count stops growing."""
    spacing = float(nodes[1] - nodes[0])
    sds = eap(weights, nodes)[1]
    if sds.size == 0:
        return len(nodes)
    narrow = max(float(np.quantile(sds, NARROW_QUANTILE)), 1e-3)
    if spacing <= REFINE_ABOVE * narrow:
        return len(nodes)
    width = float(nodes[-1] - nodes[0])
    return int(min(MAX_NODES, int(np.ceil(width / narrow)) + 1))


# ----------------------------------------------------------------------------- inputs
def resolve_groups(responses: ResponseMatrix, groups: Any, spec: mdl.ModelSpec,
                   anchored: bool, reference: Any = None) -> mg.Groups:
    """Examinee groups from a facet column name, one label per examinee, or a mapping examinee -> label."""
    n = responses.n_examinees
    free_sd = not spec.has_discrimination or anchored
    if groups is None:
        return mg.make_groups(None, n, free_reference_sd=free_sd, free_reference_mean=anchored)
    if isinstance(groups, str):
        if groups not in responses.facet_names:
            raise IrtexamError(f"groups: '{groups}' is not a column of the responses (columns: "
                               f"{', '.join(responses.facet_names) or 'none'})")
        labels = responses.examinee_facets[groups].reindex(list(responses.examinees)).tolist()
    elif isinstance(groups, Mapping) or isinstance(groups, pd.Series):
        mapping = dict(groups)
        missing = [e for e in responses.examinees if e not in mapping]
        if missing:
            raise IrtexamError(f"groups: no group for {len(missing)} examinee(s), e.g. '{missing[0]}'")
        labels = [mapping[e] for e in responses.examinees]
    else:
        labels = list(groups)
    return mg.make_groups(labels, n, free_reference_sd=free_sd, free_reference_mean=anchored, reference=reference)


def anchor_rows(fixed_items: pd.DataFrame | None, spec: mdl.ModelSpec, design: mdl.Design,
                columns: Sequence[str]) -> dict[int, np.ndarray]:
    """Anchor items (present in the data and in ``fixed_items``) as unconstrained rows of X, by item position.

    Reported a, b, c -> log a, d = -a b, logit c; GRM thresholds -> b_1 and log gaps.
    """
    if fixed_items is None:
        return {}
    table = fixed_items.copy()
    table.index = table.index.astype(str)
    bank = spec.kind_object.reported_from_table(table)
    position = {item: i for i, item in enumerate(design.items)}
    rows: dict[int, np.ndarray] = {}
    for k, item in enumerate(table.index):
        if item not in position:
            continue
        a = float(bank.a[k])
        if not np.isfinite(a) or a <= 0:
            raise IrtexamError(f"fixed item '{item}': a = {a} is not a positive number")
        values = spec.kind_object.unconstrained_items(bank.subset(np.array([k])))
        rows[position[item]] = mg.to_matrix(values, columns)[0]
    if not rows:
        raise IrtexamError("fixed_items: none of its items is in the responses (ids are matched as strings)")
    return rows


def start_matrix(init: Any, spec: mdl.ModelSpec, design: mdl.Design, columns: Sequence[str]) -> np.ndarray | None:
    """Starting item parameters from a previous fit's item parameters, matched by item id (else None)."""
    if not isinstance(init, FitResult) or init.spec.kind_object != spec.kind_object:
        return None
    try:
        previous = mg.to_matrix(init.params, columns)
    except (KeyError, IndexError, ValueError):
        return None
    start = em.start_values(spec, design.y, design.mask, columns, design.max_score)
    position = {item: i for i, item in enumerate(init.design.items)}
    for i, item in enumerate(design.items):
        if item in position:
            start[i] = previous[position[item]]
    return start


# ----------------------------------------------------------------------------- result
# How far (in log a) the median slope may sit from a fixed slope prior's centre before a fit says the prior pulls
# it: log 1.4. Simulated 3PL, 150 items x 800, a ~ LogNormal(log 1.8, 0.35): the fixed centre a = 1 (log a ~ N(0,
# 1)) gave slopes x0.918 and b slope 1.056; the learned centre (slope_centre="learned", the default) x0.984, 0.997.
SLOPE_PULL_LOG = float(np.log(1.4))


def slope_prior_pull(a: np.ndarray, spec: mdl.ModelSpec) -> str | None:
    """The warning for slopes whose median lies above exp(log_a_loc + :data:`SLOPE_PULL_LOG`) under a slope prior
    with its centre fixed (``slope_centre="fixed"``), which pulls them down towards it; None otherwise (the
    default learns the centre; ``item_prior="none"`` has no prior).

    Only the high side: on simulated 3PL exams with slopes around 0.6 every estimator's slopes come out too
    large at 800 examinees (fixed centre x1.09, learned x1.11, no prior x1.28): that is the 3PL's small-sample
    inflation, which a learned centre does not cure.
    """
    if spec.item_prior == "none" or spec.learn_a_centre or not spec.has_discrimination or np.size(a) < 5:
        return None
    median = float(np.median(a))
    if not np.log(median) - spec.log_a_loc > SLOPE_PULL_LOG:
        return None
    return (f"the items' median slope {median:.2f} lies far above the slope prior's fixed centre "
            f"a = {np.exp(spec.log_a_loc):.2g}, which pulls the slopes (and the spread of b) towards it; "
            "slope_centre='learned' (--slope-centre learned, the default of em) learns that centre from the items")


def fit_marginal(responses: ResponseMatrix, spec: mdl.ModelSpec, design: mdl.Design, train_mask: np.ndarray,
                 test_mask: np.ndarray | None, *, seed: int = 0, se: bool = True, n_draws: int = 500,
                 abilities: str = "eap", groups: Any = None, reference_group: Any = None,
                 fixed_items: pd.DataFrame | None = None, init: Any = None, tol: float = 1e-4,
                 max_cycles: int = 2000, guessing_rule: bool = False) -> FitResult:
    """Fit ``spec`` by marginal EM (:func:`irtexam.irt.marginal.em.em_estimate`) and build the :class:`FitResult`.

    ``guessing_rule``: apply guessing_centre="auto" to a learned c centre: held at 1 / n_choices below
    :data:`GUESSING_CENTRE_MIN_RESPONSES` responses per item (:func:`guessing_centre_by_size`), and refitted with
    it held when the learned fit's responses carry less than :data:`GUESSING_CENTRE_MIN_SHARE` of the c's precision
    (:func:`guessing_complete_data_share`)."""
    abilities = str(abilities).lower()
    if abilities not in ABILITY_METHODS:
        raise IrtexamError(f"unknown ability estimator '{abilities}'; choose one of {', '.join(ABILITY_METHODS)}")
    columns = mg.item_columns(spec, design.max_score)
    fixed = anchor_rows(fixed_items, spec, design, columns)
    group_info = resolve_groups(responses, groups, spec, anchored=bool(fixed), reference=reference_group)
    messages: list[str] = []
    rule = None
    if guessing_rule:
        spec, rule = guessing_centre_by_size(spec, train_mask)

    def estimate(spec: mdl.ModelSpec) -> em.MarginalResult:
        return em.em_estimate(spec, design.y, train_mask, max_score=design.max_score, groups=group_info, fixed=fixed,
                              start=start_matrix(init, spec, design, columns), tol=tol, max_cycles=max_cycles, se=se,
                              refine=refined_nodes)

    result = estimate(spec)
    complete_share = guessing_complete_data_share(result, spec, train_mask)
    held_by_share = False  # the fallback's warning already says the data barely inform c
    if (guessing_rule and spec.guessing_centre == "learned" and complete_share is not None and complete_share.size
            and complete_share.mean() < GUESSING_CENTRE_MIN_SHARE):
        learned_share, learned_c = float(complete_share.mean()), float(np.mean(mdl.item_params(
            result.item_dict(), spec).c[result.layout.free_rows]))
        spec, held_by_share = replace(spec, learn_c_centre=False), True
        result = estimate(spec)
        complete_share = guessing_complete_data_share(result, spec, train_mask)
        rule = (f"held at 1/{spec.n_choices}: with the centre learned the responses carried {100 * learned_share:.1f}% "
                f"of the c's precision (mean c {learned_c:.2f}), less than {100 * GUESSING_CENTRE_MIN_SHARE:.0f}% "
                "(guessing_centre='auto')")
        messages.append(Message(f"the responses carry little information on the guessing parameters c: the c prior's "
                                f"centre is {rule}; the reported c's lean on the prior, fix c with guessing= "
                                "(--guessing) where it is known", IdentificationWarning))
    give_back_freed_memory()  # the EM's freed temporaries (irtexam.memory)
    if not result.info["converged"]:
        messages.append(Message(f"the EM iterations stopped after {result.info['cycles']} cycles before converging "
                                f"(largest change {result.info['max_change']:.2g} > {tol}); estimates may be off: "
                                "raise max_iter", ConvergenceWarning))
    rng = np.random.default_rng(seed)
    point_items = mdl.item_params(result.item_dict(), spec)
    point = _reported(point_items, spec)
    pull = slope_prior_pull(point["a"][result.layout.free_rows], spec)
    if pull is not None:
        messages.append(Message(pull, PriorWarning))
    item_draws = None
    if se and result.covariance is not None:
        item_draws = _item_draws(result, spec, n_draws, rng)
        wide = _wide_items(result, spec, item_draws)
        if wide:
            messages.append(Message(f"{len(wide)} item(s) have very wide intervals (sd of log a or of d above 2), "
                                    f"e.g. {design.items[wide[0]]}: the data barely identify them (few or extreme "
                                    "responses)", IdentificationWarning))
    share = guessing_data_share(result, spec)
    if share is not None and share.size and share.mean() < GUESSING_SHARE_MIN and not held_by_share:
        correct = float(np.sum(design.y, where=train_mask, dtype=np.float64)) / max(int(train_mask.sum()), 1)
        messages.append(Message(guessing_message(share, spec, correct), IdentificationWarning))
    sds = np.exp(result.log_sd)[group_info.index]
    means = result.mean[group_info.index]
    # EAP, sd, the 90% interval and the draws in one compiled pass over the weights (abilities.py: on the device;
    # the host NumPy versions above took 37 s of a 10^9-cell fit on a GPU)
    draws_here = n_draws if se and abilities == "eap" else 0
    summary = posterior_summary(result.weights, result.nodes, (LOW_Q, HIGH_Q), draws_here,
                                seed=int(rng.integers(0, 2 ** 32)) if draws_here else 0)
    eap_theta, eap_sd = summary.mean, summary.sd
    if abilities == "eap":
        theta, theta_sd = eap_theta, eap_sd
        low, high = summary.quantiles.T
        theta_draws = summary.draws
    else:
        theta, theta_sd = map_abilities(result.X, columns, spec, design.y, train_mask, means, sds, eap_theta)
        z = 1.6448536269514722
        low, high = theta - z * theta_sd, theta + z * theta_sd
        theta_draws = theta + theta_sd * rng.standard_normal((n_draws, len(theta))) if se else None
    examinees = pd.DataFrame({"theta": theta, "theta_sd": theta_sd, "theta_low": low, "theta_high": high},
                             index=pd.Index(design.examinees, name="examinee"))
    for facet in responses.facet_names:
        examinees[facet] = responses.examinee_facets[facet].reindex(examinees.index).to_numpy()
    if groups is not None:
        examinees["group"] = np.asarray(group_info.names)[group_info.index]
    samples = None
    if item_draws is not None:
        samples = {**item_draws, "theta": theta_draws}
    items = item_table(point, item_draws, spec, design)
    params = {k: v for k, v in result.item_dict().items()}
    params.update({k: np.asarray(v) for k, v in result.hyper.items()})
    params["theta_raw"] = np.asarray(theta, dtype=np.float64)
    params["population_mean"] = result.mean
    params["population_log_sd"] = result.log_sd
    stats = fit_statistics(params, spec, design, train_mask, test_mask, theta=theta)
    n_free = result.layout.size
    stats.update({
        "method": "em", "model": spec.kind, "abilities": abilities, "loglik": result.loglik,
        "conditional_loglik": stats["loglik"], "log_posterior": result.log_posterior,
        "n_parameters": n_free, "aic": 2 * n_free - 2 * result.loglik,
        "bic": float(n_free * np.log(max(design.n_examinees, 1)) - 2 * result.loglik),
        "optimizer": result.info, "information": result.information, "heldout_fraction": float(test_mask.mean())
        if test_mask is not None and test_mask.any() else 0.0,
        "population": _population_table(result),
        "anchors": [design.items[i] for i in sorted(fixed)],
        "item_prior": {**mdl.item_prior_summary(spec, result.hyper),
                       **({"c_data_share": float(share.mean())} if share is not None and share.size else {}),
                       **({"c_complete_share": float(complete_share.mean())}
                          if complete_share is not None and complete_share.size else {}),
                       **({"guessing_centre_rule": rule} if rule else {})}})
    return FitResult(spec=spec, design=design, method="em", responses=responses, params=params, items=items,
                     examinees=examinees, facets=None, contrasts=None, fit_stats=stats, warnings=messages,
                     samples=samples, laplace=None, diagnostics=None, chains=1, seed=seed)


def _reported(items: kinds.ItemParams, spec: mdl.ModelSpec) -> dict[str, np.ndarray]:
    out = {"a": np.broadcast_to(np.asarray(items.a, dtype=np.float64), np.shape(items.b)).copy(),
           "b": np.asarray(items.b, dtype=np.float64)}
    for name in spec.kind_object.reported_names:
        out.setdefault(name, np.asarray(getattr(items, name), dtype=np.float64))
    return out


def _item_draws(result: em.MarginalResult, spec: mdl.ModelSpec, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Reported-scale item draws: free parameters ~ N(estimate, covariance), anchors fixed."""
    layout = result.layout
    flat = np.asarray(mg_flatten(result), dtype=np.float64)
    draws = flat + em.sample_deviations(result, n, rng)
    rows = np.flatnonzero(layout.free_rows)
    X = np.broadcast_to(result.X, (n,) + result.X.shape).copy()
    X[:, rows] = draws[:, :len(rows) * layout.n_columns].reshape(n, len(rows), layout.n_columns)
    return _reported(mdl.item_params(mg.from_matrix(X, result.columns), spec), spec)


def mg_flatten(result: em.MarginalResult) -> np.ndarray:
    """The free parameters of a marginal result in :class:`irtexam.irt.marginal.steps.Layout` order."""
    return result.layout.flatten(result.X, result.mean, result.log_sd)


def _wide_items(result: em.MarginalResult, spec: mdl.ModelSpec, draws: Mapping[str, np.ndarray]) -> list[int]:
    """Items whose log a or d has a posterior sd above 2 (barely identified)."""
    rows = np.flatnonzero(result.layout.free_rows)
    per_item = np.sqrt(np.maximum(free_item_variances(result), 0.0))
    keep = [j for j, c in enumerate(result.columns) if c in ("a", "d", "b1")]
    return [int(rows[r]) for r in np.flatnonzero((per_item[:, keep] > 2.0).any(axis=1))]


def _population_table(result: em.MarginalResult) -> dict[str, dict[str, Any]]:
    """Each group's ability mean and sd, with standard errors where estimated."""
    layout = result.layout
    sd_of = {}
    if result.covariance is not None:
        se = np.sqrt(np.maximum(em.variances(result), 0.0))
        offset = int(layout.free_rows.sum()) * layout.n_columns
        for g in np.flatnonzero(layout.free_mean):
            sd_of[("mean", g)] = float(se[offset]); offset += 1
        for g in np.flatnonzero(layout.free_sd):
            sd_of[("log_sd", g)] = float(se[offset]); offset += 1
    out = {}
    for g, name in enumerate(result.groups.names):
        sd = float(np.exp(result.log_sd[g]))
        out[name] = {"mean": float(result.mean[g]), "sd": sd,
                     "mean_se": sd_of.get(("mean", g)), "sd_se": None if ("log_sd", g) not in sd_of
                     else sd * sd_of[("log_sd", g)],
                     "n_examinees": int((result.groups.index == g).sum()),
                     "estimated": bool(layout.free_mean[g] or layout.free_sd[g])}
    return out
