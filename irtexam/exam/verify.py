"""Verify an exam's answer keys against the source passages before the grid runs.

For every item a verifier LLM reads the item's source chunk and the question and

* **judges each candidate on its own** ("is this proposed answer correct, given the
  passage? Yes or No"). With ``lp(.)`` the log-likelihood of a continuation after the
  judging prompt, the log-odds of candidate k are ``y_k = lp(Yes) - lp(No)`` and its
  support is ``judge_k = sigmoid(y_k) = P(Yes) / (P(Yes) + P(No))``. Optionally
  (``calibrate``) contextual calibration (Zhao et al., 2021) subtracts the log-odds
  ``y_0`` of the content-free answer ``N/A``: ``judge_k = sigmoid(y_k - y_0)``. Each
  candidate is judged alone, so no other candidate's position can bias it;
* **picks among all candidates** shown as A)..D), once per cyclic order (candidate k
  at position (k + r) mod K in order r, r = 0..R-1): with ``P_r(letter)`` the softmax
  over the K letters' log-likelihoods, ``pick_k = (1/R) sum_r P_r(letter of k in order
  r)``. With R = K every candidate sits once in every position, so a bias for a letter
  cancels out of the comparison between candidates.

All prompts put the shared part first (passage, then question), so a backend with
prefix KV sharing (:class:`~irtexam.llm.transformers_backend.TransformersLLM`) runs the
passage once per item; calls go through :class:`~irtexam.llm.CachedLLM` (resumable).

Checks that need no LLM (:func:`static_checks`):

* ``malformed``: a template placeholder (``{candidate D}``), another choice's label
  inside a choice (``WALInitSync E) WALInitWrite``), empty or duplicate choices;
* ``unsupported``: the key is a value (a number, a code, an identifier) that appears
  in no form in the source chunk;
* ``multiple_correct``: the key and another candidate are the same answer up to
  case/punctuation, or one of them is the other plus extra words (after removing the
  words that all candidates share), e.g. ``DROP COLUMN c`` vs ``DROP COLUMN c CASCADE``.

Verdict of an item (:func:`decide`), thresholds in :class:`VerifyConfig`. A static
finding decides first. Then, by default (``rule="relative"``), the verdict uses only
comparisons between an item's own candidates, so a model's overall leaning to "Yes" or
"No" (small models often answer "No" to everything) cancels: with
``share_k = exp(y_k) / sum_j exp(y_j)`` (the judge's log-odds turned into shares over
the candidates) the support is ``s_k = (share_k + pick_k) / 2`` (``share_k`` alone
without a pick pass); ``best`` is the candidate of highest support:

1. ``best != key``, ``s_best - s_key >= margin`` and ``best`` stands out (``s_best`` at
   least ``margin / 2`` above every other candidate): ``wrong_key``, re-keyed to
   ``best`` when ``s_best >= rekey_support`` (the correct candidate is clear);
2. ``s_key <= unsupported_support`` (far below the 1/K of a verifier that cannot
   tell): ``unsupported``;
3. ``best != key`` and ``s_best - s_key >= margin`` (several candidates beat the key):
   ``wrong_key``, not re-keyed;
4. another candidate o with ``s_o >= second_support`` and ``s_key >= second_support``:
   ``multiple_correct``;
5. otherwise ``keep`` (a verifier that cannot tell the candidates apart keeps the item).

``rule="absolute"`` reads the judge's probabilities against 0.5 instead: wrong_key when
``best`` (highest ``pick``) differs from the key with ``pick_best >= pick_min`` and
``judge_best >= judge_key``; unsupported when ``judge_key < 0.5`` and ``pick_key <
pick_min``; multiple_correct when another candidate has ``judge >= 0.5`` (and ``pick >=
second_pick``) next to an accepted key.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ..errors import InputError, IrtexamError
from ..llm.base import LLM, ContinuationScore, ScoreRequest
from .schema import LETTERS, ExamItem

VERDICTS = ("keep", "wrong_key", "multiple_correct", "unsupported", "malformed", "no_verdict")
# A verifier whose scores give every option the same support decides nothing: "no_verdict" (the item is
# neither kept as verified nor removed); more than this share of no_verdict items refuses the verifier.
MAX_NO_VERDICT_SHARE = 0.5
DEFAULT_VERIFIER = "qwen2.5-coder-1.5b"
CONTENT_FREE = "N/A"

# the shared part (passage, question) first and the instruction before the candidate, so
# that only the candidate and the chat template's tail differ between an item's prompts
JUDGE_TEMPLATE = ("Passage from {domain}:\n{passage}\n\nQuestion: {question}\n\n"
                  "Is the following proposed answer a correct answer to the question, according to the "
                  "passage? Answer Yes or No.\n\nProposed answer: {candidate}")
PICK_TEMPLATE = ("Passage from {domain}:\n{passage}\n\nQuestion: {question}\n\n"
                 "Which option is a correct answer to the question, according to the passage? Answer with "
                 "the letter only.\n\n{options}")
YES_NO = ("Yes", "No")


@dataclass(frozen=True)
class VerifyConfig:
    """Prompts and decision thresholds of the verifier (see the module doc)."""

    domain: str = "the PostgreSQL 15 manual"
    max_doc_chars: int = 4500
    permutations: int = 4  # cyclic candidate orders in the pick pass; 0 = judge only
    pick_min: float = 0.5
    rekey_pick: float = 0.6
    second_pick: float = 0.25
    judge_accept: float = 0.5
    calibrate: bool = False  # subtract the log-odds of the content-free answer N/A
    rule: str = "relative"  # "relative" (bias-free, within the item) or "absolute"
    margin: float = 0.10
    rekey_support: float = 0.5
    unsupported_support: float = 0.15
    second_support: float = 0.30
    rekey: bool = True
    static_checks: bool = True

    def __post_init__(self) -> None:
        if self.permutations < 0:
            raise InputError("permutations must be >= 0", column="permutations")
        if self.rule not in ("relative", "absolute"):
            raise InputError(f"rule must be 'relative' or 'absolute', got {self.rule!r}", column="rule")
        for name in ("pick_min", "rekey_pick", "second_pick", "judge_accept", "margin", "rekey_support",
                     "unsupported_support", "second_support"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise InputError(f"{name} must lie in [0, 1]", column=name)


@dataclass
class ItemVerdict:
    """The verifier's outcome for one item."""

    item: str
    verdict: str
    key: int
    new_key: int | None
    reason: str
    judge: list[float] = field(default_factory=list)
    pick: list[float] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)

    @property
    def rekeyed(self) -> bool:
        """Whether the item is kept with a corrected key."""
        return self.new_key is not None and self.new_key != self.key

    @property
    def kept(self) -> bool:
        """Whether the item goes into the verified exam (keep, or a re-keyed wrong key)."""
        return self.verdict in ("keep", "no_verdict") or self.rekeyed

    def row(self, n_choices: int) -> dict[str, Any]:
        """One REPORT.csv row: item, verdict, rekeyed, key, new_key, per candidate the support
        s_k, the judge's P(correct) and the pick share (empty when a static check decided),
        the static checks that fired, and the reason in words."""
        row: dict[str, Any] = {"item": self.item, "verdict": self.verdict, "rekeyed": self.rekeyed,
                               "key": LETTERS[self.key],
                               "new_key": LETTERS[self.new_key] if self.rekeyed else ""}
        scored = bool(self.judge) and not any(math.isnan(j) for j in self.judge)
        support = support_scores(self.judge, self.pick) if scored else []
        for k in range(n_choices):
            row[f"support_{LETTERS[k]}"] = _fmt(support[k]) if k < len(support) else ""
        for k in range(n_choices):
            row[f"judge_{LETTERS[k]}"] = _fmt(self.judge[k]) if k < len(self.judge) else ""
            row[f"pick_{LETTERS[k]}"] = _fmt(self.pick[k]) if k < len(self.pick) else ""
        row["checks"] = ";".join(self.checks)
        row["reason"] = self.reason
        return row


def _fmt(x: float) -> str:
    return "" if math.isnan(x) else f"{x:.4f}"


@dataclass
class VerifySummary:
    """Counts of a verification run (nothing removed silently)."""

    model: str
    n_items: int
    verdicts: dict[str, int]
    rekeyed: int
    kept: int
    removed: int
    llm_calls_run: int = 0
    llm_calls_cached: int = 0

    def to_json(self) -> dict[str, Any]:
        """Plain dict."""
        return asdict(self)

    def line(self) -> str:
        """One human-readable line."""
        counts = ", ".join(f"{v}={self.verdicts.get(v, 0)}" for v in VERDICTS)
        return (f"{self.n_items} items verified with {self.model}: {counts}; re-keyed {self.rekeyed}; "
                f"kept {self.kept}, removed {self.removed}")


# ------------------------------------------------------------------ source passages
def item_passage(item: ExamItem, documents: dict[str, str] | None = None) -> str:
    """The source chunk of an item: ``provenance.document``, else ``documents[chunk_id]``.

    Raises :class:`InputError` naming the item and the field when neither is there.
    """
    doc = (item.provenance or {}).get("document")
    if isinstance(doc, str) and doc.strip():
        return doc
    if documents is not None and item.chunk_id and item.chunk_id in documents:
        return documents[item.chunk_id]
    if documents is not None:
        raise InputError(f"item {item.id!r}: chunk_id {item.chunk_id!r} is not a chunk of the given --corpus "
                         "(chunk it with the same --max-sentences/--min-chars/--max-chars as `generate`)",
                         column="chunk_id")
    raise InputError(f"item {item.id!r} has no source passage (field provenance.document); verification needs "
                     "the passage: pass --corpus to look it up by chunk_id", column="provenance.document")


def corpus_documents(corpus: str | Path, max_sentences: int = 10, min_chars: int = 500,
                     max_chars: int = 4500) -> dict[str, str]:
    """chunk_id -> text of a corpus, chunked like ``irtexam generate`` (same defaults)."""
    from ..corpus import ChunkConfig, chunk_documents, load_corpus

    chunks, _ = chunk_documents(load_corpus(corpus), ChunkConfig(max_sentences, min_chars, max_chars))
    return {c.chunk_id: c.text for c in chunks}


# ------------------------------------------------------------------ checks without an LLM
_PLACEHOLDER = re.compile(r"\{\{?\s*(?:candidate|correct[ _]answer|answer|question|option|choice|explanation)"
                          r"\b[^{}]*\}\}?|^\s*\{[^{}]*\}\s*$", re.I)
_EMBEDDED_LABEL = re.compile(r"\s\(?[A-J]\)\s+\S")
_WORD = re.compile(r"[A-Za-z0-9_]+(?:[.\-][A-Za-z0-9_]+)*")
# syntax placeholders of generated answers (table_name, column1...): not values
_GENERIC = re.compile(r"(?:[a-z]+_)?(?:name|names|condition|value|expression|filename|path|option|options)"
                      r"|(?:table|column|col|schema|index|db|database|user|role|func|function|view|file)_?\d*")
_NUMBER_WORDS = {"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
                 "seven": "7", "eight": "8", "nine": "9", "ten": "10", "sixteen": "16", "hundred": "100"}


def has_placeholder(text: str) -> bool:
    """Whether ``text`` holds a generation-template placeholder such as ``{candidate D}``."""
    return bool(_PLACEHOLDER.search(text))


def has_embedded_label(choice: str) -> bool:
    """Whether a choice contains another choice's label (``x E) y``): a parse artifact."""
    return bool(_EMBEDDED_LABEL.search(choice.strip()))


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def value_atoms(text: str) -> list[str]:
    """The value-like tokens of a short answer: numbers, codes and identifiers.

    A token counts when it has a digit, an underscore, an inner capital (``PQresetStart``)
    or, in an answer of at most 3 words, is an all-capital word of 2+ letters (``TERSE``);
    syntax placeholders (``table_name``, ``column1``) never count. Returned lower-cased.
    """
    tokens = _WORD.findall(text)
    atoms = []
    for tok in tokens:
        if _GENERIC.fullmatch(tok.lower()):
            continue
        if (any(ch.isdigit() for ch in tok) or "_" in tok or re.search(r"[a-z][A-Z]", tok)
                or (len(tok) >= 2 and tok.isupper() and len(tokens) <= 3)):
            atoms.append(tok.lower())
    return atoms


def _doc_forms(doc: str) -> tuple[str, set[str]]:
    low = " ".join(doc.lower().split())
    words = set(_words(doc))
    words |= {d for w, d in _NUMBER_WORDS.items() if w in words}
    # "4MB" -> also "4" and "mb"; "30s" -> "30"
    for w in list(words):
        m = re.fullmatch(r"(-?\d+(?:\.\d+)?)([a-z]+)", w)
        if m:
            words.update(m.groups())
    return low, words


def value_found(answer: str, doc: str) -> bool | None:
    """Whether a value-like answer appears in ``doc`` in some form; None when it is not value-like.

    Value-like: at most 6 words with at least one :func:`value_atoms` token. Found: the
    whole answer (case/space-insensitive) is a substring of the document, or every atom
    is a word of it (number words count: "four" = 4; "4MB" = 4 + MB).
    """
    text = answer.strip().strip("`").strip()
    atoms = value_atoms(text)
    if not atoms or len(_words(text)) > 6:
        return None
    low, words = _doc_forms(doc)
    if " ".join(text.lower().split()) in low:
        return True
    expanded = []
    for a in atoms:
        m = re.fullmatch(r"(-?\d+(?:\.\d+)?)([a-z]+)", a)
        expanded.extend(m.groups() if m and a not in words else [a])
    return all(a in words for a in expanded)


def _distinct_tokens(choices: Sequence[str]) -> list[list[str]]:
    """Each choice's words without the leading and trailing words that every choice shares."""
    toks = [_words(c) for c in choices]
    if not toks or not all(toks):
        return toks
    n_pre = 0
    while all(len(t) > n_pre for t in toks) and len({t[n_pre] for t in toks}) == 1:
        n_pre += 1
    n_suf = 0
    while all(len(t) > n_pre + n_suf for t in toks) and len({t[-1 - n_suf] for t in toks}) == 1:
        n_suf += 1
    return [t[n_pre:len(t) - n_suf] for t in toks]


def _subsequence(short: Sequence[str], long: Sequence[str]) -> bool:
    """Whether ``short`` is ``long`` with some words left out (order kept), and shorter."""
    if len(short) >= len(long):
        return False
    it = iter(long)
    return all(any(w == x for x in it) for w in short)


_BOOLEAN_SPELLINGS = {**{w: "true" for w in ("on", "true", "yes", "1", "enabled", "enable")},
                      **{w: "false" for w in ("off", "false", "no", "0", "disabled", "disable")}}
_NEGATIONS = frozenset({"no", "not", "never", "without", "non", "cannot", "nothing", "none"})


def boolean_value(choice: str) -> str | None:
    """"true" / "false" when the whole choice is one spelling of a boolean (``on``, ``True``, ``yes``,
    ``1``, ``enabled`` ...; quotes and case aside), else None: two spellings of one value are one answer."""
    words = _words(choice)
    return _BOOLEAN_SPELLINGS.get(words[0]) if len(words) == 1 else None


def _extra_words(short: Sequence[str], long: Sequence[str]) -> list[str]:
    """The words of ``long`` left over after matching ``short`` as an ordered subsequence (greedy)."""
    extra, i = [], 0
    for w in long:
        if i < len(short) and w == short[i]:
            i += 1
        else:
            extra.append(w)
    return extra


def near_duplicates(choices: Sequence[str], key: int) -> list[tuple[int, str]]:
    """Candidates that repeat the key: (index, how) for identical or nested answers.

    Identical: the same words in the same order (case and punctuation aside), or two spellings
    of one boolean value (:func:`boolean_value`: ``True`` and ``on``). Nested: after dropping the
    words all candidates share at the start and end, one is the other with extra words inserted
    (its words are an ordered subsequence of the other's), unless the extra words are only
    negations (``INHERIT`` vs ``NO INHERIT`` are opposites, not a part and its whole).
    """
    words = [_words(c) for c in choices]
    distinct = _distinct_tokens(choices)
    key_bool = boolean_value(choices[key])
    out = []
    for j in range(len(choices)):
        if j == key:
            continue
        if words[j] == words[key] or (key_bool is not None and boolean_value(choices[j]) == key_bool):
            out.append((j, "identical"))
            continue
        a, b = distinct[key], distinct[j]
        if a == b:
            continue
        short, long = (a, b) if _subsequence(a, b) else (b, a) if _subsequence(b, a) else (None, None)
        if short is not None and not set(_extra_words(short, long)) <= _NEGATIONS:
            out.append((j, "nested"))
    return out


def static_checks(item: ExamItem, passage: str) -> list[tuple[str, str]]:
    """Findings that need no LLM: (verdict, reason) pairs, worst first (malformed,
    unsupported, multiple_correct)."""
    found: list[tuple[str, str]] = []
    texts = [item.question] + list(item.choices)
    if any(has_placeholder(t) for t in texts):
        where = next(("question" if i == 0 else f"choice {LETTERS[i - 1]}") for i, t in enumerate(texts)
                     if has_placeholder(t))
        found.append(("malformed", f"template placeholder in the {where}"))
    for k, c in enumerate(item.choices):
        if has_embedded_label(c):
            found.append(("malformed", f"choice {LETTERS[k]} holds another choice's label ({c!r}): a parse artifact"))
    stripped = [" ".join(c.split()).lower() for c in item.choices]
    if any(not s for s in stripped):
        found.append(("malformed", "an empty choice"))
    elif len(set(stripped)) < len(stripped):
        found.append(("malformed", "two identical choices"))
    if found:
        return found
    key_found = value_found(item.correct_text, passage)
    if key_found is False:
        found.append(("unsupported", f"the key {item.correct_text!r} is a value found in no form in the source "
                                     "passage"))
    for j, how in near_duplicates(item.choices, item.answer):
        found.append(("multiple_correct", f"choice {LETTERS[j]} is {'the same answer as' if how == 'identical' else 'nested with'} "
                                          f"the key {LETTERS[item.answer]} ({item.choices[j]!r} vs {item.correct_text!r})"))
    return found


# ------------------------------------------------------------------ prompts and scores
def unwrap_formatter(llm: Any) -> Callable[[str], str]:
    """How the verifier's prompt text reaches the model: the backend's chat template if it
    has one (``format_prompt``), else the plain text followed by ``\\nAnswer:``."""
    inner = llm
    while hasattr(inner, "llm") and not hasattr(inner, "format_prompt"):
        inner = inner.llm
    fmt = getattr(inner, "format_prompt", None)
    if callable(fmt) and getattr(inner, "chat", False):
        return fmt
    return lambda text: text + "\nAnswer:"


def judge_requests(item: ExamItem, passage: str, config: VerifyConfig,
                   fmt: Callable[[str], str]) -> list[ScoreRequest]:
    """One Yes/No request per candidate, then (``calibrate``) one for the content-free answer ``N/A``."""
    out = []
    for cand in list(item.choices) + ([CONTENT_FREE] if config.calibrate else []):
        text = JUDGE_TEMPLATE.format(domain=config.domain, passage=passage[:config.max_doc_chars],
                                     question=item.question, candidate=cand)
        out.append(ScoreRequest(fmt(text), YES_NO))
    return out


def cyclic_orders(n: int, count: int) -> list[list[int]]:
    """``count`` cyclic orders of n candidates: order r shows candidate (p - r) mod n at position p."""
    return [[(p - r) % n for p in range(n)] for r in range(min(count, n))]


def pick_requests(item: ExamItem, passage: str, config: VerifyConfig,
                  fmt: Callable[[str], str]) -> tuple[list[ScoreRequest], list[list[int]]]:
    """One request per cyclic order, continuations the letters; returns (requests, orders)."""
    n = len(item.choices)
    orders = cyclic_orders(n, config.permutations)
    letters = tuple(LETTERS[:n])
    reqs = []
    for order in orders:
        options = "\n".join(f"{LETTERS[p]}) {item.choices[k]}" for p, k in enumerate(order))
        text = PICK_TEMPLATE.format(domain=config.domain, passage=passage[:config.max_doc_chars],
                                    question=item.question, options=options)
        reqs.append(ScoreRequest(fmt(text), letters))
    return reqs, orders


def sigmoid(x: float) -> float:
    """1 / (1 + exp(-x)), overflow-safe."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def judge_probabilities(scores: Sequence[Sequence[ContinuationScore]], calibrate: bool = False) -> list[float]:
    """P(correct) per candidate: sigmoid(lp_Yes - lp_No), minus the log-odds of the
    content-free answer when ``calibrate`` (then ``scores`` ends with that [Yes, No] pair).
    """
    logodds = [row[0].logprob - row[1].logprob for row in scores]
    if calibrate:
        base = logodds.pop()
        return [sigmoid(y - base) for y in logodds]
    return [sigmoid(y) for y in logodds]


def pick_probabilities(scores: Sequence[Sequence[ContinuationScore]], orders: Sequence[Sequence[int]],
                       n: int) -> list[float]:
    """Mean over orders of softmax over letters, mapped back to candidates."""
    if not orders:
        return [math.nan] * n
    total = [0.0] * n
    for row, order in zip(scores, orders):
        lps = [s.logprob for s in row]
        m = max(lps)
        z = [math.exp(v - m) for v in lps]
        s = sum(z)
        for p, k in enumerate(order):
            total[k] += z[p] / s
    return [t / len(orders) for t in total]


def cannot_tell_apart(judge: Sequence[float], pick: Sequence[float], tolerance: float = 1e-6) -> bool:
    """True when the judge probabilities are all equal (within ``tolerance``) and the pick probabilities
    are too (or absent): such a verifier says nothing about which option is right."""
    def flat(values: Sequence[float]) -> bool:
        finite = [v for v in values if not math.isnan(v)]
        return not finite or max(finite) - min(finite) <= tolerance
    return len(judge) > 1 and flat(judge) and flat(pick) and any(not math.isnan(j) for j in judge)


def decide(item: ExamItem, judge: Sequence[float], pick: Sequence[float],
           checks: Sequence[tuple[str, str]], config: VerifyConfig = VerifyConfig()) -> ItemVerdict:
    """The verdict of one item from its scores and static findings (rules in the module doc)."""
    key = item.answer
    labels = [c[0] for c in checks]
    if checks:
        worst = next(v for v in ("malformed", "unsupported", "multiple_correct") if v in labels)
        reasons = "; ".join(r for v, r in checks if v == worst)
        return ItemVerdict(item.id, worst, key, None, reasons, list(judge), list(pick), labels)
    if cannot_tell_apart(judge, pick):
        shown = ", ".join(f"{LETTERS[k]} {judge[k]:.2f}" for k in range(len(judge)))
        return ItemVerdict(item.id, "no_verdict", key, None, f"the verifier gives every option the same score "
                           f"({shown}): no verdict, the item is kept unverified", list(judge), list(pick))
    if config.rule == "relative":
        return _decide_relative(item, judge, pick, config)
    n = len(item.choices)
    have_pick = not any(math.isnan(p) for p in pick)
    acc = config.judge_accept
    if have_pick:
        best = max(range(n), key=lambda k: (pick[k], judge[k]))
        if best != key and pick[best] >= config.pick_min and judge[best] >= judge[key]:
            clear = pick[best] >= config.rekey_pick and judge[best] >= acc > judge[key]
            new_key = best if (clear and config.rekey) else None
            reason = (f"the verifier picks {LETTERS[best]} ({pick[best]:.2f} over {len(pick)} orders; judged "
                      f"{judge[best]:.2f} alone) over the key {LETTERS[key]} (picked {pick[key]:.2f}, judged "
                      f"{judge[key]:.2f})" + (f"; re-keyed to {LETTERS[best]}" if new_key is not None else ""))
            return ItemVerdict(item.id, "wrong_key", key, new_key, reason, list(judge), list(pick))
    key_picked = pick[key] >= config.pick_min if have_pick else True
    if judge[key] < acc and not key_picked:
        reason = (f"the verifier does not accept the key {LETTERS[key]} alone (P(correct)={judge[key]:.2f})"
                  + (f" nor pick it ({pick[key]:.2f})" if have_pick else ""))
        return ItemVerdict(item.id, "unsupported", key, None, reason, list(judge), list(pick))
    if judge[key] >= acc:
        others = [o for o in range(n) if o != key and judge[o] >= acc
                  and (not have_pick or pick[o] >= config.second_pick)]
        if others:
            o = max(others, key=lambda k: judge[k])
            reason = (f"the verifier also accepts {LETTERS[o]} (P(correct)={judge[o]:.2f}, picked "
                      f"{pick[o]:.2f}) next to the key {LETTERS[key]} ({judge[key]:.2f})")
            return ItemVerdict(item.id, "multiple_correct", key, None, reason, list(judge), list(pick))
    reason = (f"key {LETTERS[key]} accepted (P(correct)={judge[key]:.2f}"
              + (f", picked {pick[key]:.2f})" if have_pick else ")"))
    return ItemVerdict(item.id, "keep", key, None, reason, list(judge), list(pick))


def support_scores(judge: Sequence[float], pick: Sequence[float]) -> list[float]:
    """s_k = (share_k + pick_k) / 2 with share_k the softmax over candidates of logit(judge_k)."""
    logodds = [math.log(max(j, 1e-12)) - math.log(max(1.0 - j, 1e-12)) for j in judge]
    m = max(logodds)
    z = [math.exp(v - m) for v in logodds]
    share = [v / sum(z) for v in z]
    if any(math.isnan(p) for p in pick):
        return share
    return [(a + b) / 2 for a, b in zip(share, pick)]


def _decide_relative(item: ExamItem, judge: Sequence[float], pick: Sequence[float],
                     config: VerifyConfig) -> ItemVerdict:
    key, n = item.answer, len(item.choices)
    s = support_scores(judge, pick)
    best = max(range(n), key=lambda k: s[k])

    def verdict(name: str, reason: str, new_key: int | None = None) -> ItemVerdict:
        scores = ", ".join(f"{LETTERS[k]} {s[k]:.2f}" for k in range(n))
        return ItemVerdict(item.id, name, key, new_key, f"{reason} (support {scores})", list(judge), list(pick))

    beaten = best != key and s[best] - s[key] >= config.margin
    second = max(s[k] for k in range(n) if k != best)
    if beaten and s[best] - second >= config.margin / 2:
        new_key = best if (config.rekey and s[best] >= config.rekey_support) else None
        return verdict("wrong_key", f"the verifier supports {LETTERS[best]} over the key {LETTERS[key]}"
                       + (f"; re-keyed to {LETTERS[best]}" if new_key is not None else ""), new_key)
    if s[key] <= config.unsupported_support:
        return verdict("unsupported", f"the verifier gives the key {LETTERS[key]} almost no support")
    if beaten:
        return verdict("wrong_key", f"the verifier supports {LETTERS[best]} and others over the key {LETTERS[key]}")
    others = [o for o in range(n) if o != key and s[o] >= config.second_support]
    if others and s[key] >= config.second_support:
        o = max(others, key=lambda k: s[k])
        return verdict("multiple_correct", f"the verifier supports {LETTERS[o]} as much as the key {LETTERS[key]}")
    return verdict("keep", f"key {LETTERS[key]} supported")


# ------------------------------------------------------------------ the run
def _score(llm: LLM, requests: list[ScoreRequest]) -> list[list[ContinuationScore]]:
    """``llm.score`` with a backend's failure turned into a one-line error naming the verifier."""
    try:
        scores = llm.score(requests)
    except IrtexamError as exc:
        raise IrtexamError(f"the verifier {llm.name!r} cannot score answers: {' '.join(str(exc).split())}") from None
    if len(scores) != len(requests) or any(len(s) != len(r.continuations) for s, r in zip(scores, requests)):
        raise IrtexamError(f"the verifier {llm.name!r} returned {len(scores)} results for {len(requests)} requests")
    bad = [s.logprob for row in scores for s in row if not math.isfinite(s.logprob)]
    if bad:
        raise IrtexamError(f"the verifier {llm.name!r} returned a non-finite log-likelihood ({bad[0]}); it cannot "
                           "score answers")
    return scores


def _with_cache(llm: LLM, cache_dir: str | Path | None, per_item: int) -> LLM:
    from ..llm.cache import CachedLLM

    if cache_dir is None or isinstance(llm, CachedLLM):
        return llm
    return CachedLLM(llm, cache_dir, chunk_size=per_item)


def _verify_loop(items: Sequence[ExamItem], passages: Sequence[str], llm: LLM, fmt: Callable[[str], str],
                 config: VerifyConfig, verdicts: list[ItemVerdict], kept: list[ExamItem], bar: Any) -> None:
    """Score and decide item by item (appending to ``verdicts`` and ``kept``)."""
    for it, passage in zip(items, passages):
        checks = static_checks(it, passage) if config.static_checks else []
        n = len(it.choices)
        if checks:
            judge, pick = [math.nan] * n, [math.nan] * n
        else:
            jreq = judge_requests(it, passage, config, fmt)
            preq, orders = pick_requests(it, passage, config, fmt)
            scores = _score(llm, jreq + preq)
            judge = judge_probabilities(scores[:len(jreq)], config.calibrate)
            pick = pick_probabilities(scores[len(jreq):], orders, n)
        v = decide(it, judge, pick, checks, config)
        verdicts.append(v)
        record = {"verdict": v.verdict, "model": llm.name, "reason": v.reason,
                  "judge": [None if math.isnan(x) else round(x, 4) for x in v.judge],
                  "pick": [None if math.isnan(x) else round(x, 4) for x in v.pick]}
        if v.rekeyed:
            record["original_answer"] = it.answer
        it.provenance["verify"] = record
        if v.kept:
            if v.rekeyed:
                it.answer = int(v.new_key)  # type: ignore[arg-type]
            kept.append(it)
        if bar is not None:
            bar.update(1)


def verify_items(items: Sequence[ExamItem], llm: LLM, *, documents: dict[str, str] | None = None,
                 config: VerifyConfig = VerifyConfig(), cache_dir: str | Path | None = None,
                 progress: bool = False) -> tuple[list[ExamItem], list[ItemVerdict], VerifySummary]:
    """Verify every item; returns (verified items, one verdict per input item, summary).

    Verified items are those judged ``keep`` plus the clearly re-keyed wrong keys (with
    ``answer`` changed and ``provenance["verify"]`` recording the original key); every
    item's verdict is in the returned list and in its ``provenance["verify"]``. Passages
    come from ``provenance.document`` or ``documents[chunk_id]`` (:func:`item_passage`);
    a missing passage raises :class:`InputError` before any LLM call. ``cache_dir``
    wraps ``llm`` in a :class:`~irtexam.llm.CachedLLM` (resumable). Items whose static
    checks already decide the verdict are not sent to the LLM.
    """
    if not items:
        raise InputError("the exam holds no items to verify")
    passages = [item_passage(it, documents) for it in items]
    per_item = max(len(it.choices) for it in items) * (1 + (config.permutations > 0)) + config.calibrate
    llm = _with_cache(llm, cache_dir, per_item)
    fmt = unwrap_formatter(llm)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(items), desc="verify", unit="item")
    verdicts: list[ItemVerdict] = []
    kept: list[ExamItem] = []
    try:
        _verify_loop(items, passages, llm, fmt, config, verdicts, kept, bar)
    finally:
        if bar is not None:
            bar.close()
    counts = {name: sum(v.verdict == name for v in verdicts) for name in VERDICTS}
    if len(verdicts) >= 4 and counts["no_verdict"] > MAX_NO_VERDICT_SHARE * len(verdicts):
        raise IrtexamError(f"the verifier {llm.name!r} gives every option the same score on {counts['no_verdict']} "
                           f"of {len(verdicts)} items: it cannot tell the options apart (a server returning equal "
                           "log-probs?); nothing is written")
    summary = VerifySummary(model=llm.name, n_items=len(items), verdicts=counts,
                            rekeyed=sum(v.rekeyed for v in verdicts), kept=len(kept),
                            removed=len(items) - len(kept), llm_calls_run=int(getattr(llm, "misses", 0)),
                            llm_calls_cached=int(getattr(llm, "hits", 0)))
    return kept, verdicts, summary


def write_report(verdicts: Iterable[ItemVerdict], path: str | Path, n_choices: int = 4) -> Path:
    """Write REPORT.csv: one row per item (see :meth:`ItemVerdict.row`), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [v.row(n_choices) for v in verdicts]
    fields = list(rows[0]) if rows else ["item", "verdict", "reason"]
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)
    return path


def verify_exam(exam: str | Path, llm: LLM | str = DEFAULT_VERIFIER, out: str | Path | None = None,
                report: str | Path | None = None, *, corpus: str | Path | None = None,
                cache_dir: str | Path | None = None, config: VerifyConfig = VerifyConfig(),
                progress: bool = True, num_threads: int | None = None,
                loader: Callable[[str], LLM] | None = None) -> VerifySummary:
    """Read an exam, verify it, write the verified exam (same JSONL schema) and REPORT.csv.

    ``llm`` is a loaded backend or anything :func:`irtexam.llm.load_llm` accepts (packaged
    name, model folder, ``http(s)://.../v1`` URL); ``cache_dir`` defaults to the user
    cache's ``calls`` folder shared with every other LLM stage; ``corpus`` looks passages
    up by ``chunk_id`` for items without ``provenance.document``; ``loader`` (optional)
    turns a name into a backend instead of ``load_llm(name, num_threads=...)``. Returns
    the summary. Every error (no passage, empty exam, a verifier that cannot score) is an
    :class:`~irtexam.errors.IrtexamError` with a one-line message.
    """
    from ..llm import load_llm
    from ..llm.registry import cache_root
    from .schema import read_exam, write_exam

    items = read_exam(exam)
    documents = corpus_documents(corpus) if corpus is not None else None
    for it in items:  # fail on a missing passage before loading any model
        item_passage(it, documents)
    if isinstance(llm, str):
        llm = loader(llm) if loader is not None else load_llm(llm, num_threads=num_threads)
    kept, verdicts, summary = verify_items(items, llm, documents=documents, config=config,
                                           cache_dir=cache_dir or cache_root() / "calls", progress=progress)
    if report is not None:
        write_report(verdicts, report, max(len(it.choices) for it in items))
    if out is not None:
        if not kept:
            raise IrtexamError(f"no item of {exam} passed verification ({summary.line()}); see the report, "
                               "nothing written to the verified exam")
        write_exam(kept, out)
    return summary
