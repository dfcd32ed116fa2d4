""""I don't know" (IDK) detection and IDK conditioning of metrics (MT-RAG steps 2 and 5).

``idk_eval`` takes three values: 0.0 (the response answers), 0.5 (it says part of the
inquiry cannot be answered but answers the rest), 1.0 (it declines to answer).

Two detectors:

* :func:`lexical_idk`: fast regular expressions, no model;
* :class:`LLMIdkJudge`: an LLM judge through any :class:`irtexam.llm.base.LLM` backend,
  asked for one label out of yes / partial / no (yes = 1.0, partial = 0.5, no = 0.0).
  With ``method="score"`` the label is the continuation with the highest log-likelihood
  (never unparseable, suited to small local models); with ``method="generate"`` the
  first word of the completion is read and an unreadable answer falls back to the
  lexical detector and is counted.

IDK conditioning (:func:`idk_condition`) follows the MT-RAG metrics reference: for an
UNANSWERABLE or CONVERSATIONAL question the conditioned score is 1 when idk_eval == 1
and 0 otherwise; for an answerable question it is the original metric.
``answerable_idk_zero=True`` additionally gives 0 to a full IDK on an answerable
question, as the MT-RAG evaluation scripts (``judge_wrapper.get_idk_score``) do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from ..llm.base import LLM, GenerationParams, ScoreRequest

UNANSWERABLE_LABELS = frozenset({"UNANSWERABLE", "CONVERSATIONAL"})

_IDK_PATTERNS = [
    r"\bi (?:do not|don't|dont) know\b",
    r"\bi(?: am|'m) not (?:sure|certain|aware)\b",
    r"\b(?:i )?(?:cannot|can't|can not|am unable to|'m unable to|unable to) (?:answer|tell|provide|determine|find|say|help)\b",
    r"\b(?:not|insufficient) (?:enough |sufficient )?information\b",
    r"\bno (?:relevant )?information\b",
    r"\b(?:do|does|did) not (?:provide|contain|mention|say|include|specify|describe|have)\b",
    r"\b(?:doesn't|don't|didn't) (?:provide|contain|mention|say|include|specify|describe|have)\b",
    r"\bthere is no (?:mention|reference|information|answer)\b",
    r"\b(?:is|are) not (?:mentioned|specified|provided|available)\b",
    r"\bunanswerable\b",
    r"\bno answer\b",
]
_IDK_RE = re.compile("|".join(_IDK_PATTERNS), re.IGNORECASE)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


def lexical_idk(response: str, partial_min_words: int = 12) -> float:
    """Lexical IDK detector: 1.0, 0.5 or 0.0.

    A sentence matching an IDK phrase marks the response as IDK. If the sentences that
    do not match hold at least ``partial_min_words`` words, the response also answers
    something and scores 0.5; otherwise 1.0. An empty response counts as IDK (1.0).
    """
    text = response.strip()
    if not text:
        return 1.0
    sentences = [s for s in _SENTENCE_SPLIT.split(text) if s.strip()]
    idk = [s for s in sentences if _IDK_RE.search(s)]
    if not idk:
        return 0.0
    rest_words = sum(len(s.split()) for s in sentences if not _IDK_RE.search(s))
    return 0.5 if rest_words >= partial_min_words else 1.0


IDK_JUDGE_PROMPT = """You judge whether a response to an inquiry says that it lacks the information to answer.
Reply with exactly one label:
yes - the response says the inquiry cannot be answered (for example, the documents do not contain the information);
partial - the response says part of the inquiry cannot be answered, but answers another part;
no - the response answers the inquiry without claiming missing information.

Inquiry: What port does the server listen on by default?
Response: By default the server listens on port 5432.
Label: no

Inquiry: Who approved the 2019 budget change?
Response: Sorry, the provided documents do not say who approved it.
Label: yes

Inquiry: How do I rotate the logs and how large can they get?
Response: The documents do not mention a size limit. To rotate logs, set log_rotation_age in the configuration file.
Label: partial

Inquiry: {inquiry}
Response: {response}
Label:"""

_LABEL_VALUES = {"yes": 1.0, "partial": 0.5, "no": 0.0}


def parse_idk_label(text: str) -> float | None:
    """Map the first word of a judge's reply to 1.0 / 0.5 / 0.0; None when unreadable."""
    match = re.match(r"\s*([A-Za-z]+)", text)
    if not match:
        return None
    return _LABEL_VALUES.get(match.group(1).lower())


@dataclass
class LLMIdkJudge:
    """IDK judge through an LLM backend; counts the replies it could not read.

    ``method="score"``: compares log P(" yes"), log P(" partial"), log P(" no") after the
    prompt (a sum over the label's tokens); ``method="generate"``: greedy 3-token reply.
    """

    llm: LLM
    method: str = "score"
    parse_failures: int = field(default=0, init=False)

    @property
    def name(self) -> str:
        """Identifier recorded with the results."""
        return f"llm-judge:{self.llm.name}:{self.method}"

    def prompts(self, inquiries: Sequence[str], responses: Sequence[str]) -> list[str]:
        """The filled judge prompts."""
        return [IDK_JUDGE_PROMPT.format(inquiry=q, response=r) for q, r in zip(inquiries, responses)]

    def judge(self, inquiries: Sequence[str], responses: Sequence[str]) -> list[float]:
        """idk_eval for each (inquiry, response) pair."""
        prompts = self.prompts(inquiries, responses)
        if self.method == "score":
            labels = tuple(_LABEL_VALUES)
            scores = self.llm.score([ScoreRequest(p, tuple(" " + lab for lab in labels)) for p in prompts])
            return [_LABEL_VALUES[labels[max(range(len(labels)), key=lambda i: s[i].logprob)]] for s in scores]
        if self.method != "generate":
            raise ValueError(f"unknown IDK judge method {self.method!r}; use 'score' or 'generate'")
        replies = self.llm.generate(prompts, GenerationParams(max_new_tokens=3, temperature=0.0))
        out = []
        for reply, response in zip(replies, responses):
            value = parse_idk_label(reply)
            if value is None:
                self.parse_failures += 1
                value = lexical_idk(response)
            out.append(value)
        return out


def idk_condition(metric: float | None, idk_eval: float, answerability: str | None,
                  answerable_idk_zero: bool = False) -> float | None:
    """IDK-conditioned metric (MT-RAG step 5).

    unanswerable/conversational: 1 if idk_eval == 1 else 0;
    otherwise: the metric itself (the reference), or 0 when idk_eval == 1 and
    ``answerable_idk_zero`` (the MT-RAG scripts).
    A missing metric on an answerable question stays missing (None).
    """
    label = (answerability or "").upper()
    if label in UNANSWERABLE_LABELS:
        return 1.0 if idk_eval == 1 else 0.0
    if answerable_idk_zero and idk_eval == 1:
        return 0.0
    return metric
