"""Adaptive testing on a calibrated bank (issue 14): engine, replay CLI, bad input."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import irtexam
from irtexam.bank.adapt import ItemBank, adapt, make_state, predicted_accuracy, run_cat
from irtexam.cli import main
from irtexam.errors import IrtexamError
from irtexam.irt import kinds


def true_bank(n_items: int = 200, seed: int = 0) -> ItemBank:
    """A bank with known 3PL parameters (no estimation error: one 'draw')."""
    rng = np.random.default_rng(seed)
    params = kinds.ItemParams(np.exp(rng.normal(0.3, 0.3, n_items)), rng.normal(0, 1.2, n_items),
                              rng.uniform(0.05, 0.25, n_items))
    return ItemBank(tuple(f"q{j}" for j in range(n_items)), params,
                    kinds.ItemParams(*(np.asarray(v)[None] for v in params)))


def answers_for(bank: ItemBank, theta: float, rng: np.random.Generator) -> dict[str, float]:
    y = kinds.simulate_responses(np.array([theta]), bank.params, rng)[0]
    return dict(zip(bank.ids, y))


def test_cat_recovers_ability_with_fewer_items_than_random():
    bank = true_bank()
    rng = np.random.default_rng(1)
    thetas = rng.normal(0, 1, 15)
    est, used_mfi, used_rand, covered = [], [], [], []
    for m, theta in enumerate(thetas):
        answers = answers_for(bank, theta, rng)
        res = run_cat(bank, answers.get, se_target=0.35, max_items=60, seed=m, selection="mfi")
        est.append(res.summary["theta"])
        used_mfi.append(res.summary["items_used"])
        covered.append(res.summary["theta_low"] <= theta <= res.summary["theta_high"])
        used_rand.append(run_cat(bank, answers.get, se_target=0.35, max_items=60, seed=m,
                                 selection="random").summary["items_used"])
    assert np.corrcoef(est, thetas)[0, 1] > 0.85
    assert np.mean(used_mfi) < 0.8 * np.mean(used_rand)
    assert np.mean(covered) >= 0.7
    res = run_cat(bank, answers.get, se_target=0.35, max_items=60, selection="mfi")
    t = res.trajectory
    assert list(t["step"]) == list(range(1, len(t) + 1)) and t["item"].is_unique
    assert res.summary["calls_saved"] == bank.n_items - res.summary["items_used"]


def test_whole_exam_answered_gives_observed_accuracy():
    bank = true_bank(30)
    answers = answers_for(bank, 0.5, np.random.default_rng(2))
    res = run_cat(bank, answers.get, se_target=1e-6, max_items=30, min_items=0)
    assert res.summary["items_used"] == 30
    observed = np.mean(list(answers.values()))
    assert res.summary["accuracy"] == pytest.approx(observed)
    assert res.summary["accuracy_high"] - res.summary["accuracy_low"] < 1e-6


def test_prediction_mixes_observed_and_predicted():
    bank = true_bank(50)
    state = make_state(bank)
    state.update(0, 1.0)
    state.update(1, 0.0)
    w = state.weights().ravel()
    p = state.p.reshape(-1, 50)
    expected = (1.0 + w @ p[:, 2:].sum(axis=1)) / 50
    assert predicted_accuracy(state)["accuracy"] == pytest.approx(expected)


def test_content_balancing_and_randomesque():
    bank = true_bank(60)
    levels = {i: ("remember" if j % 3 else "apply") for j, i in enumerate(bank.ids)}
    answers = answers_for(bank, 0.0, np.random.default_rng(3))
    res = run_cat(bank, answers.get, se_target=1e-6, max_items=12, levels=levels, randomesque=4, seed=5,
                  selection="mfi")
    counts = res.trajectory["level"].value_counts()
    assert counts["apply"] == 4 and counts["remember"] == 8      # bank shares 1/3, 2/3
    other = run_cat(bank, answers.get, se_target=1e-6, max_items=12, randomesque=4, seed=6, selection="mfi")
    assert list(other.trajectory["item"]) != list(res.trajectory["item"])


def test_bad_options():
    bank = true_bank(20)
    with pytest.raises(IrtexamError, match="se-target"):
        run_cat(bank, lambda i: 1.0, se_target=0.0)
    with pytest.raises(IrtexamError, match="min-items"):
        run_cat(bank, lambda i: 1.0, max_items=3, min_items=5)


@pytest.fixture(scope="module")
def fitdir(tmp_path_factory):
    bank = true_bank(40, seed=4)
    theta = np.random.default_rng(4).normal(0, 1, 120)
    y = kinds.simulate_responses(theta, bank.params, np.random.default_rng(5))
    rm = irtexam.ResponseMatrix.from_wide(y, items=list(bank.ids), examinees=[f"e{m}" for m in range(120)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = irtexam.fit(rm.subset(examinees=list(rm.examinees)[:100]), model="3pl", draws=50)
    out = tmp_path_factory.mktemp("fit")
    result.save(out)
    responses = out / "all_responses.csv"
    rm.save(responses)
    return out, responses, list(rm.examinees)[110]


def test_replay_cli_writes_trajectory_and_summary(fitdir, tmp_path, capsys):
    fit, responses, examinee = fitdir
    out = tmp_path / "adapt"
    code = main(["adapt", str(fit), "--replay", str(responses), "--examinee", examinee, "--se-target", "0.4",
                 "--max-items", "15", "--out", str(out)])
    assert code == 0
    trajectory = pd.read_csv(out / "trajectory.csv")
    assert {"step", "item", "response", "theta", "theta_sd"} <= set(trajectory.columns)
    summary = json.loads((out / "summary.json").read_text())
    for key in ("theta", "theta_low", "theta_high", "accuracy", "accuracy_low", "accuracy_high", "items_used",
                "calls_saved"):
        assert key in summary
    assert summary["theta_low"] <= summary["theta"] <= summary["theta_high"]
    assert summary["accuracy_low"] <= summary["accuracy"] <= summary["accuracy_high"]
    assert summary["items_used"] == len(trajectory) <= 15
    assert summary["calls_saved"] == 40 - summary["items_used"]
    assert "predicted accuracy" in capsys.readouterr().out


def test_python_api_matches_files(fitdir, tmp_path):
    fit, responses, examinee = fitdir
    res = irtexam.adapt(str(fit), replay=str(responses), examinee=examinee, max_items=8, out=tmp_path)
    assert len(res.trajectory) == 8
    assert json.loads((tmp_path / "summary.json").read_text())["theta"] == pytest.approx(res.summary["theta"])


def test_bad_input_one_line_errors(fitdir, tmp_path, capsys):
    fit, responses, examinee = fitdir
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["adapt", str(empty), "--replay", str(responses), "--examinee", examinee, "--out",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "items.csv" in err and "irtexam fit" in err and err.count("\n") == 1
    noparams = tmp_path / "noparams"
    noparams.mkdir()
    pd.DataFrame({"item": ["x"], "foo": [1]}).to_csv(noparams / "items.csv", index=False)
    assert main(["adapt", str(noparams), "--replay", str(responses), "--examinee", examinee, "--out",
                 str(tmp_path / "o")]) == 2
    assert "no item parameter columns" in capsys.readouterr().err
    assert main(["adapt", str(fit), "--replay", str(responses), "--examinee", examinee, "--se-target", "0",
                 "--out", str(tmp_path / "o")]) == 2
    assert "argument --se-target: must be a finite number > 0, got '0'" in capsys.readouterr().err
    other = tmp_path / "other.csv"
    pd.DataFrame({"item": [f"z{j}" for j in range(10)], "examinee": "e", "response": 1}).to_csv(other, index=False)
    assert main(["adapt", str(fit), "--replay", str(other), "--examinee", "e", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "other.csv" in err and "have an id in this exam" in err
    assert main(["adapt", str(fit), "--replay", str(responses), "--examinee", "nobody", "--out",
                 str(tmp_path / "o")]) == 2
    assert "no examinee 'nobody'" in capsys.readouterr().err


def test_anchor_selection_gives_representative_fixed_items(fitdir):
    from irtexam.bank.adapt import anchor_order

    fit, responses, examinee = fitdir
    bank = ItemBank.load(fit, draws=10)
    assert bank.calibration is not None and bank.calibration.shape[0] == bank.n_items
    order = anchor_order(bank.calibration, 8)
    res = irtexam.adapt(bank, replay=str(responses), examinee=examinee, selection="anchors", max_items=8,
                        se_target=1e-6)
    assert list(res.trajectory["item"]) == [bank.ids[j] for j in order]
    assert len(set(order)) == 8


def bank_with_calibration(misfit: float, n_items: int = 80, n_examinees: int = 60, seed: int = 7) -> ItemBank:
    """true_bank items with calibration responses simulated from them; ``misfit`` > 0 adds a second,
    group-specific dimension (half the examinees gain ``misfit`` logits on the less discriminating half
    of the items, the other half lose it), which the unidimensional bank does not model."""
    bank = true_bank(n_items, seed)
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n_examinees)
    p = np.asarray(kinds.prob_correct(theta, bank.params, pairwise=False)).T          # (I, E)
    a = np.asarray(bank.params.a)
    sign = np.where(np.arange(n_examinees) % 2 == 0, 1.0, -1.0)[None, :] * (a < np.median(a))[:, None]
    c = np.asarray(bank.params.c)[:, None]
    core = np.clip((p - c) / (1 - c), 1e-9, 1 - 1e-9)
    shifted = 1 / (1 + np.exp(-(np.log(core / (1 - core)) + misfit * sign)))
    y = (rng.random(p.shape) < c + (1 - c) * shifted).astype(float)
    return ItemBank(bank.ids, bank.params, bank.draws, None, y)


def test_predicted_accuracy_adds_misfit_variance():
    bank = true_bank(50)
    state = make_state(bank)
    for j in range(40):
        state.update(j, float(j % 2))
    plain, wide = predicted_accuracy(state), predicted_accuracy(state, misfit_var=0.03 ** 2)
    assert wide["accuracy"] == pytest.approx(plain["accuracy"])
    assert wide["accuracy_sd"] == pytest.approx(np.sqrt(plain["accuracy_sd"] ** 2 + 0.03 ** 2), rel=1e-6)
    assert wide["accuracy_high"] - wide["accuracy_low"] > plain["accuracy_high"] - plain["accuracy_low"] + 0.02


def test_misfit_curve_measures_misfit_from_calibration_examinees():
    from irtexam.bank.adapt import misfit_curve

    clean, bent = bank_with_calibration(0.0), bank_with_calibration(1.5)
    v_clean = misfit_curve(clean, "mfi", 15)
    v_bent = misfit_curve(bent, "mfi", 15)
    assert v_clean.shape == v_bent.shape == (16,)
    assert np.sqrt(v_clean[5:].mean()) < 0.02                 # data from the bank's own model: no misfit
    assert np.sqrt(v_bent[5:].mean()) > 0.03                  # a second dimension: the model misses it
    assert misfit_curve(bent, "mfi", 15) is v_bent            # cached on the bank
    assert misfit_curve(true_bank(40), "mfi", 15) is None     # no calibration responses: no term
    answers = dict(zip(bent.ids, bent.calibration[:, 0]))
    with_term = run_cat(bent, answers.get, se_target=1e-9, max_items=15, min_items=0, selection="mfi")
    without = run_cat(bent, answers.get, se_target=1e-9, max_items=15, min_items=0, selection="mfi", misfit=False)
    assert with_term.summary["accuracy"] == pytest.approx(without.summary["accuracy"])
    assert with_term.summary["misfit_sd"] == pytest.approx(np.sqrt(v_bent[15]))
    assert with_term.summary["misfit_examinees"] == 60 and without.summary["misfit_sd"] is None
    width = lambda r: r.summary["accuracy_high"] - r.summary["accuracy_low"]    # noqa: E731
    assert width(with_term) > width(without) + 0.02


def test_stratified_selection_is_default_and_draws_one_item_per_stratum():
    from irtexam.bank.adapt import DEFAULT_SELECTION, item_strata

    assert DEFAULT_SELECTION == "stratified"
    bank = bank_with_calibration(0.0)
    answers = dict(zip(bank.ids, bank.calibration[:, 3]))
    runs = [run_cat(bank, answers.get, se_target=1e-9, max_items=12, min_items=0, seed=s, misfit=False)
            for s in (0, 1)]
    strata = item_strata(bank, 12)
    assert len(np.unique(strata)) == 12
    for res in runs:
        assert res.summary["selection"] == "stratified"
        chosen = [bank.ids.index(i) for i in res.trajectory["item"]]
        assert sorted(strata[chosen]) == list(range(12))       # one item from every stratum, largest first
        assert strata[chosen[0]] == 0 and np.sum(strata == 0) >= np.sum(strata == 11)
    assert list(runs[0].trajectory["item"]) != list(runs[1].trajectory["item"])   # random within strata
    # without calibration responses the strata are difficulty quantiles
    plain = true_bank(40)
    b = np.asarray(plain.params.b)
    res = run_cat(plain, answers_for(plain, 0.0, np.random.default_rng(0)).get, se_target=1e-9, max_items=4,
                  min_items=0)
    picked = np.sort(b[[plain.ids.index(i) for i in res.trajectory["item"]]])
    quartiles = np.quantile(b, [0.25, 0.5, 0.75])
    assert list(np.searchsorted(quartiles, picked)) == [0, 1, 2, 3]
