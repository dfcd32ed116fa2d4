"""EXAM++ / RUBRIC: parsing, answer verification, EXAM-Cover, EXAM-Qrels via ir-measures, correlations."""

from __future__ import annotations

import pytest

from irtexam.errors import InputError
from irtexam.grading.exampp import (SELF_RATING_PROMPT, BankQuestion, ExamGrader, answers_match, exam_cover,
                                    exam_cover_query, exam_qrels, generate_question_bank, grade_passages,
                                    grade_table, graded_responses, leaderboard, parse_generated_questions,
                                    parse_self_rating, qrels_measures, rank_correlation, rankings,
                                    read_passages, read_question_bank, verify_answer, write_qrels, write_run)
from irtexam.llm.base import ContinuationScore


def test_prompts_are_the_papers():
    assert SELF_RATING_PROMPT.startswith("Can the question be answered based on the available context? choose one:")
    assert "- 3: The answer is partially relevant and complete, with noticeable gaps or inaccuracies." in SELF_RATING_PROMPT


@pytest.mark.parametrize("reply,expected", [
    ("4", (4, True)), ("Rating: 5 - highly relevant", (5, True)), (" 0: not relevant", (0, True)),
    ("unanswerable", (0, False)), ("Not enough information.", (0, False)), ("the epidermis", (1, False)),
    ("10", (1, False)),
])
def test_parse_self_rating(reply, expected):
    assert parse_self_rating(reply) == expected


def test_answer_verification_edit_distance():
    assert answers_match("rising", "rise")            # stems agree
    assert answers_match("The epidermis.", "epidermis")  # stopwords, punctuation dropped
    # "dermis" vs "epidermis": distance 3 >= 0.2 * 9 -> no match
    assert not answers_match("dermis", "epidermis")
    # "colour" vs "color": distance 1 < 0.2 * 6 = 1.2 -> match
    assert answers_match("colour", "color")
    assert not verify_answer("Not enough information", ["not enough information"])  # unanswerable phrase
    assert not verify_answer("(iii)", ["iii"]) and not verify_answer("a.", ["a"])   # ill-formed
    assert verify_answer("It will rise", ["rise", "increase"])  # 'it', 'will' are stopwords
    assert not verify_answer("The water table will fall", ["rise"])
    assert verify_answer("increase", ["rise", "increase"])


def test_parse_generated_questions():
    reply = 'Sure!\n```json\n{"questions": ["What is X?", "How does Y work?"]}\n```'
    assert parse_generated_questions(reply) == ["What is X?", "How does Y work?"]
    assert parse_generated_questions("1. What is the role of X?\n2. Why does Y fail?") == [
        "What is the role of X?", "Why does Y fail?"]
    assert parse_generated_questions("no questions here") is None


BANKS = {"q1": [BankQuestion("q1/a", "What is the outer layer of the skin?", ["epidermis"]),
                BankQuestion("q1/b", "What does melanin do?", ["protects from UV"])],
         "q2": [BankQuestion("q2/a", "What is a server?")]}
GRADES = {("q1", "p1"): {"q1/a": 5, "q1/b": 0}, ("q1", "p2"): {"q1/a": 2, "q1/b": 4},
          ("q1", "p3"): {"q1/a": 0, "q1/b": 0}, ("q2", "p9"): {"q2/a": 3}}
RUNS = {"good": {"q1": ["p1", "p2", "p3"], "q2": ["p9"]},
        "mid": {"q1": ["p3", "p2", "p1"], "q2": ["p9"]},
        "bad": {"q1": ["p3"]}}


def test_exam_cover_by_hand():
    # tau 4, k 1: good covers {a} of q1 -> 1/2; q2 grade 3 < 4 -> 0 => mean 0.25
    assert exam_cover_query(GRADES, "q1", RUNS["good"]["q1"], ["q1/a", "q1/b"], tau=4, k=1) == 0.5
    cov = exam_cover(GRADES, RUNS, BANKS, tau=4, k=1)
    assert cov == {"good": 0.25, "mid": 0.0, "bad": 0.0}
    # k 2: mid sees p3, p2 -> covers b -> 1/2 on q1
    assert exam_cover(GRADES, RUNS, BANKS, tau=4, k=2)["mid"] == 0.25
    # tau 3, k 20: good covers both on q1 and q2 -> 1.0; bad has no q2 passages -> 0
    cov = exam_cover(GRADES, RUNS, BANKS, tau=3, k=20)
    assert cov["good"] == 1.0 and cov["bad"] == 0.0


def test_qrels_round_trip_and_measures(tmp_path):
    import ir_measures

    qrels = exam_qrels(GRADES)
    assert ("q1", "p1", 5) in qrels and ("q1", "p2", 4) in qrels and ("q1", "p3", 0) in qrels
    path = tmp_path / "exam.qrels"
    write_qrels(qrels, path)
    back = sorted((q.query_id, q.doc_id, q.relevance) for q in ir_measures.read_trec_qrels(str(path)))
    assert back == sorted(qrels)
    run_path = tmp_path / "runs.txt"
    write_run(RUNS, run_path)
    runs_back = list(ir_measures.read_trec_run(str(run_path)))
    assert len(runs_back) == 9  # 4 + 4 + 1 ranked passages
    m = qrels_measures(qrels, RUNS, tau=4)
    # q1 relevant (>=4): p1, p2. good ranks p1,p2,p3 -> AP 1; q2 has no relevant doc (3 < 4)
    # mid ranks p3,p2,p1 -> AP(q1) = (1/2 + 2/3)/2 = 7/12; Rprec(q1) = 1/2
    good_q1 = ir_measures.calc_aggregate([ir_measures.AP(rel=4)], [ir_measures.Qrel(q, p, r) for q, p, r in qrels if q == "q1"],
                                          [ir_measures.ScoredDoc("q1", "p3", -1.0), ir_measures.ScoredDoc("q1", "p2", -2.0),
                                           ir_measures.ScoredDoc("q1", "p1", -3.0)])
    assert list(good_q1.values())[0] == pytest.approx(7 / 12)
    assert m["good"]["MAP"] >= m["mid"]["MAP"] >= m["bad"]["MAP"]
    assert set(m["good"]) == {"MAP", "NDCG@20", "Rprec"}
    board = leaderboard(m)
    assert list(board.index)[0] == "good"


def test_rank_correlation():
    a = {"s1": 0.9, "s2": 0.5, "s3": 0.1, "only_a": 1.0}
    assert rank_correlation(a, {"s1": 3, "s2": 2, "s3": 1})["spearman"] == pytest.approx(1.0)
    r = rank_correlation(a, {"s1": 1, "s2": 2, "s3": 3})
    assert r["spearman"] == pytest.approx(-1.0) and r["kendall"] == pytest.approx(-1.0) and r["n_systems"] == 3
    with pytest.raises(InputError, match="at least 3"):
        rank_correlation(a, {"s1": 1, "zz": 2})


def test_read_inputs_and_errors():
    banks = read_question_bank([{"query_id": "q1", "questions": ["What?", {"question": "Why?", "answers": "x"}]},
                                {"query_id": "q2", "question_id": "k", "question": "Who?"}])
    assert [b.question_id for b in banks["q1"]] == ["q1/q1", "q1/q2"] and banks["q1"][1].answers == ["x"]
    assert banks["q2"][0].question_id == "k"
    ps = read_passages([{"query_id": "q1", "system": "s", "response": "para one\n\npara two"},
                        {"query_id": "q1", "run": "t", "paragraph_id": "x", "text": "hello", "rank": 2}])
    assert [(p.passage_id, p.rank) for p in ps] == [("s/q1/1", 1), ("s/q1/2", 2), ("x", 2)]
    assert rankings(ps)["s"]["q1"] == ["s/q1/1", "s/q1/2"]
    with pytest.raises(InputError, match="system"):
        read_passages([{"query_id": "q1", "text": "x", "passage_id": "p"}], path="runs.jsonl")
    with pytest.raises(InputError, match="query_id"):
        read_question_bank([{"question": "x"}])


class FakeGraderLLM:
    """Rates 5 when the question's last word appears in the context, 0 otherwise; answers the context's first word."""

    name = "fake-grader"

    def __init__(self):
        self.calls = 0

    def generate(self, prompts, params=None):
        out = []
        for p in prompts:
            self.calls += 1
            if p.startswith("Can the question"):
                q = p.split("Question: ", 1)[1].split(" Context: ")[0]
                ctx = p.split(" Context: ", 1)[1]
                out.append("5" if q.rstrip("?").split()[-1].lower() in ctx.lower() else "unanswerable")
            elif p.startswith("provide a complete"):
                out.append(p.split(" Context: ", 1)[1].split()[0])
            else:
                out.append('{"questions": ["What is the skin?", "Where is melanin?"]}')
        return out

    def score(self, requests):
        return [[ContinuationScore(-float(i), 1, 2) for i in range(len(r.continuations))] for r in requests]


def test_grade_passages_pools_counts_and_feeds_graded_irt():
    passages = read_passages([
        {"query_id": "q1", "system": "A", "passages": ["epidermis is the skin layer", "melanin is dark"],
         "facets": {"llm": "x"}},
        {"query_id": "q1", "system": "B", "passages": [{"passage_id": "A/q1/1", "text": "epidermis is the skin layer"}]},
        {"query_id": "q9", "system": "B", "passages": ["orphan"]},
    ])
    banks = {"q1": [BankQuestion("q1/a", "What is the skin?", ["epidermis"]),
                    BankQuestion("q1/b", "What does melanin?", [])]}
    llm = FakeGraderLLM()
    written = []
    recs, counts = grade_passages(ExamGrader(llm), passages, banks, write=written.append)
    assert counts["pooled_passages"] == 3 and counts["skipped_no_question_bank"] == 1 and counts["graded_now"] == 2
    assert written == recs
    by_pid = {r["passage_id"]: r for r in recs}
    g1 = {g["question_id"]: g for g in by_pid["A/q1/1"]["exam_grades"]}
    assert g1["q1/a"]["self_rating"] == 5 and g1["q1/a"]["correct"] is True  # answer "epidermis"
    assert g1["q1/b"]["self_rating"] == 0 and not g1["q1/b"]["self_rating_parsed"]
    assert "correct" not in g1["q1/b"]  # no answer key
    assert counts["self_rating_defaulted"] == 2
    # resume: everything is done, nothing is graded again
    _, counts2 = grade_passages(ExamGrader(llm), passages, banks, done=lambda r: True)
    assert counts2["already_graded"] == 2 and counts2["graded_now"] == 0
    table = grade_table(recs)
    rows = graded_responses(table, passages, banks, k=20)
    resp = {(r["item"], r["examinee"]): r["response"] for r in rows}
    assert resp[("q1/a", "A")] == 5 and resp[("q1/b", "A")] == 5 and resp[("q1/b", "B")] == 0
    assert rows[0]["llm"] == "x"
    binary = graded_responses(table, passages, banks, tau=4)
    assert {r["response"] for r in binary} <= {0, 1}
    assert grade_table(recs, mode="answer")[("q1", "A/q1/1")] == {"q1/a": 1}


def test_score_rating_and_question_generation():
    llm = FakeGraderLLM()
    grader = ExamGrader(llm, rating_method="score", extract_answers=False)
    assert grader.self_ratings([("q?", "c")]) == [(0, True, "score:0")]
    banks, failed = generate_question_bank(llm, {"t1": "skin"})
    assert failed == [] and [b.question for b in banks["t1"]] == ["What is the skin?", "Where is melanin?"]
