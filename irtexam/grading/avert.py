"""A-VERT: verify a free-form answer by ranking it against correct and wrong target groups.

Aguirre et al. (2025). For an exam item with choices and a key, two groups are built:

* correct: the correct choice text, its letter form "{symbol} : {target}", the bare
  letter, and the paper's enhanced phrasings (section 3.1.1);
* wrong: the same for every other choice, plus refusal / "I don't know" targets.

Each candidate c is scored against the answer g with an embedding ranking function
r(c, g) = (1 + cos(E(c), E(g))) / 2 in [0, 1] (the paper's eq. 6 writes the cosine
*distance* 1 - cos; a distance cannot be arg-maxed, so the similarity is used and mapped
to [0, 1] so that eq. 4's normalisation is well defined). The group score is
S = max_i r(c_i, g) (eq. 3) or the mean of the top-k scores; S_bar = S / sum_n S_n
(eq. 4); the answer is correct when the correct group has the larger score (eq. 5).
The margin S_bar_correct - S_bar_wrong in [-1, 1] is the confidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..exam.schema import LETTERS, ExamItem
from .embeddings import Encoder

REFUSAL_TARGETS: tuple[str, ...] = (
    "I don't know.",
    "I don't know the answer to this question.",
    "I cannot answer this question.",
    "I'm sorry, but I can't help with that.",
    "None of the options is correct; the question is flawed.",
)

_CARDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def all_choices_text(choices: Sequence[str], selected: int) -> str:
    """The paper's {all-choices}: "Option X. text. Is (not) correct." for every choice."""
    parts = []
    for i, text in enumerate(choices):
        verdict = "Is correct." if i == selected else "Is not correct."
        parts.append(f"Option {LETTERS[i]}. {text}. {verdict}")
    return " ".join(parts)


def candidate_targets(choices: Sequence[str], index: int, enhance: bool = True,
                      with_letters: bool = True) -> list[str]:
    """Target strings for one choice: text, "{symbol} : {target}", letter, enhancements."""
    target, symbol = choices[index], LETTERS[index]
    out = [target]
    if with_letters:
        out += [f"{symbol} : {target}", symbol]
    if enhance:
        out += [f"The answer is : {target} . Let me explain why",
                f"Therefore, the answer is : {target}"]
        if with_letters:
            cardinal = _CARDINALS[index] if index < len(_CARDINALS) else f"#{index + 1}"
            everything = all_choices_text(choices, index)
            out += [f"Therefore, the correct answer is option {symbol}: {target}",
                    f"The answer is option {symbol}: {target}",
                    f"The answer is the {cardinal} one, option {symbol}. {target}. Let me explain why: {everything}",
                    f"Analyzing the options: {everything} Therefore, the answer is the {cardinal} one, "
                    f"option {symbol}. {target}"]
    return out


def target_groups(item: ExamItem, enhance: bool = True, with_letters: bool = True,
                  refusals: Sequence[str] = REFUSAL_TARGETS) -> tuple[list[str], list[str]]:
    """(correct group, wrong group) for an exam item."""
    correct = candidate_targets(item.choices, item.answer, enhance, with_letters)
    wrong: list[str] = []
    for i in range(len(item.choices)):
        if i != item.answer:
            wrong += candidate_targets(item.choices, i, enhance, with_letters)
    wrong += list(refusals)
    return correct, wrong


def group_score(scores: np.ndarray, aggregate: str = "max", top_k: int = 3) -> float:
    """Representative score of a group: max (eq. 3) or the mean of the top-k scores."""
    if scores.size == 0:
        raise ValueError("a target group needs at least one candidate")
    if aggregate == "max":
        return float(scores.max())
    if aggregate == "topk":
        k = max(1, min(top_k, scores.size))
        return float(np.sort(scores)[-k:].mean())
    raise ValueError(f"unknown aggregate {aggregate!r}; use 'max' or 'topk'")


@dataclass(frozen=True)
class AvertResult:
    """Verdict for one answer: correct (0/1), margin and the group scores."""

    correct: int
    margin: float
    score_correct: float
    score_wrong: float
    best_correct: str
    best_wrong: str


def decide(answer_vec: np.ndarray, correct_vecs: np.ndarray, wrong_vecs: np.ndarray,
           correct_texts: Sequence[str], wrong_texts: Sequence[str],
           aggregate: str = "max", top_k: int = 3) -> AvertResult:
    """A-VERT decision from normalised embeddings: r = (1 + cos)/2, group scores, margin."""
    rc = (1.0 + correct_vecs @ answer_vec) / 2.0
    rw = (1.0 + wrong_vecs @ answer_vec) / 2.0
    sc, sw = group_score(rc, aggregate, top_k), group_score(rw, aggregate, top_k)
    total = sc + sw
    margin = (sc - sw) / total if total > 0 else 0.0
    return AvertResult(int(sc > sw), float(margin), sc, sw,
                       correct_texts[int(rc.argmax())], wrong_texts[int(rw.argmax())])


def avert_grade(items: Sequence[ExamItem], answers: Sequence[str], encoder: Encoder,
                aggregate: str = "max", top_k: int = 3, enhance: bool = True,
                with_letters: bool = True, refusals: Sequence[str] = REFUSAL_TARGETS) -> list[AvertResult]:
    """Grade free-form answers (answers[i] answers items[i]) with A-VERT."""
    groups = [target_groups(item, enhance, with_letters, refusals) for item in items]
    # one batched pass over every distinct text first (the encoder caches vectors by text)
    everything = list(dict.fromkeys([*answers, *(t for c, w in groups for t in (*c, *w))]))
    all_vecs = encoder.encode(everything)
    index = {t: i for i, t in enumerate(everything)}
    results = []
    for (correct, wrong), answer in zip(groups, answers):
        vecs = all_vecs[[index[t] for t in (answer, *correct, *wrong)]]
        results.append(decide(vecs[0], vecs[1:1 + len(correct)], vecs[1 + len(correct):],
                              correct, wrong, aggregate, top_k))
    return results


_LETTER_PATTERNS = [
    r"answer is\s*(?:option\s*)?\(?([A-J])\b",
    r"\boption\s*\(?([A-J])\)?\s*(?:is correct|is the correct)",
    r"^\s*\(?([A-J])\s*[\).:]",
    r"^\s*\**([A-J])\**\s*$",
    r"answer\s*:\s*\(?([A-J])\b",
]


def extract_letter(text: str, n_choices: int) -> str | None:
    """Exact-letter matching baseline: the choice letter a free-form answer names, if any."""
    valid = LETTERS[:n_choices]
    for pattern in _LETTER_PATTERNS:
        for match in re.finditer(pattern, text, flags=re.IGNORECASE | re.MULTILINE):
            letter = match.group(1).upper()
            if letter in valid:
                return letter
    return None


def exact_letter_correct(item: ExamItem, answer: str) -> int | None:
    """1/0 if a letter could be extracted from the answer, None otherwise."""
    letter = extract_letter(answer, len(item.choices))
    if letter is None:
        return None
    return int(letter == LETTERS[item.answer])


def agreement(a: Sequence[int | None], b: Sequence[int | None]) -> tuple[float, int]:
    """Fraction of positions where both are defined and equal, and how many were defined."""
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    if not pairs:
        return float("nan"), 0
    return sum(x == y for x, y in pairs) / len(pairs), len(pairs)


def results_to_long(rows: Sequence[dict[str, Any]]) -> "Any":
    """A ResponseMatrix long table (item, examinee, response + facets) from graded rows.

    Each row must have ``item``, ``examinee``, ``response``; other keys except the
    A-VERT diagnostics become facet columns.
    """
    import pandas as pd

    diagnostics = {"margin", "score_correct", "score_wrong", "best_correct", "best_wrong", "answer",
                   "encoder", "exact_letter", "grader"}
    df = pd.DataFrame([{k: v for k, v in r.items() if k not in diagnostics} for r in rows])
    first = ["item", "examinee", "response"]
    return df[first + [c for c in df.columns if c not in first]]


_RESERVED = {"item", "examinee", "answer", "text", "response", "facets", "_row", "id"}


def grade_answer_records(items: Sequence[ExamItem], records: Sequence[dict[str, Any]], encoder: Encoder,
                         aggregate: str = "max", top_k: int = 3, enhance: bool = True, with_letters: bool = True,
                         refusals: Sequence[str] = REFUSAL_TARGETS, path: str | None = None,
                         progress: bool = False) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Grade answer records ``{"item", "examinee", "answer", "facets"?: {...}}`` against an exam.

    Returns (rows, counts). Each row holds item, examinee, response (A-VERT 0/1), margin,
    group scores, best targets, exact_letter (0/1 or None), the encoder name and the
    facets (the ``facets`` object, else the other scalar fields). Answers to unknown items
    are skipped and counted; so are answers without text.
    """
    from ..errors import InputError

    by_id = {it.id: it for it in items}
    counts: dict[str, int] = {"answers": len(records)}
    todo: list[tuple[ExamItem, dict[str, Any]]] = []
    for rec in records:
        row = rec.get("_row")
        for name in ("item", "examinee"):
            if name not in rec:
                raise InputError(f"an answer line needs {name}", path=path, row=row, column=name)
        answer = rec.get("answer", rec.get("text"))
        if not isinstance(answer, str):
            counts["skipped_no_answer_text"] = counts.get("skipped_no_answer_text", 0) + 1
            continue
        item = by_id.get(str(rec["item"]))
        if item is None:
            counts["skipped_unknown_item"] = counts.get("skipped_unknown_item", 0) + 1
            continue
        todo.append((item, rec))
    rows = []
    chunk = 256
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc="a-vert", unit="answer")
    results: list[AvertResult] = []
    for start in range(0, len(todo), chunk):
        part = todo[start:start + chunk]
        results += avert_grade([it for it, _ in part], [r.get("answer", r.get("text")) for _, r in part], encoder,
                               aggregate, top_k, enhance, with_letters, refusals)
        if bar is not None:
            bar.update(len(part))
    if bar is not None:
        bar.close()
    for (item, rec), res in zip(todo, results):
        answer = rec.get("answer", rec.get("text"))
        facets = rec.get("facets")
        if not isinstance(facets, dict):
            facets = {k: v for k, v in rec.items() if k not in _RESERVED and isinstance(v, (str, int, float, bool))}
        rows.append({"item": item.id, "examinee": str(rec["examinee"]), "response": res.correct,
                     "margin": res.margin, "score_correct": res.score_correct, "score_wrong": res.score_wrong,
                     "best_correct": res.best_correct, "best_wrong": res.best_wrong,
                     "exact_letter": exact_letter_correct(item, answer), "answer": answer,
                     "encoder": encoder.name, **facets})
    counts["graded"] = len(rows)
    counts["exact_letter_extracted"] = sum(r["exact_letter"] is not None for r in rows)
    return rows, counts


def avert_choice(item: ExamItem, answer: str, encoder: Encoder, enhance: bool = True, with_letters: bool = True,
                 refusals: Sequence[str] = REFUSAL_TARGETS) -> tuple[int, float]:
    """N-group A-VERT: one target group per choice (+ one refusal group, index -1).

    Returns (chosen index, normalised score of the winner S_bar = S / sum_n S_n) with
    S = max_i r(c_i, g), r = (1 + cos)/2; used to compare the option a free-form answer
    names with a log-likelihood pick or an extracted letter.
    """
    groups = [candidate_targets(item.choices, i, enhance, with_letters) for i in range(len(item.choices))]
    if refusals:
        groups.append(list(refusals))
    flat = [t for g in groups for t in g]
    vecs = encoder.encode([answer, *flat])
    sims = (1.0 + vecs[1:] @ vecs[0]) / 2.0
    scores, start = [], 0
    for g in groups:
        scores.append(float(sims[start:start + len(g)].max()))
        start += len(g)
    best = int(np.argmax(scores))
    share = scores[best] / sum(scores)
    return (-1 if refusals and best == len(item.choices) else best), share
