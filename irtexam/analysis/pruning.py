"""Iterative exam pruning (paper Algorithm 1, done right).

Round j (j = 1..steps): take the fit of the current exam Q_{j-1}, drop the
``drop`` fraction of its *remaining* items with the lowest score, giving Q_j,
then refit on Q_j warm-started from the previous parameters. The score is the
discrimination a (``by="discrimination"``, the paper's choice) or the item's
information averaged over a theta range (``by="information"``), which also
penalises items whose difficulty lies outside the abilities of interest.
The response matrix is always subset *by item id*, so responses stay attached
to their items (the paper's code refit on misaligned columns).

Number dropped per round: max(1, round(drop * n_remaining)), never going below
``min_items`` (a round that would is cut short, and the stop is recorded).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..errors import InputError
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


def choose_drops(scores: pd.Series, n_drop: int) -> list[str]:
    """The ``n_drop`` items with the lowest score (ties broken by item id, deterministic)."""
    order = sorted(scores.index, key=lambda i: (float(scores[i]), str(i)))
    return [str(i) for i in order[:n_drop]]


@dataclass
class PruneResult:
    """Outcome of :func:`prune`.

    decisions: one row per original item: item, step_dropped (<NA> if kept), a,
        information (mean over theta_range) and score from the fit on which the
        decision was taken (the final fit for kept items), information_step0.
    steps: one row per round (step 0 = full exam): step, n_items, n_dropped,
        mean_information (eq. 4 averaged over the theta_range grid, on the chosen
        ``scale``), test_information (n_items times that), mean_information_step0_params,
        mean_information_linked, mean_information_refit (all three scales), theta_sd
        (spread of the round's abilities), link_A, link_B (mean/sigma linking to
        step 0), heldout_loglik (mean per held-out response) and its item-mean
        baseline, loglik, rmse, rmse_baseline, n_observed.
    curves: mean exam information per step on a wide theta grid (index theta, one column per step).
    final: the fit of the pruned exam; responses: the pruned ResponseMatrix.
    """

    decisions: pd.DataFrame
    steps: pd.DataFrame
    curves: pd.DataFrame
    final: Any
    responses: Any
    stop_reason: str = ""
    settings: dict = field(default_factory=dict)

    @property
    def kept_items(self) -> list[str]:
        """Ids of the items that survived pruning, in original order."""
        return self.decisions.loc[self.decisions["step_dropped"].isna(), "item"].tolist()

    def save(self, out_dir: str | Path, response_name: str = "responses_pruned.csv",
             figure: bool = True, save_fit: bool = True) -> dict[str, str]:
        """Write decisions.csv, steps.csv, information_curves.csv, the pruned responses,
        the final fit (fit/) and information_evolution.png into ``out_dir``; returns the paths."""
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
            self.final.save(paths["fit"])
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


def prune(responses, model: str = "3pl", drop: float = 0.1, steps: int = 3, by: str = "discrimination",
          theta_range: tuple[float, float] = (-2.0, 2.0), min_items: int = 5, method: str = "map",
          seed: int = 0, heldout: float = 0.0, fit_kwargs: dict | None = None,
          curve_grid: np.ndarray | None = None, fit_fn: Callable | None = None,
          scale: str = "step0", progress: bool = True) -> PruneResult:
    """Iteratively drop the least discriminative (or least informative) items and refit.

    ``drop`` is a fraction of the remaining items per round (0 < drop < 1),
    ``steps`` the number of drop rounds (steps + 1 fits). Each refit is warm
    started from the previous fit (``init=``). ``fit_fn`` defaults to
    ``irtexam.fit``. See the module doc for the exact rule.

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
    if responses.n_items <= min_items and steps > 0:
        raise InputError(f"the exam has {responses.n_items} items, not more than min_items={min_items}; "
                         "nothing can be pruned (lower --min-items)")
    default_fit = fit_fn is None
    if default_fit:
        from ..irt.fit import fit as fit_fn
    kwargs = dict(fit_kwargs or {})
    grid = inf.theta_grid(theta_range[0], theta_range[1], 81)
    wide = inf.theta_grid() if curve_grid is None else np.asarray(curve_grid, dtype=float)
    plan = drop_plan(responses.n_items, drop, int(steps), min_items)
    stop_reason = (f"completed {steps} rounds" if len(plan) == int(steps) else
                   f"stopped after {len(plan)} of {steps} rounds: min_items={min_items} reached")

    def run_fit(rm, step: int, init):
        extra = dict(kwargs)
        if default_fit and step < len(plan) and "se" not in extra:
            extra["se"] = False  # intermediate fits need point estimates only
        return fit_fn(rm, model=model, method=method, seed=seed + step, heldout=heldout,
                      init=init, **extra)

    from tqdm.auto import tqdm

    bar = tqdm(total=len(plan) + 1, desc="prune: fits", disable=not progress)
    rm = responses
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

    def decide(items: pd.DataFrame, step) -> dict[str, dict]:
        scores = item_scores(items, by, theta_range)
        info = inf.mean_information(items, theta_range)
        return {i: {"item": i, "step_dropped": step, "a": float(items.loc[i, "a"]),
                    "information": float(info[i]), "score": float(scores[i]),
                    "information_step0": float(info0[i])} for i in items.index}

    decisions: dict[str, dict] = {}
    items, (A, B) = initial, (1.0, 0.0)
    rows = [_step_row(0, result, items, 0, grid, _n_observed(rm), initial, A, B, scale)]
    curves = {0: curve(items, A, B)}
    for step, n_drop in enumerate(plan, start=1):
        dropped = choose_drops(item_scores(items, by, theta_range), n_drop)
        now = decide(items, step)
        decisions.update({i: now[i] for i in dropped})
        gone = set(dropped)
        rm = rm.subset(items=[i for i in rm.items if i not in gone])  # responses follow their ids
        result = run_fit(rm, step, result)
        bar.update(1)
        items = result.items.loc[list(rm.items)]
        A, B = constants(result)
        rows.append(_step_row(step, result, items, n_drop, grid, _n_observed(rm), initial, A, B, scale))
        curves[step] = curve(items, A, B)
    bar.close()
    decisions.update(decide(items, pd.NA))
    table = pd.DataFrame([decisions[i] for i in responses.items])
    table["step_dropped"] = table["step_dropped"].astype("Int64")
    curve_df = pd.DataFrame(curves, index=pd.Index(wide, name="theta"))
    return PruneResult(decisions=table, steps=pd.DataFrame(rows), curves=curve_df, final=result,
                       responses=rm, stop_reason=stop_reason,
                       settings={"model": model, "drop": drop, "steps": steps, "by": by,
                                 "theta_range": list(theta_range), "min_items": min_items,
                                 "method": method, "seed": seed, "heldout": heldout, "scale": scale})


def _curve(items: pd.DataFrame, grid: np.ndarray) -> np.ndarray:
    """Mean exam information (eq. 4) of ``items`` on ``grid``."""
    return inf.table_information(grid, items).mean(axis=-1)
