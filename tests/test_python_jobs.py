"""The three jobs from Python with the calls a newcomer guesses: DataFrames in, labelled tables out,
pruning that drops items without information first, the exam's texts attached, short reprs, small saves,
readable plots, and the three example scripts."""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import irtexam  # noqa: E402
from irtexam import analysis, plotting  # noqa: E402
from irtexam.analysis import pruning as pr  # noqa: E402
from irtexam.errors import InputError  # noqa: E402
from irtexam.exam.schema import ExamItem, write_exam  # noqa: E402
from irtexam.responses import ResponseMatrix  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _long(n_items=14, n_constant=3, seed=0) -> pd.DataFrame:
    """A long table: 2 llms x 3 icl x 4 replicas, 2PL responses; the last ``n_constant`` items all wrong."""
    rng = np.random.default_rng(seed)
    examinees = [(llm, icl, r) for llm in ("big", "small") for icl in ("icl0", "icl1", "icl2") for r in range(4)]
    theta = np.array([(1.0 if llm == "big" else -1.0) + rng.normal(0, 0.5) for llm, _, _ in examinees])
    a, b = rng.uniform(0.8, 2.0, n_items), rng.normal(0, 1, n_items)
    p = 1 / (1 + np.exp(-a[:, None] * (theta[None] - b[:, None])))
    x = (rng.random(p.shape) < p).astype(int)
    x[n_items - n_constant:] = 0
    rows = [{"item": f"q{i}", "examinee": f"{llm}|{icl}|{r}", "response": int(x[i, m]), "llm": llm, "icl": icl}
            for i in range(n_items) for m, (llm, icl, r) in enumerate(examinees)]
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ DataFrames in
def test_coerce_wide_with_nullable_types_and_missing():
    wide = pd.DataFrame({"q1": pd.array([1, 0, None], dtype="Int64"),
                         "q2": pd.array([True, None, False], dtype="boolean"),
                         "q3": [1.0, np.nan, 0.0]}, index=["m1", "m2", "m3"])
    rm = ResponseMatrix.coerce(wide)
    assert rm.items == ("q1", "q2", "q3") and rm.examinees == ("m1", "m2", "m3")
    np.testing.assert_array_equal(rm.values, [[1, 0, np.nan], [1, np.nan, 0], [1, np.nan, 0]])
    assert ResponseMatrix.coerce(rm) is rm


def test_coerce_long_dataframe_keeps_facets_and_matches_the_file():
    path = ROOT / "data/responses/responses.csv.gz"
    from_frame = ResponseMatrix.coerce(pd.read_csv(path))
    from_file = ResponseMatrix.coerce(path)
    assert from_frame.facet_names == ["llm", "retriever", "icl"]
    assert from_frame.fingerprint() == from_file.fingerprint()


@pytest.mark.parametrize("bad, words", [
    (pd.DataFrame({"q1": [1, 2]}), "not valid"),
    (pd.DataFrame({"q1": [1, 0], "llm": ["x", "y"]}), "column 'llm'"),
    (pd.DataFrame({"item": ["a"], "response": [1]}), "not all of"),
    ([[1, 0]], "cannot use a list"),
    (pd.DataFrame(), "empty"),
])
def test_coerce_rejects_with_one_line_saying_what_is_accepted(bad, words):
    with pytest.raises(InputError) as info:
        ResponseMatrix.coerce(bad)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_fit_takes_a_wide_or_long_dataframe():
    long = _long()
    rm = ResponseMatrix.coerce(long)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from_long = irtexam.fit(long, model="2pl", facets=["llm"], se=False, method="map")
        from_wide = irtexam.fit(rm.to_wide(), model="2pl", se=False)
    assert list(from_long.items.index) == list(rm.items)
    assert set(from_long.facets["level"]) == {"big", "small"}
    assert list(from_wide.items.index) == list(rm.items) and from_wide.facets is None


# ------------------------------------------------------------------ pruning
def test_uninformative_items_and_reasons():
    values = np.array([[1, 1, np.nan], [0, 0, 0], [np.nan] * 3, [1, 0, 1]], dtype=float)
    rm = ResponseMatrix(values=values, items=["a", "b", "c", "d"], examinees=["x", "y", "z"])
    assert pr.uninformative_items(rm) == {"a": "all correct", "b": "all wrong", "c": "no responses"}


def test_tie_rule_uses_the_other_score_then_the_natural_id():
    scores = pd.Series({"q10": 0.5, "q2": 0.5, "q3": 0.5, "q1": 0.9})
    other = pd.Series({"q10": 0.1, "q2": 0.3, "q3": 0.3, "q1": 0.0})
    assert pr.choose_drops(scores, 2, other) == ["q10", "q2"]  # q10 lowest other; q2 before q3 by id
    assert pr.choose_drops(scores, 2) == ["q2", "q3"]  # natural order: q2 < q3 < q10
    assert pr.ties_at_cut(scores, ["q10", "q2"]) == 1  # q3 tied with the cut and kept


class WarningFit:
    """A cheap fit that warns on every call, to see prune summarise its refits' warnings."""

    def __init__(self):
        self.kwargs = []

    def __call__(self, rm, **kw):
        self.kwargs.append(kw)
        warnings.warn("the same fit warning", UserWarning)
        x = rm.values
        a = np.nanstd(x, axis=1) * 3 + np.arange(rm.n_items) * 1e-3
        items = pd.DataFrame({"a": a, "b": 0.0, "c": 0.0}, index=list(rm.items))
        theta = np.nanmean(x, axis=0)
        return SimpleNamespace(items=items, examinees=pd.DataFrame({"theta": theta}, index=list(rm.examinees)),
                               fit_stats={}, method="spy")


def test_prune_drops_uninformative_first_passes_fit_arguments_and_warns_once():
    long = _long()
    spy = WarningFit()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = irtexam.prune(long, model="2pl", facets=["llm", "icl"], method="nuts", guessing=0.25, drop=0.2,
                            steps=2, min_items=3, fit_fn=spy, progress=False)
    assert len(caught) == 1 and "3 fits raised 1 distinct warning" in str(caught[0].message)
    assert caught[0].filename == __file__  # points at the caller's line
    assert res.warnings and "at step 0, 1, 2" in res.warnings[0]
    assert all(kw["facets"] == ["llm", "icl"] and kw["method"] == "nuts" and kw["guessing"] == 0.25
               for kw in spy.kwargs)
    assert set(res.uninformative) == {"q11", "q12", "q13"}
    assert not set(res.uninformative) & set(res.kept_items)
    dec = res.decisions.set_index("item")
    assert (dec.loc[["q11", "q12", "q13"], "step_dropped"] == 0).all()
    assert (dec.loc[["q11", "q12", "q13"], "reason"] == "all wrong").all()
    assert res.steps["n_items"].tolist() == [11, 9, 7] and res.steps["n_dropped"].tolist() == [3, 2, 2]
    assert "3 without information removed first (3 all wrong)" in res.summary()
    assert len(repr(res).splitlines()) < 12


def test_prune_rejects_an_argument_fit_does_not_take():
    with pytest.raises(InputError, match="unknown argument.*colour"):
        irtexam.prune(_long(), drop=0.2, steps=1, colour="red", progress=False)


def test_prune_real_fit_keeps_no_item_without_information(tmp_path):
    long = _long(n_items=16, n_constant=4)
    long.loc[long["item"] == "q12", "response"] = 1  # one all-correct item too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = irtexam.prune(long, model="2pl", facets=["llm"], drop=0.15, steps=1, by="information",
                            min_items=3, progress=False, method="map")
    rm = ResponseMatrix.coerce(long)
    without = set(rm.items) - set(rm.separating_items())
    assert without == {"q12", "q13", "q14", "q15"} and not without & set(res.kept_items)
    assert res.uninformative["q12"] == "all correct" and res.settings["facets"] == ["llm"]
    assert len(res.kept_items) == 12 - pr.drop_count(12, 0.15, 3)
    exam = [ExamItem(id=f"q{i}", question=f"What is {i}?", choices=["x", "y"], answer=0) for i in range(16)]
    exam.append(ExamItem(id="extra", question="never taken?", choices=["x", "y"], answer=1))
    write_exam(exam, tmp_path / "exam.jsonl")
    with pytest.warns(UserWarning, match="1 exam item"):
        out = res.write_exam(tmp_path / "exam.jsonl", tmp_path / "next.jsonl")
    written = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert written == [i.id for i in exam if i.id in set(res.kept_items)]  # the exam's order
    with pytest.raises(InputError, match="not in the exam"):
        res.write_exam(exam[:3], tmp_path / "bad.jsonl")


# ------------------------------------------------------------------ categories and exam metadata
def test_categorize_exam_items_uses_the_question_only_and_item_ids(tmp_path):
    exam = [ExamItem(id="z9", question="What does VACUUM do?", choices=["design", "create", "build", "x"],
                     answer=0, provenance={"passage": "evaluate, analyze, create"}),
            ExamItem(id="a1", question="How do you configure the port?", choices=["a", "b"], answer=1)]
    cats = analysis.categorize(exam)
    assert list(cats.index) == ["z9", "a1"]
    assert cats.loc["z9", "bloom"] == "uncategorised" and cats.loc["a1", "bloom"] == "apply"
    write_exam(exam, tmp_path / "exam.jsonl")
    assert analysis.categorize(irtexam.read_exam(tmp_path / "exam.jsonl")).equals(cats)
    assert list(analysis.categorize(["What is x?", "Why y?"])["question_word"]) == ["what", "why"]
    assert analysis.categorize(pd.Series({"k": "Which one?"})).loc["k", "question_word"] == "which"
    with pytest.raises(InputError, match="cannot categorise"):
        analysis.categorize(42)
    table = analysis.exam_table(exam)
    assert table.loc["a1", "correct"] == "b" and table.loc["z9", "n_choices"] == 4
    items = pd.DataFrame({"a": [1.0, 2.0]}, index=pd.Index(["a1", "z9"], name="item"))
    joined = items.join(table).join(cats)
    assert joined.loc["z9", "question"] == "What does VACUUM do?" and joined.loc["a1", "bloom"] == "apply"


# ------------------------------------------------------------------ the fit object
@pytest.fixture(scope="module")
def small_fit():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return irtexam.fit(_long(), model="2pl", facets=["llm"], draws=100, method="map")


def test_repr_is_one_screen(small_fit):
    text = repr(small_fit)
    assert len(text.splitlines()) <= 24 and len(text) < 2400
    assert text.startswith("FitResult: 2PL by MAP on 14 items x 24 examinees")
    best = small_fit.examinees["theta"].idxmax()
    assert best in text and "log-likelihood" in text


def test_labelled_information_draws_and_theta(small_fit):
    grid = np.array([-1.0, 0.0, 1.0])
    info = small_fit.information(grid)
    assert list(info.columns) == list(small_fit.items.index) and list(info.index) == list(grid)
    np.testing.assert_allclose(info.to_numpy(), small_fit.information_array(grid))
    band = small_fit.information(grid, draws=10)
    assert band.dims == ("draw", "theta", "item") and band.shape == (10, 3, 14)
    a = small_fit.draws("a", n=7, as_frame=True)
    assert a.shape == (7, 14) and list(a.columns) == list(small_fit.items.index)
    np.testing.assert_allclose(a.to_numpy(), small_fit.draws("a", n=7))
    assert list(small_fit.draws("theta_llm", n=3, as_frame=True).columns) == ["big", "small"]
    assert small_fit.theta(as_frame=True)["theta"].tolist() == small_fit.theta().tolist()


def test_save_without_idata_is_small_and_loads(small_fit, tmp_path):
    small_fit.save(tmp_path / "lean", idata=False)
    small_fit.save(tmp_path / "full")
    lean, full = small_fit.saved_size(tmp_path / "lean"), small_fit.saved_size(tmp_path / "full")
    assert "fit.nc" not in lean and "fit.nc" in full and lean["total"] < full["total"]
    back = irtexam.load_fit(tmp_path / "lean")
    np.testing.assert_allclose(back.items["a"], small_fit.items["a"])


# ------------------------------------------------------------------ plots
def test_plot_labels_say_what_is_drawn():
    items = pd.DataFrame({"a": [0.5, 1.0, 1.8], "b": [-1.0, 0.0, 0.5], "c": [0.2, 0.2, 0.1]},
                         index=["q1", "q2", "q3"])
    grid = analysis.theta_grid()
    rng = np.random.default_rng(0)
    a = items["a"].to_numpy() + 0.05 * rng.standard_normal((20, 3))
    for reduce, word in (("mean", "mean item information"), ("sum", "test information")):
        band = analysis.information_band(grid, a, np.tile(items["b"], (20, 1)), np.tile(items["c"], (20, 1)),
                                         reduce=reduce)
        ax = plotting.plot_information_band(band)
        assert word in ax.get_ylabel()
        plt.close(ax.figure)
    ax = plotting.plot_item_information(items, max_items=2)
    labels = [line.get_label() for line in ax.lines]
    assert labels[:2] == ["q1", "q2"] and labels[2] == "mean of the 2 items shown"
    np.testing.assert_allclose(ax.lines[2].get_ydata(), analysis.information.table_information(grid, items.iloc[:2])
                               .mean(axis=1))
    plt.close(ax.figure)
    curves = pd.DataFrame({s: np.ones(3) for s in range(6)}, index=[0.0, 1.0, 2.0])
    ax = plotting.plot_pruning(curves)
    last = ax.lines[-1].get_color()

    def luminance(c):
        f = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in c[:3]]
        return 0.2126 * f[0] + 0.7152 * f[1] + 0.0722 * f[2]

    assert 1.05 / (luminance(last) + 0.05) >= 2.9  # readable on white (pale yellow gives 1.3)
    plt.close(ax.figure)


def test_icc_title_fits_inside_the_figure(tmp_path):
    rng = np.random.default_rng(1)
    items = pd.DataFrame({"a": rng.uniform(0.5, 2, 60), "b": rng.normal(size=60), "c": 0.2},
                         index=[f"q{i}" for i in range(60)])
    ax = plotting.plot_icc(items)
    fig = ax.figure
    fig.tight_layout()
    fig.canvas.draw()
    box = ax.title.get_window_extent(fig.canvas.get_renderer())
    width = fig.get_size_inches()[0] * fig.dpi
    assert box.x0 >= 0 and box.x1 <= width
    plt.close(fig)


# ------------------------------------------------------------------ examples
def _run_example(name: str, argv: list[str]) -> int:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main(argv)


def test_the_three_example_scripts_run_and_draw(tmp_path, capsys):
    data = ["--responses", str(ROOT / "data/responses/responses.csv.gz")]
    exam = ["--exam", str(ROOT / "data/responses/exam.jsonl")]
    figures = tmp_path / "figures"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _run_example("fit_abilities", data + ["--model", "2pl", "--figures", str(figures),
                                                            "--out", str(tmp_path / "fit")]) == 0
        assert _run_example("information_curves", data + exam + ["--figures", str(figures)]) == 0
        assert _run_example("prune_exam", data + exam + ["--steps", "1", "--figures", str(figures),
                                                                 "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for png in ("facet_abilities", "item_information", "exam_information", "information_by_bloom", "pruning"):
        data_bytes = (figures / f"{png}.png").read_bytes()
        assert data_bytes[:4] == b"\x89PNG" and len(data_bytes) > 10_000, png
    assert "FitResult: 2PL" in printed and "without information removed first" in printed
    kept = [json.loads(line)["id"] for line in (tmp_path / "exam_pruned.jsonl").read_text().splitlines()]
    rm = ResponseMatrix.read(ROOT / "data/responses/responses.csv.gz")
    assert kept and set(kept) <= set(rm.separating_items())
    assert (tmp_path / "fit" / "items.csv").exists() and not (tmp_path / "fit" / "fit.nc").exists()


def test_subpackages_are_attributes_after_a_plain_import():
    """`import irtexam; irtexam.analysis.categorize(irtexam.read_exam(path))`, as a newcomer writes it, in a fresh
    process (no earlier import of irtexam.analysis), without torch."""
    import subprocess
    import sys

    code = ("import sys, irtexam; exam = irtexam.read_exam('data/real_run/exam.jsonl'); "
            "table = irtexam.analysis.categorize(exam); assert list(table.index) == [it.id for it in exam]; "
            "assert callable(irtexam.plotting.plot_item_information); assert 'torch' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(Path(__file__).resolve().parents[1]))
    assert out.returncode == 0, out.stderr[-800:]
    assert out.stdout.strip() == "ok"
