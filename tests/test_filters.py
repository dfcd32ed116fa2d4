"""Filters on hand-built items with hand-computed Jaccard values; chains; baselines."""

from __future__ import annotations

import numpy as np
import pytest

from irtexam.errors import InputError
from irtexam.exam.schema import ExamItem
from irtexam.filters import (bias_baselines, extra_candidate_filter, format_filter, intra_candidate_filter,
                             jaccard, length_filter, longest_answer_accuracy, mean_candidate_ngram, ngrams,
                             run_chain, self_containment_filter)


def item(i, question="Which parameter limits concurrent connections?", choices=None, answer=0, doc=None):
    prov = {"document": doc} if doc else {}
    return ExamItem(f"q{i}", question, list(choices or ["max_connections", "work_mem", "shared_buffers", "port"]),
                    answer, doc_id="d", chunk_id=f"d#{i}", provenance=prov)


def test_jaccard_hand_computed():
    # unigrams {the, cat, sat} vs {the, cat, ran}: 2 shared / 4 total
    assert jaccard("The cat sat", "the cat ran", 1) == pytest.approx(0.5)
    # bigrams {the cat, cat sat} vs {the cat, cat ran}: 1 / 3
    assert jaccard("The cat sat", "the cat ran", 2) == pytest.approx(1 / 3)
    # shorter than n: the whole sequence is one gram
    assert ngrams(["a", "b"], 3) == {("a", "b")}
    assert jaccard("a b", "a b", 3) == 1.0 and jaccard("", "", 2) == 0.0
    # n = round(mean tokens): (1 + 2 + 3 + 2) / 4 = 2
    assert mean_candidate_ngram(["x", "x y", "x y z", "p q"]) == 2


def test_format_and_length_filters():
    items = [item(0), item(1, choices=["Port 5432", "port 5432.", "c", "d"]), item(2, choices=["x", "y", "z", "All of the above"]),
             item(3, choices=["x", "y", "z"]), item(4, question="Why?"), item(5, choices=["x" * 500, "y", "z", "w"])]
    f = format_filter(items)
    assert f.reasons[:4] == [None, "duplicate_choices", "positional_choice", "wrong_number_of_choices"]
    assert f.keep.tolist() == [True, False, False, False, True, True]
    L = length_filter(items)
    assert L.reasons[4] == "question_too_short" and L.reasons[5] == "choice_too_long" and L.reasons[0] is None
    # code-like choices differing only in case or punctuation are different answers
    code = format_filter([item(6, choices=["pg_dump -n", "pg_dump -N", "SELECT * FROM t;", "SELECT * FROM t *;"])])
    assert code.reasons == [None]
    # issue 16: template placeholders and parse artifacts of the real-run exam are format errors
    flawed = format_filter([item(7, choices=["on", "off", "safe_encoding", "{candidate D}"]),
                            item(8, choices=["WALInitSync E) WALInitWrite", "WALCopyWrite", "WALCopySync", "x"])])
    assert flawed.reasons == ["template_placeholder", "embedded_choice_label"]


def test_self_containment_paper_patterns():
    qs = ['According to the documentation "Routine Vacuuming", what runs VACUUM?',
          'Which setting is described in "Chapter 20"?',
          "What does this article say about WAL?",
          "Which setting controls WAL level?"]
    r = self_containment_filter([item(i, question=q) for i, q in enumerate(qs)])
    assert r.reasons == ["self_containment_1", "self_containment_2", "self_containment_3", None]
    custom = self_containment_filter([item(0, question=qs[3])], patterns=[r"\bWAL\b"])
    assert custom.reasons == ["self_containment_1"]
    with pytest.raises(InputError, match="regex"):
        self_containment_filter([item(0)], patterns=["("])


DOC = "max_connections determines the maximum number of concurrent connections to the database server"


def test_extra_candidate_jaccard_rule_fixed_threshold():
    good = item(0, choices=["the maximum number of concurrent connections", "memory for sorts", "cache size",
                            "listen port"], doc=DOC)
    bad = item(1, choices=["memory for sorts", "the maximum number of concurrent connections", "cache size",
                           "listen port"], answer=0, doc=DOC)
    r = extra_candidate_filter([good, bad], t1=0.05, use_embeddings=False)
    assert r.reasons == [None, "distractor_closer_to_doc_jaccard"]
    # hand check of the margin for `bad`: n = round((6+3+2+2)/4) = 3
    n = 3
    assert mean_candidate_ngram(bad.choices) == n
    expected = jaccard(DOC, bad.choices[1], n) - jaccard(DOC, bad.choices[0], n)
    assert r.scores["jaccard_margin"][1] == pytest.approx(expected) and expected > 0.05


def test_intra_candidate_jaccard_rule_and_calibration():
    near = item(0, choices=["set max_connections to 200", "set max_connections to 100", "raise work_mem",
                            "lower port"])
    far = [item(i, choices=[f"alpha {i}", f"beta {i} x", f"gamma {i} y", f"delta {i} z"]) for i in range(1, 20)]
    r = intra_candidate_filter([near] + far, t3=0.3, use_embeddings=False)
    # n = round((4+4+2+2)/4) = 3; trigrams {set max to, max to 200} vs {set max to, max to 100}: 1 / 3
    assert r.scores["max_jaccard"][0] == pytest.approx(1 / 3)
    assert r.reasons[0] == "distractor_repeats_answer_jaccard" and r.keep[1:].all()
    cal = intra_candidate_filter([near] + far, target_rate=0.05, use_embeddings=False)
    assert (~cal.keep).sum() == 1 and not cal.keep[0]
    assert cal.params["t3"] > 0.0 and cal.params["t3"] <= 1 / 3


class BagEmbedder:
    """Deterministic test embedder: normalised bag of hashed words (not a model)."""

    def __call__(self, texts):
        out = np.zeros((len(texts), 64))
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, hash(w) % 64] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def test_embedding_rules_with_injected_embedder():
    emb = BagEmbedder()
    dup = item(0, choices=["vacuum reclaims space", "vacuum reclaims space now", "drops tables", "adds users"])
    r = intra_candidate_filter([dup], t3=1.1, t4=0.8, embedder=emb)
    assert r.reasons == ["distractor_repeats_answer_embedding"]
    e = extra_candidate_filter([item(1, choices=["memory", "the maximum number of concurrent connections",
                                                 "cache", "port"], doc=DOC)], t1=10, t2=0.1, embedder=emb)
    assert e.reasons == ["distractor_closer_to_doc_embedding"]


def test_chain_counts_everything_and_records_outcomes():
    items = [item(0, doc=DOC), item(1, choices=["a", "a", "b", "c"], doc=DOC),
             item(2, question="What does the documentation say?", doc=DOC), item(3, question="Hm?", doc=DOC)]
    kept, dropped, rep = run_chain(items, "cheap")
    assert [i.id for i in kept] == ["q0"] and len(dropped) == 3
    tab = rep.table()
    assert int(tab[(tab.reason == "duplicate_choices")].n.iloc[0]) == 1
    assert int(tab[(tab.reason == "question_too_short")].n.iloc[0]) == 1
    assert int(tab[(tab.reason == "self_containment_3")].n.iloc[0]) == 1
    assert rep.n_in == len(kept) + len(dropped)
    assert kept[0].provenance["filters"] == {"format": "keep", "length": "keep", "self_containment": "keep"}
    with pytest.raises(InputError, match="unknown filter"):
        run_chain(items, ["nope"])


def test_extra_candidate_needs_document():
    with pytest.raises(InputError, match="source text"):
        extra_candidate_filter([item(0)], use_embeddings=False)


def test_baselines():
    items = [item(i, choices=["short", "a much longer answer", "mid size", "x"], answer=i % 4) for i in range(8)]
    b = bias_baselines(items)
    assert b["fixed_answer"] == {"A": 0.25, "B": 0.25, "C": 0.25, "D": 0.25}
    assert b["longest_answer"] == pytest.approx(0.25)
    tie = item(9, choices=["aa", "bb", "c", "d"], answer=0)
    assert longest_answer_accuracy([tie]) == pytest.approx(0.5)


@pytest.mark.llm
def test_real_minilm_embeddings_drive_both_rules():
    pytest.importorskip("sentence_transformers")
    from irtexam.filters.similarity import load_embedder, minilm_path

    if not minilm_path().exists():
        pytest.skip("MiniLM not installed")
    emb = load_embedder()
    paraphrase = item(0, choices=["It removes dead row versions to reclaim storage",
                                  "It reclaims storage by removing dead row versions",
                                  "It encrypts the data files", "It creates a new database role"])
    distinct = item(1, choices=["It removes dead row versions to reclaim storage", "It encrypts the data files",
                                "It creates a new database role", "It changes the listen port"])
    r = intra_candidate_filter([paraphrase, distinct], t3=1.1, t4=0.85, embedder=emb)
    assert r.reasons == ["distractor_repeats_answer_embedding", None]
    assert r.scores["max_embedding"][0] > 0.85 > r.scores["max_embedding"][1]
    doc = "VACUUM reclaims storage occupied by dead tuples, which are not physically removed by updates."
    closer = item(2, choices=["It changes the listen port", "It reclaims storage occupied by dead tuples",
                              "It encrypts the data files", "It creates a role"], doc=doc)
    e = extra_candidate_filter([closer], t1=10, t2=0.2, embedder=emb)
    assert e.reasons == ["distractor_closer_to_doc_embedding"]
