""":func:`validate_tiny` answers, for a response table, how far off the scores of a k-item subset are.

It splits the models (seeded, ``holdout`` of them held out, ``splits`` times, pooling the held-out
models), calibrates the bank on the others (``irtexam.fit``, ``method`` as fit's), and for every selection
rule and budget k selects k items (:func:`irtexam.bank.subset.select_subset`), scores the held-out models
from their answers on those items only (:func:`irtexam.bank.tiny.score_models`) and compares with the
full-bank truth:

* accuracy: the held-out model's actual accuracy on all the bank's items it answered, against the IRT
  prediction (``accuracy``), the blend (``accuracy_blend``) and the plain (weighted) subset accuracy
  (``subset``): mean absolute error and the share of 90% intervals that cover the truth;
* ability: the ability scored from all the bank's items (same bank, same EAP) against the k-item ability:
  mean absolute error, 90% coverage, and the slope of the k-item ability on it (OLS; 1 = no squeeze); with
  ``truth_theta`` (a simulation's true abilities) the same slope and coverage against the truth put on the
  bank's scale (:func:`truth_on_bank_scale`: the calibration sets its unit by its own models' abilities).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..errors import IrtexamError
from ..responses import ResponseMatrix
from .subset_rules import RULES, select_by_rule
from .tiny import TinyBank, score_models

DEFAULT_KS = (25, 50, 100, 200)
MIN_TRAIN_MODELS = 10

__all__ = ["TinyValidation", "validate_tiny", "choose_rule", "split_models", "check_metrics", "truth_on_bank_scale",
           "DEFAULT_KS", "AUTO_RULES"]
# the rules ``rule="auto"`` validates (mfi and random were never the best on the leaderboards and the real run
# of docs/guide/tiny.md) and the folds it holds out (each 20% of the models)
AUTO_RULES = ("info", "anchors", "stratified")
AUTO_SPLITS = 3


@dataclass
class TinyValidation:
    """The held-out experiment: ``table`` (one row per rule and k: the metrics of :func:`check_metrics` over
    the held-out models of every split, pooled), ``bank``, ``train`` / ``test`` (the last split's calibration
    and model ids) and ``settings``."""

    table: pd.DataFrame
    bank: TinyBank
    train: list[str]
    test: list[str]
    settings: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        columns = [c for c in ("rule", "k", "models", "irt_mae", "irt_cover", "subset_mae", "theta_slope",
                               "theta_slope_truth") if c in self.table.columns]
        return (f"TinyValidation: {str(self.settings.get('model', '?')).upper()} bank of {self.bank.n_items} items, "
                f"{self.settings.get('splits', 1)} split(s), last split {len(self.train)} calibrating / "
                f"{len(self.test)} held-out models; .table (all columns), .save(DIR)\n"
                + self.table[columns].round(4).to_string(index=False))

    def save(self, directory: str | Path) -> dict[str, str]:
        """Write validation.csv and settings.json into ``directory``."""
        import json

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        self.table.to_csv(out / "validation.csv", index=False)
        (out / "settings.json").write_text(json.dumps({**self.settings, "train": self.train, "test": self.test},
                                                      indent=1))
        return {"validation": str(out / "validation.csv"), "settings": str(out / "settings.json")}


def split_models(models: Sequence[str], holdout: float, seed: int, splits: int = 1
                 ) -> list[tuple[list[str], list[str]]]:
    """``splits`` (train, test) pairs of model ids, in table order: a seeded permutation cut into folds of
    round(holdout x models) (at least one) held out, each model held out at most once while folds last
    (holdout 0.2, splits 5: five-fold cross-validation); further splits draw a new permutation."""
    if not 0 < holdout < 1:
        raise IrtexamError(f"holdout (--holdout) must be a share between 0 and 1 (e.g. 0.2), got {holdout}")
    if splits < 1:
        raise IrtexamError(f"splits (--splits) must be at least 1, got {splits}")
    n_test = max(1, int(round(holdout * len(models))))
    if len(models) - n_test < MIN_TRAIN_MODELS:
        raise IrtexamError(f"{len(models)} models leave {len(models) - n_test} to calibrate on after holding out "
                           f"{n_test}; need at least {MIN_TRAIN_MODELS}")
    rng = np.random.default_rng(seed)
    folds_per_permutation = len(models) // n_test
    out = []
    for r in range(splits):
        if r % folds_per_permutation == 0:
            perm = rng.permutation(len(models))
        test = set(perm[(r % folds_per_permutation) * n_test:(r % folds_per_permutation + 1) * n_test].tolist())
        out.append(([m for j, m in enumerate(models) if j not in test], [m for j, m in enumerate(models) if j in test]))
    return out


def _cover(low: Any, high: Any, truth: Any) -> float:
    low, high, truth = (np.asarray(v, float) for v in (low, high, truth))
    return float(np.mean((low <= truth) & (truth <= high)))


def _slope(y: Any, x: Any) -> float:
    """OLS slope of y on x."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    xc = x - x.mean()
    return float(xc @ (y - y.mean()) / max(xc @ xc, 1e-300))


def check_metrics(scores: pd.DataFrame, accuracy: pd.Series, theta_full: pd.Series,
                  truth_theta: pd.Series | None = None) -> dict[str, float]:
    """Mean absolute errors (MAE = mean |estimate - truth|), 90% interval coverage (share of models whose
    [low, high] holds the truth) and ability slopes of k-item ``scores`` against the full-bank ``accuracy``
    and ability ``theta_full`` (and ``truth_theta`` when given), all indexed by model."""
    acc = accuracy.reindex(scores.index).to_numpy(float)
    full = theta_full.reindex(scores.index).to_numpy(float)
    out = {}
    for name, col in (("irt", "accuracy"), ("blend", "accuracy_blend"), ("subset", "subset_accuracy")):
        out[f"{name}_mae"] = float(np.mean(np.abs(scores[col].to_numpy(float) - acc)))
        out[f"{name}_cover"] = _cover(scores[f"{col}_low"], scores[f"{col}_high"], acc)
    out["theta_mae"] = float(np.mean(np.abs(scores["theta"].to_numpy(float) - full)))
    out["theta_cover"] = _cover(scores["theta_low"], scores["theta_high"], full)
    out["theta_slope"] = _slope(scores["theta"], full)
    if truth_theta is not None:
        true = truth_theta.reindex(scores.index).to_numpy(float)
        out["theta_slope_truth"] = _slope(scores["theta"], true)
        out["theta_cover_truth"] = _cover(scores["theta_low"], scores["theta_high"], true)
    return out


def validate_tiny(responses: Any, *, model: str = "2pl", method: str = "auto", ks: Sequence[int] = DEFAULT_KS,
                  rules: Sequence[str] = RULES, holdout: float = 0.2, splits: int = 1, seed: int = 0,
                  truth_theta: Any = None, fit_options: dict[str, Any] | None = None, estimator: str = "eap",
                  progress: Callable[[str], None] | None = None) -> TinyValidation:
    """Held-out validation of tiny-benchmark scoring (module doc): split, calibrate, select, score, compare.

    Args:
        responses: the calibrating models' answers (ResponseMatrix, long table path or DataFrame), binary.
        model: the calibration's IRT model (``irtexam.fit``'s).
        method: the calibration's estimator (``irtexam.fit``'s; "auto", the default, takes the joint mode for
            banks of 500 or more items per model and the marginal estimator below).
        ks: the subset sizes (those above the bank's size are skipped).
        rules: selection rules of :data:`irtexam.bank.subset.RULES`.
        holdout: the share of models held out (seeded by ``seed``, which also seeds the random rules).
        splits: how many held-out splits to pool (:func:`split_models`; 5 with holdout 0.2 holds every model
            out once: steadier numbers on small tables, five calibrations).
        truth_theta: true abilities by model id (a Series, mapping, or the ``theta`` list of a
            ``irtexam simulate`` truth file aligned with the table's examinees), for slopes against the truth.
        fit_options: more keywords for ``irtexam.fit`` (e.g. ``{"draws": 50}``).
        estimator: the ability estimator of :func:`irtexam.bank.tiny.score_models` ("eap" or "wle").
        progress: called with a short message after each step.

    Returns:
        A :class:`TinyValidation`; its ``table`` has one row per (rule, k): rule, k, models (held out),
        irt_mae, irt_cover, blend_mae, blend_cover, subset_mae, subset_cover, theta_mae, theta_cover,
        theta_slope (and theta_slope_truth, theta_cover_truth), misfit_sd, blend_weight (mean lambda).
    """
    from ..irt.fit import fit

    rm = ResponseMatrix.coerce(responses)
    if not rm.is_binary:
        raise IrtexamError(f"{rm.source or 'the responses'}: tiny benchmarks need 0/1 answers")
    bad = [r for r in rules if r not in RULES]
    if bad:
        raise IrtexamError(f"unknown selection rule '{bad[0]}'; choose from {', '.join(RULES)}")
    if not ks or any(int(k) < 1 for k in ks):
        raise IrtexamError(f"ks must be positive subset sizes, got {list(ks)}")
    truth = _truth_series(truth_theta, rm)
    say = progress or (lambda message: None)
    pooled: dict[tuple[str, int], list[pd.DataFrame]] = {}
    truths, methods, bank, train, test = [], [], None, [], []
    for r, (train, test) in enumerate(split_models(list(rm.examinees), holdout, seed, splits)):
        calibration = fit(rm.subset(examinees=train), model=model, method=method, seed=seed,
                          **{"progress": False, **(fit_options or {})})
        methods.append(calibration.method)
        bank = TinyBank.coerce(calibration)
        say(f"split {r + 1}/{splits}: calibrated {bank.n_items} items on {len(train)} models ({calibration.method})")
        held = rm.subset(items=list(bank.ids), examinees=test)
        wide = pd.DataFrame(held.values.T, index=list(held.examinees), columns=list(held.items))
        frame = pd.DataFrame({"accuracy": wide.mean(axis=1),
                              "theta_full": score_models(bank, wide, misfit=False, seed=seed,
                                                         estimator=estimator)["theta"]})
        if truth is not None:
            frame["truth"] = truth_on_bank_scale(truth, calibration.examinees["theta"], test)
        truths.append(frame)
        for rule in rules:
            for k in sorted({int(k) for k in ks if int(k) <= bank.n_items}):
                subset = select_by_rule(bank, k, rule, seed=seed + r)
                scores = score_models(bank, wide[list(subset["item"])], seed=seed, estimator=estimator,
                                      weights=dict(zip(subset["item"], subset["weight"])))
                cal = scores.attrs["calibration"]
                scores["misfit_sd"] = float(np.sqrt(cal["misfit_var"])) if cal else float("nan")
                pooled.setdefault((rule, k), []).append(scores)
        say(f"split {r + 1}/{splits}: scored {len(test)} held-out models")
    truth_table = pd.concat(truths)
    rows = []
    for (rule, k), frames in pooled.items():
        scores = pd.concat(frames)
        rows.append({"rule": rule, "k": k, "models": len(scores),
                     **check_metrics(scores, truth_table["accuracy"], truth_table["theta_full"],
                                     truth_table["truth"] if truth is not None else None),
                     "misfit_sd": float(scores["misfit_sd"].mean()), "blend_weight": float(scores["blend_weight"].mean())})
    settings = {"model": model, "method": sorted(set(methods)), "holdout": holdout, "splits": splits, "seed": seed,
                "estimator": estimator, "bank_items": bank.n_items, "ks": [int(k) for k in ks], "rules": list(rules),
                "source": rm.source}
    return TinyValidation(pd.DataFrame(rows), bank, train, test, settings)


def choose_rule(bank: Any, k: int, rules: Sequence[str] = AUTO_RULES, splits: int = AUTO_SPLITS, seed: int = 0,
                progress: Callable[[str], None] | None = None) -> tuple[str, pd.DataFrame]:
    """The selection rule of ``select_subset(..., rule="auto")``: the one among ``rules`` whose ``k`` questions
    predicted held-out models' whole-bank accuracy best on the bank's own calibration models, by
    :func:`validate_tiny` (``splits`` disjoint folds of 20% of the models, each calibrated on the others with the
    bank's model and estimator, 50 draws): the smallest mean absolute error of the IRT prediction, ties to the
    first in ``rules``. Informative questions win where the model fits (simulated banks), representative ones on
    real systems whose shared quirks a one-dimensional model lacks (data/real_run: anchors 0.013 against info
    0.034 at k = 100). ``bank``: a fit (folder or FitResult) or a bank holding its calibration answers.
    Returns the rule and the validation table (one row per rule)."""
    import warnings

    responses, model, method = _calibration_of(bank)
    with warnings.catch_warnings(record=True) as caught:   # each fold's calibration repeats the data's warnings
        warnings.simplefilter("always")
        try:
            result = validate_tiny(responses, model=model, method=method, ks=(int(k),), rules=rules, splits=splits,
                                   seed=seed, fit_options={"draws": 50}, progress=progress)
        except IrtexamError as error:
            raise IrtexamError(f"rule 'auto' validates the rules on the bank's calibration models and cannot here: "
                               f"{error}; choose a rule ({', '.join(RULES)})") from None
    if caught:   # counted, not repeated: the folds see the full fit's data, a fifth of the models fewer
        first = str(caught[0].message)
        warnings.warn(f"the {splits} folds' calibrations gave {len(caught)} warning(s), as a fit of these answers "
                      f"does (first: {first[:100]}{'...' if len(first) > 100 else ''})", caught[0].category,
                      stacklevel=2)
    table = result.table.reset_index(drop=True)
    return str(table.loc[table["irt_mae"].idxmin(), "rule"]), table


def _calibration_of(bank: Any) -> tuple[ResponseMatrix, str, str]:
    """The calibration answers, model and estimator of a bank: a fit's own, or a TinyBank's answers (the model
    read from its parameters, the estimator "auto")."""
    if isinstance(bank, (str, Path)):
        from .itembank import load_fit_checked

        bank = load_fit_checked(bank)
    if getattr(bank, "responses", None) is not None and hasattr(bank, "spec") and hasattr(bank, "method"):
        method = bank.method if bank.method in ("em", "map") else "auto"   # a faceted fit's NUTS: no facets here
        return bank.responses.subset(items=[str(i) for i in bank.items.index]), bank.spec.kind, method
    tb = TinyBank.coerce(bank)
    if tb.calibration is None:
        raise IrtexamError("rule 'auto' validates the rules on the bank's calibration models: pass the fit (folder "
                           f"or FitResult) or a bank with its calibration answers, or choose a rule ({', '.join(RULES)})")
    a = np.asarray(tb.params.a, float)
    c = None if tb.params.c is None else np.asarray(tb.params.c, float)
    model = "3pl" if c is not None and np.ptp(c) > 0 else ("1pl" if np.ptp(a) == 0 else "2pl")
    answers = np.asarray(tb.calibration, float).T
    rm = ResponseMatrix.from_wide(answers, items=list(tb.ids), examinees=[f"m{j}" for j in range(answers.shape[0])])
    return rm, model, "auto"


def truth_on_bank_scale(truth: pd.Series, calibrated: pd.Series, models: Sequence[str]) -> pd.Series:
    """True abilities of ``models`` on the bank's scale: alpha + beta theta, with (alpha, beta) the OLS line of
    the calibration models' fitted abilities ``calibrated`` on their true ones. A calibration fixes its scale
    on its own models (mean 0, sd 1 of their abilities), so a sample of true sd 0.92 makes the bank's unit
    1 / 0.92 of the truth's, and an estimator without any error would show a slope of 1.09 against the raw
    truth."""
    both = pd.concat([truth.rename("t"), calibrated.astype(float).rename("c")], axis=1, join="inner").dropna()
    if len(both) < 3:
        raise IrtexamError("truth theta: fewer than 3 calibration models have a true ability: pass the truth file "
                           "of this simulation")
    beta = _slope(both["c"], both["t"])
    alpha = float(both["c"].mean() - beta * both["t"].mean())
    return alpha + beta * truth.reindex(list(models)).astype(float)


def _truth_series(truth_theta: Any, rm: ResponseMatrix) -> pd.Series | None:
    """True abilities as a Series by model id (a Series/mapping, or a list aligned with the examinees)."""
    if truth_theta is None:
        return None
    if isinstance(truth_theta, pd.Series):
        return truth_theta.astype(float)
    if isinstance(truth_theta, dict):
        return pd.Series(truth_theta, dtype=float)
    values = np.asarray(truth_theta, float)
    if values.shape != (rm.n_examinees,):
        raise IrtexamError(f"truth theta: {values.size} values for {rm.n_examinees} models in "
                           f"{rm.source or 'the responses'}: pass the truth file of this simulation")
    return pd.Series(values, index=list(rm.examinees))


def plot_tiny_validation(table: pd.DataFrame, ax: Any = None, metric: str = "irt_mae", baseline: str = "subset_mae"
                         ) -> Any:
    """Error against the subset size k, one line per selection rule: ``metric`` (default the IRT prediction's
    mean absolute error, solid) and ``baseline`` (default the plain subset accuracy's, dashed, same colour), on a
    log k axis. ``table``: :attr:`TinyValidation.table`. Returns ``ax``."""
    from ..plotting import _axes, _title

    ax = _axes(ax)
    for j, (rule, rows) in enumerate(table.sort_values("k").groupby("rule", sort=False)):
        colour = f"C{j}"
        ax.plot(rows["k"], rows[metric], "o-", color=colour, label=f"{rule}: IRT prediction")
        if baseline:
            ax.plot(rows["k"], rows[baseline], "x--", color=colour, alpha=0.6, label=f"{rule}: subset accuracy")
    ax.set_xscale("log")
    ks = sorted(table["k"].unique())
    ax.minorticks_off()
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_xlabel("items answered (k)")
    ax.set_ylabel("mean absolute error of the whole-bank accuracy" if metric.endswith("mae") else metric)
    ax.legend(fontsize=7, ncol=2)
    return _title(ax, "Held-out models: predicted whole-bank accuracy", f"{int(table['models'].iloc[0])} models held out")
