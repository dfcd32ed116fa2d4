"""grade_reply: free-text replies to multiple-choice questions graded into a choice, or refused.

The replies in tests/data/real_replies.jsonl were produced by the packaged models
(Qwen2.5-Coder-0.5B-Instruct and SmolLM2-135M-Instruct, greedy) on MMLU questions by
experiments/generate_vs_loglik.py; ``label`` is what a person reading the reply says it
chose (a letter index, "abstain", or "unclear"), written by hand without looking at the grader.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from irtexam.grading.reply import ROUTES, explicit_letter, grade_reply, is_abstention, route_counts, text_match

DATA = Path(__file__).parent / "data"
CHOICES = ["a partial index", "a B-tree index", "VACUUM FULL", "A separate port reserved for SSL"]


@pytest.mark.parametrize("reply, choice", [
    ("B", 1), ("(C)", 2), ("**D**", 3), ("Answer: B", 1), ("answer: (c)", None), ("The answer is (C).", 2),
    ("The correct answer is option D because it is", 3), ("B) a B-tree index", 1), ("C. VACUUM FULL", 2),
    ("Option B is correct.", 1), ("Final answer: **A**", 0), ("choice (D)", 3), ("Answer:\nC", 2),
    ("The context does not say, but the answer is B.", 1),
])
def test_explicit_letters(reply, choice):
    graded = grade_reply(reply, CHOICES)
    if choice is None:  # a lower-case letter is not taken as a letter
        assert graded.route != "letter"
    else:
        assert (graded.choice, graded.route) == (choice, "letter"), graded


@pytest.mark.parametrize("reply, choice", [
    ("VACUUM FULL", 2), ("It uses a partial index here.", 0),
    ("The answer is A separate port reserved for SSL", 3),  # "A" starts the candidate's text, not a letter
    ("The answer is a B-tree index", 1),                     # "B-tree" is text, not the letter B
    ("a b-tree", 1),                                         # a reply of 2+ words inside one candidate
])
def test_candidate_text(reply, choice):
    graded = grade_reply(reply, CHOICES)
    assert (graded.choice, graded.route) == (choice, "text"), graded


def test_nested_candidates_count_as_the_longer_one():
    assert text_match("It is a partial index.", ["index", "a partial index", "none", "hash"]) == 1
    assert text_match("index or hash", ["index", "a partial index", "none", "hash"]) is None


@pytest.mark.parametrize("reply", [
    "I don't know.", "I'm not sure.", "The context does not mention this.", "This cannot be determined from the passages.",
    "There is not enough information to answer.", "Unanswerable", "I cannot answer this question.",
    "None of the options are correct.",
])
def test_abstentions_are_never_guessed(reply):
    graded = grade_reply(reply, CHOICES)
    assert graded.route == "abstain" and graded.choice is None
    assert is_abstention(reply)


@pytest.mark.parametrize("reply, route", [
    ("", "unparseable"), ("   ", "unparseable"), ("The answer is A or B.", "unparseable"),
    ("A table is created on the fly.", "unparseable"),  # no encoder: never guessed
])
def test_unparseable_without_encoder(reply, route):
    graded = grade_reply(reply, CHOICES)
    assert graded.route == route and graded.choice is None


def test_ambiguous_letters_detail():
    index, detail = explicit_letter("Either A or C could be right", 4)
    assert index is None and "ambiguous" in detail
    assert explicit_letter("Both A and B are wrong; the answer is C.", 4)[0] == 2


@pytest.fixture(scope="module")
def encoder():
    pytest.importorskip("sentence_transformers")
    from irtexam.grading.embeddings import load_encoder

    try:
        return load_encoder()
    except Exception as exc:  # the packaged MiniLM is missing
        pytest.skip(str(exc))


def test_embedding_route_with_margin(encoder):
    choices = ["Storage occupied by dead tuples", "Memory used by idle connections",
               "Disk space of dropped databases", "Log files older than a week"]
    graded = grade_reply("It frees the space that deleted rows still occupy on disk.", choices, encoder=encoder)
    assert graded.route in ("embedding", "unparseable")
    if graded.route == "embedding":
        assert graded.choice in (0, 2) and "cos" in graded.detail
    # a reply unrelated to every candidate stays unparseable (below the similarity floor)
    off = grade_reply("Bananas are yellow and grow in bunches.", choices, encoder=encoder)
    assert off.route == "unparseable" and off.choice is None and "needs" in off.detail
    # an impossible margin refuses every embedding pick
    strict = grade_reply("idle client connections hold memory", choices, encoder=encoder, margin=2.0)
    assert strict.route == "unparseable"
    loose = grade_reply("idle client connections hold memory", choices, encoder=encoder, margin=0.0,
                        min_similarity=-1.0)
    assert (loose.route, loose.choice) == ("embedding", 1)


def test_route_counts_list_every_route():
    assert route_counts(["letter", "letter", "abstain"]) == {"letter": 2, "text": 0, "embedding": 0,
                                                            "abstain": 1, "unparseable": 0}
    assert tuple(route_counts([])) == ROUTES


def _labelled():
    path = DATA / "real_replies.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def test_real_replies_graded_as_labelled_by_hand(encoder):
    rows = _labelled()
    if not rows:
        pytest.skip("no labelled replies")
    wrong = []
    per_route: dict[str, list[bool]] = {}
    for row in rows:
        graded = grade_reply(row["reply"], row["choices"], encoder=encoder, question=row["question"])
        if graded.choice is not None:  # precision: a pick must be what the reply chose
            ok = graded.choice == row["label"]
            per_route.setdefault(graded.route, []).append(ok)
            if not ok:
                wrong.append((row["reply"][:80], row["label"], graded))
        elif row["label"] == "abstain":
            assert graded.route == "abstain", (row["reply"], graded)
    # the letter and text routes never pick a choice the reply did not name
    assert all(per_route.get("letter", [])) and all(per_route.get("text", [])), wrong
    # the embedding route is right on at least 3 of 4 of its picks
    emb = per_route.get("embedding", [])
    assert not emb or sum(emb) / len(emb) >= 0.75, wrong
