"""More grid axes: top_k and the prompt template as lists become facet columns (fake LLM, real retrievers)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from test_take import OpenBookFakeLLM

from irtexam.pipelines import SpecError, load_spec, take_exam
from irtexam.responses import ResponseMatrix

DATA = Path(__file__).parent / "data"


def _spec(tmp_path, axes: str):
    path = tmp_path / "grid.yaml"
    path.write_text(f"exam: {DATA / 'retrieval_exam.jsonl'}\ncorpus: {DATA / 'retrieval_corpus.jsonl'}\n"
                    "llms: [fake]\nretrievers: [bm25, oracle]\nicl: [0]\n" + axes)
    return load_spec(path)


def test_top_k_and_prompt_lists_are_facets(tmp_path):
    spec = _spec(tmp_path, "top_k: [1, 2]\nprompt:\n  - {name: plain}\n"
                           "  - {name: terse, prompt: \"{context}Q: {question}\\n{choices}\\nA:\"}\n")
    out = tmp_path / "run"
    res = take_exam(spec, out, llm_factory=lambda e: OpenBookFakeLLM(), progress=False)
    assert res.n_pipelines == 2 * 2 * 2 and res.scored_pairs == 8 * 8
    answers = pd.read_parquet(out / "answers.parquet")
    assert set(answers["pipeline"]) >= {"fake|bm25|icl0|k1|terse", "fake|oracle|icl0|k2|plain"}
    assert (answers[answers.top_k == "k1"].n_passages <= 1).all()
    assert answers[(answers.top_k == "k2") & (answers.retriever == "bm25")].n_passages.max() == 2
    # the two templates give different prompts for the same item and context
    one = answers[(answers.item == "q1") & (answers.retriever == "bm25") & (answers.top_k == "k1")]
    assert one.set_index("prompt")["prompt_sha"].nunique() == 2
    rm = ResponseMatrix.read(out / "responses.csv")
    assert rm.examinee_facets.loc["fake|bm25|icl0|k1|terse", "top_k"] == "k1"
    assert rm.examinee_facets.loc["fake|bm25|icl0|k1|terse", "prompt"] == "terse"
    recall = pd.read_csv(out / "retrieval_recall.csv")
    assert sorted(recall[recall.retriever == "bm25"].k) == [1, 2]
    acc = pd.read_csv(out / "accuracy.csv")
    assert {"top_k", "prompt"} <= set(acc.columns) and len(acc) == 8
    again = take_exam(spec, out, llm_factory=lambda e: OpenBookFakeLLM(), progress=False)
    assert again.scored_pairs == 0 and again.resumed_pairs == 64


def test_single_levels_keep_the_old_ids(tmp_path):
    spec = _spec(tmp_path, "top_k: 2\n")
    res = take_exam(spec, tmp_path / "run", llm_factory=lambda e: OpenBookFakeLLM(), progress=False)
    assert res.n_pipelines == 2
    rm = ResponseMatrix.read(tmp_path / "run" / "responses.csv")
    assert set(rm.examinees) == {"fake|bm25|icl0", "fake|oracle|icl0"}
    assert "top_k" not in rm.examinee_facets.columns and "prompt" not in rm.examinee_facets.columns


@pytest.mark.parametrize("axes, message", [
    ("prompt: [{name: a}, {name: a}]\n", "distinct"),
    ("prompt: [{prompt: 'x'}]\n", "must be a table with a 'name'"),
    ("top_k: [2, 0]\n", "integer >= 1"),
])
def test_axis_errors(tmp_path, axes, message):
    with pytest.raises(SpecError, match=message):
        _spec(tmp_path, axes)
