"""Bias baselines on a finished exam (paper Table 4).

* fixed-answer accuracy per position p: mean over items of [answer == p]; with seeded
  shuffling each is about 1/4;
* longest-answer accuracy: always pick the longest candidate (characters); ties are
  broken uniformly at random in expectation, i.e. an item scores 1/t when the correct
  candidate is one of t longest;
* no-question baseline: an LLM picks by candidate text alone (prompt without the
  question); accuracy well above 1/4 means the correct answer is recognisable without
  the question.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..exam.schema import LETTERS, ExamItem


def fixed_answer_accuracy(items: Sequence[ExamItem]) -> dict[str, float]:
    """Accuracy of always answering position p, for each p (keys "A".."D")."""
    n = max(len(items), 1)
    width = max((len(i.choices) for i in items), default=4)
    return {LETTERS[p]: sum(1 for i in items if i.answer == p) / n for p in range(width)}


def longest_answer_accuracy(items: Sequence[ExamItem]) -> float:
    """Expected accuracy of picking the longest candidate (random tie-break)."""
    total = 0.0
    for item in items:
        lengths = [len(c) for c in item.choices]
        longest = [i for i, L in enumerate(lengths) if L == max(lengths)]
        if item.answer in longest:
            total += 1.0 / len(longest)
    return total / max(len(items), 1)


def no_question_accuracy(items: Sequence[ExamItem], llm: Any, prompt: str = "Answer:") -> float:
    """Accuracy of ``llm`` choosing by per-token log-likelihood of the candidates alone."""
    from ..llm.base import ScoreRequest

    requests = [ScoreRequest(prompt, tuple(" " + c for c in i.choices)) for i in items]
    scores = llm.score(requests)
    hits = 0
    for item, row in zip(items, scores):
        best = max(range(len(row)), key=lambda k: row[k].per_token)
        hits += int(best == item.answer)
    return hits / max(len(items), 1)


def bias_baselines(items: Sequence[ExamItem], llm: Any = None) -> dict[str, Any]:
    """Fixed-answer (per position and max), longest-answer and, with ``llm``, no-question accuracy."""
    fixed = fixed_answer_accuracy(items)
    out: dict[str, Any] = {"n_items": len(items), "fixed_answer": fixed,
                           "fixed_answer_max": max(fixed.values()) if fixed else 0.0,
                           "longest_answer": longest_answer_accuracy(items)}
    if llm is not None:
        out["no_question"] = no_question_accuracy(items, llm)
        out["no_question_model"] = llm.name
    return out
