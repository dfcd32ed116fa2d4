"""The marginal estimator (Bock-Aitkin EM): published mirt results, hand-computed integrals,
agreement between information estimates, recovery of known parameters, groups and anchors."""

from __future__ import annotations

import json
from dataclasses import replace
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import irtexam
from irtexam.errors import IrtexamError
from irtexam.irt import kinds
from irtexam.irt import examinee_blocks as eb
from irtexam.irt.marginal import steps as mg
from irtexam.irt.marginal import em
from irtexam.irt.marginal import fit as mf
from irtexam.irt.marginal import guessing as marginal_guessing
from irtexam.irt.marginal import information as mi
from irtexam.irt import model as mdl
from irtexam.irt.simulate import simulate
from irtexam.responses import ResponseMatrix

REFS = Path(__file__).resolve().parents[1] / "data" / "refs"

# mirt 1.x, mirt(LSAT7 expanded, 1) (2PL, slope-intercept), and mirt(Science, 1) (graded); published in
# mirt's documentation and the estimation issue
LSAT7_A = np.array([0.988, 1.081, 1.706, 0.765, 0.736])
LSAT7_D = np.array([1.856, 0.808, 1.804, 0.486, 1.855])
LSAT7_LOGLIK = -2658.805
SCIENCE_A = {"Comfort": 1.04, "Work": 1.23, "Future": 2.30, "Benefit": 1.10}
SCIENCE_LOGLIK = -1608.87


def lsat7() -> ResponseMatrix:
    table = pd.read_csv(REFS / "lsat7_patterns.csv")
    rows = np.repeat(table[[f"item{i}" for i in range(1, 6)]].to_numpy(), table["freq"].to_numpy(), axis=0)
    return ResponseMatrix.from_wide(pd.DataFrame(rows, columns=[f"Item.{i}" for i in range(1, 6)]))


def science() -> ResponseMatrix:
    table = pd.read_csv(REFS / "science_392x4.csv").set_index("person")
    return ResponseMatrix.from_wide(table - 1, graded=True)


def quiet_fit(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return irtexam.fit(*args, **kwargs)


# ----------------------------------------------------------------------------- published results
def test_lsat7_marginal_ml_equals_mirt():
    fit = quiet_fit(lsat7(), model="2pl", item_prior="none")
    assert fit.method == "em" and fit.fit_stats["abilities"] == "eap"
    a = fit.items["a"].to_numpy()
    d = -a * fit.items["b"].to_numpy()
    assert np.abs(a - LSAT7_A).max() < 0.02
    assert np.abs(d - LSAT7_D).max() < 0.02
    assert abs(fit.fit_stats["loglik"] - LSAT7_LOGLIK) < 0.01
    assert fit.fit_stats["n_parameters"] == 10
    assert abs(fit.fit_stats["aic"] - (20 - 2 * LSAT7_LOGLIK)) < 0.05


def test_lsat7_default_fit_intervals_contain_mirt_and_own_estimate():
    fit = quiet_fit(lsat7(), model="2pl")  # method auto -> em, default (weak) item priors
    assert fit.method == "em"
    items = fit.items
    inside = ((items["a_low"] <= LSAT7_A) & (LSAT7_A <= items["a_high"])).sum()
    assert inside >= 4
    for name in ("a", "b"):
        assert ((items[f"{name}_low"] <= items[name]) & (items[name] <= items[f"{name}_high"])).all()


def test_science_graded_marginal_ml_equals_mirt():
    fit = quiet_fit(science(), model="grm", item_prior="none")
    for item, value in SCIENCE_A.items():
        assert abs(fit.items.loc[item, "a"] - value) < 0.02, item
    assert abs(fit.fit_stats["loglik"] - SCIENCE_LOGLIK) < 0.01
    default = quiet_fit(science(), model="grm")
    inside = sum(default.items.loc[i, "a_low"] <= v <= default.items.loc[i, "a_high"] for i, v in SCIENCE_A.items())
    assert inside >= 3
    assert ((default.items["a_low"] <= default.items["a"]) & (default.items["a"] <= default.items["a_high"])).all()


# ----------------------------------------------------------------------------- hand-computed values
def test_marginal_loglik_equals_numerical_integral():
    """log L = sum_m log int prod_i P(y_im | t) phi(t) dt, integrated by scipy's adaptive quadrature."""
    from scipy import integrate, stats

    y = np.array([[1, 0, 1, 1], [0, 0, 1, 1], [1, 1, 1, 0]], dtype=float)  # 3 items x 4 examinees
    mask = np.ones_like(y, dtype=bool)
    mask[2, 1] = False
    a, b, c = np.array([0.8, 1.5, 1.1]), np.array([-0.5, 0.3, 1.0]), np.array([0.2, 0.1, 0.25])
    spec = mdl.ModelSpec(kind="3pl", item_prior="none")
    columns = mg.item_columns(spec, 1)
    X = mg.to_matrix({"a": np.log(a), "d": -a * b, "c": np.log(c / (1 - c))}, columns)
    expected = 0.0
    for m in range(4):
        def integrand(t: float) -> float:
            p = c + (1 - c) / (1 + np.exp(-a * (t - b)))
            like = np.where(y[:, m] == 1, p, 1 - p)[mask[:, m]].prod()
            return like * stats.norm.pdf(t)
        expected += np.log(integrate.quad(integrand, -10, 10, epsabs=1e-13)[0])
    groups = mg.make_groups(None, 4)
    layout = mg.Layout(free_rows=np.ones(3, bool), n_columns=3, free_mean=groups.free_mean, free_sd=groups.free_sd)
    import jax
    with jax.enable_x64(True):
        import jax.numpy as jnp
        value = mg.marginal_log_posterior(
            layout.flatten(jnp.asarray(X), jnp.zeros(1), jnp.zeros(1)), jnp.asarray(X), jnp.zeros(1), jnp.zeros(1),
            *map(jnp.asarray, eb.response_blocks(y, mask, np.zeros(4, dtype=np.int32))),
            jnp.asarray(mg.quadrature()), {}, layout=layout, columns=columns, spec=spec)
    assert abs(float(value) - expected) < 1e-6


def test_posterior_quantiles_and_eap_by_hand():
    nodes = np.array([-1.0, 0.0, 1.0])
    w = np.array([[0.25, 0.5, 0.25], [0.0, 0.0, 1.0]])
    mean, sd = mf.eap(w, nodes)
    assert np.allclose(mean, [0.0, 1.0]) and np.allclose(sd, [np.sqrt(0.5), 0.0])
    # piecewise-linear CDF: node 0's mass 0.5 spread over [-0.5, 0.5], so the median is 0 and the 0.5
    # quantile of the second examinee's point mass lies in [0.5, 1.5] at 1.0
    q = mf.posterior_quantiles(w, nodes, (0.5, 0.125))
    assert np.allclose(q[:, 0], [0.0, 1.0])
    assert np.isclose(q[0, 1], -1.0)


def test_map_abilities_match_a_grid_search():
    responses, truth = simulate(12, 6, model="2pl", seed=3)
    spec = mdl.ModelSpec(kind="2pl")
    columns = mg.item_columns(spec, 1)
    X = mg.to_matrix({"a": np.log(truth["a"]), "d": -truth["a"] * truth["b"]}, columns)
    y, mask = np.where(responses.observed, responses.values, 0.0), responses.observed
    theta, sd = mf.map_abilities(X, columns, spec, y, mask, np.zeros(6), np.ones(6), np.zeros(6))
    grid = np.linspace(-4, 4, 80001)
    items = kinds.ItemParams(a=truth["a"], b=truth["b"], c=np.zeros(12))
    for m in range(6):
        ll = kinds.cell_loglik(np.broadcast_to(y[:, m], (len(grid), 12)), grid[:, None], kinds.ItemParams(
            a=items.a[None], b=items.b[None], c=items.c[None])).sum(axis=1) - 0.5 * grid ** 2
        assert abs(grid[np.argmax(ll)] - theta[m]) < 2e-4
    assert (sd > 0).all()


# ----------------------------------------------------------------------------- agreement
def test_observed_and_crossproduct_information_agree():
    responses, _ = simulate(20, 1500, model="2pl", seed=5)
    y, mask = np.where(responses.observed, responses.values, 0.0), responses.observed
    spec = mdl.ModelSpec(kind="2pl", item_prior="none")
    exact = em.em_estimate(spec, y, mask)
    assert exact.information == "observed"
    budget = em.EXACT_HESSIAN_BUDGET
    try:
        em.EXACT_HESSIAN_BUDGET = 0.0
        cross = em.em_estimate(spec, y, mask)
    finally:
        em.EXACT_HESSIAN_BUDGET = budget
    assert cross.information == "crossprod"
    ratio = np.sqrt(np.diag(cross.covariance) / np.diag(exact.covariance))
    assert 0.8 < np.median(ratio) < 1.2
    assert np.abs(exact.X - cross.X).max() < 5e-3  # EM to tol without polish vs polished: same mode


def test_louis_low_rank_information_agrees_with_the_exact_one_where_examinees_answer_many_items(monkeypatch):
    """Issue 42: above the exact information's budget, with fewer examinees than parameters, the information is
    each item's complete-data block minus the missing information to second order (LowRankCovariance, sign -1).
    Where both can be computed (250 items x 120 examinees: narrow posteriors) its standard errors equal the exact
    Louis information's; the score cross-product, singular here, gave standard errors several times too wide."""
    responses, _ = simulate(250, 120, model="2pl", seed=6)
    y, mask = np.where(responses.observed, responses.values, 0.0), responses.observed
    spec = mdl.ModelSpec(kind="2pl", item_prior="hierarchical", learn_a_centre=True, log_a_scale=1.0)
    exact = em.em_estimate(spec, y, mask)
    assert exact.information == "observed"
    monkeypatch.setattr(em, "EXACT_HESSIAN_BUDGET", 0.0)
    low = em.em_estimate(spec, y, mask, start=exact.X)
    assert low.information == "louis-low-rank" and isinstance(low.covariance, em.LowRankCovariance)
    ratio = np.sqrt(em.variances(low) / np.diag(exact.covariance))
    assert 0.97 < np.median(ratio) < 1.03 and ratio.min() > 0.85 and ratio.max() < 1.15
    monkeypatch.setattr(em, "LOUIS_EXAMINEE_RATIO", 0)
    cross = em.em_estimate(spec, y, mask, start=exact.X)
    assert cross.information == "crossprod" and np.median(np.sqrt(em.variances(cross) / np.diag(exact.covariance))) > 2


def test_low_rank_louis_covariance_is_the_dense_inverse_and_samples_it():
    """Q = B - V'V by Woodbury (sign -1): its diagonal and its draws are those of the dense inverse."""
    from irtexam.irt.marginal.em import LowRankCovariance
    rng = np.random.default_rng(2)
    n_items, p, rank = 30, 2, 12
    root = rng.normal(size=(n_items, p, p))
    blocks = root @ np.swapaxes(root, 1, 2) + 3.0 * np.eye(p)
    rows = 0.1 * rng.normal(size=(rank, n_items * p))
    dense = -rows.T @ rows
    for i in range(n_items):
        dense[i * p:(i + 1) * p, i * p:(i + 1) * p] += blocks[i]
    assert np.linalg.eigvalsh(dense).min() > 0
    covariance = np.linalg.inv(dense)
    low = LowRankCovariance.from_parts(blocks, rows, sign=-1)
    np.testing.assert_allclose(low.diagonal(), np.diag(covariance), rtol=1e-10)
    draws = low.sample(100_000, np.random.default_rng(3))
    assert np.abs(np.cov(draws.T) - covariance).max() < 0.02 * np.abs(covariance).max()


def test_the_grid_is_refined_where_posteriors_are_narrower_than_its_spacing():
    """Issue 42: 61 nodes 0.2 apart cannot integrate posteriors of sd 0.05 (the rectangle rule's error is
    about 2 exp(-2 pi^2 sd^2 / h^2)): refined_nodes asks for a spacing at the posteriors' sd, and keeps the grid
    where it already resolves them."""
    nodes = mg.quadrature()
    narrow = np.exp(-0.5 * ((nodes[None, :] - np.array([[0.0], [0.5]])) / 0.05) ** 2)
    narrow /= narrow.sum(axis=1, keepdims=True)   # on the coarse grid: all the mass on one node, sd ~0
    assert 241 < mf.refined_nodes(narrow, nodes) <= mf.MAX_NODES   # spacing below 0.05
    wide = np.exp(-0.5 * ((nodes[None, :] - 0.3) / 0.4) ** 2)
    assert mf.refined_nodes(wide / wide.sum(), nodes) == len(nodes)
    fine = mg.quadrature(241)                     # spacing 0.05 = the sd: kept
    resolved = np.exp(-0.5 * ((fine[None, :] - 0.2) / 0.05) ** 2)
    assert mf.refined_nodes(resolved / resolved.sum(), fine) == 241


@pytest.mark.parametrize("kind", ["2pl", "3pl", "1pl", "grm"])
def test_the_expanded_scale_step_leaves_every_probability_unchanged(kind):
    """PX-EM's step moves the reference group's moments (mu, log sigma) into the items: at theta = mu + sigma t'
    every response probability is the one before, the reference group is N(0, 1) again and the other groups'
    moments follow (hand formulas in the docstring)."""
    rng = np.random.default_rng(4)
    spec = mdl.ModelSpec(kind=kind)
    max_score = 2 if kind == "grm" else 1
    columns = mg.item_columns(spec, max_score)
    X = rng.normal(0.0, 0.4, (6, len(columns)))
    mean, log_sd = np.array([0.3, -0.5]), np.array([np.log(1.4), np.log(0.8)])
    location, scale = True, kind != "1pl"
    X2, mean2, log_sd2 = mg.expanded_scale_step(X, mean, log_sd, columns, location, scale)
    mu, sigma = mean[0], np.exp(log_sd[0]) if scale else 1.0
    t = np.linspace(-2, 2, 7)
    kind_object = kinds.get_kind(kind)
    before = kind_object.cell_loglik(mg.from_matrix(X, columns), mu + sigma * t, np.zeros((6, 7)))
    after = kind_object.cell_loglik(mg.from_matrix(X2, columns), t, np.zeros((6, 7)))
    np.testing.assert_allclose(np.asarray(after), np.asarray(before), atol=1e-5)  # float32 cells
    assert mean2[0] == 0.0 and (log_sd2[0] == 0.0 if scale else log_sd2[0] == log_sd[0])
    np.testing.assert_allclose(mean2[1], (mean[1] - mu) / sigma)
    np.testing.assert_allclose(log_sd2[1], log_sd[1] - np.log(sigma))


def test_em_on_a_refined_grid_reports_abilities_on_the_populations_scale():
    """Issue 42: with 1,500 items per examinee every posterior is narrow and plain EM moved the common location of
    the abilities by about (posterior var / prior var) of the remaining distance a cycle: it stopped with the
    abilities 0.072 low on average (their scale is the N(0, 1) population's), 90% coverage 0.64 on the
    sample-standardised truth. With the expanded step the mean EAP is 0 and the abilities sit on the truth."""
    responses, truth = simulate(1500, 100, model="3pl", seed=3)
    fit = quiet_fit(responses, model="3pl", method="em", seed=3)
    assert fit.fit_stats["optimizer"]["nodes"] > mg.N_NODES   # the refined grid
    theta = fit.examinees.reindex(list(responses.examinees))["theta"].to_numpy()
    t_true = (truth["theta"] - truth["theta"].mean()) / truth["theta"].std()
    assert abs(theta.mean()) < 0.01 and abs(np.mean(theta - t_true)) < 0.02
    assert abs(np.polyfit(t_true, theta, 1)[0] - 1) < 0.02


def test_em_mode_has_zero_gradient():
    responses, _ = simulate(15, 800, model="3pl", seed=8)
    y, mask = np.where(responses.observed, responses.values, 0.0), responses.observed
    spec = mdl.ModelSpec(kind="3pl")
    result = em.em_estimate(spec, y, mask, polish=True)
    assert result.info["converged"] and result.info["newton_steps"] >= 1
    import jax
    import jax.numpy as jnp
    with jax.enable_x64(True):
        k = em.kernels(result.columns, spec, result.layout)
        args = (jnp.asarray(result.X), jnp.asarray(result.mean), jnp.asarray(result.log_sd),
                *map(jnp.asarray, eb.response_blocks(y, mask, result.groups.index)),
                jnp.asarray(result.nodes), {kk: jnp.asarray(v) for kk, v in result.hyper.items()})
        grad = k["gradient"](result.layout.flatten(*args[:3]), *args)
        assert float(jnp.abs(grad).max()) < 1e-3


# ----------------------------------------------------------------------------- recovery
def test_recovery_on_the_sample_standardised_scale():
    responses, truth = simulate(25, 3000, model="2pl", seed=11)
    fit = quiet_fit(responses, model="2pl")
    m, s = truth["theta"].mean(), truth["theta"].std()
    a_true, b_true, t_true = truth["a"] * s, (truth["b"] - m) / s, (truth["theta"] - m) / s
    items = fit.items.reindex(list(responses.items))
    ratio = np.exp(np.mean(np.log(items["a"].to_numpy() / a_true)))
    slope = np.polyfit(b_true, items["b"].to_numpy(), 1)[0]
    assert abs(ratio - 1) < 0.05 and abs(slope - 1) < 0.05
    cover_a = np.mean((items["a_low"] <= a_true) & (a_true <= items["a_high"]))
    cover_b = np.mean((items["b_low"] <= b_true) & (b_true <= items["b_high"]))
    ex = fit.examinees.reindex(list(responses.examinees))
    cover_t = np.mean((ex["theta_low"] <= t_true) & (t_true <= ex["theta_high"]))
    assert cover_a >= 0.72 and cover_b >= 0.72  # 25 items: binomial noise around 0.90
    assert 0.85 <= cover_t <= 0.95



def test_slope_prior_pull_warns_above_the_threshold_only_with_the_slope_centre_fixed():
    fixed = mdl.ModelSpec(kind="3pl", item_prior="fixed")
    edge = float(np.exp(mf.SLOPE_PULL_LOG))  # 1.4 above a centre of a = 1
    assert mf.slope_prior_pull(np.full(20, edge * 1.01), fixed) is not None
    assert mf.slope_prior_pull(np.full(20, edge * 0.99), fixed) is None
    assert mf.slope_prior_pull(np.full(20, 0.3), fixed) is None            # low side: not the prior's doing
    # whatever the centres of d and c, only a fixed slope centre pulls; no prior, no pull
    assert mf.slope_prior_pull(np.full(20, 3.0), mdl.ModelSpec(kind="3pl", item_prior="hierarchical")) is not None
    assert mf.slope_prior_pull(np.full(20, 3.0), mdl.ModelSpec(kind="3pl", item_prior="none")) is None
    assert mf.slope_prior_pull(np.full(20, 3.0), replace(fixed, learn_a_centre=True)) is None
    assert mf.slope_prior_pull(np.full(20, 3.0), mdl.ModelSpec(kind="3pl", learn_a_centre=True)) is None  # the em default
    shifted = mdl.ModelSpec(kind="3pl", item_prior="fixed", log_a_loc=float(np.log(2.0)))
    assert mf.slope_prior_pull(np.full(20, 2.5), shifted) is None           # measured from the prior's own centre
    assert mf.slope_prior_pull(np.full(20, 2.0 * edge * 1.01), shifted) is not None


def test_high_slopes_a_fixed_slope_centre_pulls_down_warn_and_the_default_learned_centre_lifts_them():
    a = 2.0 * np.exp(np.random.default_rng(1).normal(0.0, 0.35, 40))
    responses, truth = simulate(40, 1000, model="2pl", seed=2, a=a)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        default = irtexam.fit(responses, model="2pl")
        fixed = irtexam.fit(responses, model="2pl", slope_centre="fixed")
    pulls = [w for w in caught if w.category is irtexam.PriorWarning]
    assert len(pulls) == 1 and "--slope-centre learned" in str(pulls[0].message)
    assert any("median slope" in m for m in fixed.warnings)
    assert not any("median slope" in m for m in default.warnings)
    s = truth["theta"].std()
    ratio = {name: float(np.exp(np.mean(np.log(f.items.reindex(list(responses.items))["a"].to_numpy() / (a * s)))))
             for name, f in (("default", default), ("fixed", fixed))}
    assert ratio["fixed"] < ratio["default"]  # the fixed centre pulls the slopes down
    assert abs(ratio["default"] - 1) < 0.03
    prior = default.fit_stats["item_prior"]
    assert prior["slope_centre"] == "learned" and prior["a_median"] > 1.5  # the learned centre sits near the slopes
    assert fixed.fit_stats["item_prior"]["slope_centre"] == "fixed" and fixed.fit_stats["item_prior"]["a_median"] == 1.0


def test_centre_update_by_hand_and_as_the_normal_normal_fixed_point():
    # mu = (tau sum u + m0 / s0^2) / (n tau + 1 / s0^2), tau = 1 / s^2 for a normal prior of sd s
    assert mg.centre_update(np.array([0.2, 0.4, 0.9]), 1.0, 0.0, 1.0) == pytest.approx(1.5 / 4)
    assert mg.centre_update(np.array([0.2, 0.4, 0.9]), 1 / 0.25, 0.3, 2.0) == pytest.approx(
        (1.5 / 0.25 + 0.3 / 4) / (3 / 0.25 + 1 / 4))
    # iterated with each item's normal-normal mode (estimate e_i, se_i) it converges to the marginal-likelihood
    # centre: the precision-weighted mean of the estimates with weights 1 / (s^2 + se_i^2) (flat hyperprior)
    rng = np.random.default_rng(0)
    e, se, s = rng.normal(0.5, 0.4, 50), rng.uniform(0.1, 0.8, 50), 0.5
    mu = 0.0
    for _ in range(500):
        modes = (e / se ** 2 + mu / s ** 2) / (1 / se ** 2 + 1 / s ** 2)
        mu = mg.centre_update(modes, 1 / s ** 2, 0.0, 1e6)
    w = 1 / (s ** 2 + se ** 2)
    assert mu == pytest.approx(np.sum(w * e) / np.sum(w), abs=1e-8)


def test_update_centres_by_hand_for_each_prior():
    """update_centres: each learned centre from its own column of the free items, with the prior's precision at
    the current centre: 1 / s^2 for log a (s = log_a_scale) and d (s = b_scale), kappa m (1 - m) for logit c
    (m = sigmoid(mu_c)); anchors (rows not free) left out; a spec that learns only mu_a moves only mu_a."""
    spec = mdl.ModelSpec(kind="3pl", item_prior="hierarchical", learn_a_centre=True, n_choices=5, c_concentration=16)
    columns = ("a", "d", "c")
    X = np.array([[0.1, -1.0, -1.5], [0.5, 0.5, -2.0], [0.3, 2.0, -1.0], [9.0, 9.0, 9.0]])
    free = np.array([True, True, True, False])
    current = {"mu_a": 0.0, "mu_d": 0.0, "mu_c": -1.2}
    out = mg.update_centres(X, free, current, columns=columns, spec=spec)
    assert out["mu_a"] == pytest.approx((0.9 / 0.25 + 0.0) / (3 / 0.25 + 1.0))
    assert out["mu_d"] == pytest.approx((1.5 / 4) / (3 / 4 + 1 / 4))        # hyperprior N(0, b_scale^2)
    m = 1 / (1 + np.exp(1.2))
    tau = 16 * m * (1 - m)
    assert out["mu_c"] == pytest.approx((tau * -4.5 + np.log(0.2 / 0.8)) / (3 * tau + 1.0))
    only_slope = mdl.ModelSpec(kind="3pl", item_prior="fixed", learn_a_centre=True)
    assert set(mg.update_centres(X, free, {"mu_a": 0.0}, columns=columns, spec=only_slope)) == {"mu_a"}


def test_a_learned_slope_centre_needs_the_marginal_estimator_or_a_joint_mode_without_guessing():
    """The 2PL's joint mode learns it (as it does by itself on saturated leaderboards); the 3PL's joint mode and NUTS
    refuse it in one line (the 3PL's guessing collapses with it: benchmarks/results/leaderboard_3pl_ridge.txt)."""
    responses, _ = simulate(10, 100, model="2pl", seed=3)
    fit = irtexam.fit(responses, model="2pl", method="map", slope_centre="learned", draws=20)
    assert fit.fit_stats["item_prior"]["slope_centre"] == "learned"
    with pytest.raises(irtexam.IrtexamError, match="slope_centre='learned'.*method='em'.*without guessing"):
        irtexam.fit(responses, model="3pl", method="map", slope_centre="learned")
    with pytest.raises(irtexam.IrtexamError, match="slope_centre='learned'.*method='em'"):
        irtexam.fit(responses, model="2pl", method="nuts", slope_centre="learned")
    with pytest.raises(irtexam.IrtexamError, match="slope_centre must be one of"):
        irtexam.fit(responses, model="2pl", slope_centre="floating")

# ----------------------------------------------------------------------------- groups and anchors
def test_two_groups_recover_the_second_groups_mean_and_sd():
    rng = np.random.default_rng(4)
    n = 2500
    theta = np.concatenate([rng.normal(0, 1, n), rng.normal(0.6, 1.3, n)])
    a, b = np.exp(rng.normal(0, 0.3, 30)), rng.normal(0, 1, 30)
    responses, _ = simulate(30, 2 * n, model="2pl", seed=4, a=a, b=b, theta=theta)
    labels = ["ref"] * n + ["focal"] * n
    fit = quiet_fit(responses, model="2pl", groups=labels)
    focal = fit.fit_stats["population"]["focal"]
    assert abs(focal["mean"] - 0.6) < 3 * focal["mean_se"] + 0.02
    assert abs(focal["sd"] - 1.3) < 3 * focal["sd_se"] + 0.02
    assert fit.fit_stats["population"]["ref"]["estimated"] is False
    assert set(fit.examinees["group"]) == {"ref", "focal"}


def test_fixed_items_stay_at_their_bank_values_and_place_the_group():
    rng = np.random.default_rng(6)
    a, b = np.exp(rng.normal(0, 0.3, 20)), rng.normal(0, 1, 20)
    theta = rng.normal(0.5, 1.2, 4000)
    responses, _ = simulate(20, 4000, model="2pl", seed=6, a=a, b=b, theta=theta)
    bank = pd.DataFrame({"a": a[:8], "b": b[:8], "c": 0.0}, index=list(responses.items)[:8])
    fit = quiet_fit(responses, model="2pl", fixed_items=bank)
    held = fit.items.loc[bank.index]
    assert np.allclose(held["a"], bank["a"]) and np.allclose(held["b"], bank["b"])
    population = fit.fit_stats["population"]["all"]
    assert abs(population["mean"] - 0.5) < 0.1 and abs(population["sd"] - 1.2) < 0.1
    assert fit.fit_stats["anchors"] == list(bank.index)


# ----------------------------------------------------------------------------- choices and errors
def test_auto_picks_em_without_facets_and_the_joint_mode_refuses_flat_priors():
    from irtexam.irt.fit import resolve_method

    assert resolve_method("auto", None, 10) == "em"
    assert resolve_method("auto", ["llm"], 10) == "nuts"
    assert resolve_method("auto", ["llm"], 200) == "map"
    responses, _ = simulate(10, 50, model="2pl", seed=1)
    with pytest.raises(IrtexamError, match="needs method='em'"):
        irtexam.fit(responses, model="2pl", method="map", item_prior="none")
    with pytest.raises(IrtexamError, match="method='em'"):
        irtexam.fit(responses, model="2pl", method="map", groups=["x"] * 50)


def test_em_fit_saves_loads_and_feeds_the_consumers(tmp_path):
    responses, _ = simulate(12, 300, model="3pl", seed=2)
    fit = quiet_fit(responses, model="3pl", heldout=0.1)
    assert "heldout_loglik" in fit.fit_stats
    out = fit.save(tmp_path / "fit")
    meta = json.loads((out / "meta.json").read_text())
    assert meta["method"] == "em" and {"loglik", "aic", "bic"} <= set(meta["fit_stats"])
    again = irtexam.load_fit(out)
    assert np.allclose(again.items["a"], fit.items["a"])
    info = again.information(np.linspace(-3, 3, 7), draws=20)
    assert info.shape == (20, 7, 12) and np.isfinite(info).all()
    assert again.predictive_draws(10).shape == (10, 12, 300)


# ----------------------------------------------------------------------------- fit folders
def test_saving_over_a_fit_replaces_it_whole_and_a_mixed_folder_is_refused(tmp_path):
    responses, _ = simulate(8, 40, model="2pl", seed=3, facets={"llm": 2, "icl": 2})
    faceted = quiet_fit(responses, model="2pl", facets=["llm", "icl"], method="map", draws=20)
    plain = quiet_fit(responses, model="2pl", draws=20)
    folder = tmp_path / "fit"
    faceted.save(folder)
    assert (folder / "facets.csv").exists()
    plain.save(folder)  # the earlier fit's facets.csv and contrasts.csv must not survive
    assert not (folder / "facets.csv").exists() and not (folder / "contrasts.csv").exists()
    assert irtexam.load_fit(folder).method == "em"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".fit.") and not p.name.endswith(".lock")]
    faceted.save(tmp_path / "other")
    (folder / "facets.csv").write_bytes((tmp_path / "other" / "facets.csv").read_bytes())
    with pytest.raises(IrtexamError, match="mixes two fits"):
        irtexam.load_fit(folder)
    (folder / "facets.csv").unlink()
    (folder / "items.csv").write_text((folder / "items.csv").read_text()[:-40])
    with pytest.raises(IrtexamError, match="does not match meta.json"):
        irtexam.load_fit(folder)
    (tmp_path / "notafit").mkdir()
    (tmp_path / "notafit" / "data.csv").write_text("x")
    with pytest.raises(IrtexamError, match="not written by `irtexam fit`.*holds data.csv"):
        plain.save(tmp_path / "notafit")
    assert (tmp_path / "notafit" / "data.csv").read_text() == "x"   # issue 41: the user's file untouched


@pytest.mark.parametrize("kind, grouped, complete", [("3pl", False, False), ("grm", False, False), ("1pl", False, False),
                                                     ("2pl", True, False), ("3pl", False, True), ("grm", True, True)])
def test_louis_information_equals_the_full_hessian(kind, grouped, complete):
    """Louis' identity (the estimator's information) against JAX differentiating the marginal posterior twice;
    ``complete``: no missing cell, and the pair counts' shortcut for complete data (node_pair_counts)."""
    import jax
    import jax.numpy as jnp
    from functools import partial

    responses, _ = simulate(5, 240, model=kind, seed=2, missing=0.0 if complete else 0.1)
    max_score = responses.max_score if kind == "grm" else 1
    y, mask = np.where(responses.observed, responses.values, 0.0), responses.observed
    spec = mdl.ModelSpec(kind=kind)
    groups = mg.make_groups(["r"] * 120 + ["f"] * 120, 240) if grouped else None
    result = em.em_estimate(spec, y, mask, max_score=max_score, groups=groups, se=False, polish=False)
    with jax.enable_x64(True):
        def arguments(max_cells: int) -> tuple:
            return (jnp.asarray(result.X), jnp.asarray(result.mean), jnp.asarray(result.log_sd),
                    *map(jnp.asarray, eb.response_blocks(y, mask, result.groups.index, max_score, max_cells)),
                    jnp.asarray(result.nodes), {k: jnp.asarray(v) for k, v in result.hyper.items()})

        # the responses in 35 blocks of 7 examinees (the last padded with 5 who answered nothing): the sums over
        # blocks (lax.scan, reverse mode through jax.checkpoint) equal the one-block computation
        args, single = arguments(5 * 7), arguments(10**9)
        assert args[3].shape == (35, 7, 5) and single[3].shape == (1, 240, 5)
        # jitted: run eagerly, each of the many small operations compiles on its own (4x the time on a cold cache)
        louis = jax.jit(partial(mi.louis_hessian, layout=result.layout, columns=result.columns, spec=spec,
                                complete=complete))(*args)
        if complete:  # the shortcut equals the general route (which the other cases check against jax.hessian)
            general = jax.jit(partial(mi.louis_hessian, layout=result.layout, columns=result.columns, spec=spec))(*single)
            assert float(jnp.abs(louis - general).max()) < 1e-10 * float(jnp.abs(general).max())
            return
        assert not bool(mask.all())
        full = jax.jit(jax.hessian(partial(mg.marginal_log_posterior, layout=result.layout, columns=result.columns,
                                           spec=spec)))(result.layout.flatten(*args[:3]), *args)
        assert louis.shape == full.shape == (result.layout.size,) * 2
        assert float(jnp.abs(louis - full).max()) < 1e-8 * float(jnp.abs(full).max())


def test_blocks_of_examinees_give_the_one_block_results():
    """The kernels take the responses a block of examinees at a time (one byte a cell): E-step weights, counts
    and log-likelihood, the score cross-product and the score vectors equal the one-block computation, and the
    padding of the last block adds nothing (graded items, missing cells, two groups)."""
    import jax
    import jax.numpy as jnp

    responses, _ = simulate(6, 101, model="grm", seed=3, missing=0.2)
    y, mask = np.where(responses.observed, responses.values, 0.0), responses.observed
    spec = mdl.ModelSpec(kind="grm")
    groups = mg.make_groups(["r"] * 50 + ["f"] * 51, 101)
    result = em.em_estimate(spec, y, mask, max_score=responses.max_score, groups=groups, se=False)
    with jax.enable_x64(True):
        k = em.kernels(result.columns, spec, result.layout)
        head = (jnp.asarray(result.X), jnp.asarray(result.mean), jnp.asarray(result.log_sd))
        outputs = {}
        for cells in (10**9, 6 * 8):
            blocks, block_groups = eb.response_blocks(y, mask, groups.index, responses.max_score, cells)
            assert blocks.dtype == np.int8 and int((blocks >= 0).sum()) == int(mask.sum())
            data = (*head, jnp.asarray(blocks), jnp.asarray(block_groups), jnp.asarray(result.nodes))
            counts, ll, mass, w_e_step = k["e_step"](*data)
            w, ll_posterior = k["posterior"](*data)
            # the E-step returns the weights of a single block (the end of a small fit), none of several
            assert (w_e_step is None) == (blocks.shape[0] > 1)
            if w_e_step is not None:
                np.testing.assert_array_equal(np.asarray(w_e_step), np.asarray(w))
            assert float(ll_posterior) == pytest.approx(float(ll), abs=1e-9)
            np.testing.assert_allclose(np.asarray(mass), mg.group_node_mass(np.asarray(w)[:101], groups.index, 2),
                                       rtol=1e-10)
            items, pop = k["marginal_scores"](*data)
            outputs[cells] = (np.asarray(w)[:101], np.asarray(counts), float(ll), np.asarray(k["crossprod"](*data)),
                              np.asarray(items)[:101], np.asarray(pop)[:101], np.asarray(mass), blocks.shape)
            assert np.all(np.asarray(w)[101:] == 0) and np.all(np.asarray(items)[101:] == 0)
    one, many = outputs[10**9], outputs[48]
    assert one[-1] == (1, 101, 6) and many[-1] == (13, 8, 6)
    for a, b in zip(one[:-1], many[:-1]):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(one[0].sum(axis=1), 1.0)
    assert abs(one[2] - result.loglik) < 1e-8


def test_low_rank_covariance_equals_the_dense_inverse_and_samples_it():
    """Many items (over DENSE_COVARIANCE_PARAMETERS): Q^-1 with Q = B + S'S by Woodbury, never dense."""
    from irtexam.irt.marginal.em import LowRankCovariance
    rng = np.random.default_rng(0)
    n_items, p, n_examinees = 40, 3, 25
    root = rng.normal(size=(n_items, p, p))
    blocks = root @ np.swapaxes(root, 1, 2) + 0.5 * np.eye(p)
    scores = rng.normal(size=(n_examinees, n_items * p))
    dense = scores.T @ scores
    for i in range(n_items):
        dense[i * p:(i + 1) * p, i * p:(i + 1) * p] += blocks[i]
    covariance = np.linalg.inv(dense)
    low = LowRankCovariance.from_parts(blocks, scores)
    assert np.allclose(low.diagonal(), np.diag(covariance), rtol=1e-10)
    assert low.diagonal() is low.diagonal()  # computed once: every reader of the fit shares it
    draws = low.sample(100_000, np.random.default_rng(1))
    assert np.abs(np.cov(draws.T) - covariance).max() < 0.02 * np.abs(covariance).max()


def test_a_fit_with_many_items_uses_the_low_rank_covariance(monkeypatch):
    import warnings

    from irtexam.irt.marginal import em
    responses, _ = irtexam.simulate(60, 300, model="2pl", seed=4)
    monkeypatch.setattr(em, "EXACT_HESSIAN_BUDGET", 1)   # the crossprod information, as for large exams
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dense = irtexam.fit(responses, model="2pl", method="em", draws=4000, seed=1)
        monkeypatch.setattr(em, "DENSE_COVARIANCE_PARAMETERS", 10)
        low = irtexam.fit(responses, model="2pl", method="em", draws=4000, seed=1)
    assert np.array_equal(dense.items["a"], low.items["a"])
    ratio = low.items["a_sd"] / dense.items["a_sd"]
    assert abs(np.median(ratio) - 1) < 0.03 and ratio.between(0.85, 1.15).all()


def test_many_items_in_many_blocks_of_examinees_fit_with_the_low_rank_covariance(monkeypatch):
    """Issue 42: every fit with more than DENSE_COVARIANCE_PARAMETERS free item parameters and more than one block
    of examinees ended in ZeroDivisionError in over_blocks (the rows of the population scores, (n_blocks, B, 0),
    reshaped with -1). Both thresholds lowered so that a small fit takes that path: it runs, and its intervals
    equal those of the one-block fit."""
    from irtexam.irt.marginal import em
    responses, _ = irtexam.simulate(40, 120, model="2pl", seed=5)
    monkeypatch.setattr(em, "EXACT_HESSIAN_BUDGET", 1)
    monkeypatch.setattr(em, "DENSE_COVARIANCE_PARAMETERS", 10)
    one = quiet_fit(responses, model="2pl", method="em", draws=2000, seed=1)
    monkeypatch.setattr(eb, "BLOCK_CELLS", 40 * 16)   # 16 examinees a block: 8 blocks, the last one padded
    assert eb.response_blocks(np.zeros((40, 120)), np.ones((40, 120), bool), np.zeros(120, np.int32))[0].shape[0] == 8
    many = quiet_fit(responses, model="2pl", method="em", draws=2000, seed=1)
    np.testing.assert_allclose(many.items["a"], one.items["a"], rtol=1e-6)
    np.testing.assert_allclose(many.items["a_sd"], one.items["a_sd"], rtol=1e-6)


# ----------------------------------------------------------------------------- guessing the exam cannot inform
def _easy_exam(shift: float, seed: int = 1) -> ResponseMatrix:
    """40 items x 1000 examinees, c = 0.2, b ~ N(shift, 1) (experiments/easy_exam_guessing.py's exams)."""
    rng = np.random.default_rng(seed)
    a, b, theta = np.exp(rng.normal(0, 0.35, 40)), rng.normal(shift, 1, 40), rng.normal(0, 1, 1000)
    return simulate(40, 1000, model="3pl", seed=seed, a=a, b=b, c=np.full(40, 0.2), theta=theta)[0]


def test_an_exam_too_easy_to_inform_guessing_says_so():
    """Proportion correct 0.96. The default (guessing_centre='auto') tries the learned centre, finds the responses
    carry under 5% of the c's precision (complete-data share), refits with the centre held at 1/4 and says so once.
    A fixed c prior warns that the c's are its own (data share under 6%); a centre learned on request
    (guessing_centre='learned') runs away from the true 0.2 and the warning names guessing_centre='fixed'. An exam of
    simulate's shape (proportion correct about 0.6) keeps the learned centre and does not warn."""
    easy = _easy_exam(-3.5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        default = irtexam.fit(easy, model="3pl", draws=20)
        fixed = irtexam.fit(easy, model="3pl", item_prior="fixed", draws=20)
        learned = irtexam.fit(easy, model="3pl", guessing_centre="learned", draws=20)
    said = [str(w.message) for w in caught if w.category is irtexam.IdentificationWarning
            and "guessing parameters" in str(w.message)]
    assert len(said) == 3
    assert "held at 1/4" in said[0] and "guessing_centre='auto'" in said[0] and "guessing=" in said[0]
    assert "the reported c's are the prior's" in said[1] and "proportion correct 0.96" in said[1]
    assert "guessing_centre='fixed'" in said[2]
    summary = default.fit_stats["item_prior"]
    assert summary["kind"] == "hierarchical" and summary["guessing_centre"] == "fixed" and summary["c_mean"] == 0.25
    assert "less than 5%" in summary["guessing_centre_rule"]
    assert fixed.fit_stats["item_prior"]["c_data_share"] < mf.GUESSING_SHARE_MIN
    assert learned.fit_stats["item_prior"]["c_complete_share"] < mf.GUESSING_CENTRE_MIN_SHARE
    assert learned.items["c"].mean() > 0.3            # the learned centre ran away from the true 0.2 (measured 0.52)
    assert abs(default.items["c"].mean() - 0.25) < 0.01
    normal = _easy_exam(0.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = irtexam.fit(normal, model="3pl", draws=20)
    assert not [w for w in caught if "guessing parameters" in str(w.message)]
    assert fit.fit_stats["item_prior"]["guessing_centre"] == "learned"
    assert fit.fit_stats["item_prior"]["c_complete_share"] > 2 * mf.GUESSING_CENTRE_MIN_SHARE
    assert fit.fit_stats["item_prior"]["c_data_share"] > 3 * mf.GUESSING_SHARE_MIN


def test_guessing_centre_auto_holds_the_centre_below_300_responses_per_item():
    """The size half of guessing_centre='auto', on the spec alone, and through fit: a median of 60 responses per
    item holds the c centre at 1/n_choices (the learned centre's small-sample bias: -0.14 at 200 x 60), 300 keeps
    it learned; nothing to decide without a learned c centre."""
    spec = mdl.ModelSpec(kind="3pl", item_prior="hierarchical")
    mask = np.ones((5, 300), dtype=bool)
    assert mf.guessing_centre_by_size(spec, mask)[0].guessing_centre == "learned"
    mask[:3, 240:] = False                                               # median 240 responses per item
    held, reason = mf.guessing_centre_by_size(spec, mask)
    assert held.guessing_centre == "fixed" and "a median of 240 responses per item" in reason
    assert mf.guessing_centre_by_size(replace(spec, item_prior="fixed"), mask) == (replace(spec, item_prior="fixed"),
                                                                                  None)
    assert mf.guessing_centre_by_size(replace(spec, kind="2pl"), mask)[1] is None
    responses, _ = irtexam.simulate(20, 60, model="3pl", seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        small = irtexam.fit(responses, model="3pl", draws=20)
    assert small.fit_stats["item_prior"]["guessing_centre"] == "fixed"
    assert "fewer than 300" in small.fit_stats["item_prior"]["guessing_centre_rule"]
    assert small.fit_stats["item_prior"]["c_mean"] == 0.25
    with pytest.raises(IrtexamError, match="guessing_centre='auto' needs method='em'"):
        irtexam.fit(responses, model="3pl", method="map", guessing_centre="auto")


def test_guessing_complete_data_share_is_the_expected_information_by_finite_differences():
    """J_i, the expected complete-data information of (log a, d, logit c), equals minus the Hessian (central
    differences) of sum_q n_q [P0 log P(x) + (1 - P0) log (1 - P(x))] at x0, P0 = P(x0); the share is then
    1 - tau [(J + T)^{-1}]_cc with the prior's precisions T by hand (log a: 1, d: 1 / 4, logit c: 20 c (1 - c))."""
    from types import SimpleNamespace

    from irtexam.irt.marginal.steps import Layout, quadrature
    rng = np.random.default_rng(4)
    nodes = quadrature()
    X = np.array([[0.2, -0.5, -1.2], [-0.3, 1.0, -0.8]])
    weights = rng.dirichlet(np.ones(nodes.size), size=50)                     # 50 examinees' node posteriors
    mask = np.ones((2, 50), dtype=bool)
    mask[1, :20] = False
    result = SimpleNamespace(X=X, columns=("a", "d", "c"), nodes=nodes, weights=weights, hyper={},
                             layout=Layout(free_rows=np.ones(2, dtype=bool), n_columns=3,
                                           free_mean=np.zeros(1, dtype=bool), free_sd=np.zeros(1, dtype=bool)))
    spec = mdl.ModelSpec(kind="3pl", item_prior="fixed", log_a_scale=1.0)
    share = mf.guessing_complete_data_share(result, spec, mask)

    def prob(x: np.ndarray) -> np.ndarray:
        c = 1 / (1 + np.exp(-x[2]))
        return c + (1 - c) / (1 + np.exp(-(np.exp(x[0]) * nodes + x[1])))

    for i in range(2):
        n = mask[i].astype(float) @ weights
        p0 = prob(X[i])
        f = lambda x: float(np.sum(n * (p0 * np.log(prob(x)) + (1 - p0) * np.log1p(-prob(x)))))  # noqa: E731
        h = 1e-4
        J = np.zeros((3, 3))
        for j in range(3):
            for k in range(3):
                e_j, e_k = np.eye(3)[j] * h, np.eye(3)[k] * h
                J[j, k] = -(f(X[i] + e_j + e_k) - f(X[i] + e_j - e_k) - f(X[i] - e_j + e_k)
                            + f(X[i] - e_j - e_k)) / (4 * h * h)
        c = 1 / (1 + np.exp(-X[i, 2]))
        tau = 20 * c * (1 - c)
        total = J + np.diag([1.0, 0.25, tau])
        assert share[i] == pytest.approx(1 - tau * np.linalg.inv(total)[2, 2], abs=1e-5)
    assert mf.guessing_complete_data_share(result, replace(spec, kind="2pl"), mask) is None
    # the node counts in chunks of items (no float copy of a large mask) equal the one product; complete: column sums
    full = mask.astype(float) @ weights
    assert marginal_guessing.expected_node_counts(mask, np.arange(2), weights, cells_per_chunk=50) == pytest.approx(full)
    assert marginal_guessing.expected_node_counts(mask, np.array([1]), weights, cells_per_chunk=1) == pytest.approx(full[1:])
    complete = np.ones_like(mask)
    assert marginal_guessing.expected_node_counts(complete, np.arange(2), weights) == pytest.approx(complete.astype(float) @ weights)


def test_guessing_data_share_is_one_minus_prior_precision_times_posterior_variance():
    """By hand from the fit's own covariance: w_i = 1 - kappa c_i (1 - c_i) v_i, v_i the variance of logit c_i."""
    responses = _easy_exam(0.0)
    spec = mdl.ModelSpec(kind="3pl", item_prior="fixed", learn_a_centre=True, log_a_scale=1.0)
    result = em.em_estimate(spec, responses.values, ~np.isnan(responses.values), se=True)
    share = mf.guessing_data_share(result, spec)
    column = result.columns.index("c")
    variance = np.diag(result.covariance)[:40 * 3].reshape(40, 3)[:, column]
    c = 1 / (1 + np.exp(-result.X[:, column]))
    assert share == pytest.approx(np.clip(1 - 20 * c * (1 - c) * variance, 0, 1))
    assert mf.guessing_data_share(result, replace(spec, item_prior="none")) is None
    assert mf.guessing_data_share(result, replace(spec, kind="2pl")) is None           # no free c, no share
    assert mf.guessing_data_share(result, replace(spec, guessing=0.2)) is None
