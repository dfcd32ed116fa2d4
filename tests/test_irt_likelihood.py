"""Hand-computed reference values for the IRT likelihoods and priors, and the NumPyro/JAX agreement."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from irtexam.irt import likelihood as lk
from irtexam.irt import model as mdl
from irtexam.irt.simulate import simulate


def test_prob_correct_hand_value():
    # 0.2 + 0.8 / (1 + exp(-1.2 * (0.5 + 0.3))) = 0.2 + 0.8 / (1 + exp(-0.96))
    #  exp(-0.96) = 0.3828929; 1 / 1.3828929 = 0.7231218; 0.8 * 0.7231218 = 0.5784974
    assert float(lk.prob_correct(0.5, 1.2, -0.3, 0.2)) == pytest.approx(0.7784974, abs=1e-6)
    # 2PL at theta = b is exactly one half; 1PL limit far above b is 1
    assert float(lk.prob_correct(1.3, 2.0, 1.3)) == pytest.approx(0.5)
    assert float(lk.prob_correct(40.0, 1.0, 0.0, 0.25)) == pytest.approx(1.0)
    assert float(lk.prob_correct(-40.0, 1.0, 0.0, 0.25)) == pytest.approx(0.25)


def test_bernoulli_loglik_hand_value():
    # Two items (a=1, b=0, c=0) and (a=2, b=1, c=0.25), two examinees theta = (0, 1).
    # P = [[0.5, sigmoid(1)=0.7310586], [0.25 + 0.75 sigmoid(-2) = 0.25 + 0.75 * 0.1192029 = 0.3394022, 0.625]]
    # y = [[1, 0], [0, missing]] -> log 0.5 + log(1 - 0.7310586) + log(1 - 0.3394022)
    #  = -0.6931472 - 1.3132617 - 0.4146081 = -2.4210170
    y = jnp.array([[1.0, 0.0], [0.0, 0.0]])
    mask = jnp.array([[True, True], [True, False]])
    a = jnp.array([[1.0], [2.0]])
    b = jnp.array([[0.0], [1.0]])
    c = jnp.array([[1e-30], [0.25]])
    expected = -2.4210170
    assert float(lk.bernoulli_loglik(y, mask, jnp.array([0.0, 1.0]), a, b, c)) == pytest.approx(expected, abs=1e-5)


def test_log_probabilities_are_stable_in_the_tails():
    from irtexam.irt.kinds import ItemParams, category_logprobs
    items = ItemParams(a=np.array([3.0]), b=np.array([0.0]), c=np.array([0.2]))
    log_q, log_p = category_logprobs(np.array(20.0), items)[0]  # float64: log(0.8) - 60, no cancellation
    assert float(log_q) == pytest.approx(math.log(0.8) - 60.0, abs=1e-6)
    assert float(category_logprobs(np.array(60.0), items)[0, 0]) == pytest.approx(math.log(1e-30))  # the floor
    log_q, log_p = category_logprobs(np.array(-60.0), items)[0]
    assert float(log_p) == pytest.approx(math.log(0.2), abs=1e-6)
    jitems = ItemParams(*(jnp.asarray(v) for v in items[:3]))
    grad = jax.grad(lambda t: category_logprobs(t, jitems)[0, 0])(60.0)
    assert np.isfinite(float(grad))


def test_graded_category_probabilities_hand_value():
    # a = 1, thresholds (-1, 1), theta = 0: P(X>=1) = sigmoid(1) = 0.7310586, P(X>=2) = sigmoid(-1) = 0.2689414
    # P = (1 - 0.7310586, 0.7310586 - 0.2689414, 0.2689414) = (0.2689414, 0.4621172, 0.2689414)
    logp = lk.graded_category_logprobs(jnp.array([0.0]), jnp.array([1.0]), jnp.array([[-1.0, 1.0]]))
    np.testing.assert_allclose(np.exp(np.asarray(logp))[0, 0], [0.2689414, 0.4621172, 0.2689414], atol=1e-6)
    # sums to one over random inputs
    theta = jnp.linspace(-4, 4, 9)
    logp = lk.graded_category_logprobs(theta[None, :], jnp.array([0.7, 2.0])[:, None],
                                       jnp.array([[-1.0, 0.0, 2.0], [-0.5, 0.1, 0.3]]))
    np.testing.assert_allclose(np.exp(np.asarray(logp)).sum(-1), 1.0, atol=1e-5)


def test_logit_beta_prior_matches_change_of_variables():
    # density of u = logit(c), c ~ Beta(5, 15): Beta pdf(c) * c (1 - c)
    from scipy.stats import beta
    for u in (-2.0, -1.1, 0.3):
        c = 1 / (1 + math.exp(-u))
        expected = math.log(beta.pdf(c, 5, 15) * c * (1 - c))
        assert float(lk.logit_beta_logpdf(jnp.array(u), 5.0, 15.0)) == pytest.approx(expected, abs=1e-5)


def test_sum_to_zero_basis_is_orthonormal_and_centred():
    for k in (2, 3, 5):
        basis = mdl.sum_to_zero_basis(k)
        np.testing.assert_allclose(basis.sum(axis=0), 0.0, atol=1e-12)
        np.testing.assert_allclose(basis.T @ basis, np.eye(k - 1), atol=1e-12)


@pytest.mark.parametrize("kind,facets,guessing,residual", [
    ("3pl", (), None, False), ("2pl", (), None, False), ("1pl", (), 0.25, False),
    ("3pl", ("llm", "retriever"), None, False), ("2pl", ("llm", "retriever"), None, True), ("grm", (), None, False)])
def test_numpyro_potential_equals_pure_log_posterior(kind, facets, guessing, residual):
    """NUTS and MAP target the same density: numpyro's potential energy == -log_posterior."""
    from numpyro.infer.util import potential_energy

    if facets:
        responses, _ = simulate(30, None, model=kind, facets={"llm": 3, "retriever": 2}, seed=2, missing=0.1)
    else:
        responses, _ = simulate(30, 12, model=kind, seed=2, missing=0.1)
    spec = mdl.ModelSpec(kind, guessing=guessing, facets=facets, residual=residual)
    design = mdl.build_design(responses, spec)
    key = jax.random.PRNGKey(0)
    params = {}
    for name, value in mdl.initial_params(spec, design).items():
        key, sub = jax.random.split(key)
        params[name] = jnp.asarray(value) + 0.3 * jax.random.normal(sub, np.shape(value))
    y, mask = jnp.asarray(design.y), jnp.asarray(design.mask)
    energy = potential_energy(mdl.numpyro_model, (spec, design, y, mask), {}, params)
    assert float(energy) == pytest.approx(float(-mdl.log_posterior(params, spec, design, y, mask)), rel=1e-5)


@pytest.mark.parametrize("kind,facets,residual", [("3pl", (), False), ("grm", (), False),
                                                  ("2pl", ("llm", "retriever"), True)])
def test_analytic_prior_precision_equals_autodiff(kind, facets, residual):
    from irtexam.irt.laplace import prior_precision

    if facets:
        responses, _ = simulate(10, None, model=kind, facets={"llm": 3, "retriever": 2}, seed=1)
    else:
        responses, _ = simulate(10, 6, model=kind, seed=1)
    spec = mdl.ModelSpec(kind, facets=facets, residual=residual)
    design = mdl.build_design(responses, spec)
    params = {k: jnp.asarray(v) + 0.4 for k, v in mdl.initial_params(spec, design).items()}
    analytic = prior_precision(params, spec)
    assert set(analytic) == set(params) - set(mdl.HYPER_KEYS)  # hyperparameters are held at their mode
    for key in analytic:
        # given the hyperparameters every prior is separable within a parameter array, so the
        # Hessian-vector product with ones on this array alone is its diagonal
        ones = {k: jnp.ones_like(v) if k == key else jnp.zeros_like(v) for k, v in params.items()}
        _, hvp = jax.jvp(jax.grad(lambda tree: -mdl.log_prior(tree, spec)), (params,), (ones,))
        np.testing.assert_allclose(analytic[key], np.asarray(hvp[key]), rtol=1e-4)
