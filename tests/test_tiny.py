"""Tiny benchmarks (irtexam.bank.tiny, .subset, .tiny_check): hand-computed values, agreement with the
marginal estimator's fixed-item scoring, and recovery of known abilities and accuracies."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

from irtexam.bank.subset import greedy_information, select_subset, write_subset
from irtexam.bank.tiny import TinyBank, score_models
from irtexam.errors import IrtexamError
from irtexam.irt import kinds


def known_bank(n_items: int = 600, n_cal: int = 150, seed: int = 0, c: float = 0.0):
    """A bank of known 2PL (3PL with c) items, its calibration answers and abilities, and a sampler."""
    rng = np.random.default_rng(seed)
    params = kinds.ItemParams(rng.lognormal(0.0, 0.35, n_items), rng.normal(0.0, 1.0, n_items), np.full(n_items, c))
    ids = tuple(f"q{i:04d}" for i in range(n_items))

    def draw(n, seed):
        r = np.random.default_rng(seed)
        theta = r.normal(0.0, 1.0, n)
        y = (r.random((n, n_items)) < kinds.prob_correct(theta, params)).astype(float)
        return theta, y

    theta_cal, y_cal = draw(n_cal, seed + 1)
    return TinyBank(ids, params, y_cal.T, theta_cal), draw


def test_one_answer_gives_the_quadrature_posterior():
    """theta and accuracy after one right answer on a 3-item bank, against scipy's integrals."""
    params = kinds.ItemParams(np.array([1.2, 0.8, 1.5]), np.array([0.3, -0.5, 1.0]), np.array([0.0, 0.0, 0.2]))
    bank = TinyBank(("x", "y", "z"), params)
    res = score_models(bank, pd.DataFrame({"x": [1.0]}, index=["m"]), misfit=False).iloc[0]

    def p(t, j):
        return float(kinds.prob_correct(np.array([t]), params)[0, j])

    post = lambda t: stats.norm.pdf(t) * p(t, 0)                           # noqa: E731
    z = integrate.quad(post, -8, 8)[0]
    mean = integrate.quad(lambda t: t * post(t), -8, 8)[0] / z
    sd = np.sqrt(integrate.quad(lambda t: (t - mean) ** 2 * post(t), -8, 8)[0] / z)
    unseen = integrate.quad(lambda t: (p(t, 1) + p(t, 2)) * post(t), -8, 8)[0] / z
    assert res["theta"] == pytest.approx(mean, abs=1e-3)
    assert res["theta_sd"] == pytest.approx(sd, abs=1e-3)
    assert res["accuracy"] == pytest.approx((1.0 + unseen) / 3, abs=1e-4)
    assert res["subset_accuracy"] == 1.0 and res["n_answered"] == 1
    assert res["accuracy_low"] < res["accuracy"] < res["accuracy_high"]


def test_all_items_answered_gives_the_observed_accuracy():
    bank, draw = known_bank(60, 20)
    _, y = draw(5, 9)
    res = score_models(bank, pd.DataFrame(y, columns=bank.ids), misfit=False)
    np.testing.assert_allclose(res["accuracy"], y.mean(axis=1), atol=1e-12)
    np.testing.assert_allclose(res["accuracy_low"], y.mean(axis=1), atol=1e-12)
    np.testing.assert_allclose(res["accuracy_blend"], y.mean(axis=1), atol=1e-9)


def test_abilities_agree_with_the_marginal_estimator_on_fixed_items():
    """EAP on the grid = fit(method='em', fixed_items=...) EAP, on 40 items x 80 models."""
    import irtexam

    responses, truth = irtexam.simulate(40, 80, model="2pl", seed=4)
    items = pd.DataFrame({"a": truth["a"], "b": truth["b"], "c": 0.0}, index=list(responses.items))
    fitted = irtexam.fit(responses, model="2pl", method="em", fixed_items=items, draws=20)
    ours = score_models(items, responses, misfit=False)
    theirs = fitted.examinees["theta"].reindex(ours.index)
    assert np.mean(np.abs(ours["theta"] - theirs)) < 0.015           # em's quadrature is coarser than the grid
    assert np.max(np.abs(ours["theta"] - theirs)) < 0.05
    assert np.corrcoef(ours["theta"], theirs)[0, 1] > 0.999


def test_recovery_of_accuracy_and_ability_from_100_items():
    """Known bank of 600 items, 400 new models answer 100 info-selected items: the predicted whole-bank
    accuracy is within 0.03 on average, its 90% intervals and the abilities' cover 84-96%, no squeeze."""
    bank, draw = known_bank()
    theta, y = draw(400, 11)
    subset = select_subset(bank, 100, "info")
    cols = [bank.ids.index(i) for i in subset["item"]]
    res = score_models(bank, pd.DataFrame(y[:, cols], columns=list(subset["item"])))
    truth = y.mean(axis=1)
    assert np.mean(np.abs(res["accuracy"] - truth)) < 0.03
    assert np.mean(np.abs(res["accuracy"] - truth)) < 0.6 * np.mean(np.abs(res["subset_accuracy"] - truth))
    assert 0.84 <= np.mean((res["accuracy_low"] <= truth) & (truth <= res["accuracy_high"])) <= 0.96
    assert 0.84 <= np.mean((res["theta_low"] <= theta) & (theta <= res["theta_high"])) <= 0.96
    assert abs(np.polyfit(theta, res["theta"], 1)[0] - 1) < 0.06
    assert abs(np.mean(res["accuracy"] - truth)) < 0.01                       # no bias


def test_random_subset_accuracy_interval_covers_and_blend_weighs_it():
    bank, draw = known_bank()
    _, y = draw(300, 12)
    subset = select_subset(bank, 60, "random", seed=3)
    cols = [bank.ids.index(i) for i in subset["item"]]
    res = score_models(bank, pd.DataFrame(y[:, cols], columns=list(subset["item"])))
    truth = y.mean(axis=1)
    cover = np.mean((res["subset_accuracy_low"] <= truth) & (truth <= res["subset_accuracy_high"]))
    assert 0.84 <= cover <= 0.97
    assert ((res["blend_weight"] >= 0) & (res["blend_weight"] <= 1)).all()
    between = np.minimum(res["accuracy"], res["subset_accuracy"]) - 1e-12 <= res["accuracy_blend"]
    assert (between & (res["accuracy_blend"] <= np.maximum(res["accuracy"], res["subset_accuracy"]) + 1e-12)).all()


def test_greedy_information_by_hand():
    """Two grid points of weight 1/2; items informing one point each: the second pick is the other point's."""
    info = np.array([[4.0, 3.0, 0.0], [0.0, 0.0, 1.0]])
    g = np.array([0.5, 0.5])
    # after item 0: the objective is 0.5 / 5 + 0.5 / 1; adding 1 -> 0.5/8 + 0.5 = 0.5625, adding 2 -> 0.1 + 0.25
    np.testing.assert_array_equal(greedy_information(info, g, 2), [0, 2])


def test_rules_info_spreads_items_and_anchor_weights_are_cluster_shares():
    bank, _ = known_bank()
    info, mfi = select_subset(bank, 50, "info"), select_subset(bank, 50, "mfi")
    assert info["b"].std() > 1.15 * mfi["b"].std()
    tails = np.quantile(bank.thetas, [0.05, 0.95])                          # the calibration models' range

    def test_info(table):
        return kinds.information(tails, kinds.ItemParams(*(table[c].to_numpy() for c in "abc"))).sum(axis=1)

    assert (test_info(info) > test_info(mfi)).all()                          # more at both ends of the range
    assert len(set(info["item"])) == 50
    anchors = select_subset(bank, 20, "anchors")
    assert anchors["weight"].sum() == pytest.approx(1.0)
    assert (anchors["weight"] * bank.n_items).round(6).apply(float.is_integer).all()
    assert anchors["weight"].is_monotonic_decreasing
    with pytest.raises(IrtexamError, match="choose one of"):
        select_subset(bank, 5, "best")
    with pytest.raises(IrtexamError, match="k .--k. must be"):
        select_subset(bank, 0, "info")


def test_write_subset_writes_an_exam_and_lm_eval_samples(tmp_path):
    from irtexam.exam.schema import ExamItem, read_exam, write_exam

    ids = [f"mmlu/{j}" for j in range(8)]
    bank = TinyBank(tuple(ids), kinds.ItemParams(np.ones(8), np.linspace(-1, 1, 8), np.zeros(8)))
    exam = tmp_path / "exam.jsonl"
    write_exam([ExamItem(i, f"question {i}?", ["a", "b"], 0) for i in ids], exam)
    written = write_subset(select_subset(bank, 3, "random", seed=1), tmp_path / "sub", exam=exam)
    chosen = (tmp_path / "sub" / "items.txt").read_text().split()
    assert [item.id for item in read_exam(written["exam"])] == chosen
    samples = json.loads((tmp_path / "sub" / "lm_eval_samples.json").read_text())
    assert samples == {"mmlu": sorted(int(i.split("/")[1]) for i in chosen)}
    with pytest.raises(IrtexamError, match="not in this exam"):
        write_exam([ExamItem("other", "q?", ["a", "b"], 0)], exam)
        write_subset(select_subset(bank, 3, "random"), tmp_path / "sub2", exam=exam)


def test_bad_answers_get_one_line_errors(tmp_path):
    bank, _ = known_bank(20, 12)
    with pytest.raises(IrtexamError, match="not in the bank"):
        score_models(bank, pd.DataFrame({"zz": [1.0]}))
    path = tmp_path / "answers.csv"
    path.write_text("model,q0001,q0002\nm1,1,0\nm2,1,maybe\n")
    with pytest.raises(IrtexamError, match=r"answers.csv, row 2, column 'q0002': response 'maybe'.*examinee 'm2'"):
        score_models(bank, path)
    with pytest.raises(IrtexamError, match="prior_sd"):
        score_models(bank, pd.DataFrame({"q0001": [1.0]}), prior_sd=0)


def test_wide_and_long_files_score_the_same(tmp_path):
    bank, draw = known_bank(30, 12)
    _, y = draw(4, 5)
    wide = pd.DataFrame(y[:, :10], columns=bank.ids[:10], index=pd.Index([f"m{i}" for i in range(4)], name="model"))
    wide.iloc[0, 3] = np.nan
    wide.to_csv(tmp_path / "wide.csv")
    long = wide.stack().rename("response").reset_index().rename(columns={"model": "examinee", "level_1": "item"})
    long.to_csv(tmp_path / "long.csv", index=False)
    a, b = score_models(bank, tmp_path / "wide.csv"), score_models(bank, tmp_path / "long.csv")
    pd.testing.assert_frame_equal(a.sort_index(), b.sort_index())
    assert a.loc["m0", "n_answered"] == 9


def test_item_draws_integrate_the_answered_items():
    """Draws equal to the point estimates change nothing; spread draws widen the ability posterior."""
    bank, draw = known_bank(40, 12)
    _, y = draw(30, 6)
    answers = pd.DataFrame(y[:, :20], columns=bank.ids[:20])
    point = score_models(bank, answers, misfit=False)
    stacked = kinds.ItemParams(*(np.repeat(np.asarray(v)[None], 5, axis=0) for v in bank.params))
    same = TinyBank(bank.ids, bank.params, draws=stacked)
    np.testing.assert_allclose(score_models(same, answers, misfit=False, item_draws=True)["theta"], point["theta"])
    rng = np.random.default_rng(1)
    spread = kinds.ItemParams(stacked.a * np.exp(rng.normal(0, 0.3, stacked.a.shape)),
                              stacked.b + rng.normal(0, 0.5, stacked.b.shape), stacked.c)
    wide = score_models(TinyBank(bank.ids, bank.params, draws=spread), answers, misfit=False, item_draws=True)
    assert wide["theta_sd"].mean() > point["theta_sd"].mean()


def test_wle_by_hand_and_without_shrinkage():
    """One right answer on a 2PL item: Warm's estimate solves 1.5 (1 - P) = 0.5 P, P = 3/4, theta = b + logit(3/4) / a;
    on 100 info items the WLE's slope on the true ability is closer to 1 than the EAP's (which shrinks)."""
    params = kinds.ItemParams(np.array([1.3, 1.0]), np.array([0.4, 0.0]), np.zeros(2))
    one = score_models(TinyBank(("x", "y"), params), pd.DataFrame({"x": [1.0]}), estimator="wle", misfit=False)
    assert one["theta"].iloc[0] == pytest.approx(0.4 + np.log(3) / 1.3, abs=2e-3)
    info = 1.3 ** 2 * 0.75 * 0.25
    assert one["theta_sd"].iloc[0] == pytest.approx(1 / np.sqrt(info), rel=1e-2)
    bank, draw = known_bank(1500, 200)
    theta, y = draw(600, 11)
    subset = select_subset(bank, 100, "info")
    answers = pd.DataFrame(y[:, [bank.ids.index(i) for i in subset["item"]]], columns=list(subset["item"]))
    slope = {est: np.polyfit(theta, score_models(bank, answers, estimator=est)["theta"], 1)[0] for est in ("eap", "wle")}
    assert abs(slope["wle"] - 1) < 0.03 and abs(slope["wle"] - 1) < abs(slope["eap"] - 1)
    with pytest.raises(IrtexamError, match="eap or wle"):
        score_models(bank, answers, estimator="mle")


def test_misfit_is_measured_on_calibration_models_with_a_few_missing_answers():
    """Every calibration model misses 5% of the items: the calibration numbers are still there (models with
    at least 90% answered), and the misfit on data drawn from the bank's own items is small."""
    from irtexam.bank.tiny import calibration_errors

    bank, _ = known_bank(300, 120)
    cal = bank.calibration.copy()
    cal[np.random.default_rng(2).random(cal.shape) < 0.05] = np.nan
    holed = TinyBank(bank.ids, bank.params, cal, bank.thetas)
    answered = np.zeros(bank.n_items, bool)
    answered[:60] = True
    result = calibration_errors(holed, answered, np.ones(bank.n_items))
    assert result is not None and result["models"] == 120
    assert np.sqrt(result["misfit_var"]) < 0.01 and np.sqrt(result["subset_bias2"]) < 0.02
    assert calibration_errors(TinyBank(bank.ids, bank.params, cal[:, :9]), answered, np.ones(bank.n_items)) is None


def test_shrink_slopes_recovers_the_slope_distribution_and_removes_the_winners_curse():
    """Items of known log a ~ N(-0.1, 0.35^2) estimated with noise sd 0.15 under the fit's N(0, 0.5^2) prior
    (posterior modes and normal draws): the estimated (mu, tau) recover the truth, and the 100 items of largest
    estimated a, over-estimated by the prior's mode, are unbiased after shrinking."""
    from irtexam.bank.tiny import shrink_slopes

    rng = np.random.default_rng(3)
    n, noise, s0 = 3000, 0.15, 0.5
    true = rng.normal(-0.1, 0.35, n)
    obs = true + noise * rng.standard_normal(n)
    post_var = 1.0 / (1.0 / noise ** 2 + 1.0 / s0 ** 2)
    mode = post_var * obs / noise ** 2
    draws = mode + np.sqrt(post_var) * rng.standard_normal((4000, n))
    a, info = shrink_slopes(np.exp(mode), np.exp(draws), 0.0, s0)
    assert info["mu"] == pytest.approx(-0.1, abs=0.02) and info["tau"] == pytest.approx(0.35, abs=0.02)
    top = np.argsort(-mode)[:100]
    assert np.mean(mode[top] - true[top]) > 0.05                      # the winner's curse of the fit's modes
    assert abs(np.mean(np.log(a[top]) - true[top])) < 0.02            # gone after shrinking
    # the formula by hand for one item, with the returned (mu, tau)
    v = np.var(draws[:, 0], ddof=1)
    lam = 1 / v - 1 / s0 ** 2
    ell = mode[0] / v / lam
    expected = (lam * ell + info["mu"] / info["tau"] ** 2) / (lam + 1 / info["tau"] ** 2)
    assert np.log(a[0]) == pytest.approx(expected, abs=1e-9)
    # a bank spread wider than the fit's prior (tau 0.7 > 0.5) keeps the fit's slopes
    wide = rng.normal(0.0, 0.7, n)
    mode = post_var * (wide + noise * rng.standard_normal(n)) / noise ** 2
    same, info = shrink_slopes(np.exp(mode), np.exp(mode + np.sqrt(post_var) * rng.standard_normal((500, n))), 0.0, s0)
    assert not info["applied"] and info["tau"] > s0 and np.array_equal(same, np.exp(mode))


def test_truth_on_the_bank_scale_is_the_calibration_line():
    from irtexam.bank.tiny_check import truth_on_bank_scale

    truth = pd.Series([0.0, 1.0, 2.0, -1.0, 0.5], index=list("abcde"))
    calibrated = 0.3 + 1.25 * truth[["a", "b", "c", "d"]]
    out = truth_on_bank_scale(truth, calibrated, ["e", "a"])
    np.testing.assert_allclose(out.to_numpy(), [0.3 + 1.25 * 0.5, 0.3])
    with pytest.raises(IrtexamError, match="truth theta"):
        truth_on_bank_scale(truth, calibrated[:2], ["e"])


def test_bank_reprs_are_one_line_summaries():
    from irtexam.bank.itembank import ItemBank

    bank, _ = known_bank(n_items=400, c=0.2)
    assert repr(bank) == ("TinyBank: 400 items (2PL, c = 0.2), a {:.2f} to {:.2f}, b {:.2f} to {:.2f}; calibrated on "
                          "150 models").format(bank.params.a.min(), bank.params.a.max(), bank.params.b.min(),
                                               bank.params.b.max())
    spread = kinds.ItemParams(bank.params.a, bank.params.b, np.linspace(0.1, 0.3, 400))
    shown = repr(ItemBank.from_params(spread))
    assert shown.startswith("ItemBank: 400 items (3PL), a ") and shown.endswith("c 0.10 to 0.30; 1 posterior draw(s)")
    assert "1PL" in repr(ItemBank.from_params(kinds.ItemParams(np.ones(5), np.zeros(5), np.zeros(5))))


def test_auto_rule_takes_info_on_a_bank_the_model_fits():
    """A bank of true 2PL items with its 150 calibration models' answers: ``rule="auto"`` validates info, anchors
    and stratified on three folds (each calibrated afresh) and, the model being right, informative questions
    predict the held-out accuracy best; the subset is the one that rule selects. Without calibration answers
    "auto" has nothing to validate on and says so."""
    bank, _ = known_bank(n_items=600, n_cal=150, seed=4)
    subset = select_subset(bank, 40)
    rows = pd.DataFrame(subset.attrs["validation"]).set_index("rule")["irt_mae"]
    assert subset.attrs["rule"] == "info" and subset.attrs["rule_requested"] == "auto"
    assert rows["info"] < rows["anchors"] and rows["info"] < rows["stratified"]
    assert list(subset["item"]) == list(select_subset(bank, 40, "info")["item"])
    with pytest.raises(IrtexamError, match="rule 'auto' validates the rules"):
        select_subset(TinyBank(bank.ids, bank.params), 40)


def test_a_model_without_answers_is_scored_by_the_prior_and_said():
    from irtexam.warning_types import DataWarning

    bank, draw = known_bank(n_items=200)
    _, y = draw(3, seed=9)
    answers = pd.DataFrame(y, index=["m0", "m1", "m2"], columns=list(bank.ids))
    answers.loc["m1"] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # no 0 / 0 in its subset accuracy
        with pytest.warns(DataWarning, match="1 model.s. answered none of the bank.s items .e.g. .m1.."):
            scores = score_models(bank, answers, misfit=False)
    assert scores.loc["m1", "n_answered"] == 0 and abs(scores.loc["m1", "theta"]) < 1e-9
    assert scores.loc["m1", "theta_sd"] == pytest.approx(1.0, abs=1e-3)
