"""IRT fits: recovery of known parameters, estimator agreement, identification, uncertainty, IO, errors."""

from __future__ import annotations

import warnings

import jax
from jax.flatten_util import ravel_pytree
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import irtexam
from irtexam.errors import IrtexamError
from irtexam.irt import model as mdl
from irtexam.irt.laplace import laplace_covariance

FACETS = {"llm": 4, "retriever": 5, "icl": 3}


def corr(x, y) -> float:
    return float(np.corrcoef(np.asarray(x, float), np.asarray(y, float))[0, 1])


def quiet_fit(*args, **kwargs):
    """The joint-mode fits this file tests (``irtexam.fit``'s default is "auto": marginal EM without facets,
    tested in test_irt_marginal.py)."""
    kwargs.setdefault("method", "map")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return irtexam.fit(*args, **kwargs)


@pytest.fixture(scope="module")
def sim_3pl():
    return irtexam.simulate(250, 400, model="3pl", seed=11)


@pytest.fixture(scope="module")
def fit_3pl(sim_3pl):
    return quiet_fit(sim_3pl[0], model="3pl", heldout=0.1)


def test_3pl_recovery(sim_3pl, fit_3pl):
    truth = sim_3pl[1]
    assert corr(fit_3pl.items["b"], truth["b"]) > 0.88  # b noise sd ~0.35 at 400 examinees
    assert corr(fit_3pl.items["a"], truth["a"]) > 0.6
    assert corr(fit_3pl.examinees["theta"], truth["theta"]) > 0.95
    assert np.sqrt(np.mean((fit_3pl.items["c"] - truth["c"]) ** 2)) < 0.12


def test_laplace_intervals_cover_in_the_2pl():
    """90% Laplace intervals contain the true value about 90% of the time where the posterior is near-Gaussian.

    (For the 3PL the b posterior is skewed by the guessing floor and Laplace intervals
    under-cover, about 70% here; use method="nuts" for calibrated 3PL intervals.)
    """
    responses, truth = irtexam.simulate(300, 500, model="2pl", seed=12)
    result = quiet_fit(responses, model="2pl")
    for name, table in (("b", result.items), ("a", result.items), ("theta", result.examinees)):
        inside = ((truth[name] >= table[f"{name}_low"]) & (truth[name] <= table[f"{name}_high"])).mean()
        assert 0.82 < inside < 0.97, (name, inside)


def test_fit_statistics_beat_mean_baseline(fit_3pl):
    stats = fit_3pl.fit_stats
    assert stats["rmse"] < stats["rmse_baseline"]
    assert stats["item_rmse_mean"] < stats["item_rmse_baseline_mean"]
    assert stats["heldout_cells"] == pytest.approx(0.1 * 250 * 400, rel=0.01)
    assert stats["heldout_loglik"] > stats["heldout_loglik_baseline"]
    assert stats["optimizer"]["converged"]


def test_tables_have_the_documented_columns(fit_3pl):
    for column in ("a", "b", "c", "a_sd", "b_sd", "c_sd", "a_low", "a_high", "b_low", "b_high", "c_low", "c_high"):
        assert column in fit_3pl.items.columns
    assert list(fit_3pl.examinees.columns[:4]) == ["theta", "theta_sd", "theta_low", "theta_high"]
    assert (fit_3pl.items["a_low"] < fit_3pl.items["a"]).all() and (fit_3pl.items["a"] < fit_3pl.items["a_high"]).all()
    assert (fit_3pl.items["c"] > 0).all() and (fit_3pl.items["c"] < 1).all() and (fit_3pl.items["a"] > 0).all()
    summary = fit_3pl.summary()
    assert set(summary["parameter"]) >= {"a", "b", "c", "theta"}


def test_2pl_and_1pl_recovery_with_missing_data():
    responses, truth = irtexam.simulate(120, 300, model="2pl", seed=5, missing=0.3)
    result = quiet_fit(responses, model="2pl")
    assert corr(result.items["b"], truth["b"]) > 0.95 and corr(result.items["a"], truth["a"]) > 0.7
    assert (result.items["c"] == 0).all()
    responses, truth = irtexam.simulate(80, 200, model="1pl", seed=6)
    result = quiet_fit(responses, model="1pl")
    assert (result.items["a"] == 1).all()
    assert corr(result.items["b"], truth["b"]) > 0.97


def test_1pl_keeps_the_logit_unit_when_abilities_are_spread_wide():
    # Rasch data with ability sd 2: a = 1 fixes the unit, so the fitted abilities must spread
    # well beyond the unit-sd scale of the other models (the N(0, 1) prior shrinks the MAP
    # abilities: sd 1.5 here), and b stays in logits (a unit-sd 1PL compressed it to slope 0.77).
    rng = np.random.default_rng(21)
    theta = rng.normal(0.0, 2.0, 400)
    responses, truth = irtexam.simulate(60, 400, model="1pl", seed=21, theta=theta)
    result = quiet_fit(responses, model="1pl")
    assert 1.3 < result.examinees["theta"].std() < 2.3
    slope = np.polyfit(truth["b"], result.items["b"].to_numpy(), 1)[0]
    assert 0.85 < slope < 1.15  # no compression of the difficulties
    assert abs(result.examinees["theta"].mean()) < 1e-6


def test_fixed_guessing():
    responses, truth = irtexam.simulate(100, 200, model="3pl", guessing=0.25, seed=8)
    result = quiet_fit(responses, model="3pl", guessing=0.25)
    assert np.allclose(result.items["c"], 0.25) and (result.items["c_sd"] == 0).all()
    assert "c" not in result.params
    assert corr(result.items["b"], truth["b"]) > 0.93


@pytest.fixture(scope="module")
def hierarchical():
    effects = {"llm": [-1.0, -0.3, 0.3, 1.0], "retriever": [-1.2, -0.5, 0.0, 0.6, 1.1], "icl": [-0.5, 0.0, 0.5]}
    responses, truth = irtexam.simulate(150, None, model="3pl", facets=FACETS, seed=21,
                                        facet_effects={k: np.array(v) for k, v in effects.items()})
    return responses, truth, quiet_fit(responses, model="3pl", facets=["llm", "retriever", "icl"])


def test_hierarchical_recovers_facet_levels(hierarchical):
    _, truth, result = hierarchical
    for facet in FACETS:
        levels = result.facets[result.facets["facet"] == facet]
        assert len(levels) == FACETS[facet]
        assert corr(levels["theta"], truth[f"theta_{facet}"]) > 0.95
        # identification: sum-to-zero holds exactly
        assert abs(levels["theta"].sum()) < 1e-6  # exact up to float32 round-off
    assert {"llm", "retriever", "icl"} <= set(result.examinees.columns)


def test_examinee_theta_is_the_sum_of_its_facet_levels(hierarchical):
    responses, _, result = hierarchical
    levels = result.facets.set_index(["facet", "level"])["theta"]
    facets = responses.examinee_facets
    summed = sum(levels.loc[list(zip([f] * len(facets), facets[f]))].to_numpy() for f in FACETS)
    np.testing.assert_allclose(result.examinees["theta"].to_numpy(), summed, atol=1e-6)


def test_contrasts_are_level_differences(hierarchical):
    _, _, result = hierarchical
    levels = result.facets.set_index(["facet", "level"])
    row = result.contrasts[(result.contrasts.facet == "llm") & (result.contrasts.level == "llm2")
                           & (result.contrasts.reference == "llm0")].iloc[0]
    assert row["diff"] == pytest.approx(levels.loc[("llm", "llm2"), "theta"] - levels.loc[("llm", "llm0"), "theta"])
    assert row["low"] < row["diff"] < row["high"] and row["sd"] > 0
    n_pairs = sum(k * (k - 1) for k in FACETS.values())
    assert len(result.contrasts) == n_pairs


def test_reference_identification_pins_first_level():
    responses, truth = irtexam.simulate(100, None, model="2pl", facets={"llm": 3, "retriever": 2}, seed=4)
    result = quiet_fit(responses, model="2pl", facets=["llm", "retriever"], identify="reference")
    first = result.facets.groupby("facet").head(1)
    np.testing.assert_allclose(first["theta"], 0.0, atol=1e-12)
    np.testing.assert_allclose(first["theta_sd"], 0.0, atol=1e-12)
    # differences to the reference level track the truth
    llm = result.facets[result.facets.facet == "llm"]["theta"].to_numpy()
    true = truth["theta_llm"] - truth["theta_llm"][0]
    assert corr(llm[1:], true[1:]) > 0.9 or np.allclose(np.sign(llm[1:]), np.sign(true[1:]))


def test_laplace_schur_equals_dense_inverse():
    """The structured Schur-complement covariance equals inverting the assembled dense information."""
    responses, _ = irtexam.simulate(25, 30, model="3pl", seed=3, missing=0.2)
    result = quiet_fit(responses, model="3pl")
    spec, design = result.spec, result.design
    hyper = {k: jnp.asarray(v) for k, v in result.params.items() if k in mdl.HYPER_KEYS}
    assert set(hyper) == {"mu_d", "mu_c"}
    params = {k: jnp.asarray(v) for k, v in result.params.items() if k not in hyper}
    full = laplace_covariance({**params, **hyper}, spec, design, design.mask, mode="full")
    # Dense Gauss-Newton/Fisher information from autodiff: J^T W J over cells + prior precision,
    # the learned prior centres held at their mode (empirical Bayes, as the Laplace step does).
    flat, unravel_params = ravel_pytree(params)

    def unravel(f):
        return {**unravel_params(f), **hyper}

    def probs(f):
        constrained = mdl.constrain(unravel(f), spec, design)
        return irtexam.prob_correct(constrained["theta"][None, :], constrained["a"][:, None],
                                    constrained["b"][:, None], constrained["c"][:, None], pairwise=True)

    p = np.asarray(probs(flat), dtype=np.float64)
    J = np.asarray(jax.jacfwd(probs)(flat), dtype=np.float64).reshape(p.size, -1)
    w = (design.mask / (p * (1 - p))).reshape(-1)
    prior_hessian = np.asarray(jax.hessian(lambda f: -mdl.log_prior(unravel(f), spec))(flat), dtype=np.float64)
    info = J.T @ (w[:, None] * J) + prior_hessian
    dense = np.linalg.inv(info)
    n_items = design.n_items
    k = len(full.item_keys)
    # ravel_pytree orders keys alphabetically: a, c, d, theta_raw -> item block per key
    order = {"a": 0, "c": 1, "d": 2}
    for key in full.item_keys:
        j = full.item_slices[key].start
        block = order[key] * n_items
        np.testing.assert_allclose(full.item_cov[:, j, j], np.diag(dense)[block:block + n_items], rtol=2e-3)
    theta_dense = np.diag(dense)[3 * n_items:]
    np.testing.assert_allclose(np.diag(full.person_cov), theta_dense, rtol=2e-3)
    assert k == 3


def test_laplace_sd_close_to_observed_hessian():
    responses, _ = irtexam.simulate(40, 150, model="2pl", seed=9)
    result = quiet_fit(responses, model="2pl")
    spec, design = result.spec, result.design
    params = {k: jnp.asarray(v) for k, v in result.params.items()}
    flat, unravel = ravel_pytree(params)
    y, mask = jnp.asarray(design.y), jnp.asarray(design.mask)
    with jax.enable_x64(True):
        hessian = jax.hessian(lambda f: -mdl.log_posterior(unravel(f), spec, design, y, mask))(
            jnp.asarray(flat, dtype=jnp.float64))
    covariance = np.linalg.inv(np.asarray(hessian))
    # abilities are a function of the raw parameters (fixed scale): delta method
    jac = np.asarray(jax.jacfwd(lambda f: mdl.examinee_theta(unravel(f), spec, design))(flat), dtype=np.float64)
    theta_sd = np.sqrt(np.diag(jac @ covariance @ jac.T))
    # the reported sd comes from 500 joint draws (Monte Carlo error ~3%) of the expected-information
    # Laplace approximation; the reference uses the observed Hessian
    ratio = result.examinees["theta_sd"].to_numpy() / theta_sd
    assert 0.9 < np.median(ratio) < 1.1
    np.testing.assert_allclose(result.examinees["theta_sd"], theta_sd, rtol=0.2)


def test_warm_start_reuses_parameters_by_id(fit_3pl, sim_3pl):
    responses = sim_3pl[0]
    # Restarting from the optimum converges at once.
    again = quiet_fit(responses, model="3pl", init=fit_3pl, se=False, heldout=0.1)
    assert again.fit_stats["optimizer"]["iterations"] <= 3
    # the solver stops once no parameter moves by 0.01 standard errors: the estimates agree to that
    assert np.all(np.abs(again.items["b"] - fit_3pl.items["b"]) <= 0.02 * fit_3pl.items["b_sd"])
    # On a subset of items (in another order) the values are picked up by id, and the optimum is the same.
    kept = list(responses.items[::2])[::-1]
    from irtexam.irt.joint import warm_start as _warm_start
    sub = responses.subset(items=kept)
    design = mdl.build_design(sub, fit_3pl.spec)
    start = _warm_start(fit_3pl, fit_3pl.spec, design)
    position = {item: i for i, item in enumerate(fit_3pl.design.items)}
    np.testing.assert_allclose(start["d"], fit_3pl.params["d"][[position[i] for i in kept]])
    cold = quiet_fit(sub, model="3pl", se=False)
    warm = quiet_fit(sub, model="3pl", init=fit_3pl, se=False)
    assert corr(warm.items["b"], cold.items["b"]) > 0.999
    np.testing.assert_allclose(warm.fit_stats["loglik"], cold.fit_stats["loglik"], rtol=1e-4)


def test_save_and_load_round_trip(tmp_path, hierarchical):
    _, _, result = hierarchical
    result.save(tmp_path / "fit")
    for name in ("items.csv", "examinees.csv", "facets.csv", "contrasts.csv", "fit.nc", "meta.json"):
        assert (tmp_path / "fit" / name).exists()
    back = irtexam.load_fit(tmp_path / "fit")
    pd.testing.assert_frame_equal(back.items, result.items, check_names=False, rtol=1e-10)
    assert back.spec == result.spec
    np.testing.assert_allclose(back.predict(), result.predict(), atol=1e-6)
    draws = back.draws("theta_llm", n=50)
    assert draws.shape == (50, 4)
    posterior = back.idata.posterior
    assert set(posterior["a"].dims) == {"chain", "draw", "item"}
    assert list(posterior["theta_retriever"].coords["retriever"].values) == [f"retriever{k}" for k in range(5)]


def test_map_laplace_draws_match_reported_sd(fit_3pl):
    draws = fit_3pl.draws("theta", n=2000, seed=1)
    np.testing.assert_allclose(draws.std(axis=0), fit_3pl.examinees["theta_sd"], rtol=0.12)


def test_graded_response_model_recovery():
    responses, truth = irtexam.simulate(120, 300, model="grm", n_categories=4, seed=13)
    result = quiet_fit(responses, model="grm")
    assert corr(result.items["a"], truth["a"]) > 0.75
    for k in range(3):
        assert corr(result.items[f"b_{k + 1}"], truth["thresholds"][:, k]) > 0.9
    assert corr(result.examinees["theta"], truth["theta"]) > 0.95
    assert (np.diff(result.items[["b_1", "b_2", "b_3"]].to_numpy(), axis=1) > 0).all()


def test_errors_say_what_to_do():
    responses, _ = irtexam.simulate(20, None, facets={"llm": 2, "retriever": 2}, seed=1)
    with pytest.raises(IrtexamError, match="facet.*'icl'.*facet columns llm"):
        irtexam.fit(responses, facets=["llm", "icl"])
    graded, _ = irtexam.simulate(20, 30, model="grm", seed=1)
    with pytest.raises(IrtexamError, match="grm"):
        irtexam.fit(graded, model="3pl")
    with pytest.raises(IrtexamError, match="model must be one of '1pl', '2pl', '3pl', 'grm', got"):
        irtexam.fit(responses, model="5pl")
    single = responses.subset(examinees=[e for e in responses.examinees if e.startswith("llm0")])
    with pytest.raises(IrtexamError, match="single level"):
        irtexam.fit(single, facets=["llm"])


def test_uninformative_items_are_reported_and_fit_still_runs():
    responses, _ = irtexam.simulate(30, 40, model="2pl", seed=2)
    values = responses.values.copy()
    values[0] = 1.0
    values[1] = 0.0
    rm = irtexam.ResponseMatrix(values=values, items=responses.items, examinees=responses.examinees)
    with pytest.warns(UserWarning, match="correctly by every examinee"):
        result = irtexam.fit(rm, model="2pl")
    assert np.isfinite(result.items.loc[responses.items[0], "b"])
    assert result.items.loc[responses.items[0], "b"] < result.items.loc[responses.items[1], "b"]


def test_nuts_agrees_with_map_and_reports_diagnostics():
    responses, truth = irtexam.simulate(60, 80, model="2pl", seed=17)
    map_fit = quiet_fit(responses, model="2pl")
    nuts_fit = quiet_fit(responses, model="2pl", method="nuts", chains=2, warmup=300, samples=300, seed=1)
    assert corr(nuts_fit.items["b"], map_fit.items["b"]) > 0.98
    assert corr(nuts_fit.examinees["theta"], map_fit.examinees["theta"]) > 0.98
    assert corr(nuts_fit.items["b_sd"], map_fit.items["b_sd"]) > 0.8
    assert nuts_fit.diagnostics["r_hat"].max() < 1.1
    assert nuts_fit.idata.posterior.sizes["chain"] == 2 and nuts_fit.idata.posterior.sizes["draw"] == 300
    assert "divergences" in nuts_fit.fit_stats["sampler"]


@pytest.mark.slow
def test_hierarchical_nuts_matches_map_at_scale():
    responses, truth = irtexam.simulate(400, None, model="3pl", facets=FACETS, seed=3)
    map_fit = quiet_fit(responses, model="3pl", facets=list(FACETS))
    nuts_fit = quiet_fit(responses, model="3pl", facets=list(FACETS), method="nuts", chains=4, warmup=500,
                         samples=500)
    for facet in FACETS:
        est = nuts_fit.facets[nuts_fit.facets.facet == facet]["theta"]
        assert corr(est, truth[f"theta_{facet}"]) > 0.95
        assert corr(est, map_fit.facets[map_fit.facets.facet == facet]["theta"]) > 0.99
    assert nuts_fit.diagnostics["r_hat"].max() <= 1.01
    assert nuts_fit.fit_stats["sampler"]["divergences"] == 0


@pytest.mark.parametrize("model", ["2pl", "1pl"])
def test_blockwise_person_block_is_kept_structured_and_equals_the_dense_inverse(model, tmp_path):
    """Issue 42: a blockwise Laplace fit without facets keeps D = M^T diag(W) M + diag(prior) in O(n) numbers
    (StandardisedPersonPrecision, Woodbury) instead of n x n matrices (3.2 GB each at 20,000 examinees). Its
    covariance equals the dense inverse built by hand, its draws have that covariance, and it survives save/load."""
    from irtexam.irt import io as irt_io
    responses, _ = irtexam.simulate(30, 120, model=model, seed=5)
    fit = quiet_fit(responses, model=model, method="map")
    spec, design = fit.spec, fit.design
    cov = laplace_covariance(fit.params, spec, design, design.mask, mode="blockwise")
    assert cov.person_cov is None and cov.M is None and cov.person_precision is not None
    structure = cov.person_precision
    n = design.n_examinees
    raw = np.asarray(fit.params["theta_raw"], dtype=np.float64)
    if model == "1pl":
        M = np.eye(n) - 1.0 / n
    else:
        sd = raw.std()
        t = (raw - raw.mean()) / sd
        M = (np.eye(n) - 1.0 / n - np.outer(t, t) / n) / sd
    D = (M.T * structure.w) @ M + np.diag(structure.prior)
    np.testing.assert_allclose(cov.jacobian(), M, atol=1e-10)
    np.testing.assert_allclose(cov.person_covariance(), np.linalg.inv(D), rtol=1e-8, atol=1e-12)
    draws = structure.sample(40_000, np.random.default_rng(0))
    empirical = np.cov(draws, rowvar=False)
    diagonal = np.diag(np.linalg.inv(D))
    np.testing.assert_allclose(np.diag(empirical), diagonal, rtol=0.05)
    from dataclasses import replace
    irt_io.save_fit(replace(fit, laplace=cov), tmp_path / "fit", netcdf=False)
    stored = np.load(tmp_path / "fit" / "params.npz")
    assert "laplace__person_cov" not in stored.files and stored["laplace__w"].shape == (n,)
    loaded = irt_io.read_fit(tmp_path / "fit")["laplace"]
    np.testing.assert_allclose(loaded.person_covariance(), cov.person_covariance(), rtol=1e-12)
