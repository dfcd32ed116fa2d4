"""analyze_fit tables/figures and HTML/Markdown rendering, on a fit-like object with known parameters."""

import base64
import json
import re

import matplotlib
matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from irtexam.analysis.report import render_html, render_markdown  # noqa: E402
from irtexam.analysis.summary import analyze_fit  # noqa: E402
from irtexam.irt import model as mdl  # noqa: E402
from irtexam.irt.result import FitResult  # noqa: E402
from irtexam.responses import ResponseMatrix  # noqa: E402

QUESTIONS = ["What is the default port?", "Which setting should you configure to enable TLS?",
             "How do you troubleshoot a failed deploy?", "Why should you monitor the queue?",
             "Name the service that stores logs.", "Where is the config file?"]


def known_fit(seed=0, n_ex=40, noise_item=True):
    """A fit-like object whose parameters are the truth used to simulate the responses."""
    rng = np.random.default_rng(seed)
    n_items = len(QUESTIONS)
    a = np.array([1.5, 2.0, 1.2, 0.9, 1.8, 0.02 if noise_item else 1.0])
    b = np.linspace(-1, 1, n_items); c = np.full(n_items, 0.2)
    th = rng.normal(size=n_ex)
    p = c[:, None] + (1 - c[:, None]) / (1 + np.exp(-a[:, None] * (th[None] - b[:, None])))
    x = (rng.random(p.shape) < p).astype(float)
    ids = [f"q{i}" for i in range(n_items)]
    exs = [f"pipe{j}" for j in range(n_ex)]
    facets = pd.DataFrame({"llm": ["small" if j % 2 else "big" for j in range(n_ex)]}, index=exs)
    rm = ResponseMatrix(values=x, items=ids, examinees=exs, examinee_facets=facets,
                        item_meta=pd.DataFrame({"question": QUESTIONS}, index=ids))
    items = pd.DataFrame({"a": a, "b": b, "c": c, "a_low": a - 0.3, "a_high": a + 0.3}, index=ids)
    examinees = pd.DataFrame({"theta": th, "theta_sd": 0.3, "theta_low": th - 0.5, "theta_high": th + 0.5},
                             index=exs)
    facet_df = pd.DataFrame({"facet": ["llm", "llm"], "level": ["big", "small"], "theta": [0.1, -0.1],
                             "theta_sd": [0.2, 0.2], "theta_low": [-0.2, -0.4], "theta_high": [0.4, 0.2]})

    r = np.random.default_rng(1)
    samples = {name: base + (0.1 if name != "c" else 0.01) * r.standard_normal((200, base.size))
               for name, base in {"a": a, "b": b, "c": c, "theta": th}.items()}
    samples["c"] = np.clip(samples["c"], 0, 0.5)
    spec = mdl.ModelSpec(kind="3pl")
    params = {"a": np.log(a), "d": -a * b, "c": np.log(c / (1 - c)), "theta_raw": th}
    return FitResult(spec=spec, design=mdl.build_design(rm, spec), method="map", responses=rm, params=params,
                     items=items, examinees=examinees, facets=facet_df, contrasts=None,
                     fit_stats={"loglik": -100.0, "rmse": 0.4}, samples=samples)


def test_analyze_fit_writes_tables_figures_and_flags(tmp_path):
    manifest = analyze_fit(known_fit(), tmp_path, n_draws=50)
    for name in ("items", "examinees", "exam_information", "information_by_bloom",
                 "information_by_question_word", "local_dependence", "facets", "summary"):
        assert name in manifest["tables"], name
    items = pd.read_csv(manifest["tables"]["items"], index_col=0)
    assert items.loc["q5", "low_discrimination"] and not items.loc["q1", "low_discrimination"]
    assert items.loc["q0", "question_word"] == "what" and "apply" in items.loc["q1", "bloom"]
    assert items.loc["q2", "bloom"] == "analyze"
    curve = pd.read_csv(manifest["tables"]["exam_information"])
    assert (curve["mean_information_low"] <= curve["mean_information"] + 1e-6).all()
    np.testing.assert_allclose(curve["se"], 1 / np.sqrt(curve["test_information"]), rtol=1e-6)
    assert any("discrimination near zero" in n for n in manifest["notes"])
    assert set(manifest["figures"]) >= {"icc", "item_information", "exam_information", "information_by_bloom",
                                        "information_by_question_word", "wright_map", "facets", "ppc_examinees"}
    s = json.loads(open(manifest["tables"]["summary"]).read())["summary"]
    assert s["n_items"] == 6 and s["low_discrimination"] == 1
    assert s["question_word_counts"]["what"] == 1


def test_missing_question_text_is_counted(tmp_path):
    fit = known_fit()
    fit.responses = ResponseMatrix(values=fit.responses.values, items=fit.responses.items,
                                   examinees=fit.responses.examinees)
    m = analyze_fit(fit, tmp_path, n_draws=20, figures=False)
    assert any("6 of 6 items have no question text" in n for n in m["notes"])
    exam_q = pd.Series(dict(zip(fit.responses.items, QUESTIONS)))
    m2 = analyze_fit(fit, tmp_path / "b", exam_questions=exam_q, n_draws=20, figures=False)
    assert not any("no question text" in n for n in m2["notes"])


def test_html_is_self_contained_and_markdown_links(tmp_path):
    manifest = analyze_fit(known_fit(), tmp_path / "files", n_draws=30)
    page = render_html(manifest, "t")
    imgs = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(imgs) == len(manifest["figures"])
    assert base64.b64decode(imgs[0])[:4] == b"\x89PNG"
    items = pd.read_csv(manifest["tables"]["items"])
    n_flag = int((items.low_discrimination | items.wrong_key_flag | items.misfit_flag).sum())
    assert n_flag >= 1 and f"Flagged items ({n_flag} of 6)" in page and "src='http" not in page and "Facet abilities" in page
    md = render_markdown(manifest, tmp_path, "t")
    assert "![icc](files/icc.png)" in md and "| item |" in md


@pytest.fixture(scope="module")
def fitdir(tmp_path_factory):
    import irtexam

    rm, _ = irtexam.simulate(25, None, model="3pl", seed=2, facets={"llm": 3, "retriever": 4})
    qs = pd.DataFrame({"question": [QUESTIONS[k % len(QUESTIONS)] + f" (v{k})" for k in range(rm.n_items)]},
                      index=list(rm.items))
    res = irtexam.fit(rm.with_item_meta(qs), model="3pl", facets=["llm", "retriever"], heldout=0.1, method="map")
    d = tmp_path_factory.mktemp("fit")
    res.save(d / "fit")
    return d / "fit"


def test_cli_info_and_report(fitdir, tmp_path, capsys):
    from irtexam.cli import main

    assert main(["info", str(fitdir), "--out", str(tmp_path / "info"), "--draws", "50"]) == 0
    out = capsys.readouterr().out
    assert "25 items, 12 examinees" in out and "RMSE" in out
    assert (tmp_path / "info" / "information_by_bloom.png").exists()
    assert (tmp_path / "info" / "facets.png").exists()
    items = pd.read_csv(tmp_path / "info" / "items.csv")
    assert items["bloom"].ne("unknown").all()  # question text travelled with the fit
    assert main(["report", str(fitdir), "--out", str(tmp_path / "r.html"), "--draws", "30"]) == 0
    page = (tmp_path / "r.html").read_text()
    assert page.count("data:image/png;base64,") >= 8 and "Contrasts between levels" in page
    assert main(["report", str(fitdir), "--out", str(tmp_path / "r.md"), "--draws", "30"]) == 0
    md = (tmp_path / "r.md").read_text()
    assert "![wright_map](r_files/wright_map.png)" in md
    assert main(["info", str(fitdir), "--out", str(tmp_path / "x"), "--theta-min", "2", "--theta-max", "1"]) == 2
    assert "--theta-max" in capsys.readouterr().err
