"""Iterative exam pruning (paper Algorithm 1, done right).

Round j (j = 1..steps): take the fit of the current exam Q_{j-1}, drop the
``drop`` fraction of its *remaining* items with the lowest score, giving Q_j,
then refit on Q_j warm-started from the previous parameters. The score is the
discrimination a (``by="discrimination"``, the paper's choice) or the item's
information averaged over a theta range (``by="information"``), which also
penalises items whose difficulty lies outside the abilities of interest.
The response matrix is always subset *by item id*, so responses stay attached
to their items (the paper's code refit on misaligned columns).

Before the first fit, items without information are removed (``drop_uninformative``,
on by default): those every examinee who took them answered alike (all right, all
wrong, one graded score) or that nobody answered. Their parameters come from the
prior alone, so neither their discrimination nor their information ranks them
reliably; they are counted and reported (``PruneResult.uninformative``, the
decisions' ``reason`` column, step 0's ``n_dropped``) and do not count toward ``drop``.

Number dropped per round: max(1, round(drop * n_remaining)), never going below
``min_items`` (a round that would is cut short, and the stop is recorded).

Ties at the cut line (scores equal to 12 significant digits): the item with the
lower *other* score is dropped first (mean information when ranking by
discrimination, discrimination when ranking by information), then the item whose
id comes first in natural order. The steps table counts them (``ties_at_cut``).
"""

from __future__ import annotations

import inspect
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..errors import InputError
from ..warning_types import DataWarning, IrtexamWarning
from . import information as inf

BY_CHOICES = ("discrimination", "information")


def drop_count(n_remaining: int, drop: float, min_items: int) -> int:
    """Items to drop this round: max(1, round(drop * n)) capped so that >= min_items remain."""
    n = max(1, int(round(drop * n_remaining)))
    return max(0, min(n, n_remaining - min_items))


def drop_plan(n_items: int, drop: float, steps: int, min_items: int) -> list[int]:
    """Items dropped in each round, known in advance from the counts alone (rounds that
    would drop nothing because of ``min_items`` are not run)."""
    plan, n = [], n_items
    for _ in range(steps):
        k = drop_count(n, drop, min_items)
        if k == 0:
            break
        plan.append(k)
        n -= k
    return plan


def _n_observed(rm) -> int:
    return int((~np.isnan(np.asarray(rm.values, dtype=float))).sum())


def item_scores(items: pd.DataFrame, by: str, theta_range: tuple[float, float]) -> pd.Series:
    """Pruning score per item: a (discrimination) or mean information over ``theta_range``."""
    if by == "discrimination":
        return items["a"].astype(float)
    if by == "information":
        return inf.mean_information(items, theta_range)
    raise InputError(f"--by must be one of {BY_CHOICES}, not {by!r}")


TIE_RULE = ("scores equal to 12 significant digits tie; the lower other score (information when ranking by "
            "discrimination, discrimination when ranking by information) is dropped first, then the item id "
            "that comes first in natural order")


def _tie_key(value: float) -> float:
    """The score as compared for ties: rounded to 12 significant digits."""
    return float(f"{float(value):.12g}")


def choose_drops(scores: pd.Series, n_drop: int, secondary: pd.Series | None = None) -> list[str]:
    """The ``n_drop`` items with the lowest score; ties broken by :data:`TIE_RULE` (deterministic).

    ``secondary`` is the other score (lower dropped first among tied items); without it ties go by item id.
    """
    from ..responses import _natural_key

    def key(i) -> tuple:
        other = float(secondary[i]) if secondary is not None else 0.0
        return (_tie_key(scores[i]), _tie_key(other), _natural_key(str(i)))

    order = sorted(scores.index, key=key)
    return [str(i) for i in order[:n_drop]]


def ties_at_cut(scores: pd.Series, dropped: Sequence[str]) -> int:
    """Kept items whose score ties (:func:`_tie_key`) with the highest dropped score: the cases the tie rule decided."""
    if not len(dropped):
        return 0
    cut = max(_tie_key(scores[i]) for i in dropped)
    gone = set(map(str, dropped))
    return int(sum(1 for i in scores.index if str(i) not in gone and _tie_key(scores[i]) == cut))


def other_score(items: pd.DataFrame, by: str, theta_range: tuple[float, float]) -> pd.Series:
    """The tie-breaking score: information when ranking by discrimination, discrimination otherwise."""
    return item_scores(items, "information" if by == "discrimination" else "discrimination", theta_range)


def uninformative_items(responses) -> dict[str, str]:
    """Items without information about ability differences, id -> reason, in item order.

    Reasons: "all correct", "all wrong", "one score" (graded: every response the same
    middle score), "no responses". See :meth:`irtexam.responses.ResponseMatrix.separating_items`.
    """
    values = np.asarray(responses.values, dtype=float)
    separating = set(responses.separating_items())
    out: dict[str, str] = {}
    for k, item in enumerate(responses.items):
        if item in separating:
            continue
        row = values[k][~np.isnan(values[k])]
        if row.size == 0:
            out[item] = "no responses"
        elif row[0] == responses.max_score:
            out[item] = "all correct"
        elif row[0] == 0:
            out[item] = "all wrong"
        else:
            out[item] = "one score"
    return out


@dataclass
class PruneResult:
    """Outcome of :func:`prune`.

    decisions: one row per original item: item, step_dropped (<NA> if kept; 0 for items
        without information, removed before the first fit), reason ("kept", "all correct",
        "all wrong", "one score", "no responses", "lowest discrimination", "lowest information"),
        a, information (mean over theta_range) and score from the fit on which the decision
        was taken (the final fit for kept items; NaN for items removed before fitting),
        information_step0.
    steps: one row per round (step 0 = full exam): step, n_items, n_dropped,
        mean_information (eq. 4 averaged over the theta_range grid, on the chosen
        ``scale``), test_information (n_items times that), mean_information_step0_params,
        mean_information_linked, mean_information_refit (all three scales), theta_sd
        (spread of the round's abilities), link_A, link_B (mean/sigma linking to
        step 0), heldout_loglik (mean per held-out response) and its item-mean
        baseline, loglik, rmse, rmse_baseline, n_observed, ties_at_cut (kept items tied with
        the last dropped one, decided by the tie rule). Step 0's n_dropped counts the items
        without information removed before the first fit.
    curves: mean exam information per step on a wide theta grid (index theta, one column per step).
    final: the fit of the pruned exam; responses: the pruned ResponseMatrix.
    uninformative: item id -> reason for the items removed before the first fit.
    warnings: the distinct warnings the fits raised, each with the steps it came from.
    """

    decisions: pd.DataFrame
    steps: pd.DataFrame
    curves: pd.DataFrame
    final: Any
    responses: Any
    stop_reason: str = ""
    settings: dict = field(default_factory=dict)
    uninformative: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)

    @property
    def kept_items(self) -> list[str]:
        """Ids of the items that survived pruning, in original order."""
        return self.decisions.loc[self.decisions["step_dropped"].isna(), "item"].tolist()

    @property
    def dropped_items(self) -> list[str]:
        """Ids of the items pruned (without information first, then by score), in original order."""
        return self.decisions.loc[self.decisions["step_dropped"].notna(), "item"].tolist()

    def summary(self) -> str:
        """A few lines: items before and after, items without information by reason, rounds, the tie rule."""
        n_total, n_kept = len(self.decisions), len(self.kept_items)
        reasons = pd.Series(self.uninformative, dtype=object).value_counts().to_dict()
        lines = [f"pruned {n_total} -> {n_kept} items ({n_total - n_kept} dropped; {self.stop_reason})"]
        lines.append(f"  {len(self.uninformative)} without information removed first"
                     + (f" ({', '.join(f'{n} {r}' for r, n in reasons.items())})" if reasons else ""))
        for row in self.steps.itertuples(index=False):
            if row.step > 0:
                lines.append(f"  step {row.step}: dropped {row.n_dropped} by lowest {self.settings.get('by')}, "
                             f"{row.n_items} left" + (f" ({row.ties_at_cut} tie(s) at the cut)"
                                                      if getattr(row, "ties_at_cut", 0) else ""))
        if self.warnings:
            lines.append(f"  the fits raised {len(self.warnings)} distinct warning(s): see .warnings")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"PruneResult(\n{self.summary()}\n  kept: {_preview(self.kept_items)}\n)"

    def write_exam(self, exam: "str | Path | Sequence", path: str | Path) -> Path:
        """Write the kept items of ``exam`` (a path to an exam JSONL or the items :func:`irtexam.read_exam`
        returns) to ``path``, in the exam's order, with their question texts: the next version of the exam.

        Raises InputError when a kept item is not in the exam; exam items that were not in the
        response matrix (never taken) are left out, and a warning counts them.
        """
        from ..exam.schema import read_exam, write_exam

        items = read_exam(exam) if isinstance(exam, (str, Path)) else list(exam)
        ids = [str(it.id) for it in items]
        kept = set(self.kept_items)
        missing = sorted(kept - set(ids))
        if missing:
            raise InputError(f"{len(missing)} kept item(s) are not in the exam ({_preview(missing)}); "
                             "pass the exam the responses were collected on",
                             path=str(exam) if isinstance(exam, (str, Path)) else None)
        untaken = [i for i in ids if i not in set(self.decisions["item"])]
        if untaken:
            warnings.warn(f"{len(untaken)} exam item(s) have no responses in the pruned matrix and were left "
                          f"out ({_preview(untaken)})", DataWarning, stacklevel=2)
        out = [it for it in items if str(it.id) in kept]
        write_exam(out, path)
        return Path(path)

    def save(self, out_dir: str | Path, response_name: str = "responses_pruned.csv",
             figure: bool = True, save_fit: bool = True, idata: bool = True) -> dict[str, str]:
        """Write decisions.csv, steps.csv, information_curves.csv, the pruned responses,
        the final fit (fit/; ``idata=False``: without fit.nc) and information_evolution.png into ``out_dir``;
        returns the paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"decisions": out / "decisions.csv", "steps": out / "steps.csv",
                 "curves": out / "information_curves.csv", "responses": out / response_name}
        self.decisions.to_csv(paths["decisions"], index=False)
        self.steps.to_csv(paths["steps"], index=False)
        self.curves.to_csv(paths["curves"])
        self.responses.save(paths["responses"])
        if save_fit and hasattr(self.final, "save"):
            paths["fit"] = out / "fit"
            self.final.save(paths["fit"], idata=idata)
        if figure:
            from .. import plotting

            abilities = None
            if "theta" in self.final.examinees:
                last = self.steps.iloc[-1]
                A, B = float(last.get("link_A", 1.0)), float(last.get("link_B", 0.0))
                if self.settings.get("scale") == "refit":
                    A, B = 1.0, 0.0
                abilities = A * self.final.examinees["theta"] + B  # on the curves' scale
            ax = plotting.plot_pruning(self.curves, abilities=abilities,
                                       n_items=dict(zip(self.steps["step"], self.steps["n_items"])))
            paths["figure"] = Path(plotting.save(ax, out / "information_evolution.png"))
        return {k: str(v) for k, v in paths.items()}


def linking_constants(theta_now: np.ndarray, theta_ref: np.ndarray) -> tuple[float, float]:
    """Mean/sigma linking (Marco 1977) on common examinees: theta_ref ~ A theta_now + B.

    A = sd(theta_ref) / sd(theta_now), B = mean(theta_ref) - A mean(theta_now)
    (A = 1 when either spread is zero).
    """
    now, ref = np.asarray(theta_now, dtype=float), np.asarray(theta_ref, dtype=float)
    sd_now, sd_ref = now.std(), ref.std()
    A = float(sd_ref / sd_now) if sd_now > 0 and sd_ref > 0 else 1.0
    return A, float(ref.mean() - A * now.mean())


def link_items(items: pd.DataFrame, A: float, B: float) -> pd.DataFrame:
    """Item parameters on the reference scale: a* = a / A, b* = A b + B, c unchanged.

    P is invariant: a*(A theta + B - b*) = a (theta - b); information transforms as
    I*(theta*) = I(theta) / A^2.
    """
    out = items.copy()
    out["a"] = items["a"] / A
    for column in [col for col in items.columns if col == "b" or (col.startswith("b_") and col[2:].isdigit())]:
        out[column] = A * items[column] + B  # GRM thresholds b_k move like b
    return out


def _grid_mean_information(items: pd.DataFrame, grid: np.ndarray) -> np.ndarray:
    return inf.table_information(grid, items).sum(axis=-1)


SCALES = ("step0", "linked", "refit")


def _round_key(rm, model: str, seed: int, heldout: float, options: dict) -> str:
    """What one round's fit depends on (responses, model, seed, held-out share, fit options), hashed: the
    name of its checkpoint folder."""
    import hashlib

    text = json.dumps([rm.fingerprint(), model, seed, heldout, sorted((k, repr(v)) for k, v in options.items())])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _step_row(step: int, result, items: pd.DataFrame, n_dropped: int, grid: np.ndarray, n_observed: int,
              initial_items: pd.DataFrame, A: float, B: float, scale: str) -> dict:
    """One row of the steps table; ``items`` are the round's own (refit) parameters."""
    per = {
        "refit": _grid_mean_information(items, grid).mean() / len(items),
        "linked": _grid_mean_information(link_items(items, A, B), grid).mean() / len(items),
        # the same items under the step-0 calibration: the effect of the selection alone
        "step0": _grid_mean_information(initial_items.loc[items.index], grid).mean() / len(items),
    }
    theta = result.examinees["theta"].to_numpy(dtype=float) if "theta" in result.examinees else np.array([])
    stats = dict(getattr(result, "fit_stats", {}) or {})
    return {"step": step, "n_items": len(items), "n_dropped": n_dropped,
            "mean_information": float(per[scale]), "test_information": float(per[scale] * len(items)),
            "mean_information_step0_params": float(per["step0"]),
            "mean_information_linked": float(per["linked"]),
            "mean_information_refit": float(per["refit"]),
            "theta_sd": float(theta.std()) if theta.size else None, "link_A": A, "link_B": B,
            # mean log-likelihood per held-out response, and that of the item-mean baseline
            "heldout_loglik": stats.get("heldout_loglik"),
            "heldout_loglik_baseline": stats.get("heldout_loglik_baseline"),
            "loglik": stats.get("loglik"), "rmse": stats.get("rmse"),
            "rmse_baseline": stats.get("rmse_baseline"), "n_observed": n_observed}


def _collect(messages: dict[str, list[int]], step: int, caught: list) -> None:
    """Record the warnings a fit raised (``caught``) under their text, with the step that raised them."""
    for w in caught:
        messages.setdefault(str(w.message), []).append(step)


def _fit_arguments(fit_fn: Callable, options: dict) -> None:
    """Raise InputError for an option ``fit_fn`` does not take (prune passes its extra arguments to the fit)."""
    from ..config import BY_NAME
    from ..irt.fit import fit as irtexam_fit

    params = dict(inspect.signature(fit_fn).parameters)
    keywords = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if keywords and fit_fn is not irtexam_fit:
        return
    names = [name for name, p in params.items() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    if fit_fn is irtexam_fit:  # its keywords are the option table's
        names += [name for name in BY_NAME if name not in names]
    unknown = sorted(set(options) - set(names))
    if unknown:
        known = ", ".join(name for name in names if name not in ("responses", "init", "spec", "options", "output"))
        raise InputError(f"prune() got unknown argument(s) {unknown}; it passes extra arguments to "
                         f"irtexam.fit, which takes: {known}")


def prune(responses, model: str = "3pl", drop: float = 0.1, steps: int = 3, by: str = "discrimination",
          theta_range: tuple[float, float] = (-2.0, 2.0), min_items: int = 5, method: str | None = None,
          seed: int = 0, heldout: float = 0.0, fit_kwargs: dict | None = None,
          curve_grid: np.ndarray | None = None, fit_fn: Callable | None = None,
          scale: str = "step0", progress: bool = True, *, facets: Sequence[str] | str | None = None,
          drop_uninformative: bool = True, checkpoint: str | Path | None = None, **fit_options: Any) -> PruneResult:
    """Iteratively drop the least discriminative (or least informative) items and refit.

    ``responses`` is anything :func:`irtexam.fit` takes (a ResponseMatrix, a path, a wide
    or long DataFrame). ``model``, ``facets``, ``method`` and any other keyword argument
    of :func:`irtexam.fit` (``guessing``, ``identify``, ``residual``, ``chains``, ...) are
    passed through to every fit, so ``prune`` fits the model ``fit`` would; ``method=None``
    uses ``fit``'s default estimator. ``fit_kwargs`` (a dict) is the older spelling.

    Items without information (every examinee answered them alike, or nobody did) are
    removed before the first fit and reported (``drop_uninformative=False`` keeps them).
    ``drop`` is a fraction of the remaining items per round (0 < drop < 1),
    ``steps`` the number of drop rounds (steps + 1 fits). Ties at the cut line follow
    :data:`TIE_RULE`. Each refit is warm started from the previous fit (``init=``).
    ``fit_fn`` defaults to ``irtexam.fit``. See the module doc for the exact rule.
    The fits' warnings are gathered and shown once, as one summary warning.

    Every refit fixes its own ability scale, and dropping items changes it (the
    examinees' theta spread grows as noise items leave, shrinking every a), so
    information of different rounds is not directly comparable. ``scale`` picks
    what the steps table's ``mean_information`` and the curves show:
    "step0" (default): the kept items under the step-0 calibration (the effect
    of the selection alone, on one scale); "linked": each refit put on the step-0
    scale by mean/sigma linking on the examinees (the same in every round);
    "refit": each refit on its own scale (what the paper plots). All three are
    columns of the steps table. On simulated exams with known parameters the
    step-0 measure tracked the true change best (experiments/analytics_simulated.py).

    Write the next exam with ``result.write_exam("exam.jsonl", "exam_pruned.jsonl")``.
    """
    if not 0.0 < float(drop) < 1.0:
        raise InputError(f"drop must be a fraction between 0 and 1 (e.g. 0.1 = 10% per round), not {drop}")
    if int(steps) < 0:
        raise InputError(f"steps must be >= 0, not {steps}")
    if by not in BY_CHOICES:
        raise InputError(f"by must be one of {BY_CHOICES}, not {by!r}")
    if scale not in SCALES:
        raise InputError(f"scale must be one of {SCALES}, not {scale!r}")
    if min_items < 1:
        raise InputError(f"min_items must be >= 1, not {min_items}")
    from ..responses import ResponseMatrix

    responses = ResponseMatrix.coerce(responses, graded=model == "grm")
    if responses.n_items <= min_items and steps > 0:
        raise InputError(f"the exam has {responses.n_items} items, not more than min_items={min_items}; "
                         "nothing can be pruned (lower min_items)")
    default_fit = fit_fn is None
    if default_fit:
        from ..irt.fit import fit as fit_fn
    kwargs = dict(fit_kwargs or {})
    clash = sorted(set(kwargs) & set(fit_options))
    if clash:
        raise InputError(f"{clash} given both as arguments and in fit_kwargs; give each once")
    kwargs.update(fit_options)
    if facets is not None:
        if "facets" in kwargs:
            raise InputError("facets given both as an argument and in fit_kwargs; give it once")
        kwargs["facets"] = facets
    if method is not None:
        kwargs["method"] = method
    _fit_arguments(fit_fn, {**kwargs, "model": model, "seed": seed, "heldout": heldout})

    uninformative = uninformative_items(responses) if drop_uninformative else {}
    rm = responses
    if uninformative:
        if len(uninformative) >= responses.n_items:
            raise InputError("no item separates the examinees (every item was answered alike by all who took "
                             "it); there is nothing to rank")
        rm = responses.subset(items=[i for i in responses.items if i not in uninformative])
    grid = inf.theta_grid(theta_range[0], theta_range[1], 81)
    wide = inf.theta_grid() if curve_grid is None else np.asarray(curve_grid, dtype=float)
    plan = drop_plan(rm.n_items, drop, int(steps), min_items)
    stop_reason = (f"completed {steps} round(s)" if len(plan) == int(steps) else
                   f"stopped after {len(plan)} of {steps} rounds: min_items={min_items} reached")
    caught: dict[str, list[int]] = {}

    def run_fit(rm, step: int, init):
        extra = dict(kwargs)
        if default_fit and step < len(plan) and "se" not in extra:
            extra["se"] = False  # intermediate fits need point estimates only
        folder = None
        if checkpoint is not None and default_fit:
            folder = Path(checkpoint) / f"step{step}-{_round_key(rm, model, seed + step, heldout, extra)}"
            if (folder / "meta.json").exists():
                from ..errors import IrtexamError
                from ..irt.result import load_fit

                try:
                    done = load_fit(folder)  # a round finished before an interruption
                except IrtexamError:
                    pass  # damaged: fit again
                else:  # its warnings count as if the round had run now (a resumed prune counted fewer)
                    for message in done.warnings:
                        caught.setdefault(str(message), []).append(step)
                    return done
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = fit_fn(rm, model=model, seed=seed + step, heldout=heldout, init=init, **extra)
        _collect(caught, step, seen)
        if folder is not None:
            out.save(folder, idata=False)
        return out

    from tqdm.auto import tqdm

    bar = tqdm(total=len(plan) + 1, desc="prune: fits", disable=not progress)
    result = run_fit(rm, 0, None)
    bar.update(1)
    theta0 = result.examinees["theta"].to_numpy(dtype=float)
    examinees = list(result.examinees.index)
    initial = result.items.loc[list(rm.items)]
    info0 = inf.mean_information(initial, theta_range)

    def constants(result) -> tuple[float, float]:
        return linking_constants(result.examinees.loc[examinees, "theta"].to_numpy(dtype=float), theta0)

    def curve(items: pd.DataFrame, A: float, B: float) -> np.ndarray:
        shown = {"refit": items, "linked": link_items(items, A, B),
                 "step0": initial.loc[items.index]}[scale]
        return _curve(shown, wide)

    def decide(items: pd.DataFrame, step, reason: str) -> dict[str, dict]:
        scores = item_scores(items, by, theta_range)
        info = inf.mean_information(items, theta_range)
        return {i: {"item": i, "step_dropped": step, "reason": reason, "a": float(items.loc[i, "a"]),
                    "information": float(info[i]), "score": float(scores[i]),
                    "information_step0": float(info0[i])} for i in items.index}

    decisions: dict[str, dict] = {i: {"item": i, "step_dropped": 0, "reason": why, "a": np.nan,
                                      "information": np.nan, "score": np.nan, "information_step0": np.nan}
                                  for i, why in uninformative.items()}
    items, (A, B) = initial, (1.0, 0.0)
    first = _step_row(0, result, items, len(uninformative), grid, _n_observed(rm), initial, A, B, scale)
    rows = [{**first, "ties_at_cut": 0}]
    curves = {0: curve(items, A, B)}
    for step, n_drop in enumerate(plan, start=1):
        scores = item_scores(items, by, theta_range)
        dropped = choose_drops(scores, n_drop, other_score(items, by, theta_range))
        now = decide(items, step, f"lowest {by}")
        decisions.update({i: now[i] for i in dropped})
        gone = set(dropped)
        rm = rm.subset(items=[i for i in rm.items if i not in gone])  # responses follow their ids
        result = run_fit(rm, step, result)
        bar.update(1)
        items = result.items.loc[list(rm.items)]
        A, B = constants(result)
        row = _step_row(step, result, items, n_drop, grid, _n_observed(rm), initial, A, B, scale)
        rows.append({**row, "ties_at_cut": ties_at_cut(scores, dropped)})
        curves[step] = curve(items, A, B)
    bar.close()
    decisions.update(decide(items, pd.NA, "kept"))
    table = pd.DataFrame([decisions[i] for i in responses.items])
    table["step_dropped"] = table["step_dropped"].astype("Int64")
    curve_df = pd.DataFrame(curves, index=pd.Index(wide, name="theta"))
    fit_warnings = [f"{message} (fits at step {', '.join(map(str, sorted(set(where))))})"
                    for message, where in caught.items()]
    if fit_warnings:
        shown = "\n  ".join(fit_warnings[:5]) + (f"\n  ... {len(fit_warnings) - 5} more" if len(fit_warnings) > 5
                                                 else "")
        warnings.warn(f"prune: {len(plan) + 1} fits raised {len(fit_warnings)} distinct warning(s) "
                      f"(all in PruneResult.warnings):\n  {shown}", IrtexamWarning, stacklevel=2)
    return PruneResult(decisions=table, steps=pd.DataFrame(rows), curves=curve_df, final=result,
                       responses=rm, stop_reason=stop_reason,
                       settings={"model": model, "drop": drop, "steps": steps, "by": by,
                                 "theta_range": list(theta_range), "min_items": min_items,
                                 "method": getattr(result, "method", method), "seed": seed, "heldout": heldout,
                                 "scale": scale, "facets": kwargs.get("facets"),
                                 "drop_uninformative": drop_uninformative, "tie_rule": TIE_RULE},
                       uninformative=uninformative, warnings=fit_warnings)


def _curve(items: pd.DataFrame, grid: np.ndarray) -> np.ndarray:
    """Mean exam information (eq. 4) of ``items`` on ``grid``."""
    return inf.table_information(grid, items).mean(axis=-1)


def _preview(ids: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(map(str, ids[:limit]))
    return shown + (f", ... {len(ids) - limit} more" if len(ids) > limit else "")
