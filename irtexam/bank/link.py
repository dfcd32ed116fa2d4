"""Linking exam versions: put a new calibration on an old one's ability scale.

Two fits of IRT models identify their ability scales separately (each standardises
its own examinees). Items common to both (anchors, matched by item id) determine the
linear map

    theta_old = A theta_new + B,   so   a_old = a_new / A,   b_old = A b_new + B,   c_old = c_new.

Separate calibration + transformation (``mean-mean``, ``mean-sigma``, ``haebara``, ``stocking-lord``):
(A, B) from the anchors' parameters in the two fits (formulas in :mod:`.scale`).

Fixed-anchor calibration (``fixed``): the new responses are refitted by the marginal
estimator (:func:`irtexam.fit` with ``method="em"`` and ``fixed_items``) with the anchors held
at their old values, the new items' parameters free (same priors as NEWFIT) and the new group's
ability distribution N(mu, sigma^2) free on the old scale; the implied (A, B) is Stocking-Lord of
NEWFIT's own items onto these (the same responses, only the scale differs; A = sigma, B = mu when
NEWFIT is itself a marginal fit).

Concurrent calibration (``concurrent``): one multiple-group marginal fit of both response
matrices (examinees kept apart as ``old:``/``new:``, the old group N(0, 1), the new group its own
mean and sd: :func:`irtexam.fit` with ``groups``); the joint scale is mapped onto the old fit's by Stocking-Lord of
the joint fit's old-form items onto the old fit's (the same responses, only the scale differs),
and the new fit onto that by Stocking-Lord of its items onto the joint new-form items.

90% intervals combine two sources into a normal interval (both components in transform.json).
Estimation: the fits' posterior uncertainty. Anchor choice (the linking error,
:func:`anchor_linking_error`): the sd of the method's link between the two fits' point estimates over
bootstrap resamples of the anchors, i.e. item-level drift or misfit of the anchors that the calibrations
do not model. sd = max(sd_estimation, sd_anchors) for the separate methods, whose two terms both measure
the anchors' noise; sd^2 = sd_estimation^2 + sd_anchors^2 for fixed and concurrent, whose estimation term
holds only part of it (coverage of both rules in docs/guide/bank.md).

* separate methods: estimation sd (:func:`robust_sd`) over S independent pairs of (old, new) posterior
  draws of the anchors (each fit's draws in a random order: two fits made with the same seed share their
  standard-normal deviates, and paired in stored order their common shifts would cancel);
* fixed: estimation sd from the EM repeated with the anchors at old posterior draws (NEWFIT and
  the fixed-item fit share the new responses, so the new side's error enters through the anchor
  bootstrap, not twice);
* concurrent: estimation sd over the joint fit's item draws (both models take the anchors as
  identical in the two groups, so their posterior has no anchor-choice term).

The link maps one *sample's* scale onto the other's: the old scale is the old fit's, set by its
examinees. A marginal fit's item draws also carry the sampling of its examinees from the population
N(0, 1) (the sample's mean and log sd vary by sd^2/n and 1/(2n)), which moves every item together and
is no uncertainty of the link; :func:`population_link_variance` removes it from the estimation term
(recorded as ``A_sd_population_removed``, ``B_sd_population_removed``). Kept in, it made B intervals
of a 2PL 1.3-1.5 times too wide (experiments/link_simulated.py --model 2pl).

With exactly invariant anchors (a simulation without drift) the anchor bootstrap re-counts
the anchors' estimation noise, so the intervals are conservative there; it is the term that covers
undetected drift with real anchors.

The separate-calibration constants and the scale map are in :mod:`.scale`, the anchor drift statistic in
:mod:`.drift`.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from ..errors import IrtexamError
from ..warning_types import PriorWarning, UncertaintyWarning
from ..irt import kinds
from .drift import DRIFT_CRITICAL, drift_table
from .itembank import load_fit_checked
from .scale import SEPARATE, implied_link, linking_constants, transform_items, transformed_table

__all__ = ["METHODS", "SEPARATE", "DRIFT_CRITICAL", "LinkResult", "link", "separate_link", "fixed_link",
           "concurrent_link", "anchor_linking_error", "population_scale_variance", "population_link_variance",
           "robust_sd", "common_items", "drift_table", "implied_link",
           "linking_constants", "transform_items", "transformed_table"]

METHODS = SEPARATE + ("fixed", "concurrent")
LOW_Q, HIGH_Q = 0.05, 0.95


def _draw_params(fit: Any, positions: np.ndarray, n: int, seed: int) -> list[kinds.ItemParams] | None:
    """Posterior draws of the items at ``positions`` (None without draws). A non-finite draw of an item (a
    fit's Laplace covariance can fail for one item) is replaced by that item's point estimate, so it adds no
    spread instead of turning every linking constant into NaN; a warning says how many."""
    if fit.samples is None:
        return None
    d = fit.item_draws(None)
    # a random subset in a random order: two fits made with the same seed store the same standard-normal
    # deviates, so their draws taken in stored order would be paired (and their common shifts cancel in B)
    order = np.random.default_rng([seed, 0x11F]).permutation(d.n)[:n]
    d = type(d)(d.kind, {k: np.asarray(v)[order] for k, v in d.values.items()})
    point = kinds.from_table(fit.items)
    values = []
    for name in ("a", "b", "c"):
        est = getattr(point, name)
        if name not in d.values or est is None:
            values.append(None)
            continue
        v = np.array(d.values[name], dtype=float)[:, positions]
        values.append((v, np.asarray(est, float)[positions]))
    bad = np.zeros((d.n, len(positions)), dtype=bool)
    for pair in values:
        if pair is not None:
            bad |= ~np.isfinite(pair[0])
    if bad.any():
        warnings.warn(f"{int(bad.any(axis=0).sum())} item(s) have non-finite posterior draws ({int(bad.sum())} "
                      f"item draws); they are held at their point estimates in the linking intervals",
                      UncertaintyWarning)
        for pair in values:
            if pair is not None:
                pair[0][bad] = np.broadcast_to(pair[1], bad.shape)[bad]
    return [kinds.ItemParams(*(None if pair is None else pair[0][s] for pair in values)) for s in range(d.n)]


@dataclass
class LinkResult:
    """A link: ``transform`` (A, B, intervals, method, anchors), ``items`` (NEWFIT's items on OLDFIT's
    scale, items.csv columns) and ``drift`` (one row per anchor)."""

    transform: dict[str, Any]
    items: pd.DataFrame
    drift: pd.DataFrame

    def __repr__(self) -> str:
        t, flagged = self.transform, int(self.drift["flag"].sum()) if "flag" in self.drift else 0
        return (f"LinkResult: theta_old = A theta_new + B by {t.get('method')} on {t.get('n_anchors')} anchors, A {t['A']:.3f} "
                f"[{t['A_low']:.3f}, {t['A_high']:.3f}], B {t['B']:+.3f} [{t['B_low']:+.3f}, {t['B_high']:+.3f}] (90%); "
                f"{flagged} anchor(s) flagged as drifting; .items ({len(self.items)}), .drift, .transform, .save(DIR)")

    def save(self, directory: str | Path) -> dict[str, str]:
        """Write transform.json, items.csv and drift.csv into ``directory`` (an earlier link's files replaced
        whole, never a mix of two runs; entries irtexam did not write are kept: :mod:`irtexam.outdirs`)."""
        from ..paths import atomic_output_dir

        out = Path(directory)
        with atomic_output_dir(out, "link") as staging:
            (staging / "transform.json").write_text(json.dumps(self.transform, indent=2))
            self.items.to_csv(staging / "items.csv")
            self.drift.to_csv(staging / "drift.csv", index=False)
        return {k: str(out / f) for k, f in (("transform", "transform.json"), ("items", "items.csv"),
                                             ("drift", "drift.csv"))}

    def theta(self, theta_new: Any) -> np.ndarray:
        """Abilities on the new scale mapped to the old one: A theta + B."""
        return self.transform["A"] * np.asarray(theta_new, float) + self.transform["B"]


def _load(fit: Any, role: str) -> Any:
    if isinstance(fit, (str, Path)):
        return load_fit_checked(fit)
    return fit


def _name(fit: Any, given: Any, role: str) -> str:
    return str(given) if isinstance(given, (str, Path)) else role


def common_items(new: Any, old: Any, anchors: Sequence[str] | None, new_name: str, old_name: str) -> list[str]:
    """Anchor ids: ``anchors`` (checked) or every item id in both fits; >= 2 needed."""
    old_ids = set(map(str, old.items.index))
    new_ids = [str(i) for i in new.items.index]
    common = [i for i in new_ids if i in old_ids]
    if anchors is not None:
        missing = [a for a in anchors if a not in common]
        if missing:
            raise IrtexamError(f"anchor item(s) {missing[:3]} are not in both {new_name}/items.csv and "
                               f"{old_name}/items.csv; pass ids present in both")
        common = [i for i in new_ids if i in set(anchors)]
    if len(common) < 2:
        raise IrtexamError(f"{new_name}/items.csv and {old_name}/items.csv share {len(common)} item id(s); linking "
                           f"needs at least 2 common (anchor) items: give the new exam version some of the old "
                           f"items with their old ids")
    return common


def _anchor_items(fit: Any, anchors: Sequence[str]) -> tuple[np.ndarray, kinds.ItemParams]:
    """The anchors' positions in ``fit.items`` and their point estimates."""
    ids = list(map(str, fit.items.index))
    positions = np.array([ids.index(a) for a in anchors])
    return positions, kinds.from_table(fit.items).subset(positions)


def separate_link(new: Any, old: Any, anchors: list[str], method: str, n_draws: int = 200, seed: int = 0
                  ) -> dict[str, Any]:
    """A, B and 90% intervals of a separate-calibration method (module doc).

    Estimation sd: the method's (A, B) over S independent pairs of (new, old) posterior draws of the anchors,
    less the variance the draws carry from the populations' sampling (:func:`population_link_variance`);
    anchor sd: the method's (A, B) over bootstrap resamples of the anchors' point estimates
    (:func:`anchor_linking_error`); sd = max(estimation, anchors), normal interval (module doc).
    """
    new_pos, p_new = _anchor_items(new, anchors)
    old_pos, p_old = _anchor_items(old, anchors)
    A, B = linking_constants(p_new, p_old, method)
    d_new, d_old = _draw_params(new, new_pos, n_draws, seed), _draw_params(old, old_pos, n_draws, seed + 1)
    reps = []
    if d_new or d_old:
        n = min(len(d_new), len(d_old)) if d_new and d_old else len(d_new or d_old or [])
        for s in range(n):
            reps.append(linking_constants(d_new[s] if d_new else p_new, d_old[s] if d_old else p_old, method))
    population = population_link_variance(new, old, A, B, sides=tuple(side for side, d in (("new", d_new),
                                                                                          ("old", d_old)) if d))
    estimation = _without_population(robust_sd(np.array(reps)) if len(reps) > 1 else np.zeros(2), population)
    anchors_sd = anchor_linking_error(new, old, anchors, n_draws, seed, method=method)
    return {**_combined({"A": A, "B": B}, estimation, anchors_sd, combine="max"), **_population_record(population),
            "estimation_draws": len(reps)}


def population_scale_variance(fit: Any) -> tuple[float, float]:
    """Variance of the sample's ability mean and log sd on a fit's scale, as its item draws carry it.

    A marginal (EM) fit sets its scale by the reference group's population, N(0, 1): its item estimates
    follow the sample, whose mean and log sd differ from the population's by sampling error of variance
    sd^2 / n and 1 / (2 n) (normal abilities), and the information-based item draws include that spread.
    A link maps one sample's scale onto the other's (the old scale is the old fit's), so that spread is no
    uncertainty of the link. Returns (sd^2 / n, 1 / (2 n)) for the reference group's fixed moments; (0, 0)
    for a fit whose scale is set by fixed anchors or by its own sample (MAP and NUTS standardise the
    examinees' abilities in every draw).
    """
    stats_ = getattr(fit, "fit_stats", None) or {}
    if getattr(fit, "method", None) != "em" or stats_.get("anchors") or "population" not in stats_:
        return 0.0, 0.0
    var_mean = var_log_sd = 0.0
    for group in stats_["population"].values():
        n = max(int(group.get("n_examinees") or 0), 1)
        if group.get("mean_se") is None:
            var_mean += float(group["sd"]) ** 2 / n
        if group.get("sd_se") is None:
            var_log_sd += 1.0 / (2.0 * n)
    return var_mean, var_log_sd


def population_link_variance(new: Any, old: Any, A: float, B: float, *, sides: tuple[str, ...] = ("new", "old")
                             ) -> np.ndarray:
    """Variance of (A, B) that the fits' draws carry from their populations' sampling (delta method).

    With the old scale's mean and log sd off by (d1, e1) and the new one's by (d2, e2)
    (:func:`population_scale_variance`), theta_old = A theta_new + B moves by
    dA = A (e2 - e1),  dB = A d2 - d1 - B e1, so
    var A = A^2 (v_e1 + v_e2),  var B = v_d1 + B^2 v_e1 + A^2 v_d2.
    """
    v_d1, v_e1 = population_scale_variance(old) if "old" in sides else (0.0, 0.0)
    v_d2, v_e2 = population_scale_variance(new) if "new" in sides else (0.0, 0.0)
    return np.array([A ** 2 * (v_e1 + v_e2), v_d1 + B ** 2 * v_e1 + A ** 2 * v_d2])


# the link's variance keeps at least this share of the draws' variance when the population term is removed
MIN_KEPT_VARIANCE = 0.1


def robust_sd(reps: np.ndarray) -> np.ndarray:
    """Spread of link replicates (S, 2) as the sd of a normal with the same 5%-95% range:
    (q95 - q05) / (2 z_0.95). It equals the sd for normal replicates; a 3PL's Gaussian draws of (a, d) give
    a few very large b = -d / a, whose tails made the moment methods' sd 1.4-1.5 times their error's."""
    lo, hi = np.quantile(reps, [LOW_Q, HIGH_Q], axis=0)
    return (hi - lo) / (2.0 * float(stats.norm.ppf(HIGH_Q)))


def _without_population(spread: np.ndarray, population: np.ndarray) -> np.ndarray:
    """sqrt(spread^2 - population), keeping at least MIN_KEPT_VARIANCE of the variance."""
    return np.sqrt(np.maximum(spread ** 2 - population, MIN_KEPT_VARIANCE * spread ** 2))


def _population_record(population: np.ndarray) -> dict[str, float]:
    return {"A_sd_population_removed": float(np.sqrt(population[0])),
            "B_sd_population_removed": float(np.sqrt(population[1]))}


def _new_side_spread(new: Any, old: Any, anchors: list[str], n_draws: int, seed: int) -> np.ndarray:
    """sd of Stocking-Lord (A, B) over NEWFIT's anchor draws with the old anchors at their point values."""
    new_pos, _ = _anchor_items(new, anchors)
    _, p_old = _anchor_items(old, anchors)
    draws = _draw_params(new, new_pos, n_draws, seed) or []
    reps = np.array([linking_constants(d, p_old, "stocking-lord") for d in draws])
    return reps.std(axis=0, ddof=1) if len(reps) > 1 else np.zeros(2)


def anchor_linking_error(new: Any, old: Any, anchors: list[str], n_boot: int = 200, seed: int = 0, *,
                         method: str = "stocking-lord") -> np.ndarray:
    """Linking error of the anchor choice: sd of the ``method``'s (A, B) between the two fits' point estimates
    over bootstrap resamples of the anchors (module doc). Fixed-anchor and concurrent calibration assume the
    anchors' parameters identical in both groups, so their posterior spread has no such term."""
    _, p_new = _anchor_items(new, anchors)
    _, p_old = _anchor_items(old, anchors)
    rng = np.random.default_rng(seed + 7)
    reps = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(anchors), len(anchors))
        if len(np.unique(idx)) >= 2:
            reps.append(linking_constants(p_new.subset(idx), p_old.subset(idx), method))
    return np.array(reps).std(axis=0, ddof=1) if len(reps) > 1 else np.zeros(2)


def _combined(transform: dict[str, Any], estimation: np.ndarray, anchors_sd: np.ndarray, combine: str = "sum"
              ) -> dict[str, Any]:
    """Normal 90% interval from the estimation sd and the anchor linking error, both recorded: their variances
    added (``combine="sum"``) or the larger of the two (``"max"``: both measure the anchors' noise; module doc)."""
    estimation, anchors_sd = np.asarray(estimation, float), np.asarray(anchors_sd, float)
    sd = np.maximum(estimation, anchors_sd) if combine == "max" else np.sqrt(estimation ** 2 + anchors_sd ** 2)
    return {**transform, **_normal_interval(transform["A"], transform["B"], sd), "sd_combination": combine,
            "A_sd_estimation": float(estimation[0]), "B_sd_estimation": float(estimation[1]),
            "A_sd_anchors": float(anchors_sd[0]), "B_sd_anchors": float(anchors_sd[1])}


def _normal_interval(A: float, B: float, sd: np.ndarray) -> dict[str, float]:
    z = float(stats.norm.ppf(HIGH_Q))
    return {"A_low": A - z * sd[0], "A_high": A + z * sd[0], "B_low": B - z * sd[1], "B_high": B + z * sd[1],
            "A_sd": float(sd[0]), "B_sd": float(sd[1])}


def _fixed_item_fit(new: Any, responses: Any, anchors_table: pd.DataFrame, *, se: bool, seed: int,
                    init: Any = None) -> Any:
    """NEWFIT's responses recalibrated by marginal EM with the anchors held at ``anchors_table`` (old scale);
    the new group's ability mean and sd are estimated on that scale (:func:`irtexam.fit`, ``fixed_items``)."""
    import irtexam

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return irtexam.fit(responses, model=new.spec.kind, guessing=new.spec.guessing, n_choices=new.spec.n_choices,
                           item_prior=new.spec.item_prior, slope_centre=new.spec.slope_centre,
                           guessing_centre=new.spec.guessing_centre, method="em",
                           fixed_items=anchors_table, se=se,
                           seed=seed, init=init)


def fixed_link(new: Any, old: Any, anchors: list[str], n_draws: int = 10, seed: int = 0) -> tuple[dict, pd.DataFrame]:
    """Fixed-anchor calibration (module doc): transform dict and NEWFIT's items on the old scale.

    The implied (A, B) is :func:`implied_link` of NEWFIT's items onto the fixed-anchor estimates;
    its estimation sd is the spread over old anchor draws (EM rerun, warm), and the interval adds
    :func:`anchor_linking_error` (module doc); the spread over NEWFIT's anchor draws is recorded, not added.
    """
    new_ids = list(map(str, new.items.index))
    old_ids = list(map(str, old.items.index))
    old_pos = np.array([old_ids.index(x) for x in anchors])
    rm = new.responses.subset(items=new_ids)
    own = kinds.from_table(new.items)
    columns = [c for c in ("a", "b", "c") if c in old.items]
    main = _fixed_item_fit(new, rm, old.items.loc[anchors, columns], se=True, seed=seed)
    A, B = implied_link(own, kinds.from_table(main.items))
    reps = []
    for d in _draw_params(old, old_pos, n_draws, seed) or []:
        table = pd.DataFrame({"a": np.asarray(d.a, float), "b": np.asarray(d.b, float),
                              "c": np.asarray(d.c if d.c is not None else np.zeros(len(anchors)), float)},
                             index=pd.Index(anchors, name="item"))
        rep = _fixed_item_fit(new, rm, table, se=False, seed=seed, init=main)
        reps.append(implied_link(own, kinds.from_table(rep.items)))
    spread_old = np.array(reps).std(axis=0, ddof=1) if len(reps) > 1 else np.zeros(2)
    # the estimation term is the old anchors' spread alone: NEWFIT and the fixed-item fit are calibrated on the same
    # responses, so the new side's sampling error of their implied link mostly cancels, and what is left of it
    # (the new anchors' noise against the old ones) is in the anchor bootstrap. With both terms the intervals were
    # 1.7-1.9x too wide (experiments/link_simulated.py --methods fixed --c-range 0.15,0.35, 40 replications:
    # coverage 1.0 / 1.0 of A / B; old anchors + bootstrap: 0.95 / 0.925); the new side's spread is recorded
    spread_new = _new_side_spread(new, old, anchors, 4 * n_draws, seed)
    # the old anchors' draws carry the old population's sampling of the scale, which the link does not
    population = population_link_variance(new, old, A, B, sides=("old",))
    estimation = _without_population(spread_old, population)
    transform = _combined({"A": A, "B": B}, estimation, anchor_linking_error(new, old, anchors, 20 * n_draws, seed))
    transform.update(_population_record(population))
    transform.update(A_sd_old_anchors=float(spread_old[0]), B_sd_old_anchors=float(spread_old[1]),
                     A_sd_new_anchors=float(spread_new[0]), B_sd_new_anchors=float(spread_new[1]))
    population = main.fit_stats["population"]["all"]
    transform.update(em_iterations=main.fit_stats["optimizer"]["cycles"], mu=population["mean"],
                     sigma=population["sd"], anchor_draws=len(reps))
    # the items on the old scale: the fixed-item fit's own estimates and intervals; anchors: the old rows
    table = main.items.reindex(new_ids).copy()
    old_rows = old.items.loc[anchors]
    for col in table.columns:
        if col in old_rows:
            table.loc[anchors, col] = old_rows[col].to_numpy()
    return transform, table


def concurrent_link(new: Any, old: Any, anchors: list[str], n_draws: int = 50, seed: int = 0
                    ) -> tuple[dict, pd.DataFrame]:
    """Concurrent calibration of both response matrices (module doc): transform dict and items table.

    The joint scale is mapped to OLDFIT's by :func:`implied_link` of the joint old-form items onto
    OLDFIT's (A1, B1); (A, B) is :func:`implied_link` of NEWFIT's items onto the joint new-form items
    mapped by (A1, B1). Intervals: estimation sd of the same over the joint fit's item draws, plus
    :func:`anchor_linking_error` (module doc).
    """
    import irtexam
    from ..responses import ResponseMatrix

    anchor_set = set(anchors)
    old_ids = set(map(str, old.items.index))

    def joint_id(item: str) -> str:
        """New-form id in the joint fit: common items left out of the anchors stay separate items."""
        return item if item in anchor_set or item not in old_ids else f"{item}@new"

    def long(fit: Any, prefix: str) -> pd.DataFrame:
        frame = fit.responses.to_long(include_missing=False)
        frame["examinee"] = prefix + frame["examinee"].astype(str)
        if prefix == "new:":
            frame["item"] = [joint_id(str(i)) for i in frame["item"]]
        frame["linking_form"] = prefix.rstrip(":")
        return frame[["item", "examinee", "response", "linking_form"]]

    joint_rm = ResponseMatrix.from_long(pd.concat([long(old, "old:"), long(new, "new:")], ignore_index=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # multiple-group marginal calibration: the old group N(0, 1), the new group its own mean and sd
        # (one population for both would pull the groups together and bias A and B)
        joint = irtexam.fit(joint_rm, model=old.spec.kind, guessing=old.spec.guessing, seed=seed,
                            n_choices=old.spec.n_choices, item_prior=old.spec.item_prior,
                            slope_centre=old.spec.slope_centre, guessing_centre=old.spec.guessing_centre,
                            draws=max(n_draws, 20), method="em", groups="linking_form", reference_group="old")
    ids = list(map(str, joint.items.index))
    old_pos = np.array([ids.index(i) for i in map(str, old.items.index)])
    new_pos = np.array([ids.index(joint_id(i)) for i in map(str, new.items.index)])
    own_old, own_new = kinds.from_table(old.items), kinds.from_table(new.items)

    def constants(items: kinds.ItemParams) -> tuple[float, float, float, float]:
        A1, B1 = implied_link(items.subset(old_pos), own_old)
        A, B = implied_link(own_new, transform_items(items.subset(new_pos), A1, B1))
        return A, B, A1, B1

    A, B, A1, B1 = constants(kinds.from_table(joint.items))
    draws = _draw_params(joint, np.arange(len(ids)), n_draws, seed) or []
    reps = np.array([constants(d)[:2] for d in draws])
    estimation = reps.std(axis=0, ddof=1) if len(reps) > 1 else np.zeros(2)
    transform = _combined({"A": A, "B": B}, estimation, anchor_linking_error(new, old, anchors, 200, seed))
    transform.update(joint_items=joint.design.n_items, joint_examinees=joint.design.n_examinees,
                     joint_to_old_A=A1, joint_to_old_B=B1, joint_draws=len(reps))
    table = transformed_table(joint.items.iloc[new_pos], A1, B1)
    table.index = pd.Index(list(map(str, new.items.index)), name="item")
    return transform, table


def prior_mismatch(new_spec: Any, old_spec: Any) -> str | None:
    """What differs between two fits' item priors that linking them would read as a difference of scale (the
    item prior, the centre of the slopes' or of the guessing prior), or None. A form fitted with the c centre
    learned and the other with it held at 1 / n_choices (``guessing_centre="auto"`` decides per form) puts the
    common items' c, and with them a and b, in different places (simulated forms, 500 examinees each, the new
    group abler: Stocking-Lord A 0.706 against 0.783 with both learned, true 0.774)."""
    differs = [f"{name} {getattr(new_spec, name)} against {getattr(old_spec, name)}"
               for name in ("item_prior", "slope_centre") if getattr(new_spec, name) != getattr(old_spec, name)]
    if new_spec.free_guessing and old_spec.free_guessing and new_spec.guessing_centre != old_spec.guessing_centre:
        differs.append(f"guessing_centre {new_spec.guessing_centre} against {old_spec.guessing_centre}")
    if not differs:
        return None
    return ("the two fits' item priors differ (" + "; ".join(differs) + "), which moves the common items apart; "
            "refit both with the same settings (e.g. --guessing-centre learned or fixed)")


def link(new: Any, old: Any, method: str = "stocking-lord", *, anchors: Sequence[str] | None = None,
         draws: int = 200, seed: int = 0, drop_drift: bool = False, out: str | Path | None = None) -> LinkResult:
    """Put NEWFIT on OLDFIT's scale (FitResults or fit folders); see the module doc for every method.

    Returns a :class:`LinkResult`; ``out`` also writes transform.json, items.csv and drift.csv.
    ``drop_drift``: relink without the anchors flagged as drifting (separate methods and fixed).
    """
    if method not in METHODS:
        raise IrtexamError(f"unknown linking method '{method}'; choose one of {', '.join(METHODS)}")
    new_name, old_name = _name(new, new, "NEWFIT"), _name(old, old, "OLDFIT")
    new_fit, old_fit = _load(new, "new"), _load(old, "old")
    for fit, name in ((new_fit, new_name), (old_fit, old_name)):
        if kinds.from_table(fit.items).graded:
            raise IrtexamError(f"{name}: linking supports binary items (1PL/2PL/3PL); this fit is graded")
    if new_fit.spec.kind != old_fit.spec.kind:  # a 3PL's c takes up what a 2PL puts into a and b
        raise IrtexamError(f"{new_name} is a {new_fit.spec.kind.upper()} fit but {old_name} a "
                           f"{old_fit.spec.kind.upper()} fit: A and B would mix the models with the scales; "
                           "refit both with the same --model")
    common = common_items(new_fit, old_fit, anchors, new_name, old_name)
    mismatch = prior_mismatch(new_fit.spec, old_fit.spec)
    if mismatch:
        warnings.warn(f"{new_name} and {old_name}: {mismatch}", PriorWarning, stacklevel=2)

    def run(anchor_set: list[str]) -> tuple[dict, pd.DataFrame]:
        if method in SEPARATE:
            tr = separate_link(new_fit, old_fit, anchor_set, method, n_draws=draws, seed=seed)
            return tr, transformed_table(new_fit.items, tr["A"], tr["B"])
        if method == "fixed":
            return fixed_link(new_fit, old_fit, anchor_set, n_draws=10, seed=seed)
        return concurrent_link(new_fit, old_fit, anchor_set, n_draws=min(draws, 100), seed=seed)

    transform, table = run(common)
    drift = drift_table(new_fit, old_fit, common, transform["A"], transform["B"], n_draws=draws, seed=seed,
                        link_sd=(transform.get("A_sd", np.nan), transform.get("B_sd", np.nan)))
    dropped: list[str] = []
    if drop_drift and method != "concurrent" and drift["flag"].any():
        kept = [i for i, f in zip(drift["item"], drift["flag"]) if not f]
        if len(kept) >= 2:
            dropped = [i for i in common if i not in kept]
            transform, table = run(kept)
    transform.update(method=method, n_anchors=len(common) - len(dropped), anchors=[i for i in common
                                                                                   if i not in dropped],
                     dropped_for_drift=dropped, n_drifting=int(drift["flag"].sum()), new=new_name, old=old_name,
                     formula="theta_old = A * theta_new + B; a_old = a_new / A; b_old = A * b_new + B")
    transform = {k: (float(v) if isinstance(v, (np.floating, float)) else v) for k, v in transform.items()}
    result = LinkResult(transform, table, drift)
    if out is not None:
        result.save(out)
    return result
