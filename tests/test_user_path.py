"""The user's path around the core (issue 13): list options, warnings, readable report tables,
ICC selection, local dependence without uninformative pairs, the demo's live verdict, columnar I/O."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from irtexam.analysis.diagnostics import local_dependence
from irtexam.analysis.report import key_value_table
from irtexam.analysis.summary import split_fit_stats
from irtexam.cli import main, split_list
from irtexam.commands.demo import live_verdict
from irtexam.errors import InputError
from irtexam.plotting import icc_selection
from irtexam.responses import ResponseMatrix


def test_split_list_is_the_one_list_convention():
    assert split_list("llm, retriever,,icl ") == ["llm", "retriever", "icl"]
    assert split_list(None) == [] and split_list("") == []


def test_warnings_print_as_one_line_without_source_paths(monkeypatch, capsys):
    from irtexam.commands import fit as fit_command

    def run(args):
        warnings.warn("3 item(s) were answered correctly\nby every examinee", UserWarning)
        warnings.warn("ArviZ is undergoing a major refactor", FutureWarning)  # a developer warning: hidden
        return 0

    monkeypatch.setattr(fit_command, "run", run)
    assert main(["fit", "x.csv", "--out", "y"]) == 0
    err = capsys.readouterr().err
    assert err.strip() == "warning: 3 item(s) were answered correctly by every examinee"


def test_fit_stats_split_into_scalars_and_per_item_columns():
    stats = {"rmse": 0.33, "n_observed": 10, "converged": True, "item_rmse": {"q1": 0.1, "q2": 0.2},
             "optimizer": {"solver": "lbfgs", "converged": True, "iterations": 7, "message": "long text"},
             "draws": {"k_hat": [0.1, 0.2]}}
    scalars, per_item = split_fit_stats(stats, ["q1", "q2", "q3"])
    assert scalars == {"rmse": 0.33, "n_observed": 10, "converged": True, "optimizer": "lbfgs, converged, 7 iterations"}
    assert list(per_item) == ["item_rmse"] and np.isnan(per_item["item_rmse"]["q3"])
    table = key_value_table({**scalars, "item_rmse": {"q1": 0.1}}, {"rmse": "RMSE, IRT model"})
    assert table.iloc[0].tolist() == ["RMSE, IRT model", "0.33"]
    assert "item_rmse" not in set(table["quantity"])  # no dict in a cell


def test_icc_selection_spreads_over_difficulty_and_keeps_highlights():
    items = pd.DataFrame({"b": np.linspace(-3, 3, 200)}, index=[f"q{i}" for i in range(200)])
    chosen = icc_selection(items, 12, ["q100"])
    assert len(chosen) == 12 and chosen[0] == "q100"
    assert {"q0", "q199"} <= set(chosen)  # both ends of the difficulty range
    assert icc_selection(items.head(5), 12) == list(items.head(5).index)


def test_local_dependence_leaves_out_items_nobody_or_everybody_answered():
    rng = np.random.default_rng(0)
    theta = rng.normal(size=80)
    p = 1 / (1 + np.exp(-(theta[None, :] - rng.normal(size=(6, 1)))))
    x = (rng.random(p.shape) < p).astype(float)
    x[0] = 0.0  # nobody
    x[1] = 0.0  # nobody: residuals -P of items 0 and 1 correlate ~1
    x[2] = np.nan  # unanswered
    table = local_dependence(x, p, [f"q{i}" for i in range(6)])
    assert table.attrs["constant_items"] == 3
    assert not ({"q0", "q1", "q2"} & (set(table["item_1"]) | set(table["item_2"])))


def test_live_verdict_says_whether_the_live_grid_separates_the_llms(tmp_path):
    take, fit = tmp_path / "take", tmp_path / "fit"
    take.mkdir()
    fit.mkdir()
    pd.DataFrame({"item": ["a", "b", "c", "a", "b", "c"], "examinee": ["m1"] * 3 + ["m2"] * 3,
                  "response": [1, 1, 0, 0, 0, 1], "llm": ["big"] * 3 + ["small"] * 3}).to_csv(
        take / "responses.csv", index=False)
    facets = pd.DataFrame({"facet": ["llm", "llm"], "level": ["small", "big"], "theta": [-1.0, 1.0],
                           "theta_low": [-1.5, 0.6], "theta_high": [-0.5, 1.4]})
    facets.to_csv(fit / "facets.csv", index=False)
    verdict = live_verdict(take, fit)
    assert verdict.index("big") < verdict.index("small") and "do not overlap" in verdict and "67% correct" in verdict
    facets.assign(theta_low=[-1.5, -0.8]).to_csv(fit / "facets.csv", index=False)
    assert "too few" in live_verdict(take, fit)
    # every pipeline answered alike: no ranking claimed, whatever the fit's intervals say (the demo's live slice
    # once reported "intervals do not overlap" for two LLMs with the same answers, from a MAP fit)
    pd.DataFrame({"item": ["a", "b", "c", "a", "b", "c"], "examinee": ["m1"] * 3 + ["m2"] * 3,
                  "response": [1, 0, 0, 1, 0, 0], "llm": ["big"] * 3 + ["small"] * 3}).to_csv(
        take / "responses.csv", index=False)
    facets.to_csv(fit / "facets.csv", index=False)
    verdict = live_verdict(take, fit)
    assert "cannot rank" in verdict and "(1 of 3 right)" in verdict and "do not overlap" not in verdict


def test_no_separating_item_is_reported_and_small_faceted_map_fits_recommend_nuts():
    import irtexam

    alike = ResponseMatrix.from_long(pd.DataFrame({
        "item": ["a", "b", "a", "b", "a", "b"], "examinee": ["m1", "m1", "m2", "m2", "m3", "m3"],
        "response": [1, 0, 1, 0, 1, np.nan]}).dropna())
    assert alike.separating_items() == []
    assert any("no item separates the examinees" in m for m in alike.warnings())
    responses, _ = irtexam.simulate(12, 24, model="2pl", seed=4, facets={"llm": 2, "icl": 3})
    assert responses.separating_items() and not any("no item separates" in m for m in responses.warnings())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        small = irtexam.fit(responses, model="2pl", facets="llm,icl", draws=50, method="map")
        plain = irtexam.fit(responses, model="2pl", draws=50, method="map")
    assert any("--method nuts" in m and "12 items" in m for m in small.warnings)
    assert not any("facet intervals are too narrow" in m for m in plain.warnings)  # no facets: no facet intervals


def test_columnar_reader_parses_each_distinct_value_once_and_names_the_row(tmp_path):
    rows = ["item,examinee,response"] + [f"q{i},e{m},{'true' if (i + m) % 2 else 0}" for i in range(50)
                                          for m in range(20)]
    path = tmp_path / "r.csv"
    path.write_text("\n".join(rows) + "\n")
    rm = ResponseMatrix.read(path)
    assert rm.values.shape == (50, 20) and np.nansum(rm.values) == 500
    rows[777] = rows[777].rsplit(",", 1)[0] + ",maybe"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(InputError, match=r"row 777, column 'response'.*'maybe'"):
        ResponseMatrix.read(path)


def test_fingerprint_follows_the_data_not_the_file_format(tmp_path):
    rm = ResponseMatrix.read("data/real_run/responses.csv.gz")
    back = ResponseMatrix.read(rm.save(tmp_path / "r.parquet"))
    assert back.fingerprint() == rm.fingerprint()
    changed = rm.values.copy()
    changed[0, 0] = 1 - np.nan_to_num(changed[0, 0])
    other = ResponseMatrix(values=changed, items=rm.items, examinees=rm.examinees, examinee_facets=rm.examinee_facets)
    assert other.fingerprint() != rm.fingerprint()


@pytest.mark.llm
def test_stop_strings_end_a_batch_early_with_the_same_text():
    """A row stops decoding at its stop string; the kept text equals decoding on and cutting afterwards."""
    from irtexam.llm import GenerationParams, installed_models, load_llm

    if "smollm2-135m" not in installed_models():
        pytest.skip("SmolLM2 not installed")
    llm = load_llm("smollm2-135m", dtype="float32", reuse=False)
    prompts = ["Count: 1, 2, 3,", "List three colours, separated by commas:"]
    full = llm.generate(prompts, GenerationParams(max_new_tokens=24))
    stopped = llm.generate(prompts, GenerationParams(max_new_tokens=24, stop=(",",)))
    assert stopped == [text.split(",")[0] for text in full]
