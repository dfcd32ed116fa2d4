"""``irtexam.fit``: one entry point for every estimator.

:func:`fit` checks its settings against the option table (:mod:`irtexam.config`), builds the
model specification and the design, and calls one estimator module: the marginal EM
(:mod:`irtexam.irt.marginal.fit`), the joint mode (:mod:`irtexam.irt.joint`) or NUTS
(:mod:`irtexam.irt.nuts`). Every estimator returns a :class:`FitResult` with the same tables and
an arviz InferenceData with the same variable names and dims.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..errors import DivergedError, InputError, IrtexamError
from ..responses import ResponseMatrix
from ..warning_types import DataWarning, Message, PriorWarning, emit
from .. import config
from . import kinds
from . import model as mdl
from ..config import EstimatorOptions, OutputOptions
from .joint import SMALL_EXAM_ITEMS, fit_joint, lbfgs_map, map_estimate  # noqa: F401
from .result import FitResult, load_fit
from .saturation import SATURATED, guesses_freely, saturated_em_note, saturated_note, saturated_responses
from .stats import heldout_split

DEFAULT_FACETS = ("llm", "retriever", "icl")
__all__ = ["DEFAULT_FACETS", "FitResult", "fit", "load_fit", "map_estimate", "lbfgs_map"]


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


def _raise_category_gaps(responses: ResponseMatrix) -> None:
    """After a graded fit diverged: an :class:`InputError` naming the items that skip a score between their
    lowest and highest (0, 2, 3), the cause seen in the probe of issue 41; returns where there is none."""
    from ..table_checks import category_gaps

    gaps = category_gaps(responses.cells, responses.max_score)
    if gaps:
        shown = "; ".join(f"{responses.items[k]} never {', '.join(map(str, v))}" for k, v in list(gaps.items())[:3])
        raise InputError(f"the graded fit diverged: {len(gaps)} item(s) skip a score between their lowest and "
                         f"highest ({shown}{' ...' if len(gaps) > 3 else ''}), a category no response places; "
                         f"recode those items' scores to consecutive categories", path=responses.source)


# "auto" fits a model without facets by the joint mode ("map") where the median examinee answered at least this
# many items (LLM leaderboards: thousands of items per model), and by the marginal EM below. Measured (2PL, truth
# on the sample-standardised scale; experiments/marginal_recovery.py): the EM's 61 fixed nodes 0.2 apart cannot
# resolve ability posteriors with sd ~0.05 and its slopes fall (1,000 x 1,000: em a x0.949, b slope 1.059; map
# 1.005 / 1.001), while the joint mode, inconsistent where examinees answer few items (Neyman-Scott), is
# consistent where every examinee answers many and the items have many examinees (12,032 x 2,211: map 1.001 /
# 1.001, 90% intervals of a, b, theta covering 0.90 / 0.90 / 0.90). At 500 x 2,000 both are right (em 0.990 /
# 1.022, map 1.005 / 1.009); at 300 x 1,000 em is better (0.997 / 1.003 against 1.015 / 0.990).
LEADERBOARD_ITEMS = 500
# ... up to this many cells, the largest size the joint mode was measured at (12,032 x 2,211 = 2.7e7 cells: its whole
# process peaks at 0.70-0.76 GB, 28-30 bytes a cell with the interpreter's 0.27 GB; its sweeps hold the responses as
# int8 blocks, irtexam.irt.cell_blocks); beyond it (10^8 cells of 500 items x 200,000 examinees) "auto" stays with
# the marginal estimator, whose grid is refined to the posteriors' width (irtexam.irt.marginal.fit.refined_nodes)
LEADERBOARD_MAX_CELLS = 5e7
# ... and with at most items^2 x this many examinees: the joint mode's item estimates carry a bias of order
# 1 / (items per examinee) (Neyman-Scott) and have standard errors of order 1 / sqrt(examinees), so their
# intervals hold only where the bias is a small part of an error, examinees <= items^2 / 100 (bias ~0.1 sd). 3PL,
# 600 items x 20,000 examinees (ratio 0.056): map a x1.041, b slope 0.961, 90% intervals of a covering 0.78 in
# 27 s; em 1.020 / 0.977, covering 0.92 in 56 s. The leaderboard shapes sit far below (12,032 x 2,211: 1.5e-5).
LEADERBOARD_EXAMINEE_RATIO = 0.01
# ... and there the 3PL's c prior centre is learned by the marginal estimator's empirical-Bayes equation
# (ModelSpec.c_centre_rule="empirical") unless guessing_centre is given, at any number of models: a centre held at
# 1/n_choices is right only where the guessing averages 1/n_choices. 3PL, c ~ U(0.05, 0.30)
# (experiments/marginal_recovery.py --models 3pl --c-range 0.05,0.3): held, slopes x1.160 at 2,000 x 200 (2 reps)
# and x1.128 at 12,032 x 2,211; learned x1.061 and x1.042. c ~ Beta(5, 15), mean 1/4 (3 reps): 2,000 x 200 /
# 3,000 x 250 / 3,000 x 200 held x1.047 / x1.041 / x1.046, learned x1.027 / x1.023 / x1.025 (c -0.011 to -0.015);
# 12,032 x 2,211 held x1.027, learned x1.043 (c +0.018).
# ... and there the 2PL's items take Firth's penalty where the median item has fewer than this many responses:
# an item's slope is then a logistic regression's on few abilities, a few percent high
# (experiments/marginal_recovery.py --regimes 3000x200,2000x200,3000x250 --models 2pl --reps 2 --seed 1: x1.028 /
# x1.034 / x1.018 -> x1.007 / x1.013 / x1.001); at 2,211 models it moves nothing (12,032 x 2,211: 0.999 either
# way) and its four extra per-cell sums cost 1.5-2 s of the 7.6 s whole process.
FIRTH_MAX_RESPONSES = 1000
# The joint mode's item step can integrate every ability over its Gaussian posterior (ModelSpec.ability_nodes,
# cell_blocks.item_moments_over_abilities; opt in with spec=ModelSpec(ability_nodes=3, log_a_scale=1.0) and
# method="map"); "auto" keeps the modes. Measured (3PL, truth sample-standardised; experiments/leaderboard_3pl_ridge.py
# --ability-nodes 3 --log-a-scale 1): where the items' c follow the prior's Beta(5, 15) it removes the modes' 3-9%
# (2,000 x 1,000 seeds 1 / 2: x1.035 / x1.035 -> x1.011 / x1.010; 1,500 x 500: x1.094 / x1.021 -> x1.017 / x0.993;
# the marginal estimator agrees), but with c spread as U(0, 0.5) it puts slopes 7-9% low where the modes are right
# (2,000 x 1,000 seeds 0 / 1 / 2: x1.001 / 0.975 / 0.989 -> x0.928 / 0.912 / 0.935, a's intervals covering 0.76; the
# marginal estimator x0.899), and with 200-250 models it errs low as often as the modes err high.
LEADERBOARD_C_CENTRE = ("learned by the empirical-Bayes equation (the mean of the items' logit c): the joint mode "
                        "chosen by method='auto' for many items per examinee")


def items_per_examinee(observed: Any) -> float:
    """The median number of observed items per examinee of an (items x examinees) observed-cell mask."""
    counts = np.asarray(observed).sum(axis=0)
    return float(np.median(counts)) if counts.size else 0.0


def resolve_method(method: str, facets: Sequence[str] | None, n_items: int, per_examinee: float | None = None,
                   marginal_only: Sequence[str] = (), cells: float = 0.0) -> str:
    """The estimator that ``method`` names. "auto": for a hierarchical fit (``facets``) "nuts" below
    :data:`SMALL_EXAM_ITEMS` items (MAP's facet intervals cover about 80% there, NUTS's 90%), else the joint
    mode "map"; without facets the marginal estimator "em" (item parameters consistent however few items each
    examinee answers), except where the median examinee answered at least :data:`LEADERBOARD_ITEMS` items
    (``per_examinee``, :func:`items_per_examinee`; LLM leaderboards), no option that only the marginal
    estimator has was asked for (``marginal_only``: their names), the matrix has at most
    :data:`LEADERBOARD_MAX_CELLS` cells (``cells``, items x examinees) and at most ``per_examinee``^2 x
    :data:`LEADERBOARD_EXAMINEE_RATIO` examinees (cells / n_items): there the joint mode "map", consistent when
    both examinees and items are many (its item bias, of order 1 / items per examinee, a small part of an error of
    order 1 / sqrt(examinees)), and faster than the marginal estimator's refined grid."""
    if method != "auto":
        return method
    if not facets:
        if (per_examinee is not None and per_examinee >= LEADERBOARD_ITEMS and not marginal_only
                and cells <= LEADERBOARD_MAX_CELLS
                and cells / max(n_items, 1) <= LEADERBOARD_EXAMINEE_RATIO * per_examinee ** 2):
            return "map"
        return "em"
    return "nuts" if n_items < SMALL_EXAM_ITEMS else "map"


def marginal_only_options(given: dict[str, Any], spec: mdl.ModelSpec | None = None) -> list[str]:
    """The options among ``given`` (option name -> value; None: not given) and ``spec`` that only the marginal
    estimator has: with any of them ``auto`` keeps it."""
    asked = [name for name in ("groups", "fixed_items") if given.get(name) is not None]
    if given.get("item_prior") == "none" or (spec is not None and spec.item_prior == "none"):
        asked.append("item_prior='none'")
    if given.get("slope_centre") == "learned" or (spec is not None and spec.learn_a_centre):
        asked.append("slope_centre='learned'")
    if given.get("guessing_centre") == "auto":
        asked.append("guessing_centre='auto'")
    return asked


def auto_note(requested: str, method: str, facets: Sequence[str] | None, per_examinee: float,
              cells: float, n_items: int | None = None, saturated: int = 0) -> str | None:
    """One line on what ``method="auto"`` chose for a model without facets, and why (None otherwise), from the
    median items per examinee (:func:`items_per_examinee`) and the matrix's cells."""
    if requested != "auto" or facets:
        return None
    if method == "map":
        return (f"auto: the median examinee answered {per_examinee:.0f} items, at least {LEADERBOARD_ITEMS}, where the "
                "joint mode is consistent and fast; --method em forces the marginal estimator")
    if per_examinee >= LEADERBOARD_ITEMS:
        examinees = cells / n_items if n_items else None
        limit = LEADERBOARD_EXAMINEE_RATIO * per_examinee ** 2
        if cells > LEADERBOARD_MAX_CELLS:
            why = f"{cells:.3g} cells, more than the joint mode's {LEADERBOARD_MAX_CELLS:.0e} (memory)"
        elif examinees is not None and examinees > limit:
            why = (f"{examinees:.0f} examinees, more than {LEADERBOARD_EXAMINEE_RATIO:g} x {per_examinee:.0f}^2 items "
                   f"per examinee = {limit:.0f}, where the joint mode's item bias outgrows their errors")
        elif saturated:
            why = (f"{saturated} items answered the same way by more than {SATURATED:.0%} of the examinees, whose "
                   "slopes the 3PL's joint mode puts low")
        else:
            why = "an option only the marginal estimator has"
        return f"auto: no facets, {why}; the marginal estimator's grid follows the posteriors' width"
    return (f"auto: no facets, the median examinee answered {per_examinee:.0f} items, fewer than {LEADERBOARD_ITEMS}; "
            "--method map forces the joint mode")


# The marginal estimator's prior sd of log a. The joint mode's 0.5 anchors the common level of the discriminations
# (its ability scale is set by the estimated abilities); in the marginal estimator N(0, 1) abilities fix the scale,
# and 0.5 pulled the slopes of a spread-out group toward 1: 60 3PL items, 500 examinees from N(0.5, 1.3^2), mean
# log(a_hat / a*) -0.062 (8 reps), which biased linking constants A low by 0.03-0.06; with 1.0, +0.031 (the small-sample
# 3PL inflation, shared by both groups of a link). Recovery at 150 x 800 and 10 x 2000 is unchanged within noise.
# With the fixed centre the pull remains (80 single-group 3PL fits, sigma from 0.6 to 1.6: the error in log A falls
# by 0.05-0.065 per unit of log sigma); the marginal estimator learns the centre by default (slope_centre="learned",
# ModelSpec.learn_a_centre).
MARGINAL_LOG_A_SCALE = 1.0
# The marginal estimator's sd of the hyperprior of the c centre, mu_c ~ N(logit(1 / n_choices), 0.5^2) (the joint
# mode and NUTS: 1). On exams nearly everyone gets right (40 items x 1000, true c 0.2, proportion correct 0.91-0.96,
# experiments/easy_exam_guessing.py) a learned centre under sd 1 drifted to mean c 0.28-0.52, under 0.5 to
# 0.26-0.40 (0.3: 0.26-0.30); with guessing off 1 / n_choices (c ~ U(0.05, 0.3), 150 x 800 to 10 x 2000) sd 0.5
# keeps c within -0.004 to +0.009 (sd 1: -0.022 to +0.009; 0.3: +0.011 to +0.013, a up to x1.06).
MARGINAL_C_CENTRE_SCALE = 0.5


def default_item_prior(method: str) -> str:
    """The item prior each estimator uses unless told otherwise: "hierarchical" for all three, the centres of the
    priors learned from the exam by empirical Bayes. The marginal estimator learns the centres of log a and d (GRM:
    b_1) in closed form each EM cycle (:func:`irtexam.irt.marginal.steps.update_centres`; no slower than fixed centres),
    and the centre of c as ``guessing_centre="auto"`` decides (:func:`irtexam.irt.marginal.guessing.guessing_centre_by_size`):
    learned where the median item has at least 300 responses and the responses then carry at least 5% of the c's
    precision, held at 1 / n_choices otherwise.

    Why learned: a fixed centre pulls items that sit elsewhere. With guessing below 1 / n_choices (c ~ U(0.05,
    0.30), four regimes from 150 x 800 to 10 x 2000) the fixed c centre gave c +0.047 to +0.057 and a x1.07-1.13,
    the learned c -0.022 to +0.009 and a x1.00-1.03; a fixed d centre at 0 pulls the difficulties of a group
    placed away from the items' centre (linked 2PL forms: Haebara and Stocking-Lord B covered 0.75, learned 0.90 and
    0.925); a fixed slope centre pulls slopes far from a = 1 (3PL 150 x 800, a ~ LogNormal(log 1.8, 0.35): x0.918
    fixed, x0.984 learned). With c around 1 / n_choices both do equally well (c ~ Beta(5, 15), 10 replications, a
    ratio / b slope / c bias, 150 x 800: fixed 1.017 / 0.974 / +0.003, learned 1.013 / 0.974 / -0.001).

    Why the c centre is held where the data are thin: there the learned centre follows the items' small-sample
    pull (simulate's c, around 0.25; mean c bias learned: -0.11 at 200 items x 60 examinees, -0.065 at 150,
    -0.017 at 300, -0.008 at 500, 0.00 from 800) or drifts (40 items x 1000, true c 0.2, proportion correct
    0.91-0.96: mean c 0.26-0.40 learned under the hyperprior sd :data:`MARGINAL_C_CENTRE_SCALE`, 0.28-0.52 under
    sd 1). ``item_prior="fixed"`` is BILOG's default (d centred at 0, c at 1 / n_choices; the slope
    centre follows ``slope_centre``)."""
    return "hierarchical"


def fit(responses: ResponseMatrix | str | Path | pd.DataFrame, model: str = "3pl",
        facets: Sequence[str] | str | None = None, method: str = "auto", seed: int | None = None, *,
        spec: mdl.ModelSpec | None = None, options: EstimatorOptions | None = None,
        output: OutputOptions | None = None, **kwargs: Any) -> FitResult:
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
    "nuts" samples the joint posterior. "auto" (default, :func:`resolve_method`): "em" without facets, except
    where the median examinee answered at least :data:`LEADERBOARD_ITEMS` items (leaderboards: "map"); with
    facets NUTS below 50 items and MAP above.

    Uncertainty: EM fits draw item parameters from the normal approximation with the inverse observed
    information (Wald intervals on the log a / d / logit c scale) and abilities from their posterior
    over the quadrature nodes; MAP fits draw ``draws`` joint samples from the Laplace approximation,
    corrected item by item by Pareto-smoothed importance sampling
    (:mod:`irtexam.irt.draws`; a one-line warning when an item's correction fails,
    k-hat > 0.7); NUTS fits use their MCMC draws. Every reported interval (items,
    examinees, facets, contrasts, prob_greater) comes from these draws.

    Settings come in three groups, each checked against :data:`irtexam.config.OPTIONS` (one
    error template, ``fit: OPTION must be ALLOWED, got VALUE``), which also generates the flags of
    ``irtexam fit``:

    * model: ``model``, ``facets`` and the keywords ``guessing``, ``n_choices``, ``identify``,
      ``residual``, ``item_prior``, ``slope_centre``, ``guessing_centre``, or a whole ``spec``;
    * estimator: ``method``, ``seed`` and :class:`~irtexam.config.EstimatorOptions` (``options=``, or
      its fields as keywords: ``heldout``, ``abilities``, ``groups``, ``reference_group``, ``fixed_items``,
      ``init``, ``se``, ``chains``, ``warmup``, ``samples``, ``target_accept``, ``max_iter``, ``tol``,
      ``correct_draws``);
    * output: :class:`~irtexam.config.OutputOptions` (``output=``, or ``draws``, ``progress``).

    Args:
        responses: a ResponseMatrix, a path to a long response table, or a pandas DataFrame (wide: rows
            examinees, columns items; or long: item, examinee, response + facet columns), see
            :meth:`irtexam.responses.ResponseMatrix.coerce`.
        model: "1pl", "2pl", "3pl" or "grm" (the kinds of :data:`irtexam.irt.kinds.REGISTRY`).
        facets: examinee facet terms for the hierarchical model (e.g. ["llm", "retriever", "icl", "llm:icl"]),
            a comma-separated string, or "auto" (every facet column with at least two levels).
        method: "auto" (default, :func:`resolve_method`), "em" (marginal), "map" (joint mode + corrected
            Laplace draws) or "nuts" (NumPyro, ``chains`` chains).
        seed: seeds the held-out split, NUTS, and the posterior draws (default 0, or ``options.seed``).
        spec: a complete :class:`irtexam.irt.model.ModelSpec` instead of ``model`` and the model keywords
            (giving both with different values is an error); ``facets``, when given, replace the spec's.
        options: estimator options (:class:`irtexam.config.EstimatorOptions`); keywords override them.
        output: output options (:class:`irtexam.config.OutputOptions`); keywords override them.
        **kwargs: any model, estimator or output option above by name, e.g. ``guessing=0.25``,
            ``item_prior="none"``, ``heldout=0.1``, ``chains=2``, ``draws=200``.

    Returns:
        The fit: item, examinee and facet tables with intervals, draws, statistics and warnings.

    Example:
        >>> import irtexam
        >>> responses, truth = irtexam.simulate(20, 300, model="2pl", seed=1)
        >>> fit = irtexam.fit(responses, model="2pl", method="em")
        >>> fit.items[["a", "b"]].shape
        (20, 2)
    """
    model_options, options, output = config.split_options(kwargs, options, output)
    if seed is not None:
        options = replace(options, seed=config.check("seed", seed))
    method = config.check("method", method)
    user_spec = spec is not None
    spec = _model_spec(model, spec, model_options)
    kind = spec.kind if spec is not None else config.check("model", model)
    graded = kinds.get_kind(kind).graded
    responses = ResponseMatrix.coerce(responses, graded=graded)  # path, DataFrame (wide/long), array
    if graded:  # a score no response has: its category cannot be placed (the EM diverged on 0, 1, 4)
        from ..table_checks import check_categories_used

        check_categories_used(responses.cells, responses.source)
    messages = list(responses.warnings())
    facet_names = resolve_facets(responses, facets, messages)
    requested = method
    per_examinee = items_per_examinee(responses.observed) if method == "auto" else None
    cells = responses.n_items * responses.n_examinees
    facets_in_model = facet_names or (spec.facets if spec is not None else ())
    # one pass over the matrix: a saturated table sends a 3PL to em and has the 2PL's joint mode learn its slope centre
    saturated = (saturated_responses(responses) if method == "auto" and responses.is_binary and not facets_in_model
                 and per_examinee is not None and per_examinee >= LEADERBOARD_ITEMS else 0)
    saturated_guessing = saturated if guesses_freely(model, model_options, spec) else 0
    method = resolve_method(method, facets_in_model, responses.n_items, per_examinee,
                            marginal_only_options({**model_options, "groups": options.groups,
                                                   "fixed_items": options.fixed_items}, spec)
                            + (["saturated"] if saturated_guessing else []), cells)
    if saturated_guessing and method == "em":
        messages.append(Message(saturated_em_note(saturated_guessing, responses.n_items), PriorWarning))
    leaderboard = requested == "auto" and method == "map" and not facets_in_model
    if method == "em" and isinstance(options.se, str) and options.se != "auto":
        raise IrtexamError(f"se='{options.se}' chooses the joint mode's Laplace covariance (method='map'); the marginal "
                           "estimator takes se=True (the information of the item parameters) or se=False")
    if method != "em" and (options.groups is not None or options.fixed_items is not None):
        raise IrtexamError("groups and fixed_items need the marginal estimator: method='em' (CLI: --method em)")
    if spec is None:
        item_prior = model_options.get("item_prior") or default_item_prior(method)
        slope_centre = model_options.get("slope_centre") or ("learned" if method == "em" else "fixed")
        guessing_centre = model_options.get("guessing_centre") or ("auto" if method == "em" else "learned")
        if guessing_centre == "auto" and method != "em":
            raise IrtexamError("guessing_centre='auto' needs method='em'; the joint mode and NUTS learn the centre "
                               "under item_prior='hierarchical' (guessing_centre='learned') or hold it ('fixed')")
        guessing_rule = guessing_centre == "auto"
        spec = mdl.ModelSpec(kind=kind, **{k: v for k, v in model_options.items()
                                           if k not in ("item_prior", "slope_centre", "guessing_centre")},
                             learn_c_centre=guessing_centre != "fixed",
                             facets=facet_names, item_prior=item_prior, learn_a_centre=slope_centre == "learned",
                             log_a_scale=MARGINAL_LOG_A_SCALE if method == "em" else mdl.ModelSpec.log_a_scale,
                             c_centre_scale=MARGINAL_C_CENTRE_SCALE if method == "em" else mdl.ModelSpec.c_centre_scale)
    else:
        guessing_rule = False
        spec = replace(spec, facets=facet_names or spec.facets)
    if method != "em" and spec.learn_a_centre and spec.item_prior != "none" and (method == "nuts"
                                                                                or spec.free_guessing):
        raise IrtexamError("a learned slope centre (slope_centre='learned', learn_a_centre) needs method='em', or the "
                           "joint mode without guessing (1PL/2PL): the 3PL's joint mode with it can collapse its "
                           "guessing (benchmarks/results/leaderboard_3pl_ridge.txt), NUTS keeps log a centred on "
                           "log_a_loc")
    if method != "em" and spec.item_prior == "none":
        raise IrtexamError("item_prior='none' (marginal maximum likelihood) needs method='em'; the joint mode "
                           "and NUTS need proper item priors")
    design = mdl.build_design(responses, spec)
    guessing_note = None
    saturated = saturated if leaderboard and spec.has_discrimination else 0
    learn_centre = (saturated and spec.has_discrimination and not spec.free_guessing and not user_spec
                    and model_options.get("slope_centre") is None)
    if learn_centre:   # the fixed centre a = 1 put such a table's slopes 7-21% low, Firth's penalty more
        spec = replace(spec, learn_a_centre=True)
    elif (leaderboard and spec.has_discrimination and spec.kind_object.logistic_regression
            and float(np.median(design.mask.sum(axis=1))) < FIRTH_MAX_RESPONSES):
        spec = replace(spec, bias_reduction="firth")
    if saturated:
        messages.append(Message(saturated_note(saturated, design.n_items, learn_centre), PriorWarning))
    if leaderboard and spec.guessing_centre == "learned" and spec.free_guessing:
        spec = replace(spec, c_centre_rule="empirical")
        guessing_note = LEADERBOARD_C_CENTRE
    if design.mask.sum() == 0:
        raise IrtexamError("the response matrix has no observed responses")
    output = replace(output, draws=output.draws or default_draws(method, design.n_examinees, design.n_items))
    train_mask, test_mask = heldout_split(design.mask, options.heldout, options.seed)
    test = test_mask if options.heldout > 0 else None
    if method == "em":
        from .marginal.fit import fit_marginal
        try:
            result = fit_marginal(responses, spec, design, train_mask, test, seed=options.seed, se=bool(options.se),
                                  n_draws=output.draws, abilities=options.abilities, groups=options.groups,
                                  reference_group=options.reference_group, fixed_items=options.fixed_items,
                                  init=options.init, tol=options.tol, max_cycles=options.max_iter,
                                  guessing_rule=guessing_rule)
        except DivergedError:
            if graded:
                _raise_category_gaps(responses)
            raise
        result.warnings[:0] = messages
    elif method == "map":
        result = fit_joint(responses, spec, design, train_mask, test, options, output, messages)
        if leaderboard:
            result.fit_stats["method_rule"] = auto_note(requested, method, None, per_examinee, cells,
                                                        responses.n_items)
            if guessing_note:
                result.fit_stats["item_prior"]["guessing_centre_rule"] = guessing_note
    else:
        from .nuts import fit_nuts
        result = fit_nuts(responses, spec, design, train_mask, test, options, output, messages)
    emit(result.warnings, stacklevel=2)
    return result


DEFAULT_DRAWS = 500
ABILITY_DRAW_VALUES = 50_000_000
ITEM_DRAW_VALUES = 3_000_000


def default_draws(method: str, n_examinees: int, n_items: int = 0) -> int:
    """Posterior draws a fit keeps when ``draws`` is not given: 500; an EM fit of many examinees keeps
    max(100, 5e7 / examinees) so that its ability draws (draws x examinees, float32) stay near 200 MB
    (200,000 examinees: 250 draws, not 500 taking 400 MB); a fit of more than 6,000 items keeps
    max(100, 3e6 / items), each item parameter's draws near 12 MB (12,032 items: 249 draws; a leaderboard's a, b, c,
    d draws then take 48 MB, not 96, of a fit whose whole process is 0.45 GB)."""
    draws = DEFAULT_DRAWS
    if method == "em" and n_examinees * DEFAULT_DRAWS > ABILITY_DRAW_VALUES:
        draws = max(100, ABILITY_DRAW_VALUES // n_examinees)
    if n_items * DEFAULT_DRAWS > ITEM_DRAW_VALUES:
        draws = min(draws, max(100, ITEM_DRAW_VALUES // n_items))
    return draws


def _model_spec(model: str, spec: mdl.ModelSpec | None, model_options: dict[str, Any]) -> mdl.ModelSpec | None:
    """``spec`` checked against model keywords given with it (a conflict is an error, not silently overridden)."""
    if spec is None:
        return None
    if not isinstance(spec, mdl.ModelSpec):
        raise IrtexamError(f"fit: spec must be a ModelSpec, got {type(spec).__name__}")
    given = dict(model_options)
    if str(model).lower() != "3pl":
        given["kind"] = str(model).lower()
    conflicts = [f"{name}={value!r} (spec: {getattr(spec, name)!r})" for name, value in given.items()
                 if getattr(spec, name) != value]
    if conflicts:
        raise IrtexamError("fit: the model keywords disagree with spec: " + ", ".join(conflicts)
                           + "; give the model in one place")
    return spec


def auto_facets(responses: ResponseMatrix) -> tuple[list[str], list[str]]:
    """Facet columns usable in the hierarchical model (>= 2 levels) and those with a single level."""
    usable = [f for f in responses.facet_names if len(responses.facet_levels(f)) >= 2]
    return usable, [f for f in responses.facet_names if f not in usable]


def resolve_facets(responses: ResponseMatrix, facets: Sequence[str] | str | None,
                   messages: list[str] | None = None) -> tuple[str, ...]:
    """Facet terms of ``facets``: names, a comma-separated string, or "auto" (every facet column with at least
    two levels; the single-level columns it leaves out are noted in ``messages``), checked against the data."""
    if isinstance(facets, str) and facets.strip() == "auto":
        usable, constant = auto_facets(responses)
        for facet in constant:
            note = (f"facet '{facet}' has a single level ({responses.facet_levels(facet)[0]}); it is left out of "
                    f"the hierarchical model")
            if messages is not None:
                messages.append(Message(note, DataWarning))
        facets = usable
    return _validate_facets(responses, facets)


