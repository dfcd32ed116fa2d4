"""``irtexam tiny score|select|validate``, the held-out experiment (irtexam.bank.tiny_check) on simulated and
real data, and the adaptive test's misfit term on calibration data with missing answers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import irtexam
from irtexam.bank.tiny import score_models
from irtexam.bank.subset import select_subset
from irtexam.bank.tiny_check import split_models, validate_tiny
from irtexam.cli import main
from irtexam.errors import IrtexamError

REAL_RUN = Path(__file__).resolve().parents[1] / "data" / "real_run" / "responses.csv.gz"


@pytest.fixture(scope="module")
def bank_dir(tmp_path_factory):
    """A 2PL bank of 200 items calibrated on 100 simulated models (fit folder), and 30 new models' answers."""
    root = tmp_path_factory.mktemp("tiny")
    responses, truth = irtexam.simulate(200, 130, model="2pl", seed=5)
    old = responses.subset(examinees=list(responses.examinees[:100]))
    irtexam.fit(old, model="2pl", method="em", draws=20).save(root / "fit")
    new = responses.subset(examinees=list(responses.examinees[100:])).to_wide()
    return root, new, truth["theta"][100:]


def test_cli_select_then_score_matches_python(bank_dir, capsys):
    root, new, _ = bank_dir
    assert main(["tiny", "select", str(root / "fit"), "--k", "30", "--rule", "anchors", "--out", str(root / "sub")]) == 0
    subset = pd.read_csv(root / "sub" / "subset.csv")
    assert len(subset) == 30 and subset["weight"].sum() == pytest.approx(1.0)
    assert (root / "sub" / "items.txt").read_text().split() == list(subset["item"])
    new[list(subset["item"])].to_csv(root / "answers.csv")
    code = main(["tiny", "score", str(root / "fit"), str(root / "answers.csv"), "--weights",
                 str(root / "sub" / "subset.csv"), "--out", str(root / "scores.csv")])
    assert code == 0 and "scored 30 models on 30 items" in capsys.readouterr().out
    cli = pd.read_csv(root / "scores.csv", index_col="model")
    py = score_models(root / "fit", new[list(subset["item"])], weights=root / "sub" / "subset.csv")
    pd.testing.assert_frame_equal(cli, py, check_names=False, check_dtype=False)
    assert (cli["accuracy_low"] <= cli["accuracy"]).all() and (cli["accuracy"] <= cli["accuracy_high"]).all()
    # the tiny guide's quick start passes the folder `tiny select --out` wrote, not its subset.csv
    assert main(["tiny", "score", str(root / "fit"), str(root / "answers.csv"), "--weights", str(root / "sub"),
                 "--out", str(root / "scores_folder.csv")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(root / "scores_folder.csv", index_col="model"), cli)
    (root / "empty").mkdir()
    assert main(["tiny", "score", str(root / "fit"), str(root / "answers.csv"), "--weights", str(root / "empty"),
                 "--out", str(root / "s.csv")]) == 2
    assert "a folder without subset.csv" in capsys.readouterr().err


def test_cli_select_auto_validates_the_rules_and_python_agrees(bank_dir, capsys):
    """The default rule: info, anchors and stratified validated on three folds of the bank's 100 calibration
    models; the command prints each rule's error and takes the smallest, as select_subset(..., "auto") does."""
    from irtexam.bank.tiny_check import choose_rule

    root, _, _ = bank_dir
    assert main(["tiny", "select", str(root / "fit"), "--k", "30", "--out", str(root / "sub_auto")]) == 0
    out = capsys.readouterr().out
    rule, table = choose_rule(root / "fit", 30)
    assert list(table["rule"]) == ["info", "anchors", "stratified"] and (table["models"] == 60).all()
    assert table.loc[table["rule"] == rule, "irt_mae"].item() == table["irt_mae"].min()
    assert f"-> {rule}" in out and all(f"{r} {m:.4f}" in out for r, m in zip(table["rule"], table["irt_mae"]))
    written = pd.read_csv(root / "sub_auto" / "subset.csv")
    assert list(written["item"]) == list(select_subset(root / "fit", 30, rule)["item"])
    python = select_subset(root / "fit", 30)
    assert python.attrs["rule"] == rule and python.attrs["rule_requested"] == "auto"
    assert list(python["item"]) == list(written["item"])


@pytest.mark.slow
def test_real_run_auto_rule_picks_representative_items():
    """On the real run the one-dimensional model misfits the pipelines' shared quirks: validated on its own 60
    pipelines, auto prefers anchors or stratified to info at k = 100, and the chosen rule's error is under 0.02."""
    from irtexam.bank.tiny_check import choose_rule

    fitted = irtexam.fit(irtexam.ResponseMatrix.read(REAL_RUN), model="2pl", draws=20, progress=False)
    rule, table = choose_rule(fitted, 100)
    errors = table.set_index("rule")["irt_mae"]
    assert rule in ("anchors", "stratified") and errors[rule] < 0.02 and errors["info"] > errors[rule] + 0.005


def test_cli_errors_are_one_line(bank_dir, capsys):
    root, _, _ = bank_dir
    (root / "bad.csv").write_text("model,nope\nm1,1\n")
    assert main(["tiny", "score", str(root / "fit"), str(root / "bad.csv"), "--out", str(root / "s.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not in the bank" in err
    assert main(["tiny", "select", str(root / "fit"), "--k", "999", "--out", str(root / "s")]) == 2
    assert "k (--k) must be an integer from 1 to the bank's 200 items" in capsys.readouterr().err
    assert main(["tiny", "validate", str(root / "x.csv"), "--k", "a,b", "--out", str(root / "v")]) == 2


def test_weights_cover_the_subset_only(bank_dir, capsys):
    """Answers to the whole bank with the subset's weights: subset_accuracy is the anchor-weighted accuracy on the
    subset (items outside weigh 0, where they weighed 1 and swamped the anchors' shares), and the command says so."""
    root, new, _ = bank_dir
    assert main(["tiny", "select", str(root / "fit"), "--k", "20", "--rule", "anchors", "--out", str(root / "sub20")]) == 0
    subset = pd.read_csv(root / "sub20" / "subset.csv")
    new.to_csv(root / "everything.csv")
    capsys.readouterr()
    assert main(["tiny", "score", str(root / "fit"), str(root / "everything.csv"), "--weights", str(root / "sub20"),
                 "--out", str(root / "all_scores.csv")]) == 0
    assert f"{new.shape[1] - 20} answered item(s) are not in" in capsys.readouterr().out
    scores = pd.read_csv(root / "all_scores.csv", index_col="model")
    weighted = new[list(subset["item"])].to_numpy() @ subset["weight"].to_numpy() / subset["weight"].sum()
    np.testing.assert_allclose(scores["subset_accuracy"].to_numpy(), weighted, atol=1e-12)
    assert (scores["n_answered"] == new.shape[1]).all()


def test_wide_answers_read_like_a_long_tables_responses(bank_dir, capsys):
    root, new, _ = bank_dir
    items = list(new.columns[:12])
    new[items].to_csv(root / "numbers.csv")
    new[items].astype(bool).to_csv(root / "booleans.csv")                      # pandas writes True / False
    new[items].replace({1.0: "yes", 0.0: "no"}).to_csv(root / "words.csv")
    from irtexam.responses import ResponseMatrix

    numbers = ResponseMatrix.read(root / "numbers.csv")
    for name in ("booleans.csv", "words.csv"):
        other = ResponseMatrix.read(root / name)
        assert other.items == numbers.items and np.array_equal(other.values, numbers.values)
    framed = new[items].astype(object)
    framed.iloc[3, 5] = "correct"
    framed.to_csv(root / "bad_word.csv")
    assert main(["tiny", "score", str(root / "fit"), str(root / "bad_word.csv"), "--out", str(root / "s.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"column '{items[5]}'" in err and "'correct'" in err
    assert f"examinee '{framed.index[3]}'" in err and "read as a wide table" in err


def test_split_models_is_a_seeded_partition():
    models = [f"m{i}" for i in range(50)]
    folds = split_models(models, 0.2, seed=3, splits=5)
    held = [m for _, test in folds for m in test]
    assert sorted(held) == sorted(models)                                  # five folds: each model out once
    assert all(set(train).isdisjoint(test) and len(test) == 10 for train, test in folds)
    assert split_models(models, 0.2, seed=3, splits=5) == folds
    with pytest.raises(IrtexamError, match="need at least 10"):
        split_models(models[:11], 0.2, 0)


def test_validate_on_a_simulation_reports_sound_numbers(tmp_path, capsys):
    responses, truth = irtexam.simulate(300, 120, model="2pl", seed=8)
    result = validate_tiny(responses, model="2pl", method="em", ks=(20, 60, 500), rules=("info", "random"),
                           truth_theta=truth["theta"], splits=2, fit_options={"draws": 20})
    table = result.table.set_index(["rule", "k"])
    assert list(table.index) == [("info", 20), ("info", 60), ("random", 20), ("random", 60)]   # 500 > bank
    assert (table["models"] == 48).all()
    info60 = table.loc[("info", 60)]
    assert info60["irt_mae"] < 0.045 and info60["irt_mae"] < table.loc[("info", 20), "irt_mae"]
    assert 0.75 <= info60["irt_cover"] <= 1.0 and 0.8 <= info60["theta_cover"] <= 1.0
    assert abs(info60["theta_slope"] - 1) < 0.15
    # against the truth the slope also carries the calibration's scale (96 models: their sample sd, ~0.9)
    assert 0.5 < info60["theta_slope_truth"] < 1.1
    assert info60["irt_mae"] < info60["subset_mae"]                       # info items are no random sample
    shown = repr(result)                       # a summary and the table, not every array of the bank
    assert len(shown) < 1500 and "2PL bank of 300 items" in shown and "info 60" in shown
    assert repr(result.bank).startswith("TinyBank: 300 items (2PL), a ") and len(repr(result.bank)) < 400
    paths = result.save(tmp_path / "v")
    assert pd.read_csv(paths["validation"]).shape[0] == 4
    assert json.loads(Path(paths["settings"]).read_text())["splits"] == 2


@pytest.mark.slow
def test_cli_validate_prints_the_table(tmp_path, capsys):
    responses, truth = irtexam.simulate(80, 40, model="2pl", seed=2)
    responses.save(tmp_path / "r.csv")
    (tmp_path / "t.json").write_text(json.dumps({"theta": truth["theta"].tolist()}))
    code = main(["tiny", "validate", str(tmp_path / "r.csv"), "--k", "15", "--rules", "info,random", "--method", "em",
                 "--draws", "10", "--truth", str(tmp_path / "t.json"), "--out", str(tmp_path / "v")])
    out = capsys.readouterr().out
    assert code == 0 and "irt_mae" in out and "theta_slope_truth" in out
    assert pd.read_csv(tmp_path / "v" / "validation.csv")["rule"].tolist() == ["info", "random"]


@pytest.mark.slow
def test_real_run_held_out_pipelines():
    """data/real_run (202 items x 60 pipelines), five folds: the IRT prediction from 50 anchor items is within
    0.03 of the whole-exam accuracy on average, better than the plain anchor accuracy, with its 90% intervals
    covering at least 85% of the held-out pipelines (they over-cover: the measured misfit is an upper bound)."""
    result = validate_tiny(REAL_RUN, model="2pl", ks=(25, 50), rules=("anchors", "stratified", "random"), splits=5,
                           fit_options={"draws": 20})
    table = result.table.set_index(["rule", "k"])
    assert (table["models"] == 60).all()
    anchors = table.loc[("anchors", 50)]
    assert anchors["irt_mae"] < 0.03 and anchors["irt_mae"] < anchors["subset_mae"]
    assert (table["irt_cover"] >= 0.85).all() and (table["theta_cover"] >= 0.85).all()
    assert (table.xs(50, level="k")["irt_mae"] < table.xs(25, level="k")["irt_mae"]).all()


def test_adapt_misfit_uses_calibration_models_with_a_few_missing_answers():
    """Every calibration model misses 5% of the items: the misfit term is still measured (it was None, so
    summary["misfit_sd"] was None on such banks)."""
    from irtexam.bank.adapt import ItemBank, misfit_curve, run_cat
    from irtexam.irt import kinds

    rng = np.random.default_rng(3)
    params = kinds.ItemParams(rng.lognormal(0, 0.3, 60), rng.normal(0, 1, 60), np.zeros(60))
    y = (rng.random((60, 30)) < kinds.prob_correct(rng.normal(0, 1, 30), params).T).astype(float)
    y[rng.random(y.shape) < 0.05] = np.nan
    assert np.isnan(y).any(axis=0).mean() > 0.9
    bank = ItemBank.from_params(params)
    bank.calibration = y
    curve = misfit_curve(bank, "mfi", 5)
    assert curve is not None and curve.shape == (6,) and bank.cache[("misfit_examinees", "mfi", 5, "eap", 1, False)] >= 20
    answers = dict(zip(bank.ids, np.nan_to_num(y[:, 0])))
    summary = run_cat(bank, answers.get, max_items=5, selection="mfi").summary
    assert summary["misfit_sd"] == pytest.approx(np.sqrt(curve[5])) and summary["misfit_examinees"] >= 20


def test_a_fitted_bank_has_empirical_bayes_slopes(bank_dir):
    """A fit folder's bank shrinks the fit's slopes toward the bank's own spread (tau below the fit's prior sd
    0.5 on this simulation of a ~ LogNormal(0, 0.35)), keeps b and nearly the slopes' order, and shrink=False keeps the fit's slopes."""
    from irtexam.bank.tiny import TinyBank

    shrunk, raw = TinyBank.coerce(bank_dir[0] / "fit"), TinyBank.coerce(bank_dir[0] / "fit", shrink=False)
    assert shrunk.shrinkage["applied"] and raw.shrinkage is None
    assert 0.1 < shrunk.shrinkage["tau"] < 0.5
    np.testing.assert_allclose(shrunk.params.b, raw.params.b)
    log_shrunk, log_raw = np.log(shrunk.params.a), np.log(raw.params.a)
    assert np.std(log_shrunk) < np.std(log_raw)
    assert stats.spearmanr(log_shrunk, log_raw)[0] > 0.9


def test_fit_reads_a_wide_leaderboard_as_its_long_table(tmp_path, capsys):
    """A leaderboard kept wide (one row per model, one column per question) fits as its long table does."""
    responses, _ = irtexam.simulate(40, 30, model="2pl", seed=11)
    wide = responses.to_wide()
    wide.index.name = "model"
    wide.to_csv(tmp_path / "wide.csv")
    responses.save(tmp_path / "long.csv")
    for name in ("wide", "long"):
        assert main(["fit", str(tmp_path / f"{name}.csv"), "--model", "2pl", "--out", str(tmp_path / name)]) == 0
    items = [pd.read_csv(tmp_path / name / "items.csv", index_col=0) for name in ("wide", "long")]
    pd.testing.assert_frame_equal(items[0], items[1])
