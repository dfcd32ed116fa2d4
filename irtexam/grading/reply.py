"""Grade a free-text reply to a multiple-choice question into one choice, or refuse to.

Used for every examinee that answers in words instead of log-likelihoods: black-box
systems (an HTTP endpoint, a Python function) and LLM levels with ``answer: generate``.
:func:`grade_reply` tries, in order, and reports which route decided (``route``):

1. ``letter``: the reply names a letter explicitly: ``B``, ``(B)``, ``**B**``, ``B) ...``,
   ``B. ...``, ``B: ...``, ``Answer: B``, ``the answer is B``, ``option B``, ``choice (B)``.
   Keywords are case-insensitive, the letter must be upper case, and a leading letter
   counts only with a delimiter, so "A table is ..." names no letter. When the strongest
   pattern that matched names two different letters the reply is ambiguous: the text and
   abstention routes are tried, and failing those it is unparseable (never embedded).
   A letter followed by another candidate's text ("A. About $8k" where "About $8k" is B)
   names two choices: unparseable;
2. ``text``: the normalised text of exactly one candidate occurs in the normalised reply
   (option lines "A. ..." restated after the first line, and candidates whose text is in
   the question, are ignored; a reply that also declines is unparseable)
   (or the reply is contained in exactly one candidate, for replies of >= 2 words);
   candidates nested in another matched candidate count as the longer one;
3. ``abstain``: the reply declines ("I don't know", "the context does not mention ...",
   "cannot be determined"): :func:`is_abstention`. Checked after the letter and text
   routes, so "The context does not say, but the answer is B" is graded B, and before
   the embedding route, so a refusal is never turned into a choice;
4. ``embedding``: an A-VERT-style match: the reply's MiniLM sentence vector against each
   candidate's targets (its text and "X. text"), a candidate's score being its best
   cosine (option lines after the first line left out); chosen when the best score is at least ``min_similarity``, beats the runner-up
   by ``margin`` and (given the question) beats the reply's similarity to the question;
5. ``unparseable``: none of the above (also an empty reply).

Abstentions and unparseable replies have ``choice=None``: they score 0 and are never
guessed; callers count them. Everything here is pure except the optional encoder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..exam.schema import LETTERS

ROUTES = ("letter", "text", "embedding", "abstain", "unparseable")
DEFAULT_MARGIN = 0.10
DEFAULT_MIN_SIMILARITY = 0.35


@dataclass(frozen=True)
class GradedReply:
    """How one reply was graded: the chosen index (None = abstained / unparseable), the route, a detail."""

    choice: int | None
    route: str
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        """The fields stored in an answer record."""
        return {"chosen": self.choice, "grading": self.route, "grading_detail": self.detail}


# strongest first; each tier is tried on the whole reply before the next. Keywords are
# case-insensitive, the letter itself must be upper case ("the answer is a table" names no letter).
_L = "([A-J])"
_KW_ANSWER = r"(?i:\banswer)"
_KW_OPTION = r"(?i:\b(?:option|choice|letter))"
# what may follow a letter inside a sentence: the end, punctuation, or a connective ("B because ...");
# not a word ("the answer is A separate port", "B-tree"), which is candidate text, not a letter
_END = r"(?=\s*$|[\.\)\]\*,;:!?]|\s*\n|\s+(?i:because|since|as|which|is|[-\u2013\u2014(\[]))"
_LETTER_TIERS: tuple[tuple[str, ...], ...] = (
    # the reply is only a letter, maybe wrapped: "B", "(B)", "**B.**", "[B]"
    (rf"^\W*{_L}\W*$",),
    # "Answer: B", "The answer is (B)", "correct answer is option B", "final answer: **B**"
    (rf"{_KW_ANSWER}(?i:\s*(?:is|was|would be|should be)?\s*[:=\-]?)\s*(?i:option|choice|letter)?\s*"
     rf"[\(\[\*]*{_L}{_END}",
     rf"{_KW_OPTION}\s*[\(\[\*]*{_L}[\)\]\*]*\s*(?i:is|would be|seems)\s*(?i:the\s*)?(?i:correct|right|best)"),
    # leading letter with a delimiter, at the very start: "B) text", "B. text", "B: text", "(B) text"
    (rf"^\W{{0,3}}{_L}\s*[\)\]\.:\-\*](?!\w)", rf"^\s*\({_L}\)"),
    # "option B", "choice (C)" anywhere
    (rf"{_KW_OPTION}\s*[\(\[\*]*{_L}{_END}",),
)


def _norm(text: str) -> str:
    text = text.lower().replace("\u2019", "'")
    text = re.sub(r"[^\w\s%.+-]", " ", text)
    text = re.sub(r"(?<!\d)\.|\.(?!\d)", " ", text)  # keep decimal points, drop sentence dots
    return " ".join(text.split())


def _light(text: str) -> str:
    """Case-folded, whitespace-collapsed, without surrounding quotes, dashes and end punctuation."""
    return " ".join(text.casefold().replace("\u2019", "'").split()).strip(" \"'`*-.;:!?")


def explicit_letter(reply: str, n_choices: int) -> tuple[int | None, str]:
    """The choice index a reply names by letter, and a detail ("" when none; "ambiguous ..." on conflict)."""
    valid = LETTERS[:n_choices]
    text = reply.strip()
    pair = re.search(rf"(?<![\w']){_L}\)?\s*(?i:or|and|/)\s*\(?{_L}(?![\w'])", text)
    either = ({pair.group(1), pair.group(2)} if pair and pair.group(1) != pair.group(2)
              and pair.group(1) in valid and pair.group(2) in valid else set())
    for tier in _LETTER_TIERS:
        found = [m.group(1) for pattern in tier for m in re.finditer(pattern, text) if m.group(1) in valid]
        distinct = list(dict.fromkeys(found))
        if len(distinct) == 1 and distinct[0] in either:  # "the answer is A or B"
            return None, f"ambiguous letters {sorted(either)}"
        if len(distinct) == 1:
            return LETTERS.index(distinct[0]), f"letter {distinct[0]}"
        if len(distinct) > 1:
            return None, f"ambiguous letters {distinct}"
    if either:  # "either A or C" with no stronger pattern
        return None, f"ambiguous letters {sorted(either)}"
    return None, ""


_OPTION_LINE = re.compile(r"^[\s\-\*#\d\.\)]*(?i:(?:option|choice|event|argument|statement)\s+)?\(?[A-J]\)?\s*[\.\):]")


def without_option_walkthrough(reply: str) -> str:
    """The reply without option lines after the first line ("A. ...", "B) ...", "1. **Event A: ...**").

    A reply that starts "Let's analyze each option:" and then restates option A is not
    choosing A; a reply whose first line is "B. text" is (the letter route takes it).
    """
    lines = [line for line in reply.splitlines() if line.strip()]
    return "\n".join(lines[:1] + [line for line in lines[1:] if not _OPTION_LINE.match(line)])


def text_match(reply: str, choices: Sequence[str], question: str | None = None) -> int | None:
    """The one candidate whose normalised text occurs in the reply (or contains a reply of >= 2 words).

    Option lines after the first line are ignored (:func:`without_option_walkthrough`), and
    so is a candidate whose text occurs in ``question`` (a reply restating the question
    "given that f(x) = 2" names the candidate "2" without choosing it).
    """
    exact = [i for i, c in enumerate(choices) if _light(c) == _light(reply)]
    if len(exact) == 1:
        return exact[0]
    norm = _norm
    if len({_norm(c) for c in choices}) < len(choices):  # "(E ⊃ F) ∨ (~C ⊃ S)": symbols carry the difference
        norm = _light
    r = norm(without_option_walkthrough(reply))
    in_question = f" {norm(question)} " if question else ""
    if not r:
        return None
    padded = f" {r} "
    hits = [i for i, c in enumerate(choices) if norm(c) and f" {norm(c)} " in padded
            and f" {norm(c)} " not in in_question]
    # drop candidates nested inside another matched candidate ("index" inside "partial index")
    hits = [i for i in hits if not any(j != i and f" {norm(choices[i])} " in f" {norm(choices[j])} "
                                       and norm(choices[i]) != norm(choices[j]) for j in hits)]
    if len(hits) == 1:
        return hits[0]
    if not hits and len(r.split()) >= 2:
        inside = [i for i, c in enumerate(choices) if f" {r} " in f" {norm(c)} "]
        if len(inside) == 1:
            return inside[0]
    return None


def letter_text_conflict(reply: str, index: int, choices: Sequence[str]) -> int | None:
    """Another candidate's index when the text after the named letter ("A. <text>") is that candidate's text.

    Small models write "A. About $8k" where $8k is choice B: the reply names two different
    choices, and the grader refuses to pick one.
    """
    letter = LETTERS[index]
    for match in re.finditer(rf"(?<![\w']){letter}\s*[\.\):\-]\s*([^\n]+)", reply):
        said = match.group(1).strip()
        if _norm(said) == _norm(choices[index]) or f" {_norm(choices[index])} " in f" {_norm(said)} ":
            return None
        other = text_match(said, choices)
        if other is not None and other != index:
            return other
    return None


_ABSTAIN_PATTERNS = (
    r"\bi (?:do not|don't|dont|really don't) know\b",
    r"\bi(?: am|'m) (?:not sure|not certain|unsure|unable)\b",
    r"\b(?:i )?(?:cannot|can't|can not|could not|couldn't|am unable to|unable to) (?:answer|tell|determine|"
    r"find|say|help|be determined|choose|select|decide|provide an answer)\b",
    r"\bcannot be (?:determined|answered|inferred)\b",
    r"\b(?:not|insufficient|no) (?:enough |sufficient |relevant )?(?:information|context|data)\b",
    r"\b(?:does|do|did) not (?:provide|contain|mention|say|include|specify|state|give)\b",
    r"\b(?:doesn't|don't|didn't) (?:provide|contain|mention|say|include|specify|state|give)\b",
    r"\b(?:is|are) not (?:mentioned|specified|provided|stated|given|in the (?:context|passages|documents))\b",
    r"\bnot in the (?:context|passages|documents|provided)\b",
    r"\bunanswerable\b",
    r"\bnone of (?:the|these) (?:options|choices|answers|above)\b",
    r"\bnot (?:a|one of the) valid (?:option|choice|answer)s?\b",
    r"^\W*(?:idk|n/?a|unknown|no answer|pass)\W*$",
    r"\bi (?:do not|don't|dont) have (?:the ability|enough|access|any information|the information)\b",
    r"\bas an ai\b|\bas a (?:chatbot|language model)\b",
    r"\bi(?:'m| am) sorry\b",
)
_ABSTAIN_RE = re.compile("|".join(_ABSTAIN_PATTERNS), re.IGNORECASE | re.MULTILINE)


def is_abstention(reply: str) -> bool:
    """True when the reply declines to answer (checked only after the letter and text routes failed)."""
    return bool(_ABSTAIN_RE.search(reply.replace("\u2019", "'")))


def embedding_match(reply: str, choices: Sequence[str], encoder: Any, *, margin: float = DEFAULT_MARGIN,
                    min_similarity: float = DEFAULT_MIN_SIMILARITY,
                    question: str | None = None) -> tuple[int | None, str]:
    """A-VERT-style nearest candidate by cosine with a margin; (index or None, detail with the numbers).

    With ``question``, a reply not closer to the best candidate than to the question by
    ``margin`` (a restatement, a truncated derivation) is refused: it has not chosen yet.
    """
    targets: list[str] = []
    owner: list[int] = []
    for i, c in enumerate(choices):
        for t in (c, f"{LETTERS[i]}. {c}", f"The answer is {c}"):
            targets.append(t)
            owner.append(i)
    vecs = np.asarray(encoder.encode([reply, *targets]), dtype=np.float64)
    sims = vecs[1:] @ vecs[0]
    best = np.full(len(choices), -1.0)
    for i, s in zip(owner, sims):
        best[i] = max(best[i], float(s))
    order = np.argsort(-best)
    top = float(best[order[0]])
    second = float(best[order[1]]) if len(choices) > 1 else -1.0
    detail = f"cos {top:.3f}, runner-up {second:.3f}"
    if question is not None:
        q = np.asarray(encoder.encode([question]), dtype=np.float64)[0]
        to_question = float(q @ vecs[0])
        detail += f", question {to_question:.3f}"
        if top - to_question < margin:
            return None, detail + f" (not closer to a candidate than to the question by {margin})"
    if top >= min_similarity and top - second >= margin:
        return int(order[0]), detail
    return None, detail + f" (needs >= {min_similarity} and margin >= {margin})"


def grade_reply(reply: str | None, choices: Sequence[str], *, encoder: Any = None, question: str | None = None,
                margin: float = DEFAULT_MARGIN, min_similarity: float = DEFAULT_MIN_SIMILARITY) -> GradedReply:
    """Grade a free-text reply into a choice index, an abstention or unparseable (see the module doc).

    ``encoder`` (an :class:`irtexam.grading.embeddings.Encoder`, e.g. ``load_encoder()``)
    enables the embedding route; without it a reply that reaches that route is unparseable.
    ``question`` (recommended) lets the embedding route refuse replies that only restate it.
    """
    text = (reply or "").strip()
    if not text:
        return GradedReply(None, "unparseable", "empty reply")
    index, detail = explicit_letter(text, len(choices))
    if index is not None:
        other = letter_text_conflict(text, index, choices)
        if other is not None:
            return GradedReply(None, "unparseable", f"letter {LETTERS[index]} but the text of {LETTERS[other]}")
        return GradedReply(index, "letter", detail)
    ambiguous = detail
    index = text_match(text, choices, question)
    if index is not None and is_abstention(text):  # "- I only. The answer is not a valid option."
        return GradedReply(None, "unparseable", f"text of {LETTERS[index]} but also declines")
    if index is not None:
        return GradedReply(index, "text", f"text of {LETTERS[index]}")
    if is_abstention(text):
        return GradedReply(None, "abstain", _ABSTAIN_RE.search(text.replace("\u2019", "'")).group(0))
    if ambiguous:
        return GradedReply(None, "unparseable", ambiguous)
    if encoder is None:
        return GradedReply(None, "unparseable", "no letter or candidate text; no encoder for the embedding route")
    index, detail = embedding_match(without_option_walkthrough(text), choices, encoder, margin=margin, min_similarity=min_similarity,
                                    question=question)
    if index is not None:
        return GradedReply(index, "embedding", f"{LETTERS[index]}: {detail}")
    return GradedReply(None, "unparseable", detail)


def route_counts(routes: Sequence[str]) -> dict[str, int]:
    """How many replies each route graded (every route listed, zeros included)."""
    return {r: sum(1 for x in routes if x == r) for r in ROUTES}
