"""`irtexam grade ...` end to end on small files (fast paths without model loading, plus one MiniLM run)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from irtexam.cli import main


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _read_jsonl(path):
    return [json.loads(x) for x in open(path) if x.strip()]


MTRAG = [
    {"task_id": "t1", "input": [{"speaker": "user", "text": "Default port?"}], "targets": [{"text": "It is 5432."}],
     "contexts": [{"text": "The default port is 5432."}], "predictions": [{"text": "The default port is 5432."}],
     "answerability": ["ANSWERABLE"]},
    {"task_id": "t2", "input": "Who wrote it?", "targets": [{"text": "Unknown."}], "contexts": [],
     "predictions": [{"text": "I don't know."}], "answerability": ["UNANSWERABLE"]},
]


def test_grade_without_grader_prints_help(capsys):
    assert main(["grade"]) == 2


def test_mtrag_cli_resumes(tmp_path, capsys):
    inp = _write_jsonl(tmp_path / "in.jsonl", MTRAG)
    out = tmp_path / "out.jsonl"
    assert main(["grade", "mtrag", "--input", inp, "--output", str(out), "--no-bertscore"]) == 0
    recs = _read_jsonl(out)
    assert [r["task_id"] for r in recs] == ["t1", "t2"]
    assert recs[1]["metrics"]["RB_agg_idk"] == [1.0] and recs[0]["metrics_info"]["idk_detector"] == "lexical"
    assert "BertscoreR" not in recs[0]["metrics"]  # --no-bertscore: not invented
    # simulate a crash after the first record: the second is redone, the first kept
    out.write_text(json.dumps(recs[0]) + "\n" + '{"task_id": "t2", "metr')
    assert main(["grade", "mtrag", "--input", inp, "--output", str(out), "--no-bertscore"]) == 0
    text = capsys.readouterr().out
    assert "already_done: 1" in text and "scored_now: 1" in text
    assert [r["task_id"] for r in _read_jsonl(out)] == ["t1", "t2"]


def test_mtrag_cli_bad_input_names_the_row(tmp_path, capsys):
    inp = _write_jsonl(tmp_path / "in.jsonl", [MTRAG[0], {"task_id": "t3", "targets": []}])
    assert main(["grade", "mtrag", "--input", inp, "--output", str(tmp_path / "o.jsonl"), "--no-bertscore"]) == 2
    assert "row 2" in capsys.readouterr().err


def test_exampp_cli_from_graded_file(tmp_path, capsys):
    bank = _write_jsonl(tmp_path / "bank.jsonl", [{"query_id": "q1", "questions": [
        {"question_id": "a", "question": "A?"}, {"question_id": "b", "question": "B?"}]}])
    runs = _write_jsonl(tmp_path / "runs.jsonl", [
        {"query_id": "q1", "system": s, "passage_id": p, "text": p, "rank": i + 1}
        for s, order in {"S1": ["p1", "p2"], "S2": ["p2", "p3"], "S3": ["p3"]}.items() for i, p in enumerate(order)])
    graded = _write_jsonl(tmp_path / "graded.jsonl", [
        {"query_id": "q1", "passage_id": "p1", "exam_grades": [{"question_id": "a", "self_rating": 5},
                                                               {"question_id": "b", "self_rating": 1}]},
        {"query_id": "q1", "passage_id": "p2", "exam_grades": [{"question_id": "a", "self_rating": 2},
                                                               {"question_id": "b", "self_rating": 4}]},
        {"query_id": "q1", "passage_id": "p3", "exam_grades": [{"question_id": "a", "self_rating": 0},
                                                               {"question_id": "b", "self_rating": 0}]}])
    lb, qrels, resp = tmp_path / "lb.csv", tmp_path / "exam.qrels", tmp_path / "resp.csv"
    assert main(["grade", "exampp", "--bank", bank, "--runs", runs, "--graded", graded, "--tau", "4",
                 "--qrels", str(qrels), "--leaderboard", str(lb), "--responses", str(resp)]) == 0
    board = pd.read_csv(lb).set_index("system")
    assert board.loc["S1", "EXAM-Cover@tau4,k20"] == 1.0 and board.loc["S2", "EXAM-Cover@tau4,k20"] == 0.5
    assert board.loc["S3", "MAP"] == 0.0
    assert sorted(qrels.read_text().split("\n")[:-1]) == ["q1 0 p1 5", "q1 0 p2 4", "q1 0 p3 0"]
    r = pd.read_csv(resp)
    assert set(r["response"]) <= set(range(6)) and len(r) == 6
    # correlate two leaderboard columns
    assert main(["grade", "correlate", str(lb), str(lb), "--a-col", "MAP", "--b-col", "EXAM-Cover@tau4,k20"]) == 0
    assert '"n_systems": 3' in capsys.readouterr().out


@pytest.mark.llm
def test_avert_cli_with_minilm(tmp_path, capsys):
    exam = _write_jsonl(tmp_path / "exam.jsonl", [
        {"id": "q1", "question": "Capital of France?", "choices": ["London", "Paris", "Rome", "Berlin"], "answer": 1},
        {"id": "q2", "question": "2+2?", "choices": ["3", "4", "5", "22"], "answer": 1}])
    answers = _write_jsonl(tmp_path / "answers.jsonl", [
        {"item": "q1", "examinee": "p1", "answer": "The answer is B: Paris.", "facets": {"llm": "m1"}},
        {"item": "q2", "examinee": "p1", "answer": "The answer is A: 3.", "facets": {"llm": "m1"}},
        {"item": "q9", "examinee": "p1", "answer": "whatever", "facets": {"llm": "m1"}}])
    out, resp = tmp_path / "graded.jsonl", tmp_path / "resp.csv"
    assert main(["grade", "avert", "--exam", exam, "--answers", answers, "--output", str(out),
                 "--responses", str(resp)]) == 0
    rows = _read_jsonl(out)
    assert [r["response"] for r in rows] == [1, 0] and rows[0]["encoder"] == "all-MiniLM-L6-v2"
    text = capsys.readouterr().out
    assert "skipped_unknown_item: 1" in text and "agreement with exact-letter matching: 1.000 on 2" in text
    assert list(pd.read_csv(resp).columns[:4]) == ["item", "examinee", "response", "llm"]
