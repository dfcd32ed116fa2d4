"""End to end with the real packaged SmolLM2-135M: 3 items x 2 retrievers x ICL {0, 1}."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

DATA = Path(__file__).parent / "data"
pytestmark = pytest.mark.llm


def test_small_grid_with_smollm2(smol, tmp_path):
    from irtexam.exam.schema import read_exam
    from irtexam.pipelines import load_spec, take_exam
    from irtexam.responses import ResponseMatrix

    spec_path = tmp_path / "grid.toml"
    spec_path.write_text(f'exam = "{DATA / "retrieval_exam.jsonl"}"\ncorpus = "{DATA / "retrieval_corpus.jsonl"}"\n'
                         'llms = [{name = "smollm2-135m", dtype = "float32"}]\n'
                         'retrievers = ["closed-book", "bm25"]\nicl = [0, 1]\ntop_k = 1\n')
    spec = load_spec(spec_path)
    items = read_exam(spec.exam)[:3]
    out = tmp_path / "run"
    res = take_exam(spec, out, items=items, progress=False)
    assert res.scored_pairs == 12
    rm = ResponseMatrix.read(out / "responses.csv")
    assert rm.values.shape == (3, 4) and set(np.unique(rm.values)) <= {0.0, 1.0}
    assert sorted(rm.examinees) == sorted(f"smollm2-135m|{r}|icl{k}" for r in ("closed-book", "bm25") for k in (0, 1))
    answers = pd.read_parquet(out / "answers.parquet")
    assert all(np.all(np.array(lp) < 0) for lp in answers.logprob_sum)
    assert (answers[answers.retriever == "bm25"].n_passages == 1).all()
    # the recorded choice (default rule: per character, lm-eval acc_norm) and the per-token
    # pick are the argmaxes of the sums divided by characters and by tokens
    for _, row in answers.iterrows():
        item = next(i for i in items if i.id == row["item"])
        n_chars = np.array([len(c) for c in spec.prompt.continuations(item)])
        per_char = np.array(row.logprob_sum) / n_chars
        per_token = np.array(row.logprob_sum) / np.array(row.n_tokens)
        assert row.normalisation == "char"
        assert row.chosen == int(np.argmax(per_char)) and row.correct == int(row.chosen == row.answer)
        assert row.chosen_token == int(np.argmax(per_token))
    # the scores equal a naive per-candidate forward pass on the same prompt (fp32)
    from irtexam.exam.schema import read_exam as _r
    from irtexam.llm.base import ScoreRequest
    from irtexam.pipelines.prompt import PromptTemplate

    row = answers[(answers.retriever == "closed-book") & (answers.icl_k == 0)].iloc[0]
    item = next(i for i in items if i.id == row["item"])
    tpl = PromptTemplate()
    naive = smol.score_naive([ScoreRequest(tpl.render(item, [], []), tpl.continuations(item))])[0]
    assert np.allclose([s.logprob for s in naive], row.logprob_sum, atol=1e-3)
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["models"]["smollm2-135m"]["dtype"] == "float32" and prov["versions"]["torch"].startswith("2.13")
