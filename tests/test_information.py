"""Item/exam information against numerical Fisher information from autodiff."""

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from irtexam.analysis import information as inf
from irtexam.errors import InputError


def _numerical_fisher(theta: float, a: float, b: float, c: float) -> float:
    """E[-d^2/dtheta^2 log p(X | theta)] with X ~ Bernoulli(P(theta)), by autodiff."""
    def p(t):
        return c + (1 - c) * jax.nn.sigmoid(a * (t - b))

    def loglik(t, x):
        pt = p(t)
        return x * jnp.log(pt) + (1 - x) * jnp.log1p(-pt)

    h = jax.grad(jax.grad(loglik))
    pt = p(theta)
    return float(-(pt * h(theta, 1.0) + (1 - pt) * h(theta, 0.0)))


@pytest.mark.parametrize("a,b,c", [(1.5, 0.3, 0.25), (0.7, -1.0, 0.0), (2.5, 1.2, 0.4), (1.0, 0.0, 0.1)])
def test_item_information_matches_autodiff_fisher(a, b, c):
    grid = np.linspace(-3, 3, 13)
    got = np.asarray(inf.item_information(grid, np.array([a]), np.array([b]), np.array([c])))[:, 0]
    ref = np.array([_numerical_fisher(float(t), a, b, c) for t in grid])
    np.testing.assert_allclose(got, ref, rtol=2e-3, atol=1e-6)


def test_3pl_information_is_not_the_2pl_formula():
    a, b, c = np.array([1.5]), np.array([0.0]), np.array([0.25])
    p = np.asarray(inf.prob_correct(0.0, a, b, c))
    wrong = a ** 2 * p * (1 - p)
    got = np.asarray(inf.item_information(0.0, a, b, c))
    # at theta=b: s=1/2, P=0.625 -> I = a^2 * 0.25 * 0.75 * 0.5 / 0.625
    np.testing.assert_allclose(got, 1.5 ** 2 * 0.25 * 0.75 * 0.5 / 0.625, rtol=1e-5)
    assert abs(float(got[0]) - float(wrong[0])) > 0.1


def test_shapes_exam_information_and_se():
    grid = np.linspace(-2, 2, 5)
    a = np.array([1.0, 2.0, 0.5]); b = np.array([0.0, 1.0, -1.0]); c = np.array([0.2, 0.0, 0.1])
    info = np.asarray(inf.item_information(grid, a, b, c))
    assert info.shape == (5, 3)
    np.testing.assert_allclose(np.asarray(inf.exam_information(grid, a, b, c, reduce="sum")), info.sum(1), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(inf.exam_information(grid, a, b, c, items=[0, 2])), info[:, [0, 2]].mean(1), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(inf.standard_error(grid, a, b, c)), 1 / np.sqrt(info.sum(1)), rtol=1e-5)
    with pytest.raises(InputError):
        inf.exam_information(grid, a, b, c, reduce="median")


def test_2pl_maximum_at_difficulty():
    grid = np.linspace(-3, 3, 601)
    info = np.asarray(inf.item_information(grid, np.array([1.3]), np.array([0.7])))[:, 0]
    assert abs(grid[info.argmax()] - 0.7) < 0.02
    np.testing.assert_allclose(info.max(), 1.3 ** 2 / 4, rtol=1e-4)


def test_category_information_multilabel_mean():
    items = pd.DataFrame({"a": [1.0, 2.0, 0.5], "b": [0.0, 0.5, 1.0], "c": [0.0, 0.2, 0.1]},
                         index=["q1", "q2", "q3"])
    labels = pd.Series({"q1": "remember|apply", "q2": ["apply"], "q3": ""})
    grid = np.array([-1.0, 0.0, 1.0])
    df = inf.category_information(grid, items, labels, order=["remember", "apply"])
    assert list(df.columns) == ["remember", "apply", "uncategorised"]
    assert df.attrs["n_items"] == {"remember": 1, "apply": 2, "uncategorised": 1}
    full = np.asarray(inf.item_information(grid, items.a.values, items.b.values, items.c.values))
    np.testing.assert_allclose(df["apply"].values, full[:, :2].mean(1), rtol=1e-6)
    np.testing.assert_allclose(df["uncategorised"].values, full[:, 2], rtol=1e-6)


def test_posterior_band_contains_point_and_narrows_without_spread():
    rng = np.random.default_rng(0)
    a = np.array([1.0, 1.5]); b = np.array([0.0, 0.5]); c = np.array([0.1, 0.2])
    grid = np.linspace(-2, 2, 9)
    draws = lambda x, s: x + s * rng.standard_normal((300, x.size))
    band = inf.information_band(grid, draws(a, 0.2), draws(b, 0.2), np.clip(draws(c, 0.02), 0, 0.5))
    point = np.asarray(inf.exam_information(grid, a, b, c))
    assert (band["low"].values <= point + 1e-6).all() and (band["high"].values >= point - 1e-6).all()
    assert (band["high"] - band["low"]).min() > 0.001
    exact = inf.information_band(grid, np.tile(a, (5, 1)), np.tile(b, (5, 1)), np.tile(c, (5, 1)))
    np.testing.assert_allclose(exact["high"] - exact["low"], 0, atol=1e-6)


def test_a_band_around_the_estimate_contains_it_where_many_skewed_items_move_the_draws_centre():
    """Issue 42: the information of thousands of items, each a skewed function of its item's draws, has draws
    whose whole 90% interval misses the plug-in curve; placed around the estimate (band_around) the band keeps
    the draws' width and contains the fit's own curve."""
    rng = np.random.default_rng(1)
    n = 3000
    a, b = np.exp(rng.normal(0, 0.35, n)), rng.normal(0, 1, n)
    grid = np.linspace(-2, 2, 5)
    a_draws = a * np.exp(0.2 * rng.standard_normal((200, n)))   # log-normal draws: E[a^2] > a^2
    b_draws = b + 0.3 * rng.standard_normal((200, n))
    plain = inf.information_band(grid, a_draws, b_draws)
    point = np.asarray(inf.exam_information(grid, a, b))
    assert not ((plain["low"] <= point) & (point <= plain["high"])).all()   # the draws' own interval misses it
    band = inf.information_band(grid, a_draws, b_draws, estimate=(a, b, None))
    np.testing.assert_allclose(band["estimate"], point, rtol=1e-5)
    assert ((band["low"] < point) & (point < band["high"])).all()
    np.testing.assert_allclose(band["high"] - band["low"], plain["high"] - plain["low"], rtol=1e-6)
    low, high = inf.band_around(np.array([1.0]), np.array([[0.0], [1.0], [2.0], [3.0], [10.0]]), prob=0.5)
    assert (low[0], high[0]) == (0.0, 2.0)   # median 2, quartiles 1 and 3: 1 - (2 - 1), 1 + (3 - 2)


def test_summary_with_examinee_crosses_and_mean_information():
    items = pd.DataFrame({"a": [1.0, 2.0], "b": [0.0, 0.5], "c": [0.2, 0.2]}, index=["x", "y"])
    s = inf.exam_information_summary(items, np.linspace(-1, 1, 3), abilities={"m1": 0.3})
    assert (s["kind"] == "examinee:m1").sum() == 1
    row = s[s.kind == "examinee:m1"].iloc[0]
    np.testing.assert_allclose(row.se, 1 / np.sqrt(row.test_information), rtol=1e-6)
    mi = inf.mean_information(items, (-2, 2))
    assert mi["y"] > mi["x"]


def test_jax_inputs_stay_differentiable():
    grid = jnp.linspace(-2, 2, 5)
    g = jax.grad(lambda a: inf.exam_information(grid, a, jnp.zeros(2), jnp.full(2, 0.2)).sum())(jnp.ones(2))
    assert g.shape == (2,) and bool(jnp.all(g > 0))  # information grows with discrimination here
    assert isinstance(inf.item_information(np.zeros(1), np.ones(1), np.zeros(1)), np.ndarray)


def test_analytics_import_without_torch_or_transformers():
    import subprocess
    import sys

    code = ("import sys, irtexam.analysis, irtexam.analysis.summary, irtexam.analysis.report, irtexam.plotting, "
            "irtexam.commands.info, irtexam.commands.prune, irtexam.commands.report; "
            "bad = [m for m in ('torch', 'transformers') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_graded_information_equals_autodiff_fisher_information():
    """GRM information equals E[-d2/dtheta2 log P(X | theta)] computed by autodiff."""
    import jax
    import jax.numpy as jnp

    from irtexam.analysis.information import graded_item_information
    from irtexam.irt.likelihood import graded_category_logprobs

    a = np.array([0.7, 1.8])
    thresholds = np.array([[-1.0, 0.2, 1.5], [-0.3, 0.1, 0.9]])
    theta = np.linspace(-3, 3, 7)
    info = graded_item_information(theta, a, thresholds)
    assert info.shape == (7, 2)
    for t_index, t in enumerate(theta):
        for i in range(2):
            def logp(th):
                return graded_category_logprobs(th[None], jnp.asarray(a[i])[None, None],
                                                jnp.asarray(thresholds[i])[None])[0, 0]
            probs = np.exp(np.asarray(logp(jnp.asarray(t))))
            hessians = np.asarray(jax.hessian(lambda th: logp(th))(jnp.asarray(t)))
            fisher = -(probs * hessians).sum()
            assert info[t_index, i] == pytest.approx(fisher, rel=1e-3)


def test_graded_information_with_two_categories_is_the_2pl():
    from irtexam.analysis.information import graded_item_information, item_information

    theta = np.linspace(-2, 2, 5)
    np.testing.assert_allclose(graded_item_information(theta, np.array([1.3]), np.array([[0.4]])),
                               item_information(theta, np.array([1.3]), np.array([0.4])), rtol=1e-9)


def test_category_membership_by_hand():
    """Multi-label items count in every category, unlabelled ones in 'uncategorised', columns in ``order``."""
    import pandas as pd

    from irtexam.analysis.information import category_membership

    labels = pd.Series({"q1": ["apply", "recall"], "q2": "recall", "q3": None, "q4": "analyse|apply", "q5": ""})
    table = category_membership(labels, order=["recall", "apply", "create"])
    assert list(table.columns) == ["recall", "apply", "analyse", "uncategorised"]
    assert list(table.index) == ["q1", "q2", "q3", "q4", "q5"]
    expected = {"q1": {"recall", "apply"}, "q2": {"recall"}, "q3": {"uncategorised"}, "q4": {"analyse", "apply"},
                "q5": {"uncategorised"}}
    for item, cats in expected.items():
        assert set(table.columns[table.loc[item].to_numpy()]) == cats, item
    assert table.to_numpy().dtype == bool
