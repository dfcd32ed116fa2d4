"""MT-RAG metrics: hand-computed ROUGE-L, Recall, RB_agg, IDK detection and conditioning."""

from __future__ import annotations

import json

import numpy as np
import pytest

from irtexam.errors import InputError
from irtexam.grading.idk import LLMIdkJudge, idk_condition, lexical_idk, parse_idk_label
from irtexam.grading.mtrag import (algorithmic_metrics, extractiveness, grade_records, parse_record, rb_agg,
                                   rouge_l)
from irtexam.grading.text import normalize_text, token_recall
from irtexam.llm.base import ContinuationScore


class WordEncoder:
    """Fake encoder: one one-hot vector per normalised word, so BERTScore = exact word matching."""

    name = "fake-words"

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def _vec(self, word: str) -> np.ndarray:
        idx = self.vocab.setdefault(word, len(self.vocab))
        v = np.zeros(256, dtype=np.float32)
        v[idx % 256] = 1.0
        return v

    def token_embeddings(self, texts):
        return [np.stack([self._vec(w) for w in normalize_text(t).split()]) if normalize_text(t)
                else np.zeros((0, 256), dtype=np.float32) for t in texts]

    def encode(self, texts):
        return np.stack([m.mean(axis=0) / np.linalg.norm(m.mean(axis=0)) for m in self.token_embeddings(texts)])


def test_rouge_l_by_hand():
    # LCS of "the cat sat on the mat" / "the cat lay on the mat" is 5 tokens: P = R = F = 5/6
    assert rouge_l("the cat lay on the mat", "the cat sat on the mat") == pytest.approx(5 / 6)
    # pred a b c d, ref a c e: LCS = 2, P = 2/4, R = 2/3, F = 2PR/(P+R) = 4/7
    assert rouge_l("a b c d", "a c e") == pytest.approx(4 / 7)
    assert rouge_l("x y", "a b") == 0.0


def test_token_recall_by_hand():
    # reference tokens after normalisation: cat is black (3); shared: cat -> 1/3
    assert token_recall("The cat sat.", "the cat is black") == pytest.approx(1 / 3)
    assert token_recall("dog", "the cat") == 0.0
    # multiset: reference "a a b" -> tokens "b" (articles dropped) ... use non-articles
    assert token_recall("x x y", "x x x z") == pytest.approx(2 / 4)


def test_rb_agg_by_hand():
    # r = (0.6+1)/2 = 0.8, g = 0.5, e = (max(0.2, 0.4)+1)/2 = 0.7
    # RB = 3*0.8*0.5*0.7 / (0.4 + 0.56 + 0.35) = 0.84 / 1.31
    agg, zero = rb_agg(0.5, bertscore_r=0.6, bertkprec=[0.2, 0.4])
    assert agg == pytest.approx(0.84 / 1.31) and zero is False
    # no passages -> e = 0; rouge 0 -> denominator r*0 + r*0 + 0 = 0 -> flagged
    assert rb_agg(0.0, bertscore_r=0.6, bertkprec=None) == (0.0, True)
    # one factor zero but denominator positive -> 0 without the flag
    assert rb_agg(0.0, bertscore_r=0.6, bertkprec=[0.0]) == (0.0, False)
    # falls back to Recall when BERTScore is missing; None passage scores count as 0
    agg, zero = rb_agg(0.5, recall=0.5, bertkprec=[None, 0.0])
    assert agg == pytest.approx(0.5) and not zero


def test_extractiveness_contained_and_rouge():
    assert extractiveness("As the manual says: Port 5432 is the default!", "port 5432 is the default") == 1.0
    assert extractiveness("a b c d", "a c e") == pytest.approx(4 / 7)


@pytest.mark.parametrize("answerability,idk,metric,expected_scripts,expected_reference", [
    ("UNANSWERABLE", 1.0, 0.3, 1.0, 1.0),
    ("UNANSWERABLE", 0.5, 0.3, 0.0, 0.0),
    ("UNANSWERABLE", 0.0, 0.3, 0.0, 0.0),
    ("CONVERSATIONAL", 1.0, 0.3, 1.0, 1.0),
    ("CONVERSATIONAL", 0.0, 0.3, 0.0, 0.0),
    ("ANSWERABLE", 1.0, 0.3, 0.0, 0.3),
    ("ANSWERABLE", 0.5, 0.3, 0.3, 0.3),
    ("ANSWERABLE", 0.0, 0.3, 0.3, 0.3),
    ("PARTIAL", 1.0, 0.3, 0.0, 0.3),
    ("PARTIAL", 0.0, 0.3, 0.3, 0.3),
    (None, 0.0, 0.7, 0.7, 0.7),
])
def test_idk_conditioning_truth_table(answerability, idk, metric, expected_scripts, expected_reference):
    assert idk_condition(metric, idk, answerability) == expected_reference  # the metrics reference is the default
    assert idk_condition(metric, idk, answerability, answerable_idk_zero=True) == expected_scripts


@pytest.mark.parametrize("text,expected", [
    ("The default port is 5432.", 0.0),
    ("I don't know.", 1.0),
    ("I'm sorry, but the provided document does not contain the answer to your question.", 1.0),
    ("", 1.0),
    ("The document does not mention the size limit. However, to rotate the logs you set "
     "log_rotation_age in postgresql.conf and reload the server configuration afterwards.", 0.5),
])
def test_lexical_idk(text, expected):
    assert lexical_idk(text) == expected


def test_parse_idk_label():
    assert parse_idk_label(" Yes, clearly") == 1.0
    assert parse_idk_label("partial") == 0.5
    assert parse_idk_label("no") == 0.0
    assert parse_idk_label("maybe") is None and parse_idk_label("42") is None


class FakeJudgeLLM:
    name = "fake-judge"

    def generate(self, prompts, params=None):
        return ["yes" if "don't know" in p.rsplit("Response:", 1)[1] else "hmm" for p in prompts]

    def score(self, requests):
        out = []
        for r in requests:
            idk = "don't know" in r.prompt.rsplit("Response:", 1)[1]
            lp = {" yes": -0.1 if idk else -5.0, " partial": -3.0, " no": -5.0 if idk else -0.2}
            out.append([ContinuationScore(lp[c], 1, len(c)) for c in r.continuations])
        return out


def test_llm_idk_judge_score_and_generate_counts_failures():
    judge = LLMIdkJudge(FakeJudgeLLM(), method="score")
    assert judge.judge(["q", "q"], ["I don't know", "It is 4."]) == [1.0, 0.0]
    gen = LLMIdkJudge(FakeJudgeLLM(), method="generate")
    # second reply "hmm" is unreadable: falls back to lexical (0.0) and is counted
    assert gen.judge(["q", "q"], ["I don't know", "It is 4."]) == [1.0, 0.0]
    assert gen.parse_failures == 1


def test_algorithmic_metrics_with_fake_encoder():
    enc = WordEncoder()
    m = algorithmic_metrics("cat sat on mat", ["cat sat on mat today"], ["cat sat on mat", "dog"], enc)
    # word-level BERTScore with one-hot words: P = 4/4, R = 4/5
    assert m["BertscoreP"] == [pytest.approx(1.0)] and m["BertscoreR"] == [pytest.approx(0.8)]
    assert m["BertKPrec"] == [pytest.approx(1.0), pytest.approx(0.0)]
    assert m["Extractiveness_RougeL"][0] == 1.0
    assert m["Length"] == [4]
    r, g, e = 0.9, rouge_l("cat sat on mat", "cat sat on mat today"), 1.0
    assert m["RB_agg"][0] == pytest.approx(3 * r * g * e / (r * g + r * e + g * e))
    empty = algorithmic_metrics("cat", ["dog"], [], enc)
    assert empty["BertKPrec"] is None and empty["Extractiveness_RougeL"] is None
    assert empty["RB_agg"] == [0.0] and empty["RB_agg_zero_denominator"] == [True]


def test_grade_records_end_to_end_mtrag_layout():
    records = [
        {"task_id": "t1", "input": [{"speaker": "user", "text": "Default port?"}],
         "targets": [{"text": "The default port is 5432."}], "contexts": [{"text": "Port 5432 is the default."}],
         "predictions": [{"text": "The default port is 5432."}], "answerability": ["ANSWERABLE"]},
        {"id": "t2", "question": "Who wrote it?", "response": "I don't know.", "reference": "Nobody knows.",
         "passages": [], "answerability": "UNANSWERABLE", "metrics": {"RB_llm": [0.4]}},
    ]
    written = []
    out = grade_records(records, WordEncoder(), write=written.append)
    assert len(out) == 2 and written == out
    m1, m2 = out[0]["metrics"], out[1]["metrics"]
    assert m1["idk_eval"] == [0.0] and m1["RB_agg_idk"] == m1["RB_agg"]
    assert m2["idk_eval"] == [1.0] and m2["RB_agg_idk"] == [1.0] and m2["RB_llm_idk"] == [1.0]
    assert "RL_F_idk" not in m2  # RL_F absent in the input: nothing invented
    # unanswerable without any reference: RB_agg is not computable but RB_agg_idk is
    out = grade_records([{"id": "t3", "question": "q", "response": "Paris.", "answerability": "UNANSWERABLE"}],
                        WordEncoder())
    assert "RB_agg" not in out[0]["metrics"] and out[0]["metrics"]["RB_agg_idk"] == [0.0]
    json.dumps(out)  # serialisable


def test_parse_record_errors_name_the_field():
    with pytest.raises(InputError, match="row 3.*predictions"):
        parse_record({"task_id": "x"}, path="f.jsonl", row=3)
    with pytest.raises(InputError, match="contexts"):
        parse_record({"response": "a", "contexts": [1, 2]}, path="f.jsonl", row=1)


@pytest.mark.llm
def test_bertscore_with_packaged_minilm():
    from irtexam.grading.embeddings import bertscore, load_encoder

    enc = load_encoder()
    p, r = bertscore(enc, "The default port is 5432.", "The default port is 5432.")
    assert p == pytest.approx(1.0, abs=1e-5) and r == pytest.approx(1.0, abs=1e-5)
    p2, r2 = bertscore(enc, "Bananas are yellow fruit.", "The default port is 5432.")
    assert p2 < 0.9 and r2 < 0.9
    # a shorter candidate covering part of the reference: precision above recall
    p3, r3 = bertscore(enc, "The default port", "The default port is 5432 unless changed in postgresql.conf.")
    assert p3 > r3
    m = algorithmic_metrics("The default port is 5432.", ["It is 5432 by default."],
                            ["PostgreSQL listens on port 5432 by default."], enc)
    assert -1.0 <= m["BertKPrec"][0] <= 1.0 and 0.0 < m["RB_agg"][0] <= 1.0
