"""IRT model specifications, the pure log-posterior, and the matching NumPyro model.

A model has three parts, kept apart in the dynamax / numpyro style:

* :class:`ModelSpec`: configuration only (1PL/2PL/3PL/GRM, priors, facets, how the
  hierarchy is identified). No data, no fitted values.
* :class:`Design`: what the data fix: sizes, the response array and mask, and for
  each facet the level of every examinee and the identifying basis.
* parameters: a dict of *unconstrained* arrays keyed by the NumPyro site names
  (``a`` holds log a, ``c`` holds logit c, ``z_<facet>`` the free facet
  coordinates, ...). :func:`constrain` maps them to a, b, c, theta.

The MAP estimate maximises :func:`log_posterior` over the unconstrained dict; NUTS
samples :func:`numpyro_model`, whose potential energy is exactly
``-log_posterior`` (tested), so both estimators target the same posterior.

Binary items use the slope-intercept form z = a theta + d (b = -d / a), as mirt does:
under a rescaling theta -> s theta, a -> a / s the intercepts d do not move, so the
joint posterior mode and the posterior mean agree on the ability scale (with
(a, b) the volume of the b's grows like s^n_items and the mode shrinks the scale).

Priors (weakly informative, no box constraints):
  log a ~ N(0, 0.5^2);  d ~ N(0, 2^2);  c ~ Beta(k/n, k(1 - 1/n)) with mean 1/n_choices;
  raw abilities ~ N(0, 1) or, with facets, raw theta_m = sum_f theta_f[level_f(m)]
  (+ sigma * e_m), each facet's levels sum-to-zero with N(0, 1) free coordinates
  (or a reference level fixed at 0). The ability scale is fixed exactly: reported
  abilities are the raw ones divided by their standard deviation across examinees
  (see :func:`ability_scale`), except in the 1PL, where a = 1 fixes the unit and the
  abilities keep the spread the data and their N(0, 1) prior give them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import IrtexamError
from ..responses import ResponseMatrix
from . import kinds
from . import likelihood as lk

MODELS = ("1pl", "2pl", "3pl", "grm")
ITEM_PRIORS = ("hierarchical", "fixed", "none")
ITEM_KEYS = ("a", "d", "b1", "gap", "c")
# item parameter -> the hyperparameter that locates its prior (ModelSpec.item_prior = "hierarchical")
# (the prior on log a keeps its fixed centre: with abilities scaled to sd 1 it anchors the common level of
# the discriminations, which a learned centre would leave to the likelihood alone; the MAP then
# converged along that shift at a rate of 0.99 per sweep)
HYPER_OF = {"d": "mu_d", "b1": "mu_b1", "c": "mu_c"}
HYPER_KEYS = tuple(HYPER_OF.values())
Params = dict[str, jax.Array]


@dataclass(frozen=True)
class ModelSpec:
    """Configuration of an IRT model (no data, no fitted values).

    Attributes:
        kind: "1pl", "2pl", "3pl" (binary) or "grm" (Samejima graded response).
        guessing: fixed lower asymptote c for every item (e.g. 0.25); None = free c (3PL).
        n_choices: number of answer choices; the prior on c is centred on 1 / n_choices.
        c_concentration: alpha + beta of the Beta prior on c.
        log_a_loc, log_a_scale: normal prior on log a.
        b_scale: normal prior scale on the intercept d = -a b (and on the first GRM threshold).
        theta_scale: prior scale of abilities (and of each facet's free coordinates).
        facets: examinee facet names for the hierarchical model; () = one theta per examinee.
        identify: "sum-to-zero" (levels of each facet sum to 0) or "reference" (first level = 0).
        residual: add a per-examinee residual sigma * e_m to the facet sum (sigma ~ HalfNormal(1)).
        item_prior: "hierarchical" (default): the centres of the difficulty and guessing priors are
            learned from the exam, d_i ~ N(mu_d, b_scale^2) (GRM: b1_i ~ N(mu_b1, b_scale^2)),
            c_i ~ Beta(kappa m, kappa (1 - m)) with m = sigmoid(mu_c), kappa = c_concentration, under
            weak hyperpriors mu_d, mu_b1 ~ N(0, b_scale^2), mu_c ~ N(logit(1 / n_choices), 1)
            (see :func:`hyper_prior`); "fixed": mu_d = mu_b1 = 0, m = 1 / n_choices. log a stays
            centred on log_a_loc (it anchors the common level of the discriminations). An exam far
            harder or easier than the examinees, or with fewer guessable items than 1 / n_choices,
            otherwise has every item shrunk towards the wrong centre: on data/real_run (median b 1.5) the fixed priors made the
            3PL over-predict the number of correct answers by 6%.
    """

    kind: str = "3pl"
    guessing: float | None = None
    n_choices: int = 4
    c_concentration: float = 20.0
    log_a_loc: float = 0.0
    log_a_scale: float = 0.5
    b_scale: float = 2.0
    theta_scale: float = 1.0
    facets: tuple[str, ...] = ()
    identify: str = "sum-to-zero"
    residual: bool = False
    item_prior: str = "hierarchical"

    def __post_init__(self) -> None:
        kind = self.kind.lower()
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "facets", tuple(self.facets))
        kinds.check_kind(kind)
        if self.guessing is not None:
            if not 0.0 <= self.guessing < 1.0:
                raise IrtexamError(f"guessing must be in [0, 1), got {self.guessing}")
            if kind not in ("3pl", "2pl", "1pl"):
                raise IrtexamError("a fixed guessing parameter applies to binary models only")
        if self.identify not in ("sum-to-zero", "reference"):
            raise IrtexamError(f"identify must be 'sum-to-zero' or 'reference', got '{self.identify}'")
        if self.residual and not self.facets:
            raise IrtexamError("a residual needs facets: without facets every examinee already has its own theta")
        if self.item_prior not in ITEM_PRIORS:
            raise IrtexamError(f"unknown item prior '{self.item_prior}'; choose one of {', '.join(ITEM_PRIORS)}")
        if self.n_choices < 2:
            raise IrtexamError("n_choices must be at least 2")

    @property
    def free_guessing(self) -> bool:
        """True when each item has its own estimated c."""
        return self.kind == "3pl" and self.guessing is None

    @property
    def fixed_c(self) -> float:
        """The fixed lower asymptote (0 for 1PL/2PL without guessing)."""
        return float(self.guessing) if self.guessing is not None else 0.0

    @property
    def c_prior(self) -> tuple[float, float]:
        """(alpha, beta) of the Beta prior on c, mean 1 / n_choices."""
        mean = 1.0 / self.n_choices
        return self.c_concentration * mean, self.c_concentration * (1.0 - mean)

    @property
    def has_discrimination(self) -> bool:
        """False for the 1PL (a = 1 for every item)."""
        return self.kind != "1pl"

    def item_param_names(self) -> tuple[str, ...]:
        """Names of the per-item constrained parameters reported in tables."""
        if self.kind == "grm":
            return ("a",)
        return ("a", "b", "c")


def sum_to_zero_basis(n_levels: int) -> np.ndarray:
    """Orthonormal basis (n_levels, n_levels - 1) of the sum-to-zero subspace (Helmert).

    theta_levels = H z with z ~ N(0, s^2 I) gives levels that sum to exactly zero,
    each with marginal variance s^2 (K - 1) / K, exchangeable across levels.
    """
    if n_levels < 2:
        return np.zeros((n_levels, 0))
    basis = np.zeros((n_levels, n_levels - 1))
    for j in range(1, n_levels):
        basis[:j, j - 1] = 1.0 / np.sqrt(j * (j + 1))
        basis[j, j - 1] = -j / np.sqrt(j * (j + 1))
    return basis


def reference_basis(n_levels: int) -> np.ndarray:
    """Basis (n_levels, n_levels - 1) that fixes the first level at 0."""
    return np.vstack([np.zeros((1, max(n_levels - 1, 0))), np.eye(max(n_levels - 1, 0))])


INTERACTION = ":"


def facet_layout(responses: ResponseMatrix, facet: str,
                 make_basis: Any = None) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """Levels, the level index of every examinee, and the identifying basis of one facet term.

    A main effect ``llm`` has the levels of the ``llm`` column and a sum-to-zero (or
    reference) basis H_llm. An interaction ``llm:icl`` has one level per combination
    ("A:0", ...), examinee index i_llm * K_icl + i_icl, and basis H_llm (x) H_icl (Kronecker
    product): (K_llm - 1)(K_icl - 1) free coordinates whose levels sum to zero over each
    row and column of the K_llm x K_icl table, so they are orthogonal to both main effects.
    """
    make_basis = make_basis or sum_to_zero_basis
    parts = facet.split(INTERACTION)
    level_lists = [tuple(responses.facet_levels(part)) for part in parts]
    indices = [responses.examinee_facets[part].map({lv: k for k, lv in enumerate(lvls)}).to_numpy(dtype=np.int64)
               for part, lvls in zip(parts, level_lists)]
    index = np.zeros(len(responses.examinees), dtype=np.int64)
    basis = np.ones((1, 1))
    names: list[str] = [""]
    for lvls, idx in zip(level_lists, indices):
        index = index * len(lvls) + idx
        basis = np.kron(basis, make_basis(len(lvls)))
        names = [f"{prefix}{INTERACTION if prefix else ''}{lv}" for prefix in names for lv in lvls]
    return tuple(names), index.astype(np.int32), basis


@dataclass(frozen=True, eq=False)
class Design:
    """Data-dependent structure of a fit: sizes, responses, facet layout.

    ``y`` holds responses with missing cells set to 0, ``mask`` marks observed cells.
    For each facet: ``levels`` (names), ``index`` (level of each examinee) and
    ``basis`` (levels x free coordinates).
    """

    items: tuple[str, ...]
    examinees: tuple[str, ...]
    y: np.ndarray
    mask: np.ndarray
    max_score: int = 1
    facet_levels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    facet_index: Mapping[str, np.ndarray] = field(default_factory=dict)
    facet_basis: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_examinees(self) -> int:
        return len(self.examinees)


def build_design(responses: ResponseMatrix, spec: ModelSpec) -> Design:
    """Extract arrays and facet layout from a response matrix for a given model."""
    if spec.kind == "grm":
        if responses.max_score < 1:
            raise IrtexamError("graded responses need at least two categories")
    elif not responses.is_binary:
        raise IrtexamError(f"model '{spec.kind}' needs 0/1 responses but the scores go up to "
                           f"{responses.max_score}; use model='grm' for graded scores")
    levels: dict[str, tuple[str, ...]] = {}
    index: dict[str, np.ndarray] = {}
    basis: dict[str, np.ndarray] = {}
    make_basis = sum_to_zero_basis if spec.identify == "sum-to-zero" else reference_basis
    for facet in spec.facets:
        levels[facet], index[facet], basis[facet] = facet_layout(responses, facet, make_basis)
    mask = responses.observed
    y = np.where(mask, responses.values, 0.0)
    return Design(items=responses.items, examinees=responses.examinees, y=y.astype(np.float32),
                  mask=mask, max_score=responses.max_score if spec.kind == "grm" else 1,
                  facet_levels=levels, facet_index=index, facet_basis=basis)


# ----------------------------------------------------------------------------- parameters
def param_shapes(spec: ModelSpec, design: Design) -> dict[str, tuple[int, ...]]:
    """Shapes of the unconstrained parameter arrays, keyed by site name."""
    shapes: dict[str, tuple[int, ...]] = {}
    n_items, n_examinees = design.n_items, design.n_examinees
    if spec.has_discrimination:
        shapes["a"] = (n_items,)
    if spec.kind == "grm":
        shapes["b1"] = (n_items,)
        if design.max_score > 1:
            shapes["gap"] = (n_items, design.max_score - 1)
    else:
        shapes["d"] = (n_items,)
    if spec.free_guessing:
        shapes["c"] = (n_items,)
    for name in hyper_names(spec):
        shapes[name] = ()
    if spec.facets:
        for facet in spec.facets:
            shapes[f"z_{facet}"] = (design.facet_basis[facet].shape[1],)
        if spec.residual:
            shapes["sigma_resid"] = ()
            shapes["resid"] = (n_examinees,)
    else:
        shapes["theta_raw"] = (n_examinees,)
    return shapes


def initial_params(spec: ModelSpec, design: Design) -> dict[str, np.ndarray]:
    """Data-driven starting values in unconstrained space.

    a = 1; b from the item's observed proportion correct, b = -logit((p - c)/(1 - c));
    c at its prior mean; theta from the examinee's standardised proportion correct;
    facet coordinates 0.
    """
    shapes = param_shapes(spec, design)
    y, mask = design.y, design.mask
    counts = np.maximum(mask.sum(axis=1), 1)
    params: dict[str, np.ndarray] = {}
    if "a" in shapes:
        params["a"] = np.zeros(shapes["a"])
    c0 = spec.c_prior[0] / sum(spec.c_prior) if spec.free_guessing else spec.fixed_c
    if spec.kind == "grm":
        mean_score = (y * mask).sum(axis=1) / counts / max(design.max_score, 1)
        p = np.clip(mean_score, 0.05, 0.95)
        params["b1"] = -np.log(p / (1 - p)) - 0.5 * (design.max_score - 1)
        if "gap" in shapes:
            params["gap"] = np.zeros(shapes["gap"])
    else:
        p = np.clip(((y * mask).sum(axis=1) / counts - c0) / (1 - c0), 0.05, 0.95)
        params["d"] = np.clip(np.log(p / (1 - p)), -3, 3)  # d = -a b with a = 1
    if "c" in shapes:
        params["c"] = np.full(shapes["c"], np.log(c0 / (1 - c0)))
    for item_key, name in HYPER_OF.items():
        if name in shapes:
            params[name] = np.asarray(np.mean(params[item_key]))  # each centre's item parameter is in the model
    if "theta_raw" in shapes:
        score = (y * mask).sum(axis=0) / np.maximum(mask.sum(axis=0), 1)
        sd = score.std()
        params["theta_raw"] = (score - score.mean()) / sd if sd > 0 else np.zeros_like(score)
    for name, shape in shapes.items():
        if name not in params:
            params[name] = np.zeros(shape)
    return {k: np.asarray(v, dtype=np.float32) for k, v in params.items()}


def _xp(params: Mapping[str, Any]) -> Any:
    """jax.numpy for JAX inputs (traceable), NumPy otherwise (no eager JAX, no compilation)."""
    return kinds._xp(*params.values())


def _raw_facet_thetas(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design) -> dict[str, jax.Array]:
    """Raw level values basis_f z_f of each facet term; z may carry leading draw dimensions."""
    xp = _xp(params)
    return {facet: params[f"z_{facet}"] @ xp.asarray(design.facet_basis[facet].T, dtype=params[f"z_{facet}"].dtype)
            for facet in spec.facets}


def _raw_examinee_theta(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design) -> jax.Array:
    if not spec.facets:
        return params["theta_raw"]
    levels = _raw_facet_thetas(params, spec, design)
    theta = 0.0
    for facet in spec.facets:
        theta = theta + levels[facet][..., design.facet_index[facet]]
    if spec.residual:
        xp = _xp(params)
        theta = theta + xp.exp(params["sigma_resid"])[..., None] * params["resid"]
    return theta


def ability_scale(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design) -> jax.Array:
    """Standard deviation of the raw examinee abilities; dividing by it fixes the ability scale.

    The likelihood is invariant under theta -> s theta, a -> a / s, so the scale must be
    pinned. irtexam pins it exactly: reported abilities have standard deviation 1 across
    the examinees (and, without facets, mean 0). Leaving it to the priors lets the joint
    mode shrink the scale (about 0.8 of the truth on a 300 x 500 2PL). Leading (draw)
    dimensions are kept: the sd is over the last axis.
    """
    xp = _xp(params)
    raw = _raw_examinee_theta(params, spec, design)
    return xp.sqrt(xp.mean((raw - raw.mean(axis=-1, keepdims=True)) ** 2, axis=-1) + 1e-12)


def fixes_scale(spec: ModelSpec) -> bool:
    """True when reported abilities are standardised (sd 1): every model with discriminations.

    In the 1PL every a is 1, which already fixes the unit of theta (the logit); its
    abilities keep their own spread, estimated from the data under the N(0, theta_scale^2)
    prior (the Rasch model with a normal ability prior), and are only centred.
    """
    return spec.has_discrimination


def _scale(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design) -> Any:
    """The ability scale with a trailing axis for broadcasting ((..., 1)), or 1.0 for the 1PL."""
    return ability_scale(params, spec, design)[..., None] if fixes_scale(spec) else 1.0


def facet_thetas(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design) -> dict[str, jax.Array]:
    """Level abilities of each facet on the fixed ability scale: theta_f = basis_f z_f / s (1PL: s = 1)."""
    scale = _scale(params, spec, design)
    return {facet: value / scale for facet, value in _raw_facet_thetas(params, spec, design).items()}


def examinee_theta(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design) -> jax.Array:
    """Ability of each examinee on the fixed scale (sd 1 across examinees).

    Without facets: theta_m = (raw_m - mean(raw)) / sd(raw). With facets:
    theta_m = (sum_f theta_f[level_f(m)] + sigma e_m) / s, the location fixed by the
    facet identification (sum-to-zero or reference level) and s = sd of the raw sum.
    1PL: s = 1 (the unit is fixed by a = 1; see :func:`fixes_scale`). NumPy or JAX,
    with any leading (draw) dimensions.
    """
    raw = _raw_examinee_theta(params, spec, design)
    scale = _scale(params, spec, design)
    if not spec.facets:
        return (raw - raw.mean(axis=-1, keepdims=True)) / scale
    return raw / scale


def grm_thresholds(params: Mapping[str, jax.Array], xp: Any = None) -> jax.Array:
    """Ordered GRM thresholds b_1 < ... < b_K: b_1 then cumulative exp(gap)."""
    xp = xp or _xp(params)
    b1 = params["b1"][..., None]
    if "gap" not in params:
        return b1
    steps = xp.cumsum(xp.exp(params["gap"]), axis=-1)
    return xp.concatenate([b1, b1 + steps], axis=-1)


def constrain(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design) -> dict[str, jax.Array]:
    """Map unconstrained parameters to the reported a, b, c / thresholds, theta, theta_<facet>, sigma_resid.

    NumPy in, NumPy out (no JAX dispatch); JAX in (or tracers), JAX out. Leading draw
    dimensions are kept, so a whole set of posterior draws is transformed in one call.
    """
    xp = _xp(params)
    items = item_params({k: v for k, v in params.items() if k in ("a", "d", "c", "b1", "gap")}, spec)
    lead = params["d"].shape if "d" in params else params["b1"].shape
    out: dict[str, jax.Array] = {"a": xp.broadcast_to(items.a, lead), "b": items.b}
    if spec.kind == "grm":
        out["thresholds"] = items.thresholds
    else:
        out["d"] = params["d"]
        out["c"] = xp.broadcast_to(items.c, lead)
    out["theta"] = examinee_theta(params, spec, design)
    for facet, value in facet_thetas(params, spec, design).items():
        out[f"theta_{facet}"] = value
    if spec.residual:
        out["sigma_resid"] = xp.exp(params["sigma_resid"])
    return out


# ----------------------------------------------------------------------------- densities
def item_slopes_and_floors(items: Mapping[str, jax.Array], spec: ModelSpec) -> tuple[jax.Array, Any]:
    """Binary items' discrimination a = exp(log a) (ones without ``a``: the 1PL) and lower
    asymptote c = sigmoid(logit c) per item, or the model's fixed c (a float) without ``c``."""
    a = jnp.exp(items["a"]) if "a" in items else jnp.ones_like(items["d"])
    c: Any = jax.nn.sigmoid(items["c"]) if "c" in items else spec.fixed_c
    return a, c


def item_params(params: Mapping[str, Any], spec: ModelSpec, n_items: int | None = None) -> kinds.ItemParams:
    """Reported item parameters (:class:`irtexam.irt.kinds.ItemParams`) from unconstrained ones.

    a = exp(log a) (1PL: 1); binary: b = -d / a, c = sigmoid(logit c) or the fixed c;
    GRM: thresholds b_1 + cumulative exp(gap), b = their mean. Works on NumPy or JAX
    arrays with any leading (draw) dimensions.
    """
    xp = jnp if any(isinstance(v, jax.Array) for v in params.values()) else np
    ref = params["d"] if "d" in params else params["b1"]
    a = xp.exp(params["a"]) if "a" in params else xp.ones_like(ref)
    if spec.kind == "grm":
        thresholds = grm_thresholds(params, xp)
        return kinds.ItemParams(a=a, b=thresholds.mean(axis=-1), c=None, thresholds=thresholds)
    c = 1.0 / (1.0 + xp.exp(-params["c"])) if "c" in params else xp.full_like(ref, spec.fixed_c)
    return kinds.ItemParams(a=a, b=-params["d"] / a, c=c)


def hyper_names(spec: ModelSpec) -> tuple[str, ...]:
    """The hyperparameters of a hierarchical item prior, in :data:`HYPER_OF` order (() for "fixed")."""
    if spec.item_prior != "hierarchical":
        return ()
    names = ["mu_b1" if spec.kind == "grm" else "mu_d"]
    if spec.free_guessing:
        names.append("mu_c")
    return tuple(names)


def hyper_prior(spec: ModelSpec) -> dict[str, tuple[float, float]]:
    """(location, scale) of the normal hyperprior of each hyperparameter.

    mu_d, mu_b1 ~ N(0, b_scale^2), mu_c ~ N(logit(1 / n_choices), 1):
    wide enough for any exam the data can pin down (202 items locate mu_d to about
    b_scale / sqrt(202) = 0.14), centred where the fixed priors sit.
    """
    chance = 1.0 / spec.n_choices
    return {"mu_d": (0.0, spec.b_scale), "mu_b1": (0.0, spec.b_scale),
            "mu_c": (float(np.log(chance / (1.0 - chance))), 1.0)}


def _hyper(items: Mapping[str, Any], hyper: Mapping[str, Any] | None) -> dict[str, Any]:
    """Hyperparameters given explicitly, else those carried in ``items`` (a whole parameter dict)."""
    found = {k: items[k] for k in HYPER_KEYS if k in items}
    found.update(hyper or {})
    return found


def item_prior_locations(spec: ModelSpec, hyper: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Locations of the item priors: log a, d and b1 locations, and (alpha, beta) of the Beta prior on c.

    With hyperparameters (:func:`hyper_names`): loc d = mu_d, loc b1 = mu_b1,
    c ~ Beta(kappa m, kappa (1 - m)) with m = sigmoid(mu_c); without them the fixed values
    0, 0 and m = 1 / n_choices (:attr:`ModelSpec.c_prior`). log a is always centred on log_a_loc.
    """
    hyper = hyper or {}
    locations: dict[str, Any] = {"a": spec.log_a_loc, "d": hyper.get("mu_d", 0.0),
                                 "b1": hyper.get("mu_b1", 0.0), "c": spec.c_prior}
    if "mu_c" in hyper:
        mu_c = hyper["mu_c"]
        xp = kinds._xp(mu_c) if not isinstance(mu_c, float) else np
        mean = 1.0 / (1.0 + xp.exp(-mu_c))
        locations["c"] = (spec.c_concentration * mean, spec.c_concentration * (1.0 - mean))
    return locations


def item_prior_summary(spec: ModelSpec, hyper: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The centres of the item priors a fit used, on the reported scale: ``a_median`` = exp(log_a_loc),
    ``d_location`` = mu_d (GRM: ``b1_location``), ``c_mean`` = sigmoid(mu_c) (the prior mean of c); only
    ``kind`` for flat priors ("none")."""
    out: dict[str, Any] = {"kind": spec.item_prior}
    if spec.item_prior == "none":
        return out
    loc = item_prior_locations(spec, {k: float(np.asarray(v)) for k, v in (hyper or {}).items()})
    if spec.has_discrimination:
        out["a_median"] = float(np.exp(loc["a"]))
    key = "b1" if spec.kind == "grm" else "d"
    out[f"{key}_location"] = float(loc[key])
    if spec.free_guessing:
        alpha, beta = loc["c"]
        out["c_mean"] = float(alpha / (alpha + beta))
    return out


def item_log_prior(items: Mapping[str, Any], spec: ModelSpec, hyper: Mapping[str, Any] | None = None) -> Any:
    """Log prior density of each item's unconstrained parameters (Jacobians included), shape (..., I).

    log a ~ N(loc_a, s^2); d, b1 ~ N(loc, s_b^2); log gap ~ N(0, 1); c ~ Beta(alpha, beta) on the
    logit scale: log p(u) = alpha log c + beta log(1 - c) - log B(alpha, beta), c = sigmoid(u).
    Locations from the hyperparameters (``hyper``, or those in ``items``; see
    :func:`item_prior_locations`). The sum over items plus :func:`hyper_log_prior` equals the
    item part of :func:`log_prior`.
    """
    if spec.item_prior == "none":  # marginal maximum likelihood: flat priors
        ref = items["d"] if "d" in items else items["b1"]
        return ref * 0.0
    loc = item_prior_locations(spec, _hyper(items, hyper))
    total = 0.0
    if "a" in items:
        total = total + lk.normal_logpdf(items["a"], loc["a"], spec.log_a_scale)
    if "d" in items:
        total = total + lk.normal_logpdf(items["d"], loc["d"], spec.b_scale)
    if "b1" in items:
        total = total + lk.normal_logpdf(items["b1"], loc["b1"], spec.b_scale)
    if "gap" in items:
        total = total + lk.normal_logpdf(items["gap"], 0.0, 1.0).sum(axis=-1)
    if "c" in items:
        total = total + lk.logit_beta_logpdf(items["c"], *loc["c"])
    return total


def hyper_log_prior(params: Mapping[str, Any], spec: ModelSpec) -> Any:
    """Log density of the hyperparameters in ``params`` under :func:`hyper_prior` (0 without any)."""
    prior = hyper_prior(spec)
    total = 0.0
    for name in HYPER_KEYS:
        if name in params:
            total = total + lk.normal_logpdf(params[name], *prior[name])
    return total


def item_prior_terms(items: Mapping[str, Any], spec: ModelSpec, xp: Any = jnp,
                     hyper: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per item parameter: gradient and precision (-d2/du2) of the log prior, unconstrained scale.

    The item priors are separable given the hyperparameters, so both are elementwise:
    log a ~ N(loc, s^2): g = -(u - loc) / s^2, h = 1 / s^2; d, b1 ~ N(loc, s_b^2): g = -(u - loc) / s_b^2,
    h = 1 / s_b^2; log gap ~ N(0, 1): g = -u, h = 1; logit c with c ~ Beta(alpha, beta):
    g = alpha - (alpha + beta) c, h = (alpha + beta) c (1 - c). ``xp`` is ``jax.numpy``
    (traceable, used by the MAP solver) or ``numpy`` (float64, used by the Laplace step).
    Hyperparameters are held at their values (empirical Bayes in the Laplace step).
    """
    loc = item_prior_locations(spec, _hyper(items, hyper))
    grad: dict[str, Any] = {}
    precision: dict[str, Any] = {}
    for key, value in items.items():
        if key == "a":
            grad[key] = -(value - loc["a"]) / spec.log_a_scale ** 2
            precision[key] = xp.full_like(value, 1.0 / spec.log_a_scale ** 2)
        elif key in ("d", "b1"):
            grad[key] = -(value - loc[key]) / spec.b_scale ** 2
            precision[key] = xp.full_like(value, 1.0 / spec.b_scale ** 2)
        elif key == "gap":
            grad[key] = -value
            precision[key] = xp.ones_like(value)
        elif key == "c":
            alpha, beta = loc["c"]
            c = 1.0 / (1.0 + xp.exp(-value))
            grad[key] = alpha - (alpha + beta) * c
            precision[key] = (alpha + beta) * c * (1.0 - c)
    return grad, precision


def log_prior(params: Mapping[str, jax.Array], spec: ModelSpec) -> jax.Array:
    """Log prior density of the unconstrained parameters (Jacobians included).

    Items: :func:`item_log_prior` summed over items (locations from the hyperparameters in
    ``params``) plus :func:`hyper_log_prior`; abilities and facet coordinates N(0, theta_scale^2);
    residuals N(0, 1) with log sigma, sigma ~ HalfNormal(1).
    """
    total = jnp.zeros(())
    items = {k: params[k] for k in ITEM_KEYS if k in params}
    if items:
        total += jnp.sum(item_log_prior(items, spec, _hyper(params, None)))
    total += hyper_log_prior(params, spec)
    if "theta_raw" in params:
        total += lk.normal_logpdf(params["theta_raw"], 0.0, spec.theta_scale).sum()
    for facet in spec.facets:
        total += lk.normal_logpdf(params[f"z_{facet}"], 0.0, spec.theta_scale).sum()
    if "sigma_resid" in params:
        total += lk.half_normal_log_logpdf(params["sigma_resid"], 1.0)
        total += lk.normal_logpdf(params["resid"], 0.0, 1.0).sum()
    return total


def cell_loglik(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design, y: jax.Array) -> jax.Array:
    """Per-cell log-likelihood matrix (n_items, n_examinees), unmasked."""
    theta = examinee_theta(params, spec, design)
    if spec.kind == "grm":
        a = jnp.exp(params["a"])
        logp = lk.graded_category_logprobs(theta[None, :], a[:, None], grm_thresholds(params))
        k = jnp.clip(y, 0, design.max_score).astype(jnp.int32)
        return jnp.take_along_axis(logp, k[..., None], axis=-1)[..., 0]
    a, c = item_slopes_and_floors(params, spec)
    b = -params["d"] / a
    return lk.bernoulli_loglik_cells(y, theta[None, :], a[:, None], b[:, None], c[:, None] if "c" in params else c)


def log_likelihood(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design,
                   y: jax.Array, mask: jax.Array) -> jax.Array:
    """Total log-likelihood over observed cells.

    Binary models go through :func:`irtexam.irt.likelihood.binary_loglik`, whose value
    and gradient come from one fused pass over the cells; the GRM sums
    :func:`cell_loglik`.
    """
    if spec.kind == "grm":
        return jnp.sum(jnp.where(mask, cell_loglik(params, spec, design, y), 0.0))
    theta = examinee_theta(params, spec, design)
    a, c = item_slopes_and_floors(params, spec)
    return lk.binary_loglik(y, mask, theta, a, params["d"], c if "c" in params or c else None)


SCALE_ANCHOR_SD = 0.1


def scale_anchor(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design) -> jax.Array:
    """log N(log s | 0, 0.1^2) for the raw ability scale s (see :func:`ability_scale`).

    Reported abilities are raw / s, so neither the likelihood nor any reported
    quantity depends on s; but the N(0, 1) prior on the raw values alone would pull s
    to 0 (an unbounded, ill-conditioned MAP direction). This term gives that nuisance
    direction a finite mode. It is part of the NumPyro model too.
    """
    if not fixes_scale(spec):
        return jnp.zeros(())  # 1PL: the raw scale is the reported one, its prior alone sets it
    return lk.normal_logpdf(jnp.log(ability_scale(params, spec, design)), 0.0, SCALE_ANCHOR_SD)


def log_posterior(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design,
                  y: jax.Array, mask: jax.Array) -> jax.Array:
    """Unnormalised log posterior in unconstrained space: log prior + scale anchor + log likelihood."""
    return (log_prior(params, spec) + scale_anchor(params, spec, design)
            + log_likelihood(params, spec, design, y, mask))


# ----------------------------------------------------------------------------- numpyro
def numpyro_model(spec: ModelSpec, design: Design, y: jax.Array, mask: jax.Array) -> None:
    """The same model written for NumPyro; its potential energy equals -log_posterior.

    Sites: ``a`` (LogNormal), ``b`` (Normal) or ``b1``/``gap`` (GRM), ``c`` (Beta),
    ``theta`` (Normal) or ``z_<facet>`` with deterministic ``theta_<facet>`` and
    ``theta``; the likelihood enters as a factor over observed cells.
    """
    import numpyro
    import numpyro.distributions as dist

    params: dict[str, jax.Array] = {}
    hyperprior = hyper_prior(spec)
    for name in hyper_names(spec):
        params[name] = numpyro.sample(name, dist.Normal(*hyperprior[name]))
    loc = item_prior_locations(spec, params)
    with numpyro.plate("item", design.n_items):
        if spec.has_discrimination:
            a = numpyro.sample("a", dist.LogNormal(loc["a"], spec.log_a_scale))
            params["a"] = jnp.log(a)
        if spec.kind == "grm":
            params["b1"] = numpyro.sample("b1", dist.Normal(loc["b1"], spec.b_scale))
            if design.max_score > 1:
                gap = numpyro.sample("gap", dist.LogNormal(0.0, 1.0).expand([design.max_score - 1]).to_event(1))
                params["gap"] = jnp.log(gap)
        else:
            params["d"] = numpyro.sample("d", dist.Normal(loc["d"], spec.b_scale))
        if spec.free_guessing:
            c = numpyro.sample("c", dist.Beta(*loc["c"]))
            params["c"] = jnp.log(c) - jnp.log1p(-c)
    if spec.facets:
        for facet in spec.facets:
            n_free = design.facet_basis[facet].shape[1]
            z = numpyro.sample(f"z_{facet}", dist.Normal(0.0, spec.theta_scale).expand([n_free]).to_event(1))
            params[f"z_{facet}"] = z
        if spec.residual:
            sigma = numpyro.sample("sigma_resid", dist.HalfNormal(1.0))
            params["sigma_resid"] = jnp.log(sigma)
            with numpyro.plate("examinee", design.n_examinees):
                params["resid"] = numpyro.sample("resid", dist.Normal(0.0, 1.0))
        for facet, value in facet_thetas(params, spec, design).items():
            numpyro.deterministic(f"theta_{facet}", value)
        numpyro.deterministic("theta", examinee_theta(params, spec, design))
    else:
        with numpyro.plate("examinee", design.n_examinees):
            params["theta_raw"] = numpyro.sample("theta_raw", dist.Normal(0.0, spec.theta_scale))
        numpyro.deterministic("theta", examinee_theta(params, spec, design))
    if spec.kind != "grm" and not spec.free_guessing:
        numpyro.deterministic("c", jnp.full(design.n_items, spec.fixed_c))
    if not spec.has_discrimination:
        numpyro.deterministic("a", jnp.ones(design.n_items))
    if spec.kind != "grm":
        a_values = jnp.exp(params["a"]) if "a" in params else 1.0
        numpyro.deterministic("b", -params["d"] / a_values)
    if spec.kind == "grm":
        numpyro.deterministic("thresholds", grm_thresholds(params))
    numpyro.factor("scale_anchor", scale_anchor(params, spec, design))
    numpyro.factor("loglik", log_likelihood(params, spec, design, y, mask))
