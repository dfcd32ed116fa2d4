"""A-VERT: target groups, group scores, decisions, exact-letter baseline, long format."""

from __future__ import annotations

import numpy as np
import pytest

from irtexam.exam.schema import ExamItem
from irtexam.grading.avert import (agreement, avert_grade, candidate_targets, decide, exact_letter_correct,
                                   extract_letter, group_score, results_to_long, target_groups)
from irtexam.grading.text import normalize_text

ITEM = ExamItem(id="q1", question="What is the capital of France?",
                choices=["London", "Paris", "Rome", "Berlin"], answer=1)


class BagEncoder:
    """Fake encoder: normalised bag of words (hashing into 512 dims)."""

    name = "fake-bag"

    def encode(self, texts):
        out = np.zeros((len(texts), 512), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in normalize_text(t).split():
                out[i, hash(w) % 512] += 1.0
            n = np.linalg.norm(out[i])
            out[i] /= n if n else 1.0
        return out


def test_target_groups_follow_the_paper():
    correct, wrong = target_groups(ITEM)
    assert "Paris" in correct and "B : Paris" in correct and "B" in correct
    assert "Therefore, the correct answer is option B: Paris" in correct
    assert any("Option B. Paris. Is correct." in c for c in correct)
    assert "London" in wrong and "A : London" in wrong and "I don't know." in wrong
    assert not any(c in wrong for c in ["Paris", "B : Paris"])
    # enhancements off, letters off: only the raw text
    assert candidate_targets(ITEM.choices, 2, enhance=False, with_letters=False) == ["Rome"]


def test_group_score_max_and_topk():
    s = np.array([0.1, 0.9, 0.5, 0.7])
    assert group_score(s, "max") == pytest.approx(0.9)
    assert group_score(s, "topk", top_k=2) == pytest.approx(0.8)
    assert group_score(s, "topk", top_k=10) == pytest.approx(s.mean())
    with pytest.raises(ValueError):
        group_score(s, "median")


def test_decide_margin_by_hand():
    a = np.array([1.0, 0.0])
    correct = np.array([[1.0, 0.0]])           # cos 1 -> r = 1
    wrong = np.array([[0.0, 1.0], [-1.0, 0.0]])  # cos 0, -1 -> r = 0.5, 0
    res = decide(a, correct, wrong, ["c"], ["w1", "w2"])
    assert res.correct == 1 and res.score_correct == 1.0 and res.score_wrong == 0.5
    assert res.margin == pytest.approx((1.0 - 0.5) / 1.5) and res.best_wrong == "w1"
    flipped = decide(a, wrong[:1], correct, ["c"], ["w"])
    assert flipped.correct == 0 and flipped.margin < 0


def test_avert_grade_with_fake_encoder():
    answers = ["Therefore, the answer is Paris.", "I think it is Rome, the eternal city.", "I don't know."]
    res = avert_grade([ITEM] * 3, answers, BagEncoder())
    assert [r.correct for r in res] == [1, 0, 0]
    assert res[2].best_wrong in ("I don't know.", "I don't know the answer to this question.")


@pytest.mark.parametrize("text,letter", [
    ("The answer is (B).", "B"), ("B) Paris", "B"), ("Answer: C", "C"), ("b", "B"),
    ("Paris is the capital.", None), ("The answer is E", None),
])
def test_extract_letter(text, letter):
    assert extract_letter(text, 4) == letter


def test_exact_letter_and_agreement():
    assert exact_letter_correct(ITEM, "The answer is B") == 1
    assert exact_letter_correct(ITEM, "The answer is A") == 0
    assert exact_letter_correct(ITEM, "Paris") is None
    assert agreement([1, 0, None, 1], [1, 1, 0, None]) == (0.5, 2)


def test_results_to_long_has_response_matrix_columns():
    df = results_to_long([{"item": "q1", "examinee": "p1", "response": 1, "margin": 0.2, "llm": "smol"},
                          {"item": "q2", "examinee": "p1", "response": 0, "margin": -0.1, "llm": "smol"}])
    assert list(df.columns) == ["item", "examinee", "response", "llm"]
    assert df["response"].tolist() == [1, 0]


@pytest.mark.llm
def test_avert_with_packaged_minilm():
    from irtexam.grading.embeddings import load_encoder

    enc = load_encoder()
    assert enc.name == "all-MiniLM-L6-v2"
    res = avert_grade([ITEM] * 3, ["The capital of France is Paris.", "It is Berlin, of course.",
                                   "I'm sorry, I don't know the answer."], enc)
    assert [r.correct for r in res] == [1, 0, 0]
    assert res[0].margin > 0 > res[1].margin
