"""Computerised adaptive testing (CAT) on a calibrated item bank.

A calibrated fit (``irtexam fit ... --out FITDIR``) is an item bank (:mod:`.itembank`): its item
parameters (and their posterior draws) let a new examinee (a new RAG pipeline) be measured with a few
items. :func:`run_cat` composes three objects, as catsim does: a :class:`~irtexam.bank.select.Selector`
chooses the next item (by default one random item per stratum of similar items; :mod:`.select` lists the
rules), the exact grid posterior of the ability (:mod:`.cat`) is updated with the answer and an
:class:`~irtexam.bank.cat.Estimator` reads the estimate from it (EAP or grid MAP), and a
:class:`~irtexam.bank.cat.Stopper` ends the test (posterior sd <= ``se_target`` after ``min_items``,
``max_items`` reached, or no item left). Each is named by its option (``selection="mfi"``,
``estimator="map"``) or passed as an object (a user's own selection rule: a subclass of
:class:`~irtexam.bank.select.Selector`). The predicted whole-exam accuracy and its interval are in
:func:`~irtexam.bank.cat.predicted_accuracy`.

Model misfit: an examinee's whole-exam score need not lie on the test characteristic curve at its
ability (on data/real_run the prediction from all 202 answers is off by 0.037 on average for a
held-out pipeline: the pipelines of one LLM share item-level deviations a unidimensional model does
not have), and adaptive selection by information amplifies it. :func:`misfit_curve` replays the same
procedure on the bank's calibration examinees and takes v_k = mean squared error of their predicted
accuracy after k items minus the mean predictive variance (floored at 0), added to the predictive
variance of the accuracy after k items.

Why stratified is the default: in the leave-one-pipeline-out replay on data/real_run, maximum
information gives a whole-exam accuracy MAE of about 0.05 at 10-30 items (worse than k random items,
about 0.03): its items (high a, near the ability) fit the ability but carry the examinee's misfit, and
the prediction of the other ~170 items inherits it. Items drawn at random from strata of the bank
spread the misfit like the exam does (experiments/adapt_replay.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import IrtexamError
from .cat import (EAP, ESTIMATOR_TYPES, ESTIMATORS, HIGH_Q, LOW_Q, MAP, CatState, Estimator,
                  StopRule, Stopper, ability, get_estimator, make_state, predicted_accuracy, rule_key, rule_name)
from .itembank import ItemBank, load_fit_checked
from .select import (DEFAULT_SELECTION, SELECTIONS, SELECTOR_TYPES, AStratified, Anchors,
                     ExpectedAccuracy, FixedOrder, MaxInformation, RandomItem, Selector, Stratified, anchor_order,
                     choose_item, get_selector, item_clusters, item_strata, selection_scores, stratified_order)

__all__ = ["AdaptResult", "adapt", "run_cat", "compose", "check_options", "misfit_curve", "misfit_key",
           "replay_answers", "item_levels", "check_exam_ids",
           # re-exported from .itembank, .cat and .select (the names' old home)
           "ItemBank", "load_fit_checked", "CatState", "make_state", "ability", "predicted_accuracy", "Estimator",
           "EAP", "MAP", "ESTIMATORS", "ESTIMATOR_TYPES", "StopRule", "Stopper", "LOW_Q", "HIGH_Q", "Selector",
           "FixedOrder", "MaxInformation", "AStratified", "ExpectedAccuracy", "RandomItem", "Anchors", "Stratified",
           "SELECTIONS", "SELECTOR_TYPES", "DEFAULT_SELECTION", "get_selector", "get_estimator", "selection_scores",
           "item_clusters", "anchor_order", "item_strata", "stratified_order", "choose_item"]

MISFIT_MIN_EXAMINEES = 10
MISFIT_MIN_ANSWERED = 0.9   # calibration examinees replayed by the misfit curve: those with >= 90% of the items


def misfit_key(selection: str | Selector, max_items: int, estimator: str | Estimator, randomesque: int,
               levels: Mapping[str, str] | None) -> tuple:
    """The cache key of a misfit curve (without its leading tag): the procedure's rules and settings."""
    return (rule_key(get_selector(selection), SELECTOR_TYPES), int(max_items),
            rule_key(get_estimator(estimator), ESTIMATOR_TYPES), int(randomesque), bool(levels))


def misfit_curve(bank: ItemBank, selection: str | Selector, max_items: int, *, estimator: str | Estimator = "eap",
                 randomesque: int = 1, levels: Mapping[str, str] | None = None, max_examinees: int = 200
                 ) -> np.ndarray | None:
    """Variance of the model-misfit error of the predicted accuracy after k = 0..max_items items, (max_items + 1,).

    The same procedure (selection, estimator) is replayed on the calibration examinees who answered at least
    90% of the items (up to ``max_examinees``; the bank's point estimates; an item they did not answer is
    skipped as in a live run), and at each k the mean squared error of the predicted whole-exam accuracy
    against their actual accuracy (on the items they answered), minus the mean predictive variance, is the
    variance that the IRT model does not explain (an examinee's total score off the test characteristic
    curve: multidimensionality, misfit of the selected items). None when the bank has no calibration
    responses or fewer than 10 such examinees (the summary's ``misfit_sd`` is then None). A property of the procedure, not of one
    run: the replays use seeds 1, 2, ... whatever the run's seed. Cached on the bank.
    """
    key = ("misfit",) + misfit_key(selection, max_items, estimator, randomesque, levels)
    if key in bank.cache:
        return bank.cache[key]
    curve = None
    y = bank.calibration
    if y is not None:
        complete = np.flatnonzero(np.isnan(y).mean(axis=0) <= 1.0 - MISFIT_MIN_ANSWERED)
        if complete.size > max_examinees:
            complete = np.sort(np.random.default_rng(0).choice(complete, max_examinees, replace=False))
        if complete.size >= MISFIT_MIN_EXAMINEES:
            point = bank.point()
            point.cache.update({k: v for k, v in bank.cache.items() if k[0] in ("order", "strata")})
            steps = min(int(max_items), bank.n_items)
            sq = np.zeros(steps + 1)
            var = np.zeros(steps + 1)
            before = predicted_accuracy(make_state(point), n_samples=10)   # k = 0: the same for every examinee
            for e in complete:
                answers = {item: v for item, v in zip(bank.ids, y[:, e]) if not np.isnan(v)}   # missing: skipped
                actual = float(np.nanmean(y[:, e]))
                t = run_cat(point, answers.get, se_target=1e-12, max_items=steps, min_items=0, seed=1 + int(e),
                            selection=selection, randomesque=randomesque, levels=levels, estimator=estimator,
                            misfit=False).trajectory
                sq[1:] += (t["accuracy"].to_numpy() - actual) ** 2
                var[1:] += t["accuracy_sd"].to_numpy() ** 2
                sq[0] += (before["accuracy"] - actual) ** 2
                var[0] += before["accuracy_sd"] ** 2
            curve = np.maximum(sq - var, 0.0) / complete.size
            curve = np.concatenate([curve, np.zeros(max(int(max_items) - steps, 0))])
            bank.cache[("misfit_examinees",) + key[1:]] = int(complete.size)
    bank.cache[key] = curve
    return curve


@dataclass
class AdaptResult:
    """Outcome of an adaptive run: ``trajectory`` (step, item, response, theta, theta_sd, ...) and ``summary``."""

    trajectory: pd.DataFrame
    summary: dict[str, Any]

    def save(self, directory: str | Path) -> dict[str, str]:
        """Write trajectory.csv and summary.json into ``directory`` (an earlier run's files replaced whole, never
        a mix of two runs; entries irtexam did not write are kept: :mod:`irtexam.outdirs`)."""
        from ..paths import atomic_output_dir

        out = Path(directory)
        with atomic_output_dir(out, "adapt") as staging:
            self.trajectory.to_csv(staging / "trajectory.csv", index=False)
            (staging / "summary.json").write_text(json.dumps(self.summary, indent=2, default=_json_default))
        return {"trajectory": str(out / "trajectory.csv"), "summary": str(out / "summary.json")}


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    raise TypeError(type(value).__name__)


def compose(se_target: float, max_items: int, min_items: int, selection: str | Selector,
            estimator: str | Estimator, stopper: StopRule | None = None) -> tuple[Selector, Estimator, StopRule]:
    """The selector, estimator and stopper of a run from option names or objects (``stopper``, when given,
    replaces ``se_target``, ``max_items`` and ``min_items``); one-line errors for impossible options."""
    stop = Stopper(se_target, max_items, min_items) if stopper is None else stopper
    if isinstance(stop, Stopper):
        stop.check()
    return get_selector(selection), get_estimator(estimator), stop


def check_options(se_target: float, max_items: int, min_items: int, selection: str | Selector,
                  estimator: str | Estimator) -> None:
    """One-line errors for impossible options (:func:`compose`)."""
    compose(se_target, max_items, min_items, selection, estimator)


def run_cat(bank: ItemBank, answer: Callable[[str], float | None], *, available: Sequence[str] | None = None,
            se_target: float = 0.3, max_items: int = 30, min_items: int = 5, seed: int = 0,
            selection: str | Selector = DEFAULT_SELECTION, randomesque: int = 1,
            levels: Mapping[str, str] | None = None, estimator: str | Estimator = "eap",
            stopper: StopRule | None = None, state: CatState | None = None,
            progress: Callable[[int], None] | None = None, misfit: bool = True) -> AdaptResult:
    """Adaptive test: select, ask ``answer(item_id)`` (0/1; None = could not be answered, skipped), update, stop.

    ``selection``: a name in :data:`SELECTIONS` or a :class:`~irtexam.bank.select.Selector`; ``estimator``: a
    name in :data:`ESTIMATORS` or an :class:`~irtexam.bank.cat.Estimator`; ``stopper``: a
    :class:`~irtexam.bank.cat.Stopper` (or any :class:`~irtexam.bank.cat.StopRule`) instead of ``se_target``,
    ``max_items`` and ``min_items``. ``available``: the items that may be given (default: the whole bank).
    ``randomesque``: draw the next item among this many best (rules that rank items). ``levels``: item ->
    level for content balancing. ``misfit``: widen the accuracy interval by the misfit variance that
    :func:`misfit_curve` measures on the calibration examinees (when the bank has them). Returns the
    trajectory (one row per administered item, with the estimate and predicted accuracy after it) and the
    summary (module doc for the formulas).
    """
    selector, est, stop = compose(se_target, max_items, min_items, selection, estimator, stopper)
    max_items = int(stop.max_items)
    rng = np.random.default_rng(seed)
    state = state or make_state(bank)
    position = {item: j for j, item in enumerate(bank.ids)}
    usable = np.zeros(bank.n_items, bool)
    usable[[position[i] for i in (available if available is not None else bank.ids) if i in position]] = True
    fixed_scores = selector.start(bank, max_items=max_items, seed=seed, rng=rng)
    curve = misfit_curve(bank, selector, max_items, estimator=est, randomesque=randomesque,
                         levels=levels) if misfit else None

    def extra(k: int) -> float:
        """Misfit variance after k items (0 without the curve)."""
        return float(curve[min(k, curve.size - 1)]) if curve is not None else 0.0

    level_array = None
    if levels:
        level_array = np.array([str(levels.get(i, "uncategorised")) for i in bank.ids], dtype=object)
    informative = bool(getattr(selector, "reports_information", False))
    rows, skipped, reason = [], [], "no items left"
    current = ability(state, est)
    while usable.any():
        stop_now = stop.stop(state, current)
        if stop_now:
            reason = stop_now
            break
        scores = fixed_scores if fixed_scores is not None else \
            selector.scores(state, bank, current["theta"], max_items=max_items)
        j = choose_item(scores, usable, rng, selector.pool(bank, randomesque), level_array, state.administered)
        usable[j] = False
        y = answer(bank.ids[j])
        if y is None or (isinstance(y, float) and math.isnan(y)):
            skipped.append(bank.ids[j])
            continue
        state.update(j, float(y))
        current = ability(state, est)
        acc = predicted_accuracy(state, n_samples=1000, seed=seed, misfit_var=extra(len(state.administered)))
        rows.append({"step": len(state.administered), "item": bank.ids[j], "response": float(y), **current,
                     "information": float(scores[j]) if informative else float("nan"),
                     "level": None if level_array is None else level_array[j], **acc})
        if progress is not None:
            progress(len(state.administered))
    trajectory = pd.DataFrame(rows, columns=["step", "item", "response", "theta", "theta_sd", "theta_low",
                                             "theta_high", "information", "level", "accuracy", "accuracy_sd",
                                             "accuracy_low", "accuracy_high"])
    k = len(state.administered)
    acc = predicted_accuracy(state, seed=seed, misfit_var=extra(k))
    summary = {**ability(state, est), **acc, "items_used": k,
               "exam_items": bank.n_items, "calls_saved": bank.n_items - k - len(skipped),
               "calls_spent": k + len(skipped), "skipped_items": skipped,
               "observed_correct": float(sum(state.responses)), "stop_reason": reason,
               "se_target": getattr(stop, "se_target", None), "max_items": max_items,
               "min_items": getattr(stop, "min_items", None), "selection": rule_name(selector),
               "randomesque": randomesque, "estimator": rule_name(est), "item_draws": bank.n_draws, "seed": seed,
               "content_balancing": bool(levels), "bank": bank.source,
               "misfit_sd": math.sqrt(extra(k)) if curve is not None else None,
               "misfit_examinees": bank.cache.get(("misfit_examinees",) + misfit_key(
                   selector, max_items, est, randomesque, levels), 0) if curve is not None else 0}
    return AdaptResult(trajectory, summary)


# ----------------------------------------------------------------------------- replay and the entry point
def replay_answers(responses: Any, examinee: str) -> tuple[dict[str, float], str]:
    """The recorded answers {item: score} of ``examinee`` (observed cells only) and the source name."""
    from ..responses import ResponseMatrix

    if not isinstance(responses, ResponseMatrix):
        responses = ResponseMatrix.read(responses)
    source = responses.source or "the replay responses"
    if str(examinee) not in responses.examinees:
        raise IrtexamError(f"{source}: no examinee '{examinee}'; pick one of {', '.join(responses.examinees[:5])}"
                           + (" ..." if responses.n_examinees > 5 else ""))
    column = responses.values[:, responses.examinees.index(str(examinee))]
    answers = {item: float(v) for item, v in zip(responses.items, column) if not np.isnan(v)}
    if not answers:
        raise IrtexamError(f"{source}: examinee '{examinee}' has no answers (its {responses.n_items} responses "
                           f"are all blank); pick an examinee with recorded answers")
    return answers, source


def item_levels(exam: str | Path | Sequence[Any], category: str = "bloom") -> dict[str, str]:
    """First Bloom level (or question word) of each exam item, for content balancing."""
    from ..analysis.categories import bloom_levels, question_word
    from ..exam.schema import read_exam

    items = read_exam(exam) if isinstance(exam, (str, Path)) else list(exam)
    out = {}
    for it in items:
        given = (getattr(it, "categories", None) or {}).get(category)
        if given:
            out[it.id] = given[0] if isinstance(given, (list, tuple)) else str(given)
        elif category == "bloom":
            out[it.id] = (bloom_levels(it.question) or ["uncategorised"])[0]
        else:
            out[it.id] = question_word(it.question)
    return out


def check_exam_ids(bank: ItemBank, exam_ids: Sequence[str], exam_source: str, fit_source: str | None) -> list[str]:
    """Bank items that the exam has; a one-line error when none (or under half) of the fit's items are in it."""
    have = set(map(str, exam_ids))
    common = [i for i in bank.ids if i in have]
    if len(common) < max(1, bank.n_items // 2):
        example = next(iter(have), "?")
        raise IrtexamError(f"{exam_source}: only {len(common)} of the {bank.n_items} items of {fit_source or 'the fit'}"
                           f" have an id in this exam (fit ids look like '{bank.ids[0]}', exam ids like "
                           f"'{example}'); pass the exam the fit was calibrated on")
    return common


def adapt(fit: Any, *, replay: Any = None, examinee: str | None = None, exam: str | Path | None = None,
          spec: str | Path | None = None, pipeline: str | None = None, se_target: float = 0.3,
          max_items: int = 30, min_items: int = 5, seed: int = 0, selection: str | Selector = DEFAULT_SELECTION,
          randomesque: int = 1, balance: str | Mapping[str, str] | None = None, estimator: str | Estimator = "eap",
          draws: int | None = 100, out: str | Path | None = None, progress: bool = True, misfit: bool = True
          ) -> AdaptResult:
    """Adaptive evaluation of one examinee against a calibrated fit (FitResult, fit folder or ItemBank).

    Offline (``replay``: a ResponseMatrix or long table, ``examinee``: its column) the answers
    are read from the recorded responses (the examinee need not be in the fit); live
    (``exam``, ``spec``: a grid spec, ``pipeline``: ``llm|retriever|iclK``) the pipeline answers
    each chosen item through :func:`irtexam.pipelines.take.take_exam` (its answer log and the
    LLM call cache make an interrupted run resume). ``balance``: ``"bloom"`` (levels from the
    exam's questions), or a mapping item -> level. ``selection`` and ``estimator``: option names or objects
    (:func:`run_cat`). Writes trajectory.csv and summary.json to
    ``out`` when given. The summary's formulas are in the module doc.
    """
    check_options(se_target, max_items, min_items, selection, estimator)
    if isinstance(fit, ItemBank):
        bank = fit
    elif isinstance(fit, (str, Path)):
        bank = ItemBank.load(fit, draws=draws, seed=seed)
    else:
        bank = ItemBank.from_fit(fit, draws=draws, seed=seed)
    levels = None
    if isinstance(balance, Mapping):
        levels = dict(balance)
    elif balance:
        if exam is None:
            raise IrtexamError(f"--balance {balance} needs --exam EXAM (the questions' {balance} levels)")
        levels = item_levels(exam, str(balance))
    if replay is not None:
        if examinee is None:
            raise IrtexamError("--replay needs --examinee ID (the recorded examinee to replay)")
        answers, source = replay_answers(replay, examinee)
        check_exam_ids(bank, list(answers), source, bank.source)
        result = run_cat(bank, answers.get, available=[i for i in bank.ids if i in answers], se_target=se_target,
                         max_items=max_items, min_items=min_items, seed=seed, selection=selection,
                         randomesque=randomesque, levels=levels, estimator=estimator, misfit=misfit)
        observed = [answers[i] for i in bank.ids if i in answers]
        result.summary.update(mode="replay", replay=source, examinee=str(examinee),
                              actual_accuracy=float(np.mean(observed)) if observed else float("nan"),
                              bank_items_unanswered=bank.n_items - len(observed))
    else:
        if exam is None or spec is None or pipeline is None:
            raise IrtexamError("give either --replay RESPONSES --examinee ID, or --exam EXAM --spec GRID "
                               "--pipeline LLM|RETRIEVER|iclK")
        from .live import live_answerer

        if out is not None:  # the live answers are logged in OUT/take: the folder is adapt's from now on
            from ..outdirs import claim

            claim(Path(out), "adapt")
        answerer = live_answerer(exam, spec, pipeline, out_dir=Path(out or ".") / "take", progress=progress)
        check_exam_ids(bank, answerer.item_ids, str(exam), bank.source)
        try:
            result = run_cat(bank, answerer, available=[i for i in bank.ids if i in set(answerer.item_ids)],
                             se_target=se_target, max_items=max_items, min_items=min_items, seed=seed,
                             selection=selection, randomesque=randomesque, levels=levels, estimator=estimator,
                             progress=answerer.tick, misfit=misfit)
        finally:
            answerer.close()
        result.summary.update(mode="live", exam=str(exam), spec=str(spec), pipeline=pipeline,
                              **answerer.stats())
    if out is not None:
        result.save(out)
    return result
