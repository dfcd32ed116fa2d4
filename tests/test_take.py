"""The pipeline grid end to end with a fake LLM: outputs, dedup, resume after a crash."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from irtexam.llm.base import ContinuationScore
from irtexam.pipelines import load_spec, take_exam
from irtexam.responses import ResponseMatrix

DATA = Path(__file__).parent / "data"


class OpenBookFakeLLM:
    """Fake LLM for unit tests: a candidate scores high when its text appears in the prompt.

    log-likelihood = -2 per word + 10 x (share of the candidate's words found in the context,
    the prompt before its first "Question:"); so it answers well exactly when retrieval
    put the right passage in the prompt.
    Raises after ``fail_after`` score() calls to simulate a crash. ``tiebreak`` subtracts 1e-6 x the
    candidate's position, so candidates the rule scores alike (same word count, nothing in the context)
    go to the first one as before instead of tying (take does not score tied items); ``tiebreak=False``
    is the tying scorer.
    """

    def __init__(self, name="fake", fail_after=None, tiebreak=True):
        self.name = name
        self.fail_after = fail_after
        self.tiebreak = tiebreak
        self.calls = 0
        self.scored: list[tuple[str, tuple[str, ...]]] = []

    def score(self, requests):
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError("simulated crash")
        self.calls += 1
        out = []
        for r in requests:
            self.scored.append((r.prompt, r.continuations))
            context = set(re.findall(r"\w+%?", r.prompt.split("Question:")[0].lower()))
            row = []
            for position, c in enumerate(r.continuations):
                words = re.findall(r"\w+%?", c.lower())
                share = sum(w in context for w in words) / max(len(words), 1)
                lp = -2.0 * len(words) + 10.0 * share - (1e-6 * position if self.tiebreak else 0.0)
                row.append(ContinuationScore(lp, len(words), len(c)))
            out.append(row)
        return out

    def generate(self, prompts, params=None):
        return [f"gen{len(p)}" for p in prompts]


def _spec(tmp_path, extra=""):
    path = tmp_path / "grid.yaml"
    path.write_text(f"exam: {DATA / 'retrieval_exam.jsonl'}\ncorpus: {DATA / 'retrieval_corpus.jsonl'}\n"
                    "llms: [fake-a, fake-b]\nretrievers: [closed-book, bm25, oracle]\nicl: [0, 1]\ntop_k: 2\n"
                    "batch_items: 2\n" + extra)
    return load_spec(path)


def test_take_writes_all_artifacts(tmp_path):
    spec = _spec(tmp_path)
    out = tmp_path / "run"
    res = take_exam(spec, out, llm_factory=lambda e: OpenBookFakeLLM(e["name"]), progress=False)
    assert res.scored_pairs == 2 * 3 * 2 * 8 and res.resumed_pairs == 0
    rm = ResponseMatrix.read(out / "responses.csv")
    assert rm.values.shape == (8, 12) and not pd.isna(rm.values).any()
    assert "fake-a|bm25|icl1" in rm.examinees
    assert set(rm.examinee_facets.columns) >= {"llm", "retriever", "icl"}
    assert rm.examinee_facets.loc["fake-b|oracle|icl0", "retriever"] == "oracle"
    answers = pd.read_parquet(out / "answers.parquet")
    assert len(answers) == 96 and len(answers.iloc[0]["logprob_sum"]) == 4
    oracle = answers[answers.retriever == "oracle"]
    assert (oracle.n_passages == 1).all() and oracle.oracle_in_context.all()
    closed = answers[(answers.retriever == "closed-book") & (answers.icl_k == 0)]
    assert (closed.n_passages == 0).all()
    assert oracle.correct.mean() >= 0.75 > closed.correct.mean()
    acc = pd.read_csv(out / "accuracy.csv")
    assert list(acc.columns) == ["llm", "retriever", "ICL@0", "ICL@1", "best", "n_items"]
    row = acc[(acc.llm == "fake-a") & (acc.retriever == "oracle")].iloc[0]
    oracle_a = answers[(answers.llm == "fake-a") & (answers.retriever == "oracle")]
    assert row["ICL@0"] == pytest.approx(oracle_a[oracle_a.icl_k == 0].correct.mean())
    assert row["best"] == max(row["ICL@0"], row["ICL@1"])
    recall = pd.read_csv(out / "retrieval_recall.csv").set_index("retriever")
    assert recall.loc["oracle", "recall"] == 1.0 and recall.loc["bm25", "recall"] >= 0.75
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["prompt_template"]["sha256"] == spec.prompt.sha256 and prov["spec"]["sha256"] == spec.sha256
    assert prov["counts"]["scored_now"] == 96 and set(prov["models"]) == {"fake-a", "fake-b"}
    # the demonstrations of ICL@1 never include the test item
    icl1 = answers[answers.icl_k == 1]
    assert all(item not in demos for item, demos in zip(icl1["item"], icl1["demo_ids"]))


def test_dedup_shares_identical_prompts_across_pipelines(tmp_path):
    # two closed-book levels under different names build identical prompts: scored once
    spec = _spec(tmp_path, "")
    spec.retrievers = [{"name": "closed-book", "kind": "closed-book"}, {"name": "none2", "kind": "closed-book"}]
    spec.llms = [{"name": "fake"}]
    llm = OpenBookFakeLLM()
    res = take_exam(spec, tmp_path / "d", llm_factory=lambda e: llm, progress=False)
    assert res.dedup.requested == 32 and res.dedup.unique == 16 and len(llm.scored) == 16
    spec.dedup = False
    llm2 = OpenBookFakeLLM()
    take_exam(spec, tmp_path / "nd", llm_factory=lambda e: llm2, progress=False)
    assert len(llm2.scored) == 32
    a = pd.read_parquet(tmp_path / "d" / "answers.parquet")
    b = pd.read_parquet(tmp_path / "nd" / "answers.parquet")
    assert (a.chosen.values == b.chosen.values).all()


def _crashed_run(tmp_path):
    """A grid whose first LLM crashes after two item batches: (spec, out folder, the crashed LLM)."""
    spec = _spec(tmp_path)
    out = tmp_path / "run"
    crashing = OpenBookFakeLLM("fake-a", fail_after=2)
    with pytest.raises(RuntimeError, match="simulated crash"):
        take_exam(spec, out, llm_factory=lambda e: crashing, progress=False)
    return spec, out, crashing


def test_resume_after_crash_rescoring_nothing_finished(tmp_path):
    spec, out, crashing = _crashed_run(tmp_path)
    log = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    finished = {(r["pipeline"], r["item"]) for r in log}
    assert len(finished) == 2 * 2 * 6  # two batches of 2 items x 6 pipelines of fake-a
    # simulate a line cut short by the crash: it must be ignored and redone, not break the run
    with open(out / "answers.jsonl", "a") as fh:
        fh.write('{"pipeline": "fake-a|bm25|ic')
    second = {}

    def factory(entry):
        second[entry["name"]] = OpenBookFakeLLM(entry["name"])
        return second[entry["name"]]

    res = take_exam(spec, out, llm_factory=factory, progress=False)
    assert res.resumed_pairs == 24 and res.unreadable_lines == 1 and res.scored_pairs == 96 - 24
    prompts_first_run = {p for p, _ in crashing.scored}
    rescored = [p for p, _ in second["fake-a"].scored if p in prompts_first_run]
    assert rescored == []
    rm = ResponseMatrix.read(out / "responses.csv")
    assert rm.values.shape == (8, 12) and not pd.isna(rm.values).any()
    # a third run finds everything done and loads no model
    third = take_exam(spec, out, llm_factory=lambda e: pytest.fail("model loaded"), progress=False)
    assert third.scored_pairs == 0 and third.resumed_pairs == 96


def test_tables_only_rebuilds_a_partial_grid_without_loading_a_model(tmp_path):
    spec, out, _ = _crashed_run(tmp_path)
    res = take_exam(spec, out, llm_factory=lambda e: pytest.fail("model loaded"), progress=False,
                    score_pending=False)
    assert res.scored_pairs == 0 and res.resumed_pairs == 24 and res.missing_pairs == 96 - 24
    assert "not answered yet: 72" in res.summary()
    rm = ResponseMatrix.read(out / "responses.csv")
    assert int((~pd.isna(rm.values)).sum()) == 24  # only the answered cells, nothing invented
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["counts"]["missing_pairs"] == 72
    # the real run then picks up where the log ends
    full = take_exam(spec, out, llm_factory=lambda e: OpenBookFakeLLM(e["name"]), progress=False)
    assert full.scored_pairs == 72 and full.missing_pairs == 0


def test_changing_the_normalisation_rereads_the_log_without_scoring(tmp_path):
    out = tmp_path / "run"
    first = take_exam(_spec(tmp_path), out, llm_factory=lambda e: OpenBookFakeLLM(e["name"]), progress=False)
    assert first.scored_pairs == 96
    by_char = pd.read_parquet(out / "answers.parquet")
    assert (by_char.normalisation == "char").all() and (by_char.chosen == by_char.chosen_char).all()
    spec_sum = _spec(tmp_path, "normalisation: sum\n")
    again = take_exam(spec_sum, out, llm_factory=lambda e: pytest.fail("model loaded"), progress=False)
    assert again.scored_pairs == 0 and again.resumed_pairs == 96
    by_sum = pd.read_parquet(out / "answers.parquet")
    assert (by_sum.normalisation == "sum").all() and (by_sum.chosen == by_sum.chosen_sum).all()
    assert (by_sum.correct == (by_sum.chosen_sum == by_sum.answer).astype(int)).all()
    rm = ResponseMatrix.read(out / "responses.csv")
    assert int(np.nansum(rm.values)) == int(by_sum.correct.sum())
    assert json.loads((out / "provenance.json").read_text())["counts"]["answers_reread_under_normalisation"] == 96
    # the log itself is untouched: it still records the rule each answer was taken under
    logged = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert {r["normalisation"] for r in logged} == {"char"}


class LetterFakeLLM(OpenBookFakeLLM):
    """OpenBookFakeLLM plus a small preference among letters (bare letters never occur in the context, so the
    open-book rule alone ties every candidate: take refuses such a scorer)."""

    def score(self, requests):
        rows = super().score(requests)
        return [[ContinuationScore(s.logprob - 0.01 * (ord(c.strip()[:1] or "A") + len(r.prompt)) % 5, s.n_tokens,
                                   s.n_chars) for s, c in zip(row, r.continuations)]
                for row, r in zip(rows, requests)]


def test_changed_template_invalidates_log(tmp_path):
    spec = _spec(tmp_path)
    out = tmp_path / "run"
    take_exam(spec, out, llm_factory=lambda e: OpenBookFakeLLM(e["name"]), progress=False)
    from irtexam.pipelines import PromptTemplate

    spec.prompt = PromptTemplate(continuation=" {letter}")
    res = take_exam(spec, out, llm_factory=lambda e: LetterFakeLLM(e["name"]), progress=False)
    assert res.stale_records == 96 and res.scored_pairs == 96


class TiesOnOneItemFake(OpenBookFakeLLM):
    """OpenBookFakeLLM, except that every candidate of item ``target`` gets the same log-likelihood."""

    def __init__(self, name, target):
        super().__init__(name)
        self.target = target

    def score(self, requests):
        rows = super().score(requests)
        return [[ContinuationScore(-1.0, 1, 1) for _ in row] if self.target in r.prompt.rsplit("Question:", 1)[-1]
                else row for row, r in zip(rows, requests)]


def test_an_item_whose_candidates_tie_is_logged_not_scored(tmp_path):
    """Issue 27: a tied item is not answered 'A' by default: its cells are missing in responses.csv, counted
    in the summary and provenance, and the log keeps the record (tied: true)."""
    import json

    from irtexam.exam.schema import read_exam

    first = read_exam(DATA / "retrieval_exam.jsonl")[0]
    spec = _spec(tmp_path)
    out = tmp_path / "run"
    res = take_exam(spec, out, llm_factory=lambda e: TiesOnOneItemFake(e["name"], first.question), progress=False)
    assert res.tied_pairs == 12 and "tied candidates (not scored): 12" in res.summary()
    rm = ResponseMatrix.read(out / "responses.csv")
    row = rm.items.index(first.id)
    assert pd.isna(rm.values[row]).all() and not pd.isna(np.delete(rm.values, row, axis=0)).any()
    assert json.loads((out / "provenance.json").read_text())["counts"]["tied_not_scored"] == 12
    logged = [json.loads(x) for x in (out / "answers.jsonl").read_text().splitlines()]
    assert sum(r["tied"] for r in logged) == 12 and all(r["correct"] is None for r in logged if r["tied"])


def test_a_scorer_that_ties_every_letter_is_refused(tmp_path):
    """Issue 27: bare-letter continuations the open-book fake cannot tell apart tie on every item; take
    refuses the batch instead of answering candidate A everywhere."""
    from irtexam.errors import IrtexamError
    from irtexam.pipelines import PromptTemplate

    spec = _spec(tmp_path)
    spec.prompt = PromptTemplate(continuation=" {letter}")
    with pytest.raises(IrtexamError, match=r"the candidates of \d+ of \d+ items tie at the top"):
        take_exam(spec, tmp_path / "run", llm_factory=lambda e: OpenBookFakeLLM(e["name"], tiebreak=False),
                  progress=False)


def test_generate_keeps_free_form_answers(tmp_path):
    spec = _spec(tmp_path, "generate: {max_new_tokens: 8}\n")
    spec.llms = [{"name": "fake"}]
    take_exam(spec, tmp_path / "g", llm_factory=lambda e: OpenBookFakeLLM(), progress=False)
    answers = pd.read_parquet(tmp_path / "g" / "answers.parquet")
    assert answers["generated"].str.startswith("gen").all()


def test_take_cli(tmp_path, monkeypatch, capsys):
    from irtexam.cli import main
    from irtexam.pipelines import take as take_module

    monkeypatch.setattr(take_module, "default_llm_factory", lambda e: OpenBookFakeLLM(e["name"]))
    spec = _spec(tmp_path)
    assert main(["take", str(spec.source), "--out", str(tmp_path / "cli"), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "ICL@0" in text and "recall" in text
    bad = tmp_path / "bad.yaml"
    bad.write_text("exam: x.jsonl\n")
    assert main(["take", str(bad), "--out", str(tmp_path / "x")]) == 2
    assert "key 'llms': is required" in capsys.readouterr().err
