"""The shape of irt/ (issue 25): kinds are objects, parameters are declared once, one option table,
no import circle, one definition per formula, typed errors and warnings."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import warnings
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

import irtexam
from irtexam import config
from irtexam.cli import main
from irtexam.errors import InputError, IrtexamError
from irtexam.irt import kinds
from irtexam.irt import model as mdl
from irtexam.warning_types import ConvergenceWarning, DataWarning, IrtexamWarning, Message

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "irtexam"
KIND_TEST = re.compile(r"""(?<!dtype\.)\bkind\s*(==|!=|\bin\b|\bnot in\b)\s*[("']""")


def _modules(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (PACKAGE / folder).rglob("*.py"))


def test_no_kind_string_test_outside_the_kind_objects():
    offenders = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
                 for path in _modules("irt", "analysis", "bank") if path.name != "kinds.py"
                 for n, line in enumerate(path.read_text().splitlines(), 1) if KIND_TEST.search(line)]
    assert not offenders, "\n".join(offenders)


def test_the_pattern_catches_a_kind_test():
    assert KIND_TEST.search('if spec.kind == "grm":') and KIND_TEST.search("if kind in ('1pl', '2pl'):")
    assert not KIND_TEST.search("if spec.kind_object.graded:") and not KIND_TEST.search('values.dtype.kind in "OUS"')


def _import_graph() -> dict[str, set[str]]:
    """Module -> the irtexam modules it imports (module level, in functions and under TYPE_CHECKING alike)."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        package = name if is_package else name.rsplit(".", 1)[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
                target = ".".join(base + [node.module]) if node.level and node.module else (
                    ".".join(base) if node.level else node.module or "")
                for alias in node.names:
                    candidate = f"{target}.{alias.name}"
                    exists = (ROOT / (candidate.replace(".", "/") + ".py")).exists() or \
                        (ROOT / candidate.replace(".", "/") / "__init__.py").exists()
                    deps.add(candidate if exists else target)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[name] = {d for d in deps if d.startswith("irtexam") and d != name}
    return graph


def _cycles(graph: dict[str, set[str]], inside: str) -> list[list[str]]:
    """Strongly connected components of more than one module among the modules under ``inside`` (Tarjan)."""
    nodes = [m for m in graph if m.startswith(inside)]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in graph or not w.startswith(inside) or w.endswith("__init__"):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in nodes:
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_in_the_package():
    graph = _import_graph()
    assert _cycles(graph, "irtexam") == []
    # the check sees a circle when there is one
    graph["irtexam.irt.kinds"] = graph["irtexam.irt.kinds"] | {"irtexam.irt.model"}
    assert _cycles(graph, "irtexam.irt")


@pytest.mark.slow  # 24 fresh interpreters, each importing JAX: ~40 s on a cold CI machine; the import graph test above is the default guard
@pytest.mark.parametrize("module", sorted(p.stem for p in (PACKAGE / "irt").glob("*.py") if p.stem != "__init__"))
def test_every_irt_module_imports_alone(module):
    out = subprocess.run([sys.executable, "-c", f"import irtexam.irt.{module}"], capture_output=True, text=True,
                         cwd=str(ROOT))
    assert out.returncode == 0, out.stderr[-2000:]


def test_the_public_formulas_are_the_kind_objects_own():
    from irtexam.analysis import information
    from irtexam.irt import likelihood
    assert irtexam.prob_correct is kinds.prob_correct
    assert likelihood.prob_correct is kinds.prob_correct
    assert information.prob_correct is kinds.prob_correct
    assert likelihood.normal_logpdf is importlib.import_module("irtexam.irt.parameters").normal_logpdf
    theta = np.linspace(-2, 2, 5)
    items = kinds.ItemParams(a=np.array([1.3, 0.7]), b=np.array([0.2, -1.0]), c=np.array([0.2, 0.0]))
    # information and log-likelihood through the public paths equal the kind module's own
    assert np.allclose(information.item_information(theta, items.a, items.b, items.c), kinds.information(theta, items))
    y = np.array([[1.0, 0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0, 1.0]])
    public = np.asarray(likelihood.bernoulli_loglik_cells(y, theta[None, :], items.a[:, None], items.b[:, None],
                                                         items.c[:, None]))
    assert np.allclose(public, kinds.cell_loglik(y, theta, items.column(), pairwise=True))


def test_hand_values_of_the_kind_objects():
    # 3PL: 0.2 + 0.8 sigmoid(1.2 (0.5 + 0.3)) = 0.7784974
    assert float(kinds.prob_correct(0.5, 1.2, -0.3, 0.2)) == pytest.approx(0.7784974, abs=1e-6)
    three = kinds.get_kind("3pl")
    u = {"a": np.log(np.array([1.2])), "d": np.array([1.2 * 0.3]), "c": np.log(np.array([0.25]))}
    items = three.item_params(u)
    assert items.b[0] == pytest.approx(-0.3) and items.c[0] == pytest.approx(0.2)
    back = three.unconstrained_items(items)
    assert np.allclose([back["a"][0], back["d"][0], back["c"][0]], [u["a"][0], u["d"][0], u["c"][0]])
    graded = kinds.get_kind("grm")
    gu = {"a": np.zeros(1), "b1": np.array([-1.0]), "gap": np.log(np.array([[0.5, 1.5]]))}
    assert np.allclose(graded.item_params(gu).thresholds, [[-1.0, -0.5, 1.0]])
    assert np.allclose(graded.unconstrained_items(graded.item_params(gu))["gap"], gu["gap"])
    fixed = kinds.get_kind("3pl", guessing=0.25)
    assert not fixed.free_guessing and fixed.fixed_c == 0.25
    assert [site.name for site in fixed.item_sites(mdl.ModelSpec(kind="3pl", guessing=0.25), 1)] == ["a", "d"]


def test_registry_drives_the_cli_choices_and_a_new_kind_registers():
    from irtexam.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["fit"]
    model = next(a for a in sub._actions if a.dest == "model")
    assert tuple(model.choices) == tuple(kinds.REGISTRY)
    kinds.register(kinds.BinaryKind("2pl-floor", fixed_c=0.1))
    try:
        assert "2pl-floor" in model.choices
        spec = mdl.ModelSpec(kind="2pl-floor")
        assert spec.fixed_c == 0.1 and spec.has_discrimination
    finally:
        del kinds.REGISTRY["2pl-floor"]


def test_sites_declare_the_priors_once():
    spec = mdl.ModelSpec(kind="3pl")
    sites = {s.name: s for s in mdl.item_sites(spec)}
    assert set(sites) == {"a", "d", "c"} and sites["d"].hyper == "mu_d" and sites["c"].hyper == "mu_c"
    assert set(mdl.ITEM_KEYS) == {"a", "d", "b1", "gap", "c"}
    assert set(mdl.HYPER_KEYS) == {"mu_a", "mu_d", "mu_b1", "mu_c"}
    assert sites["a"].hyper is None  # the joint mode and NUTS keep log a centred on log_a_loc
    floating = {s.name: s for s in mdl.item_sites(mdl.ModelSpec(kind="3pl", learn_a_centre=True))}
    assert floating["a"].hyper == "mu_a"
    # under "fixed" the slope centre is the one learned centre (the marginal default, slope_centre="learned")
    assert mdl.hyper_names(mdl.ModelSpec(kind="3pl", learn_a_centre=True, item_prior="fixed")) == ("mu_a",)
    assert mdl.hyper_names(mdl.ModelSpec(kind="3pl", learn_a_centre=False, item_prior="fixed")) == ()
    assert mdl.hyper_names(mdl.ModelSpec(kind="3pl", learn_a_centre=True, item_prior="none")) == ()
    rng = np.random.default_rng(0)
    u = {"a": rng.normal(size=4), "d": rng.normal(size=4), "c": rng.normal(size=4) - 1}
    # the gradient the solvers use is the derivative of the density the posterior uses (finite differences)
    grad, precision = mdl.item_prior_terms(u, spec, xp=np, hyper={"mu_d": 0.3, "mu_c": -1.2})
    for key in u:
        h = 1e-2  # the Beta normaliser is computed in float32 (jax.scipy gammaln)
        up, down = dict(u), dict(u)
        up[key] = u[key] + h
        down[key] = u[key] - h
        f = lambda q: np.asarray(mdl.item_log_prior(q, spec, {"mu_d": 0.3, "mu_c": -1.2}), dtype=float)  # noqa: E731
        numeric = (f(up) - f(down)) / (2 * h)
        assert np.allclose(grad[key], numeric, rtol=1e-3, atol=2e-3), key
        curvature = -(f(up) - 2 * f(u) + f(down)) / h ** 2
        assert np.allclose(precision[key], curvature, rtol=0.02, atol=0.05), key


def test_one_option_table_for_python_and_the_cli():
    estimator = {f.name for f in fields(config.EstimatorOptions)}
    output = {f.name for f in fields(config.OutputOptions)}
    table = {o.name: o.group for o in config.OPTIONS}
    assert estimator == {n for n, g in table.items() if g == "estimator"} - {"method"}
    assert output == {n for n, g in table.items() if g == "output"}
    assert set(config.MODEL_OPTIONS) == {"model", "guessing", "n_choices", "identify", "residual", "item_prior",
                                         "slope_centre", "guessing_centre"}
    # argparse formats each flag's help with %: a bare % (as "5%") broke `irtexam fit --help`
    assert not [o.name for o in config.OPTIONS if "%" in o.help]
    assert main(["fit", "--help"]) == 0
    doc = irtexam.fit.__doc__
    missing = [name for name in table if f"``{name}``" not in doc]
    assert not missing, f"fit's docstring does not name {missing}"
    from irtexam.cli import build_parser
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["fit"]
    flags = {a.dest: a for a in sub._actions}
    for option in config.OPTIONS:
        if option.cli:
            assert flags[option.name].default == option.default and flags[option.name].help.startswith(option.help)


def test_building_the_cli_parser_does_not_import_jax():
    """The --model choices come from the kind registry, read only when a value is checked or help is shown."""
    code = "import sys; from irtexam.cli import build_parser; build_parser(); print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT))
    assert out.stdout.strip() == "False", out.stderr[-2000:]


def test_options_are_checked_with_one_template():
    responses, _ = irtexam.simulate(8, 60, model="2pl", seed=0)
    for kwargs, text in (({"chains": 0}, "fit: chains must be an integer >= 1, got 0"),
                         ({"heldout": 0.7}, "fit: heldout must be a finite number in [0, 0.5], got 0.7"),
                         ({"identify": "first"}, "fit: identify must be one of 'sum-to-zero', 'reference', got 'first'"),
                         ({"method": "mcmc"}, "fit: method must be one of 'auto', 'em', 'map', 'nuts', got 'mcmc'")):
        with pytest.raises(IrtexamError, match=re.escape(text)):
            irtexam.fit(responses, **kwargs)
    with pytest.raises(TypeError, match="unexpected option.*'bogus'"):
        irtexam.fit(responses, bogus=1)
    with pytest.raises(IrtexamError, match="disagree with spec"):
        irtexam.fit(responses, spec=mdl.ModelSpec(kind="2pl"), guessing=0.2)


def test_options_objects_equal_keywords():
    responses, _ = irtexam.simulate(10, 150, model="2pl", seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IrtexamWarning)
        by_keywords = irtexam.fit(responses, model="2pl", method="em", tol=1e-5, draws=50, seed=3)
        by_objects = irtexam.fit(responses, model="2pl", method="em", options=config.EstimatorOptions(tol=1e-5, seed=3),
                                 output=config.OutputOptions(draws=50))
    assert np.array_equal(by_keywords.items.to_numpy(), by_objects.items.to_numpy())


def test_a_graded_file_is_read_as_graded_when_the_spec_says_so(tmp_path):
    responses, _ = irtexam.simulate(6, 120, model="grm", seed=1)
    path = tmp_path / "graded.csv"
    responses.to_long().to_csv(path, index=False)
    assert responses.max_score > 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IrtexamWarning)
        result = irtexam.fit(str(path), spec=mdl.ModelSpec(kind="grm"), method="em")
    assert "b_2" in result.items.columns


def test_facets_auto_in_python():
    responses, _ = irtexam.simulate(12, model="2pl", seed=0, facets={"llm": 3, "retriever": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IrtexamWarning)
        result = irtexam.fit(responses, model="2pl", facets="auto", method="map", se=False)
    assert result.spec.facets == ("llm", "retriever")


def test_errors_are_value_errors_and_warnings_have_categories():
    assert issubclass(IrtexamError, ValueError) and issubclass(InputError, IrtexamError)
    assert issubclass(ConvergenceWarning, IrtexamWarning) and issubclass(IrtexamWarning, UserWarning)
    responses, _ = irtexam.simulate(6, 80, model="2pl", seed=0)
    values = responses.values.copy()
    values[0] = 1.0  # an item everyone answered correctly
    from irtexam.responses import ResponseMatrix
    constant = ResponseMatrix(values=values, items=responses.items, examinees=responses.examinees)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", ConvergenceWarning)
        irtexam.fit(constant, model="2pl", method="em", draws=20)
    data = [w for w in caught if issubclass(w.category, DataWarning)]
    assert data and "answered correctly by every examinee" in str(data[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        with pytest.raises(DataWarning):
            irtexam.fit(constant, model="2pl", method="em", draws=20)
    assert Message("x", ConvergenceWarning).category is ConvergenceWarning


def test_no_module_over_500_lines_in_irt_and_bank():
    long = {str(p.relative_to(ROOT)): n for p in _modules("irt", "bank")
            if (n := len(p.read_text().splitlines())) > 500}
    assert not long, long
