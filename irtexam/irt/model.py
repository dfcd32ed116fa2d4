"""IRT model specifications, the pure log-posterior, and the matching NumPyro model.

A model has three parts, kept apart in the dynamax / numpyro style:

* :class:`ModelSpec`: configuration only (the kind object of :mod:`irtexam.irt.kinds`, priors,
  facets, how the hierarchy is identified). No data, no fitted values.
* :class:`~irtexam.irt.design.Design`: what the data fix: sizes, the response array and mask, and for
  each facet the level of every examinee and the identifying basis.
* parameters: a dict of *unconstrained* arrays keyed by the NumPyro site names (``a`` holds log a, ``c`` holds
  logit c, ``z_<facet>`` the free facet coordinates, ...). :func:`constrain` maps them to a, b, c, theta.

Every parameter array is a declared :class:`~irtexam.irt.parameters.Site` (prior, bijector,
hyperparameter): the item sites come from the kind object, the hyperparameter and ability sites
from :func:`hyper_sites` and :func:`person_sites`. The log prior, its gradient and precision,
constrain / unconstrain and the NumPyro model are all derived from that one table.

The MAP estimate maximises :func:`log_posterior` over the unconstrained dict; NUTS samples :func:`numpyro_model`,
whose potential energy is exactly ``-log_posterior`` (tested), so both estimators target the same posterior.

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

from dataclasses import dataclass
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import IrtexamError
from . import kinds
from .design import INTERACTION, Design, build_design, facet_layout, reference_basis, sum_to_zero_basis  # noqa: F401
from .parameters import EXP, IDENTITY, HalfNormal, Normal, Site, hyper_site, sample_numpyro
from .scale import (SCALE_ANCHOR_SD, ability_scale, examinee_theta, facet_thetas, fixes_scale,  # noqa: F401
                    scale_anchor)

ITEM_PRIORS = ("hierarchical", "fixed", "none")
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
            centred on log_a_loc (it anchors the common level of the discriminations) unless
            ``learn_a_centre``. An exam far
            harder or easier than the examinees, or with fewer guessable items than 1 / n_choices,
            otherwise has every item shrunk towards the wrong centre: on data/real_run (median b 1.5) the fixed priors made the
            3PL over-predict the number of correct answers by 6%.
        learn_a_centre: learn the centre of the log a prior, log a_i ~ N(mu_a, log_a_scale^2) with
            mu_a ~ N(log_a_loc, 1) (BILOG's floating slope prior; the fit option ``slope_centre="learned"``).
            Under ``item_prior="fixed"`` it is the only learned centre; each EM cycle updates the learned centres
            in closed form (:func:`irtexam.irt.marginal.steps.update_centres`). Only where a population distribution
            fixes the ability scale (the marginal estimator, which turns it on by default): a prior centred on a = 1 pulls slopes that sit away from
            1 towards it (3PL 150 x 800, a ~ LogNormal(log 1.8, 0.35): x0.918 with the centre fixed, x0.984
            learned), and with them the linking constant A of a group spread wider or narrower than the
            reference (:data:`irtexam.irt.fit.MARGINAL_LOG_A_SCALE`). The joint mode and NUTS keep log a
            centred on log_a_loc.
        learn_c_centre: under ``item_prior="hierarchical"``, learn the centre mu_c of the c prior (True, the
            default) or hold it at logit(1 / n_choices) (the fit option ``guessing_centre="fixed"``; "auto", the
            marginal estimator's default, decides from the data: :func:`irtexam.irt.marginal.guessing.guessing_centre_by_size`).
        c_centre_scale: sd of the hyperprior of mu_c, N(logit(1 / n_choices), c_centre_scale^2): 1, or the marginal
            estimator's :data:`irtexam.irt.fit.MARGINAL_C_CENTRE_SCALE`.
        c_centre_rule: how the joint mode's alternating solver learns mu_c: "mode" (the joint posterior's mode,
            exact logit-Beta density, as L-BFGS and NUTS see it) or "empirical" (the marginal estimator's
            empirical-Bayes equation, mu_c = the mean of the items' logit c under the hyperprior). The mode climbs
            towards c = 1/2 where thousands of items carry little information on their c
            (:func:`irtexam.irt.alternating.hyper_gradient_and_precision`); ``method="auto"`` uses "empirical"
            where it picks the joint mode for many items per examinee.
        bias_reduction: "none", or "firth": the joint mode's alternating solver adds Firth's penalty 1/2 log det
            F_i (item i's Fisher information given the abilities) to each item's log posterior, which removes the
            O(1 / examinees) bias of a logistic regression's slope (no guessing, binary;
            :func:`irtexam.irt.alternating.firth_gradient`). ``method="auto"`` uses it there for the 2PL where the
            median item has fewer than :data:`irtexam.irt.fit.FIRTH_MAX_RESPONSES` responses.
        ability_nodes: Gauss-Hermite points over each ability's Gaussian posterior in the joint mode's item step
            (1: the mode plugged in; :func:`irtexam.irt.cell_blocks.item_moments_over_abilities`).
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
    learn_a_centre: bool = False
    learn_c_centre: bool = True
    c_centre_scale: float = 1.0
    c_centre_rule: str = "mode"
    bias_reduction: str = "none"
    ability_nodes: int = 1

    def __post_init__(self) -> None:
        kind = str(self.kind).lower()
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "facets", tuple(self.facets))
        if self.guessing is not None and not 0.0 <= self.guessing < 1.0:
            raise IrtexamError(f"guessing must be in [0, 1), got {self.guessing}")
        object.__setattr__(self, "_kind", kinds.get_kind(kind, self.guessing))
        if self.identify not in ("sum-to-zero", "reference"):
            raise IrtexamError(f"identify must be 'sum-to-zero' or 'reference', got '{self.identify}'")
        if self.residual and not self.facets:
            raise IrtexamError("a residual needs facets: without facets every examinee already has its own theta")
        if self.item_prior not in ITEM_PRIORS:
            raise IrtexamError(f"unknown item prior '{self.item_prior}'; choose one of {', '.join(ITEM_PRIORS)}")
        if self.c_centre_rule not in ("mode", "empirical"):
            raise IrtexamError(f"c_centre_rule must be 'mode' or 'empirical', got '{self.c_centre_rule}'")
        if self.bias_reduction not in ("none", "firth"):
            raise IrtexamError(f"bias_reduction must be 'none' or 'firth', got '{self.bias_reduction}'")
        if self.bias_reduction == "firth" and not self.kind_object.logistic_regression:
            raise IrtexamError("bias_reduction='firth' needs a model without guessing (1PL or 2PL): the 3PL's "
                               "Jeffreys penalty is no bias correction (its link is not canonical)")
        if self.n_choices < 2:
            raise IrtexamError("n_choices must be at least 2")

    @property
    def slope_centre(self) -> str:
        """The centre of the log a prior: "learned" with :attr:`learn_a_centre` (the option ``slope_centre``), else "fixed"."""
        return "learned" if self.learn_a_centre else "fixed"

    @property
    def guessing_centre(self) -> str:
        """The centre of the c prior: "learned" under ``item_prior="hierarchical"`` with :attr:`learn_c_centre`, else
        "fixed" (at 1 / n_choices)."""
        return "learned" if self.item_prior == "hierarchical" and self.learn_c_centre else "fixed"

    @property
    def kind_object(self) -> kinds.Kind:
        """The model kind (:class:`irtexam.irt.kinds.Kind`), with the fixed guessing parameter applied."""
        return self._kind  # type: ignore[attr-defined, no-any-return]

    @property
    def free_guessing(self) -> bool:
        """True when each item has its own estimated c."""
        return self.kind_object.free_guessing

    @property
    def fixed_c(self) -> float:
        """The fixed lower asymptote (0 for 1PL/2PL without guessing)."""
        return self.kind_object.fixed_c

    @property
    def c_prior(self) -> tuple[float, float]:
        """(alpha, beta) of the Beta prior on c, mean 1 / n_choices."""
        mean = 1.0 / self.n_choices
        return self.c_concentration * mean, self.c_concentration * (1.0 - mean)

    @property
    def has_discrimination(self) -> bool:
        """False for the 1PL (a = 1 for every item)."""
        return self.kind_object.has_discrimination


# ----------------------------------------------------------------------------- sites
def item_sites(spec: ModelSpec, max_score: int = 2) -> tuple[Site, ...]:
    """The item parameter sites of ``spec``'s kind (GRM: K - 1 gaps for scores 0..``max_score``)."""
    return spec.kind_object.item_sites(spec, max_score)


def hyper_prior(spec: ModelSpec) -> dict[str, tuple[float, float]]:
    """(location, scale) of the normal hyperprior of each hyperparameter.

    mu_a ~ N(log_a_loc, 1) (only with ``learn_a_centre``), mu_d, mu_b1 ~ N(0, b_scale^2),
    mu_c ~ N(logit(1 / n_choices), c_centre_scale^2) (1; the marginal estimator 0.5):
    wide enough for any exam the data can pin down (202 items locate mu_d to about
    b_scale / sqrt(202) = 0.14), centred where the fixed priors sit.
    """
    chance = 1.0 / spec.n_choices
    return {"mu_a": (spec.log_a_loc, 1.0), "mu_d": (0.0, spec.b_scale), "mu_b1": (0.0, spec.b_scale),
            "mu_c": (float(np.log(chance / (1.0 - chance))), spec.c_centre_scale)}


def hyper_sites(spec: ModelSpec) -> tuple[Site, ...]:
    """The hyperparameters locating the item priors (:func:`hyper_names`), in item-site order."""
    prior = hyper_prior(spec)
    return tuple(hyper_site(site, Normal(*prior[site.hyper])) for site in item_sites(spec) if site.hyper)


def hyper_names(spec: ModelSpec) -> tuple[str, ...]:
    """The learned centres of the item priors: those of a hierarchical prior, mu_a alone under "fixed" with
    ``learn_a_centre``, () otherwise."""
    return tuple(site.name for site in hyper_sites(spec))


def person_sites(spec: ModelSpec, design: Design | None = None) -> tuple[Site, ...]:
    """Ability sites: raw abilities N(0, theta_scale^2), or per facet term its free coordinates
    N(0, theta_scale^2) (one event), with a residual: log sigma (sigma ~ HalfNormal(1)) and N(0, 1) residuals.
    Without ``design`` the event sizes are placeholders (1): enough for densities, not for shapes."""
    if not spec.facets:
        return (Site("theta_raw", IDENTITY, Normal(0.0, spec.theta_scale), role="person"),)
    sites = [Site(f"z_{facet}", IDENTITY, Normal(0.0, spec.theta_scale), role="person",
                  event_size=design.facet_basis[facet].shape[1] if design is not None else 1) for facet in spec.facets]
    if spec.residual:
        sites += [Site("sigma_resid", EXP, HalfNormal(1.0), role="person"),
                  Site("resid", IDENTITY, Normal(0.0, 1.0), role="person")]
    return tuple(sites)


def _declared() -> tuple[tuple[str, ...], dict[str, str]]:
    """Every item site name of the registered kinds (discriminations first) and the hyperparameter of each."""
    names: dict[str, None] = {}
    hyper: dict[str, str] = {}
    for kind in sorted(kinds.REGISTRY.values(), key=lambda k: not k.has_discrimination):
        for site in item_sites(ModelSpec(kind=kind.name, learn_a_centre=True)):
            names[site.name] = None
            if site.hyper:
                hyper[site.name] = site.hyper
    return tuple(names), hyper


ITEM_KEYS, HYPER_OF = _declared()
HYPER_KEYS = tuple(dict.fromkeys(HYPER_OF.values()))


def param_shapes(spec: ModelSpec, design: Design) -> dict[str, tuple[int, ...]]:
    """Shapes of the unconstrained parameter arrays, keyed by site name."""
    shapes: dict[str, tuple[int, ...]] = {}
    for site in item_sites(spec, design.max_score):
        shapes[site.name] = (design.n_items,) + ((site.event_size,) if site.event_size else ())
    for name in hyper_names(spec):
        shapes[name] = ()
    for site in person_sites(spec, design):
        shapes[site.name] = (((site.event_size,) if site.event_size else (design.n_examinees,))
                             if site.name != "sigma_resid" else ())
    return shapes


def initial_params(spec: ModelSpec, design: Design) -> dict[str, np.ndarray]:
    """Data-driven starting values in unconstrained space.

    a = 1; b from the item's observed proportion correct, b = -logit((p - c)/(1 - c));
    c at its prior mean; theta from the examinee's standardised proportion correct;
    facet coordinates 0.
    """
    shapes = param_shapes(spec, design)
    y, mask = design.y, design.mask
    c0 = spec.c_prior[0] / sum(spec.c_prior) if spec.free_guessing else spec.fixed_c
    params: dict[str, np.ndarray] = dict(spec.kind_object.initial_items(y, mask, design.max_score, c0))
    if "c" in shapes:
        params["c"] = np.full(shapes["c"], np.log(c0 / (1 - c0)))
    for item_key, name in HYPER_OF.items():
        if name in shapes:
            # each centre's item parameter is in the model; log a starts at 0 (a = 1)
            params[name] = np.asarray(np.mean(params.get(item_key, np.zeros(shapes[item_key]))))
    if "theta_raw" in shapes:
        score = (y * mask).sum(axis=0) / np.maximum(mask.sum(axis=0), 1)
        sd = score.std()
        params["theta_raw"] = (score - score.mean()) / sd if sd > 0 else np.zeros_like(score)
    for name, shape in shapes.items():
        if name not in params:
            params[name] = np.zeros(shape)
    return {k: np.asarray(params[k], dtype=np.float32) for k in shapes}  # site order


def grm_thresholds(params: Mapping[str, jax.Array], xp: Any = None) -> jax.Array:
    """Ordered GRM thresholds b_1 < ... < b_K: :func:`irtexam.irt.kinds.graded_thresholds`."""
    return kinds.graded_thresholds(params, xp)


def constrain(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design) -> dict[str, jax.Array]:
    """Map unconstrained parameters to the reported a, b, c / thresholds, theta, theta_<facet>, sigma_resid. NumPy
    in, NumPy out (no JAX dispatch); JAX (or tracers) in, JAX out; leading draw dimensions kept (all draws at once)."""
    xp = kinds._xp(*params.values())
    unconstrained = {k: v for k, v in params.items() if k in ITEM_KEYS}
    items = item_params(unconstrained, spec)
    lead = params[spec.kind_object.location_key].shape
    out: dict[str, jax.Array] = {"a": xp.broadcast_to(items.a, lead), "b": items.b}
    if items.graded:
        out["thresholds"] = items.thresholds
    else:
        out["d"] = params["d"]
        out["c"] = xp.broadcast_to(items.c, lead)
    return {**out, **constrain_persons(params, spec, design)}


def constrain_persons(params: Mapping[str, Any], spec: ModelSpec, design: Design) -> dict[str, Any]:
    """:func:`constrain`'s ability part: theta, theta_<facet> and sigma_resid (= exp of its log)."""
    out = {"theta": examinee_theta(params, spec, design), **{f"theta_{facet}": value for facet, value in
                                                            facet_thetas(params, spec, design).items()}}
    return {**out, "sigma_resid": kinds._xp(*params.values()).exp(params["sigma_resid"])} if spec.residual else out


def unconstrain(draws: Mapping[str, Any], spec: ModelSpec, design: Design) -> dict[str, Any]:
    """Reported values of sampled sites (NumPyro's draws: a, c, gap, sigma_resid, ...) -> unconstrained ones."""
    sites = {site.name: site for site in item_sites(spec, design.max_score) + hyper_sites(spec)
             + person_sites(spec, design)}
    return {key: sites[key].unconstrain(value) for key, value in draws.items() if key in sites}


def item_params(params: Mapping[str, Any], spec: ModelSpec, n_items: int | None = None) -> kinds.ItemParams:
    """Reported item parameters (:class:`irtexam.irt.kinds.ItemParams`) from unconstrained ones:
    the kind object's :meth:`~irtexam.irt.kinds.Kind.item_params` (NumPy or JAX, leading draw axes kept)."""
    return spec.kind_object.item_params(params)


def item_slopes_and_floors(items: Mapping[str, jax.Array], spec: ModelSpec) -> tuple[jax.Array, Any]:
    """Binary items' discrimination a = exp(log a) (ones without ``a``: the 1PL) and lower
    asymptote c = sigmoid(logit c) per item, or the model's fixed c (a float) without ``c``."""
    return spec.kind_object.slopes_and_floors(items)


# ----------------------------------------------------------------------------- densities
def _hyper(items: Mapping[str, Any], hyper: Mapping[str, Any] | None) -> dict[str, Any]:
    """Hyperparameters given explicitly, else those carried in ``items`` (a whole parameter dict)."""
    found = {k: items[k] for k in HYPER_KEYS if k in items}
    found.update(hyper or {})
    return found


def item_prior_locations(spec: ModelSpec, hyper: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Locations of the item priors: log a, d and b1 locations, and (alpha, beta) of the Beta prior on c.

    With hyperparameters (:func:`hyper_names`): loc d = mu_d, loc b1 = mu_b1,
    c ~ Beta(kappa m, kappa (1 - m)) with m = sigmoid(mu_c); without them the fixed values
    0, 0 and m = 1 / n_choices (:attr:`ModelSpec.c_prior`). log a is centred on mu_a with
    ``learn_a_centre``, else on log_a_loc.
    """
    return {site.name: site.location(hyper) for site in item_sites(spec) if site.name != "gap"}


def item_prior_summary(spec: ModelSpec, hyper: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The centres of the item priors a fit used, on the reported scale: ``slope_centre`` ("learned" or "fixed"),
    ``a_median`` = exp(mu_a) (learned) or exp(log_a_loc),
    ``d_location`` = mu_d (GRM: ``b1_location``), ``c_mean`` = sigmoid(mu_c) (the prior mean of c); only
    ``kind`` for flat priors ("none"); ``bias_reduction`` and ``c_centre_rule`` where not the plain joint mode's."""
    out: dict[str, Any] = {"kind": spec.item_prior}
    if spec.bias_reduction != "none":
        out["bias_reduction"] = spec.bias_reduction
    if spec.item_prior == "none":
        return out
    if spec.has_discrimination:
        out["slope_centre"] = spec.slope_centre
    loc = item_prior_locations(spec, {k: float(np.asarray(v)) for k, v in (hyper or {}).items()})
    if spec.has_discrimination:
        out["a_median"] = float(np.exp(loc["a"]))
    key = spec.kind_object.location_key
    out[f"{key}_location"] = float(loc[key])
    if spec.free_guessing:
        alpha, beta = loc["c"]
        out["guessing_centre"] = spec.guessing_centre
        out["c_mean"] = float(alpha / (alpha + beta))
        if spec.guessing_centre == "learned" and spec.c_centre_rule != "mode":
            out["c_centre_rule"] = spec.c_centre_rule
    return out


def item_log_prior(items: Mapping[str, Any], spec: ModelSpec, hyper: Mapping[str, Any] | None = None) -> Any:
    """Log prior density of each item's unconstrained parameters (Jacobians included), shape (..., I).

    The sum over the item sites present in ``items`` of :meth:`irtexam.irt.parameters.Site.log_prior`:
    log a ~ N(loc_a, s^2); d, b1 ~ N(loc, s_b^2); log gap ~ N(0, 1); c ~ Beta(alpha, beta) on the
    logit scale. Locations from the hyperparameters (``hyper``, or those in ``items``; see
    :func:`item_prior_locations`). The sum over items plus :func:`hyper_log_prior` equals the
    item part of :func:`log_prior`. Flat (0) for ``item_prior="none"`` (marginal maximum likelihood).
    """
    if spec.item_prior == "none":
        return items[spec.kind_object.location_key] * 0.0
    hyper = _hyper(items, hyper)
    total = 0.0
    for site in item_sites(spec):
        if site.name in items:
            total = total + site.log_prior(items[site.name], hyper)
    return total


def hyper_log_prior(params: Mapping[str, Any], spec: ModelSpec) -> Any:
    """Log density of the hyperparameters in ``params`` under :func:`hyper_prior` (0 without any)."""
    total = 0.0
    for site in hyper_sites(spec):
        if site.name in params:
            total = total + site.log_prior(params[site.name])
    return total


def item_prior_terms(items: Mapping[str, Any], spec: ModelSpec, xp: Any = jnp,
                     hyper: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per item parameter: gradient and precision (-d2/du2) of the log prior, unconstrained scale.

    The item priors are separable given the hyperparameters, so both are elementwise
    (:meth:`irtexam.irt.parameters.Site.prior_terms`): normal priors g = -(u - loc) / s^2, h = 1 / s^2;
    logit c with c ~ Beta(alpha, beta): g = alpha - (alpha + beta) c, h = (alpha + beta) c (1 - c).
    ``xp`` is ``jax.numpy`` (traceable, used by the MAP solver) or ``numpy`` (float64, used by the
    Laplace step). Hyperparameters are held at their values (empirical Bayes in the Laplace step).
    """
    hyper = _hyper(items, hyper)
    grad: dict[str, Any] = {}
    precision: dict[str, Any] = {}
    sites = {site.name: site for site in item_sites(spec)}
    for key, value in items.items():
        if key in sites:
            grad[key], precision[key] = sites[key].prior_terms(value, hyper, xp)
    return grad, precision


def log_prior(params: Mapping[str, jax.Array], spec: ModelSpec) -> jax.Array:
    """Log prior density of the unconstrained parameters (Jacobians included).

    Items: :func:`item_log_prior` summed over items (locations from the hyperparameters in
    ``params``) plus :func:`hyper_log_prior`; abilities and facet coordinates N(0, theta_scale^2);
    residuals N(0, 1) with log sigma, sigma ~ HalfNormal(1) (the sites of :func:`person_sites`).
    """
    total = jnp.zeros(())
    items = {k: params[k] for k in ITEM_KEYS if k in params}
    if items:
        total += jnp.sum(item_log_prior(items, spec, _hyper(params, None)))
    total += hyper_log_prior(params, spec)
    for site in person_sites(spec):
        if site.name in params:
            total += jnp.sum(site.log_prior(params[site.name]))
    return total


def cell_loglik(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design, y: jax.Array) -> jax.Array:
    """Per-cell log-likelihood matrix (n_items, n_examinees), unmasked: the kind object's."""
    theta = examinee_theta(params, spec, design)
    return spec.kind_object.cell_loglik({k: params[k] for k in ITEM_KEYS if k in params}, theta, y)


def log_likelihood(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design,
                   y: jax.Array, mask: jax.Array) -> jax.Array:
    """Total log-likelihood over observed cells: the kind object's (binary models through the fused
    :func:`irtexam.irt.fused.binary_loglik`, value and gradient from one pass over the cells)."""
    theta = examinee_theta(params, spec, design)
    return spec.kind_object.log_likelihood({k: params[k] for k in ITEM_KEYS if k in params}, theta, y, mask)


def log_posterior(params: Mapping[str, jax.Array], spec: ModelSpec, design: Design,
                  y: jax.Array, mask: jax.Array) -> jax.Array:
    """Unnormalised log posterior in unconstrained space: log prior + scale anchor + log likelihood."""
    return (log_prior(params, spec) + scale_anchor(params, spec, design)
            + log_likelihood(params, spec, design, y, mask))


# ----------------------------------------------------------------------------- numpyro
def numpyro_model(spec: ModelSpec, design: Design, y: jax.Array, mask: jax.Array) -> None:
    """The same model written for NumPyro from the same sites; its potential energy equals -log_posterior.

    Sites: the hyperparameters, the item sites in an item plate (``a`` LogNormal, ``d`` or
    ``b1``/``gap``, ``c`` Beta), ``theta_raw`` in an examinee plate or ``z_<facet>`` (with
    ``sigma_resid`` and ``resid``); deterministic ``theta``, ``theta_<facet>``, ``a``, ``b``, ``c``,
    ``thresholds``; the likelihood enters as a factor over observed cells.
    """
    import numpyro

    params: dict[str, jax.Array] = {}
    for site in hyper_sites(spec):
        params[site.name] = sample_numpyro(site)
    with numpyro.plate("item", design.n_items):
        for site in item_sites(spec, design.max_score):
            params[site.name] = sample_numpyro(site, params)
    for site in person_sites(spec, design):
        if site.name in ("theta_raw", "resid"):
            with numpyro.plate("examinee", design.n_examinees):
                params[site.name] = sample_numpyro(site)
        else:
            params[site.name] = sample_numpyro(site)
    for facet, value in facet_thetas(params, spec, design).items():
        numpyro.deterministic(f"theta_{facet}", value)
    numpyro.deterministic("theta", examinee_theta(params, spec, design))
    items = item_params({k: params[k] for k in ITEM_KEYS if k in params}, spec)
    for name in spec.kind_object.reported_names:
        if name not in params or name == "b":
            numpyro.deterministic(name, getattr(items, name))
    numpyro.factor("scale_anchor", scale_anchor(params, spec, design))
    numpyro.factor("loglik", log_likelihood(params, spec, design, y, mask))
