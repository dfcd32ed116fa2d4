"""The alternating Fisher-scoring MAP solver: reference linear algebra, agreement with float64 L-BFGS."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import irtexam
from irtexam.irt import alternating as alt
from irtexam.irt import model as mdl
from irtexam.irt.fit import lbfgs_map, map_estimate
from irtexam.irt.laplace import laplace_covariance


@pytest.mark.parametrize("k", [1, 2, 3])
def test_small_spd_solve_matches_numpy(k):
    rng = np.random.default_rng(k)
    root = rng.normal(size=(50, k, k))
    matrix = root @ np.transpose(root, (0, 2, 1)) + 0.1 * np.eye(k)
    matrix[:, 0, :] *= 100.0  # badly scaled rows and columns, as log a vs d vs logit c are
    matrix[:, :, 0] *= 100.0
    rhs = rng.normal(size=(50, k))
    expected = np.linalg.solve(matrix, rhs[..., None])[..., 0]
    with jax.enable_x64(True):
        got = np.asarray(alt.solve_small_spd(jnp.asarray(matrix), jnp.asarray(rhs)))
    np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-10)


def test_small_spd_solve_hand_value():
    # [[4, 2], [2, 3]] x = [2, 5]: det 8, x = [(3*2 - 2*5)/8, (4*5 - 2*2)/8] = [-0.5, 2]
    got = alt.solve_small_spd(jnp.array([[[4.0, 2.0], [2.0, 3.0]]]), jnp.array([[2.0, 5.0]]))
    np.testing.assert_allclose(np.asarray(got)[0], [-0.5, 2.0], atol=1e-6)


def _max_deviation_in_se(params: dict, reference: dict, spec: mdl.ModelSpec, design: mdl.Design) -> float:
    """Largest |difference| / Laplace sd over item parameters and standardised abilities."""
    cov = laplace_covariance(reference, spec, design, design.mask, mode="full")
    worst = 0.0
    for key in ("a", "d", "c"):
        if key in reference:
            worst = max(worst, float(np.max(np.abs(np.asarray(params[key]) - reference[key]) / cov.item_sd(key))))
    standardise = lambda t: (np.asarray(t) - np.mean(t)) / np.std(t)  # noqa: E731
    theta_sd = np.sqrt(np.diag(cov.theta_cov()))
    return max(worst, float(np.max(np.abs(standardise(params["theta_raw"]) - standardise(reference["theta_raw"]))
                                   / theta_sd)))


@pytest.mark.parametrize("model,guessing,missing", [("3pl", None, 0.0), ("2pl", None, 0.15), ("1pl", None, 0.0),
                                                    ("2pl", 0.25, 0.0)])
def test_alternating_reaches_the_float64_lbfgs_optimum(model, guessing, missing):
    responses, _ = irtexam.simulate(80, 150, model=model if guessing is None else "3pl", seed=4, missing=missing,
                                    guessing=guessing)
    spec = mdl.ModelSpec(kind=model, guessing=guessing)
    design = mdl.build_design(responses, spec)
    start = mdl.initial_params(spec, design)
    fast, info = alt.alternating_map(spec, design, design.mask, start, tol=1e-3)
    assert info["converged"] and info["solver"] == "alternating"
    exact, exact_info = lbfgs_map(spec, design, design.mask, start, tol=1e-9, precision="float64")
    assert exact_info["max_abs_gradient"] < 1e-6
    assert _max_deviation_in_se(fast, exact, spec, design) < 0.02


def test_alternating_solution_is_on_the_fixed_ability_scale():
    responses, _ = irtexam.simulate(60, 90, model="3pl", seed=2)
    spec = mdl.ModelSpec(kind="3pl")
    design = mdl.build_design(responses, spec)
    params, _ = alt.alternating_map(spec, design, design.mask, mdl.initial_params(spec, design))
    theta = params["theta_raw"]
    assert abs(theta.mean()) < 1e-5 and abs(theta.std() - 1.0) < 1e-5


def test_map_estimate_picks_the_solver_by_model():
    responses, _ = irtexam.simulate(30, 4 * 3 * 2, model="2pl", seed=1, facets={"llm": 4, "retriever": 3, "icl": 2})
    flat = mdl.ModelSpec(kind="2pl")
    design = mdl.build_design(responses, flat)
    assert map_estimate(flat, design, design.mask, mdl.initial_params(flat, design))[1]["solver"] == "alternating"
    faceted = mdl.ModelSpec(kind="2pl", facets=("llm", "retriever", "icl"))
    design = mdl.build_design(responses, faceted)
    assert map_estimate(faceted, design, design.mask, mdl.initial_params(faceted, design))[1]["solver"] == "lbfgs"
    assert not alt.supports(mdl.ModelSpec(kind="grm"))


def _degenerate_matrices() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    base = (rng.random((20, 15)) < 0.6).astype(float)
    cases = {"all ones": np.ones((10, 8)), "one correct answer": np.zeros((10, 8)), "2 x 3": base[:2, :3].copy()}
    cases["one correct answer"][0, 0] = 1.0
    sparse = base.copy()
    sparse[rng.random(sparse.shape) < 0.9] = np.nan
    cases["90% missing"] = sparse
    empty_examinee = base.copy()
    empty_examinee[:, 3] = np.nan
    cases["examinee without responses"] = empty_examinee
    return cases


@pytest.mark.parametrize("case", sorted(_degenerate_matrices()))
@pytest.mark.parametrize("model", ["3pl", "1pl"])
def test_degenerate_matrices_give_finite_estimates(case, model):
    from irtexam.responses import ResponseMatrix

    values = _degenerate_matrices()[case]
    responses = ResponseMatrix(values=values, items=tuple(f"q{i}" for i in range(values.shape[0])),
                               examinees=tuple(f"m{j}" for j in range(values.shape[1])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # uninformative items/examinees are reported, by design
        result = irtexam.fit(responses, model=model)
    assert result.fit_stats["optimizer"]["converged"]
    for table, columns in ((result.items, ["a", "b", "c", "b_sd"]), (result.examinees, ["theta", "theta_sd"])):
        assert np.isfinite(table[columns].to_numpy()).all()



def test_extrapolation_factor_hand_values():
    # parallel changes shrinking by rho = 0.8: remaining distance = 0.8 / 0.2 = 4 more changes
    assert alt._extrapolation_factor(np.array([1.0, 0.0]), np.array([0.8, 0.0])) == pytest.approx(4.0)
    # rho = 0.99 (the common shift of the discriminations and their learned centre): 99 more changes
    assert alt._extrapolation_factor(np.array([1.0, 0.0]), np.array([0.99, 0.0])) == pytest.approx(99.0)
    # not parallel, or growing by more than 5% -> no extrapolation
    assert alt._extrapolation_factor(np.array([1.0, 0.0]), np.array([0.6, 0.6])) == 0.0
    assert alt._extrapolation_factor(np.array([1.0, 0.0]), np.array([1.2, 0.0])) == 0.0
    # a steady drift (rho from RHO_MAX to DRIFT_RHO_MAX, where Aitken's distance is unknown or infinite): 50 changes
    assert alt._extrapolation_factor(np.array([1.0, 0.0]), np.array([0.999, 0.0])) == alt.DRIFT_FACTOR == 50.0
    assert alt._extrapolation_factor(np.array([1.0, 0.0]), np.array([1.03, 0.0])) == 50.0
    # the stopping rule's ratio: parallel changes shrinking by 0.9; orthogonal ones -> 0
    assert alt._convergence_ratio(np.array([1.0, 1.0]), np.array([0.9, 0.9])) == pytest.approx(0.9)
    assert alt._convergence_ratio(np.array([1.0, 0.0]), np.array([0.0, 0.5])) == 0.0


def test_extrapolation_lands_on_the_same_optimum():
    responses, _ = irtexam.simulate(150, 300, model="3pl", seed=7)
    spec = mdl.ModelSpec(kind="3pl")
    design = mdl.build_design(responses, spec)
    start = mdl.initial_params(spec, design)
    plain, plain_info = alt.alternating_map(spec, design, design.mask, start, tol=1e-3, extrapolate=False)
    fast, fast_info = alt.alternating_map(spec, design, design.mask, start, tol=1e-3, extrapolate=True)
    assert fast_info["converged"] and plain_info["converged"]
    assert fast_info["iterations"] <= plain_info["iterations"]
    assert _max_deviation_in_se(fast, plain, spec, design) < 0.02


def test_laplace_fisher_blocks_stay_finite_for_a_near_step_item():
    """An item with a = 80 (a near-Guttman item, as joint MAP can give for a highly discriminating item) puts
    p at 1 in float32 for most examinees; the Fisher blocks must stay finite and match a float64 reference
    (there slope = 0 exactly where p = 1, so the p bound cannot matter)."""
    from irtexam.irt.laplace import _fisher_blocks_binary

    spec = mdl.ModelSpec(kind="3pl", n_choices=4)
    eta = np.linspace(-3.0, 3.0, 41)
    params = {"a": np.log(np.array([80.0, 1.2])), "d": np.array([0.3, -0.2]), "c": np.array([-1.9, -1.1])}
    mask = np.ones((2, eta.size), dtype=bool)
    A, G, W = _fisher_blocks_binary(params, spec, ("a", "d", "c"), eta, mask)
    assert np.isfinite(A).all() and np.isfinite(G).all() and np.isfinite(W).all()
    a, d, c = np.exp(params["a"]), params["d"], 1.0 / (1.0 + np.exp(-params["c"]))
    z = a[:, None] * eta[None] + d[:, None]
    s, s_bar = 1.0 / (1.0 + np.exp(-z)), 1.0 / (1.0 + np.exp(z))
    p, q = c[:, None] + (1 - c[:, None]) * s, (1 - c[:, None]) * s_bar
    jac = np.stack([(1 - c[:, None]) * s * s_bar * a[:, None] * eta, (1 - c[:, None]) * s * s_bar,
                    (c * (1 - c))[:, None] * s_bar], axis=-1)                          # (items, examinees, 3)
    ref = np.einsum("ime,imf->ief", jac / (p * q)[..., None], jac)
    np.testing.assert_allclose(A, ref, rtol=2e-3, atol=1e-6 * np.abs(ref).max())


@pytest.mark.parametrize("model", ["3pl", "2pl"])
def test_many_blocks_of_items_reach_the_one_block_optimum(model, monkeypatch):
    """The sweeps' per-cell sums go a block of items at a time (irtexam.irt.cell_blocks); with blocks of 7 items
    (the last one padded) and missing plus held-out cells the solver lands where one block does."""
    from irtexam.irt import cell_blocks

    responses, _ = irtexam.simulate(80, 150, model=model, seed=6, missing=0.1)
    spec = mdl.ModelSpec(kind=model)
    design = mdl.build_design(responses, spec)
    held_out = np.random.default_rng(0).random(design.mask.shape) < 0.05
    mask = design.mask & ~held_out
    start = mdl.initial_params(spec, design)
    one, _ = alt.alternating_map(spec, design, mask, start, tol=1e-4)
    monkeypatch.setattr(cell_blocks, "CPU_BLOCK_CELLS", 7 * 150)
    assert cell_blocks.rows_per_block(80, 150, "cpu") == 7
    many, info = alt.alternating_map(spec, design, mask, start, tol=1e-4)
    assert info["converged"]
    for key in ("a", "d", "c", "theta_raw"):
        if key in one:
            np.testing.assert_allclose(many[key], one[key], atol=2e-3)


def test_successive_changes_hand_values():
    # |(3, 4)| = 5, |(6, 8)| = 10: parallel (cosine 1), rho 2; (1, 0) against (0, 2): cosine 0, rho 2
    assert alt._successive_changes(np.array([3.0, 4.0]), np.array([6.0, 8.0])) == pytest.approx((1.0, 2.0))
    assert alt._successive_changes(np.array([1.0, 0.0]), np.array([0.0, 2.0])) == pytest.approx((0.0, 2.0))
    assert alt._successive_changes(np.zeros(2), np.array([1.0, 0.0])) == (0.0, 0.0)


def test_large_matrices_compile_the_sweeps_with_xla_defaults(monkeypatch):
    """From LARGE_SWEEP_CELLS cells the sweeps take XLA's default options (faster to run, slower to compile);
    the solver lands on the same optimum either way."""
    from irtexam.irt import compile_cache

    assert alt.sweep_compiler_options(alt.LARGE_SWEEP_CELLS - 1) is None
    assert alt.sweep_compiler_options(alt.LARGE_SWEEP_CELLS) == {}
    responses, _ = irtexam.simulate(60, 120, model="3pl", seed=8)
    spec = mdl.ModelSpec(kind="3pl")
    design = mdl.build_design(responses, spec)
    start = mdl.initial_params(spec, design)
    seen = []
    real = compile_cache.compiled_executable

    def spy(name, parts, jitted, args, compiler_options=None, check=True):
        seen.append((name, compiler_options))
        return real(name, parts, jitted, args, compiler_options, check)

    monkeypatch.setattr(compile_cache, "compiled_executable", spy)
    quick, _ = alt.alternating_map(spec, design, design.mask, start, tol=1e-4)
    monkeypatch.setattr(alt, "LARGE_SWEEP_CELLS", 60 * 120)
    default, info = alt.alternating_map(spec, design, design.mask, start, tol=1e-4)
    assert [options for _, options in seen] == [None, None, {}, {}]
    assert info["converged"]
    for key in ("a", "d", "c", "theta_raw"):
        np.testing.assert_allclose(default[key], quick[key], atol=2e-3)
