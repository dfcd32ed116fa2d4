"""A-priori filters: each takes the items and returns a keep mask and one reason per
dropped item; chains run filters in order on the survivors and count everything.

Paper filters (appendix A.2), with k the source chunk, c the correct answer and d_i
the distractors:

* extra-candidate: drop when J(k, c) + t1 < max_i J(k, d_i) or S(k, c) + t2 < max_i S(k, d_i)
  (a distractor is closer to the documentation than the correct answer);
* intra-candidate: drop when max_i J_n(c, d_i) >= t3 or max_i S(c, d_i) >= t4
  (a distractor nearly repeats the correct answer);

J with n = mean candidate length in tokens, S the MiniLM cosine. A threshold left as
``None`` is calibrated so that the filter removes about ``target_rate`` of the items it
sees (paper: about 5% each); the thresholds used are reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import InputError
from ..exam.parse import choice_identity
from ..exam.verify import has_embedded_label, has_placeholder
from ..exam.schema import ExamItem
from .similarity import Embedder, jaccard, load_embedder, mean_candidate_ngram

# The paper's three self-containment patterns, in its order.
PAPER_SELF_CONTAINMENT = (
    r'\b(documentation|paper|article|research|study)\b\s*\"[^\"]+\"',
    r'\b(discussed in|addressed in|described in|of the)\b\s*\"[^\"]+\"',
    r'\b(documentation|paper|article|research|study)\b',
)
POSITIONAL = re.compile(r"\b(all|none|both|neither) of the (above|following|options|choices)\b|\boptions? [A-D]\b"
                        r"|\b[A-D] (and|or) [A-D]\b", re.I)


@dataclass
class FilterResult:
    """Outcome of one filter on a list of items."""

    name: str
    keep: np.ndarray
    reasons: list[str | None]
    params: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert len(self.keep) == len(self.reasons)
        assert all((r is None) == bool(k) for k, r in zip(self.keep, self.reasons))


def _result(name: str, reasons: list[str | None], **params: Any) -> FilterResult:
    return FilterResult(name, np.array([r is None for r in reasons], dtype=bool), reasons, params)


def format_filter(items: Sequence[ExamItem], n_choices: int = 4, drop_positional: bool = True) -> FilterResult:
    """Exactly ``n_choices`` distinct non-empty choices, a valid answer index, a non-empty
    question, no generation-template placeholder (``{candidate D}``) or other choice's
    label inside a choice (``x E) y``), and (``drop_positional``) no choice like "all of
    the above" / "A and B" whose meaning breaks when candidates are shuffled."""
    reasons: list[str | None] = []
    for it in items:
        identity = [choice_identity(c) for c in it.choices]  # case/punctuation count in code-like text
        if len(it.choices) != n_choices:
            reasons.append("wrong_number_of_choices")
        elif any(not c for c in identity):
            reasons.append("empty_choice")
        elif len(set(identity)) != len(identity):
            reasons.append("duplicate_choices")
        elif not 0 <= it.answer < len(it.choices):
            reasons.append("answer_out_of_range")
        elif not it.question.strip():
            reasons.append("empty_question")
        elif any(has_placeholder(t) for t in [it.question, *it.choices]):
            reasons.append("template_placeholder")
        elif any(has_embedded_label(c) for c in it.choices):
            reasons.append("embedded_choice_label")
        elif drop_positional and any(POSITIONAL.search(c) for c in it.choices):
            reasons.append("positional_choice")
        else:
            reasons.append(None)
    return _result("format", reasons, n_choices=n_choices, drop_positional=drop_positional)


def length_filter(items: Sequence[ExamItem], min_question_chars: int = 20, max_question_chars: int = 1000,
                  max_choice_chars: int = 400, max_choice_ratio: float | None = None) -> FilterResult:
    """Question length in [min, max] characters and every choice at most ``max_choice_chars``.

    ``max_choice_ratio`` (optional) drops items whose longest choice is more than that
    many times longer than the shortest (a length giveaway)."""
    reasons: list[str | None] = []
    for it in items:
        lengths = [len(c) for c in it.choices]
        if len(it.question) < min_question_chars:
            reasons.append("question_too_short")
        elif len(it.question) > max_question_chars:
            reasons.append("question_too_long")
        elif max(lengths) > max_choice_chars:
            reasons.append("choice_too_long")
        elif max_choice_ratio is not None and max(lengths) > max_choice_ratio * max(min(lengths), 1):
            reasons.append("choice_length_ratio")
        else:
            reasons.append(None)
    return _result("length", reasons, min_question_chars=min_question_chars, max_question_chars=max_question_chars,
                   max_choice_chars=max_choice_chars, max_choice_ratio=max_choice_ratio)


def self_containment_filter(items: Sequence[ExamItem], patterns: Sequence[str] = PAPER_SELF_CONTAINMENT,
                            include_choices: bool = False) -> FilterResult:
    """Drop questions matching any pattern (case-insensitive); reason names the pattern index."""
    try:
        compiled = [re.compile(p, re.I) for p in patterns]
    except re.error as exc:
        raise InputError(f"invalid self-containment regex: {exc}", column="patterns") from None
    reasons: list[str | None] = []
    for it in items:
        text = it.question + ("\n" + "\n".join(it.choices) if include_choices else "")
        hit = next((i for i, rx in enumerate(compiled) if rx.search(text)), None)
        reasons.append(None if hit is None else f"self_containment_{hit + 1}")
    return _result("self_containment", reasons, patterns=list(patterns), include_choices=include_choices)


def _document(item: ExamItem, documents: dict[str, str] | None) -> str:
    doc = (item.provenance or {}).get("document")
    if doc:
        return str(doc)
    if documents is not None:
        for key in (item.chunk_id, item.doc_id):
            if key and key in documents:
                return documents[key]
    raise InputError("the extra-candidate filter needs each item's source text: generate the exam with "
                     "`irtexam generate` (it stores it in provenance.document) or pass --corpus",
                     row=None, column=f"item {item.id}")


def _cosines(embed: Embedder, texts: list[str]) -> np.ndarray:
    return embed(texts)


def _calibrate(scores: list[np.ndarray], thresholds: list[float | None], target_rate: float,
               strict: bool) -> list[float]:
    """Pick missing thresholds as a common upper quantile so that the union of the
    rules ``score > t`` (``strict``) or ``score >= t`` drops about ``target_rate``."""
    if all(t is not None for t in thresholds):
        return [float(t) for t in thresholds]  # type: ignore[arg-type]
    n = len(scores[0])
    best, best_gap = [np.inf if t is None else float(t) for t in thresholds], np.inf
    for q in np.linspace(0.0, target_rate, 101):
        ts = [float(t) if t is not None else (float(np.quantile(s, 1.0 - q)) if n and q > 0 else np.inf)
              for s, t in zip(scores, thresholds)]
        drop = np.zeros(n, dtype=bool)
        for s, t in zip(scores, ts):
            drop |= (s > t) if strict else (s >= t)
        gap = abs(drop.mean() - target_rate) if n else 0.0
        if gap < best_gap - 1e-12:
            best, best_gap = ts, gap
    return best  # type: ignore[return-value]


def extra_candidate_filter(items: Sequence[ExamItem], t1: float | None = None, t2: float | None = None,
                           target_rate: float = 0.05, embedder: Embedder | None = None,
                           documents: dict[str, str] | None = None, use_embeddings: bool = True) -> FilterResult:
    """Drop when J(k,c) + t1 < max_i J(k,d_i) or S(k,c) + t2 < max_i S(k,d_i).

    Scores reported per item: ``jaccard_margin`` = max_i J(k,d_i) - J(k,c) and
    ``embedding_margin`` likewise; an item is dropped when a margin exceeds its threshold.
    """
    margins_j, margins_s = np.zeros(len(items)), np.zeros(len(items))
    docs = [_document(it, documents) for it in items]
    for m, it in enumerate(items):
        n = mean_candidate_ngram(it.choices)
        js = [jaccard(docs[m], c, n) for c in it.choices]
        margins_j[m] = max(j for i, j in enumerate(js) if i != it.answer) - js[it.answer]
    if use_embeddings and items:
        embed = embedder or load_embedder()
        doc_emb = embed(docs)
        flat = [c for it in items for c in it.choices]
        cand = embed(flat)
        pos = 0
        for m, it in enumerate(items):
            sims = cand[pos:pos + len(it.choices)] @ doc_emb[m]
            pos += len(it.choices)
            margins_s[m] = max(s for i, s in enumerate(sims) if i != it.answer) - sims[it.answer]
    scores = [margins_j] + ([margins_s] if use_embeddings else [])
    ts = _calibrate(scores, [t1, t2][:len(scores)], target_rate, strict=True)
    reasons: list[str | None] = []
    for m in range(len(items)):
        if margins_j[m] > ts[0]:
            reasons.append("distractor_closer_to_doc_jaccard")
        elif use_embeddings and margins_s[m] > ts[1]:
            reasons.append("distractor_closer_to_doc_embedding")
        else:
            reasons.append(None)
    res = _result("extra_candidate", reasons, t1=ts[0], t2=ts[1] if use_embeddings else None,
                  calibrated=[t is None for t in (t1, t2)], target_rate=target_rate)
    res.scores = {"jaccard_margin": margins_j.tolist(), "embedding_margin": margins_s.tolist()}
    return res


def intra_candidate_filter(items: Sequence[ExamItem], t3: float | None = None, t4: float | None = None,
                           target_rate: float = 0.05, embedder: Embedder | None = None,
                           use_embeddings: bool = True) -> FilterResult:
    """Drop when max_i J_n(c, d_i) >= t3 or max_i S(c, d_i) >= t4 (n = mean candidate tokens)."""
    max_j, max_s = np.zeros(len(items)), np.zeros(len(items))
    for m, it in enumerate(items):
        n = mean_candidate_ngram(it.choices)
        c = it.choices[it.answer]
        max_j[m] = max(jaccard(c, d, n) for i, d in enumerate(it.choices) if i != it.answer)
    if use_embeddings and items:
        embed = embedder or load_embedder()
        emb = embed([c for it in items for c in it.choices])
        pos = 0
        for m, it in enumerate(items):
            e = emb[pos:pos + len(it.choices)]
            pos += len(it.choices)
            sims = e @ e[it.answer]
            max_s[m] = max(s for i, s in enumerate(sims) if i != it.answer)
    scores = [max_j] + ([max_s] if use_embeddings else [])
    ts = _calibrate(scores, [t3, t4][:len(scores)], target_rate, strict=False)
    reasons: list[str | None] = []
    for m in range(len(items)):
        if max_j[m] >= ts[0]:
            reasons.append("distractor_repeats_answer_jaccard")
        elif use_embeddings and max_s[m] >= ts[1]:
            reasons.append("distractor_repeats_answer_embedding")
        else:
            reasons.append(None)
    res = _result("intra_candidate", reasons, t3=ts[0], t4=ts[1] if use_embeddings else None,
                  calibrated=[t is None for t in (t3, t4)], target_rate=target_rate)
    res.scores = {"max_jaccard": max_j.tolist(), "max_embedding": max_s.tolist()}
    return res


def verify_filter(items: Sequence[ExamItem], llm: Any = None, cache_dir: str | None = None,
                  documents: dict[str, str] | None = None, dtype: str = "bfloat16", num_threads: int | None = None,
                  permutations: int = 4, progress: bool = True) -> FilterResult:
    """The LLM verifier (:mod:`irtexam.exam.verify`) as a chain step: keeps the items judged
    ``keep``; the reason of a dropped item is its verdict (wrong_key, multiple_correct,
    unsupported, malformed). No item is re-keyed here (``irtexam verify`` can re-key).

    ``llm``: a loaded backend or a name/path/URL for :func:`irtexam.llm.load_llm`
    (default: the packaged qwen2.5-coder-1.5b); calls are cached under ``cache_dir``
    (default: the user cache's ``calls`` folder). Scores per item: ``judge_key`` and
    ``pick_key`` (the verifier's support for the key).
    """
    from ..exam.verify import DEFAULT_VERIFIER, VerifyConfig, verify_items
    from ..llm import load_llm
    from ..llm.registry import cache_root

    if not items:
        return _result("verify", [])
    model = load_llm(llm or DEFAULT_VERIFIER, dtype=dtype, num_threads=num_threads) if llm is None or isinstance(
        llm, str) else llm
    config = VerifyConfig(permutations=permutations, rekey=False)
    _, verdicts, summary = verify_items(list(items), model, documents=documents, config=config,
                                        cache_dir=cache_dir or cache_root() / "calls", progress=progress)
    res = _result("verify", [None if v.verdict in ("keep", "no_verdict") else v.verdict for v in verdicts],
                  model=summary.model, permutations=permutations)
    res.scores = {"judge_key": [v.judge[v.key] for v in verdicts], "pick_key": [v.pick[v.key] for v in verdicts]}
    return res


FilterFn = Callable[[Sequence[ExamItem]], FilterResult]

FILTERS: dict[str, Callable[..., FilterResult]] = {
    "format": format_filter, "length": length_filter, "self_containment": self_containment_filter,
    "extra_candidate": extra_candidate_filter, "intra_candidate": intra_candidate_filter,
    "verify": verify_filter,
}
CHAINS: dict[str, tuple[str, ...]] = {
    "paper": ("format", "length", "self_containment", "extra_candidate", "intra_candidate"),
    "cheap": ("format", "length", "self_containment"),
    "verified": ("format", "length", "self_containment", "extra_candidate", "intra_candidate", "verify"),
}


@dataclass
class ChainReport:
    """Counts per filter and reason, thresholds used, and what survived."""

    chain: list[str]
    n_in: int
    n_out: int
    rows: list[dict[str, Any]]
    params: dict[str, dict[str, Any]]

    def table(self) -> "Any":
        """A pandas DataFrame: filter, reason, n (one row per reason; 'kept' rows per filter)."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=["filter", "reason", "n"])


def run_chain(items: Sequence[ExamItem], chain: str | Sequence[str] = "paper",
              options: dict[str, dict[str, Any]] | None = None) -> tuple[list[ExamItem], list[ExamItem], ChainReport]:
    """Run named filters in order on the survivors; returns (kept, dropped, report).

    Each item's ``provenance["filters"]`` records ``{filter: "keep" | reason}`` for the
    filters it met. ``options`` maps a filter name to keyword arguments (thresholds,
    patterns, target_rate, embedder...).
    """
    names = list(CHAINS[chain]) if isinstance(chain, str) and chain in CHAINS else (
        [chain] if isinstance(chain, str) else list(chain))
    unknown = [n for n in names if n not in FILTERS]
    if unknown:
        raise InputError(f"unknown filter(s) {unknown}; known filters: {sorted(FILTERS)}, chains: {sorted(CHAINS)}")
    options = options or {}
    alive = list(items)
    dropped: list[ExamItem] = []
    rows: list[dict[str, Any]] = []
    params: dict[str, dict[str, Any]] = {}
    for name in names:
        result = FILTERS[name](alive, **options.get(name, {}))
        params[name] = result.params
        counts: dict[str, int] = {}
        survivors = []
        for it, keep, reason in zip(alive, result.keep, result.reasons):
            it.provenance.setdefault("filters", {})[name] = "keep" if keep else reason
            if keep:
                survivors.append(it)
            else:
                dropped.append(it)
                counts[str(reason)] = counts.get(str(reason), 0) + 1
        rows.append({"filter": name, "reason": "(input)", "n": len(alive)})
        rows.extend({"filter": name, "reason": r, "n": n} for r, n in sorted(counts.items()))
        rows.append({"filter": name, "reason": "(kept)", "n": len(survivors)})
        alive = survivors
    return alive, dropped, ChainReport(names, len(items), len(alive), rows, params)
