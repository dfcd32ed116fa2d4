"""run_cat trajectories frozen from the if-chain implementation (before the selector / estimator / stopper
objects, issue 25): every selection rule and estimator on a seeded simulated bank gives the same items, the
same abilities, posterior sds and predicted accuracies (to 1e-10) as the code before the change.

Regenerate (only when a change of results is intended): ``python tests/test_adapt_regression.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest

from irtexam.bank.adapt import (DEFAULT_SELECTION, ESTIMATOR_TYPES, ESTIMATORS, SELECTIONS, SELECTOR_TYPES, Estimator,
                                ItemBank, Selector, StopRule, Stopper, run_cat)
from irtexam.cli import build_parser
from irtexam.errors import IrtexamError
from irtexam.irt import kinds

FROZEN = Path(__file__).parent / "data" / "adapt_regression.json"
COLUMNS = ("theta", "theta_sd", "theta_low", "theta_high", "information", "accuracy", "accuracy_sd",
           "accuracy_low", "accuracy_high")
SUMMARY = ("theta", "theta_sd", "theta_low", "theta_high", "accuracy", "accuracy_sd", "accuracy_low",
           "accuracy_high", "items_used", "stop_reason", "misfit_sd", "misfit_examinees", "calls_saved")


def regression_bank(n_items: int = 60, n_draws: int = 5, n_examinees: int = 30, seed: int = 11) -> ItemBank:
    """A 3PL bank with ``n_draws`` perturbed parameter draws and calibration responses simulated from it."""
    rng = np.random.default_rng(seed)
    params = kinds.ItemParams(np.exp(rng.normal(0.3, 0.3, n_items)), rng.normal(0, 1.2, n_items),
                              rng.uniform(0.05, 0.25, n_items))
    draws = kinds.ItemParams(params.a * np.exp(rng.normal(0, 0.1, (n_draws, n_items))),
                             params.b + rng.normal(0, 0.15, (n_draws, n_items)),
                             np.clip(params.c + rng.normal(0, 0.02, (n_draws, n_items)), 0.0, 0.5))
    y = kinds.simulate_responses(rng.normal(0, 1, n_examinees), params, rng).T          # (I, E)
    return ItemBank(tuple(f"q{j}" for j in range(n_items)), params, draws, "regression", y)


CASES: dict[str, dict[str, Any]] = {
    **{f"{s}-eap": {"selection": s} for s in ("mfi", "astrat", "accuracy", "random", "anchors", "stratified")},
    "mfi-map": {"selection": "mfi", "estimator": "map"},
    "stratified-map": {"selection": "stratified", "estimator": "map", "seed": 3},
    "accuracy-randomesque": {"selection": "accuracy", "randomesque": 3, "seed": 2},
    "mfi-randomesque-levels": {"selection": "mfi", "randomesque": 2, "levels": True, "seed": 4},
    "random-map-levels": {"selection": "random", "estimator": "map", "levels": True, "seed": 5},
    "astrat-long": {"selection": "astrat", "max_items": 16, "se_target": 0.2, "min_items": 0},
    "mfi-se-stop": {"selection": "mfi", "se_target": 0.6, "min_items": 3},
    "stratified-no-misfit": {"selection": "stratified", "misfit": False, "seed": 1},
    "stratified-quantiles": {"selection": "stratified", "calibration": False, "seed": 6},
    "accuracy-point": {"selection": "accuracy", "calibration": False, "point": True},
}


def run_case(name: str) -> dict[str, Any]:
    """The frozen quantities of one case: items in order and the numeric columns of every step."""
    options = {"max_items": 10, "min_items": 2, "se_target": 0.3, **CASES[name]}
    bank = regression_bank()
    if not options.pop("calibration", True):
        bank = ItemBank(bank.ids, bank.params, bank.draws, bank.source)      # strata from difficulty quantiles
    if options.pop("point", False):
        bank = bank.point()
    truth = float(np.random.default_rng(len(name)).normal(0, 1))
    answers = dict(zip(bank.ids, kinds.simulate_responses(np.array([truth]), bank.params,
                                                          np.random.default_rng(7))[0]))
    if options.pop("levels", False):
        options["levels"] = {i: ("remember" if j % 3 else "apply") for j, i in enumerate(bank.ids)}
    res = run_cat(bank, answers.get, **options)
    t = res.trajectory
    return {"items": list(t["item"]), **{c: [float(v) for v in t[c]] for c in COLUMNS},
            "summary": {k: res.summary[k] for k in SUMMARY}}


@pytest.fixture(scope="module")
def frozen() -> dict[str, Any]:
    return json.loads(FROZEN.read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_run_cat_matches_frozen_if_chain_results(name, frozen):
    got, want = run_case(name), frozen[name]
    assert got["items"] == want["items"]                       # the same items in the same order
    for column in COLUMNS:
        np.testing.assert_allclose(got[column], want[column], rtol=0, atol=1e-10, equal_nan=True, err_msg=column)
    for key, value in want["summary"].items():
        if isinstance(value, float):
            assert got["summary"][key] == pytest.approx(value, rel=0, abs=1e-10), key
        else:
            assert got["summary"][key] == value, key


def test_frozen_cases_are_not_trivial(frozen):
    """The frozen runs exercise the stops, the misfit term and different item sets per rule."""
    reasons = {v["summary"]["stop_reason"] for v in frozen.values()}
    assert {"max_items", "se_target"} <= reasons
    assert any(v["summary"]["misfit_sd"] for v in frozen.values())
    assert len({tuple(v["items"]) for v in frozen.values()}) >= len(frozen) - 2


def answers_of(bank: ItemBank, theta: float = 0.4) -> dict[str, float]:
    y = kinds.simulate_responses(np.array([theta]), bank.params, np.random.default_rng(3))[0]
    return dict(zip(bank.ids, y))


@pytest.mark.parametrize("selection", SELECTIONS)
@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_rule_objects_give_the_same_run_as_their_names(selection, estimator):
    """run_cat takes the registered objects (and a Stopper) exactly as it takes the option names."""
    bank = regression_bank(40)
    answers = answers_of(bank)
    named = run_cat(bank, answers.get, selection=selection, estimator=estimator, se_target=0.4, max_items=8,
                    min_items=1, seed=2)
    composed = run_cat(bank, answers.get, selection=SELECTOR_TYPES[selection](),
                       estimator=ESTIMATOR_TYPES[estimator](), stopper=Stopper(0.4, 8, 1), seed=2)
    pd.testing.assert_frame_equal(named.trajectory, composed.trajectory)
    assert named.summary == composed.summary
    assert composed.summary["selection"] == selection and composed.summary["estimator"] == estimator


def test_user_selector_estimator_and_stopper():
    """A user's own rules: highest difficulty first, the posterior median, stop after 4 right answers."""

    @dataclass(frozen=True)
    class Hardest(Selector):
        name: ClassVar[str] = "hardest"

        def scores(self, state, bank, theta, *, max_items):
            return np.asarray(bank.params.b, float)

    class Median:
        name = "median"

        def point(self, grid, marginal):
            return float(np.interp(0.5, np.cumsum(marginal), grid))

    @dataclass(frozen=True)
    class FourRight:
        max_items: int = 20

        def stop(self, state, current):
            return "four right" if sum(state.responses) >= 4 else None

    bank = regression_bank(40, n_examinees=5)
    res = run_cat(bank, lambda item: 1.0, selection=Hardest(), estimator=Median(), stopper=FourRight())
    b = np.asarray(bank.params.b)
    assert list(res.trajectory["item"]) == [bank.ids[j] for j in np.argsort(-b)[:4]]
    assert res.summary["stop_reason"] == "four right" and res.summary["items_used"] == 4
    assert res.summary["selection"] == "hardest" and res.summary["estimator"] == "median"
    assert res.summary["misfit_sd"] is None                   # 5 calibration examinees: too few for the curve
    assert isinstance(Median(), Estimator) and isinstance(FourRight(), StopRule)


def test_unknown_rule_names_and_cli_choices():
    bank = regression_bank(20)
    with pytest.raises(IrtexamError, match="unknown selection 'best'; choose one of mfi, astrat"):
        run_cat(bank, lambda item: 1.0, selection="best")
    with pytest.raises(IrtexamError, match="unknown estimator 'mle'; choose one of eap, map"):
        run_cat(bank, lambda item: 1.0, estimator="mle")
    adapt_parser = build_parser("adapt")._subparsers._group_actions[0].choices["adapt"]
    choices = {a.dest: a.choices for a in adapt_parser._actions}
    assert set(choices["selection"]) == set(SELECTIONS) and set(choices["estimator"]) == set(ESTIMATORS)
    defaults = {a.dest: a.default for a in adapt_parser._actions}
    assert defaults["selection"] == DEFAULT_SELECTION and defaults["estimator"] == "eap"


if __name__ == "__main__":
    FROZEN.write_text(json.dumps({name: run_case(name) for name in sorted(CASES)}, indent=1) + "\n")
    print(f"wrote {FROZEN}")
