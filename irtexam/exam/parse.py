"""Robust parsing of LLM-written multiple-choice questions.

Accepted shapes (any mix, markdown bold stripped first):

* question: ``Question: ...`` / ``Q: ...`` / ``Question 1: ...`` / ``**Question**``, or,
  without a label, the paragraph just before the first choice;
* choices: ``A) x``, ``A. x``, ``(A) x``, ``A: x``, ``a) x``, ``Option A: x``, ``1) x`` /
  ``1. x`` (only when no lettered choices exist), or all four on one line;
  a choice may continue on the following lines;
* answer: ``Correct Answer: B``, ``Answer: (B)``, ``The answer is B``, ``The correct
  answer is B) text``, ``Correct answer: 2``, or the answer given as the text of a choice.

A choice ends at a blank line, the next choice, an answer line or an explanation line
(``Explanation:``, ``Rationale:``, ``Reason:``, ``Note:``), and any answer or
explanation marker inside the choice's own line is cut off, so the answer line never
leaks into choice D (the failure of the paper's parser).

The result is exactly one correct answer among 4 distinct candidates, or a
:class:`ParseFailure` with a machine-readable ``reason`` (counted in reports):
``empty_output``, ``no_choices``, ``wrong_number_of_choices``, ``empty_choice``,
``duplicate_choices``, ``no_question``, ``no_answer``, ``multiple_answers``,
``answer_not_in_choices``, ``answer_letter_text_mismatch``, ``template_placeholder``.

Two flaws of generated items are refused here rather than left to a verifier: a fifth
(or later) lettered choice (``E) ...``) is a choice, never a continuation of choice D
(``WALInitSync E) WALInitWrite`` was one candidate), so such an output fails with
``wrong_number_of_choices``; and a question or choice that is still the prompt's
placeholder (``{candidate D}``, ``{question}``) fails with ``template_placeholder``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

REASONS = ("empty_output", "no_choices", "wrong_number_of_choices", "empty_choice", "duplicate_choices",
           "no_question", "no_answer", "multiple_answers", "answer_not_in_choices",
           "answer_letter_text_mismatch", "template_placeholder")

N_CHOICES = 4
LETTERS = "ABCD"

_ANSWER_LINE = re.compile(
    r"^\s*(?:[-*#>]+\s*)?(?:the\s+)?(?:correct|right|final)?\s*(?:answer|option|choice)(?:\s+is)?\s*"
    r"(?:[:=\-–—]|\bis\b)\s*(?P<rest>.*)$", re.I)
_ANSWER_INLINE = re.compile(
    r"(?:the\s+)?(?:correct|right)\s+(?:answer|option|choice)\s*(?:is|would be|:|=)\s*(?P<rest>.+)"
    r"|\bthe\s+answer\s+is\s*:?\s*(?P<rest2>.+)", re.I)
_EXPLANATION = re.compile(r"^\s*(?:[-*#>]+\s*)?(?:explanations?|rationale|reason(?:ing)?|justification|note)\b\s*[:\-–]",
                          re.I)
# markers that must never stay inside a choice's text
_LEAK = re.compile(r"\s*(?:\b(?:the\s+)?(?:correct|right)\s+(?:answer|option|choice)\b|\banswer\s*[:=]"
                   r"|\bexplanations?\s*:|\brationale\s*:)", re.I)
_CHOICE_LETTER = re.compile(
    r"^\s*(?:[-*]\s*)?(?:(?i:option|choice|candidate)\s+)?(?:\((?P<a>[A-Da-d])\)|(?P<b>[A-Da-d])\s*[).:\]]|(?P<c>[A-D])\s+-)"
    r"\s*(?P<text>.*)$")
# a lettered choice beyond D: ends the previous choice and counts as an extra choice
_EXTRA_CHOICE = re.compile(r"^\s*(?:[-*]\s*)?(?:(?i:option|choice|candidate)\s+)?(?:\([E-Je-j]\)|[E-J]\s*[).:\]])\s*\S")
# the generation template's placeholders left in an output ("{candidate D}", "{question}")
_PLACEHOLDER = re.compile(r"\{\{?\s*(?:candidate|correct[ _]answer|answer|question|option|choice|explanation)\b"
                          r"[^{}]*\}\}?", re.I)
_CHOICE_NUMBER = re.compile(r"^\s*(?:\((?P<a>[1-4])\)|(?P<b>[1-4])\s*[).:])\s+(?P<text>.*)$")
_INLINE_SPLIT = re.compile(r"(?:^|\s)(?:\(([A-D])\)|([A-D])[).])\s+")
_QUESTION = re.compile(r"^\s*(?:[-*#>]+\s*)?(?:question|q)(?:\s*\d+)?\s*[:.)\-]\s*(?P<text>.*)$", re.I)
# how an answer spec names a choice: "Option B", "(b)", "B.", "B", "2)", "C the third one"
# (a bare capital A followed by a word is the article "A", not a letter)
_LETTER_PATTERNS = (
    re.compile(r"^\s*(?:option|choice|letter|candidate)\s+[\"'(\[]?(?P<l>[A-Da-d1-4])\b", re.I),
    re.compile(r"^\s*[\"'(\[]?(?P<l>[A-Da-d1-4])\s*(?:[\"')\].:,;]|$|\s+[-–:])"),
    re.compile(r"^\s*(?P<l>[B-D])\s+(?=\S)"),
)


@dataclass(frozen=True)
class ParsedQuestion:
    """A parsed item: question, 4 choices in the generated order, index of the correct one."""

    question: str
    choices: tuple[str, ...]
    answer: int
    explanation: str | None = None


class ParseFailure(ValueError):
    """The output cannot be turned into a valid item; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail = reason, detail


def _clean(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r"\*\*|__|`{3}[a-z]*|^\s*#{1,6}\s*", "", text, flags=re.M)
    # an answer / explanation marker glued to a choice line starts a line of its own
    lines = []
    for line in text.split("\n"):
        if _CHOICE_LETTER.match(line) or _CHOICE_NUMBER.match(line):
            m = _LEAK.search(line)
            if m and line[:m.start()].strip():
                lines.extend([line[:m.start()], line[m.start():].strip()])
                continue
        lines.append(line)
    return "\n".join(lines)


def _norm(choice: str) -> str:
    return re.sub(r"[\W_]+", " ", choice.lower()).strip()


_PROSE = re.compile(r"[A-Za-z0-9 ,'\"!?]+")


def choice_identity(choice: str) -> str:
    """What makes two choices the same answer: case and punctuation count in code-like text.

    Whitespace, surrounding backticks and a trailing period never matter; letter case is
    ignored only for plain prose ("True" = "true"), since `pg_dump -n` and `pg_dump -N`,
    or `table;` and `table *;`, are different answers.
    """
    text = re.sub(r"\s+", " ", choice).strip().rstrip(".").strip().strip("`").strip().rstrip(".").strip()
    return text.lower() if _PROSE.fullmatch(text) else text


def _strip_choice(text: str) -> str:
    m = _LEAK.search(text)
    if m:
        text = text[:m.start()]
    return " ".join(text.split()).strip()


def _is_answer_line(line: str) -> bool:
    return bool(_ANSWER_LINE.match(line)) or bool(re.match(r"^\s*the\s+(?:correct\s+)?answer\s+is\b", line, re.I))


def _choice_match(line: str, numbered: bool) -> tuple[int, str] | None:
    m = (_CHOICE_NUMBER if numbered else _CHOICE_LETTER).match(line)
    if not m:
        return None
    label = (m.group("a") or m.group("b") or (m.groupdict().get("c") or "")).upper()
    if not label:
        return None
    index = int(label) - 1 if numbered else LETTERS.index(label)
    return index, m.group("text")


def _find_choices(lines: list[str], numbered: bool) -> tuple[list[str], int, int] | None:
    """First run of choices labelled A..D (or 1..4) in order: (texts, first line, last line)."""
    start = None
    for i, line in enumerate(lines):
        if _is_answer_line(line):
            continue
        cm = _choice_match(line, numbered)
        if cm and cm[0] == 0:
            start = i
            break
    if start is None:
        return None
    texts: list[str] = []
    i, expected, last = start, 0, start
    while i < len(lines):
        line = lines[i]
        cm = _choice_match(line, numbered) if not _is_answer_line(line) else None
        if cm and cm[0] == expected:
            texts.append(cm[1])
            expected += 1
            last = i
        elif cm and cm[0] > expected:
            break  # a gap: stop here, the count check will complain
        elif not numbered and texts and _EXTRA_CHOICE.match(line):
            texts.append(line.strip())  # "E) ...": a fifth choice, never part of D
            expected += 1
            last = i
        elif texts and line.strip() and not _is_answer_line(line) and not _EXPLANATION.match(line) \
                and expected <= N_CHOICES and not _QUESTION.match(line):
            texts[-1] += " " + line.strip()  # continuation of the previous choice
            last = i
        else:
            if texts and (not line.strip() and expected < N_CHOICES):
                i += 1  # blank lines between choices are common
                continue
            break
        i += 1
        if expected >= N_CHOICES + 2:
            break
    return texts, start, last


def _inline_choices(text: str) -> list[str] | None:
    parts = _INLINE_SPLIT.split(text)
    # parts = [before, a1, b1, text1, a2, b2, text2, ...]
    labels = [(parts[i] or parts[i + 1]) for i in range(1, len(parts) - 1, 3)]
    texts = [parts[i] for i in range(3, len(parts), 3)]
    if labels[:N_CHOICES] == list(LETTERS):
        return texts[:N_CHOICES]
    return None


def _answer_spec(text: str) -> str | None:
    lines = text.split("\n")
    for line in lines:
        m = _ANSWER_LINE.match(line)
        if m and m.group("rest").strip():
            return m.group("rest").strip()
        if m:  # "Correct Answer:" with the value on the next line
            idx = lines.index(line)
            nxt = next((x for x in lines[idx + 1:] if x.strip()), None)
            if nxt:
                return nxt.strip()
    m = _ANSWER_INLINE.search(text)
    if m:
        return (m.group("rest") or m.group("rest2") or "").strip() or None
    return None


def _resolve_answer(spec: str, choices: list[str], numbered: bool) -> int:
    spec = spec.strip().strip("*").strip()
    letters = re.findall(r"(?:^|[\s(\[,'\"])([A-D])(?=$|[\s).\],:'\"])", spec)
    if re.match(r"^[\(\[]?[A-D][\)\]]?(?:\s*(?:,|and|&|/)\s*[\(\[]?[A-D][\)\]]?)+\s*[.]?$", spec):
        if len(set(letters)) > 1:
            raise ParseFailure("multiple_answers", spec)
    index: int | None = None
    rest = spec
    for pattern in _LETTER_PATTERNS:
        m = pattern.match(spec)
        if m:
            label = m.group("l").upper()
            index = int(label) - 1 if label.isdigit() else LETTERS.index(label)
            rest = spec[m.end():]
            break
    text_rest = _strip_choice(re.sub(r"^[\s).:\-–]+", "", rest)).rstrip(".")
    normed = [_norm(c) for c in choices]
    if index is not None:
        if text_rest and len(_norm(text_rest)) > 3:
            matches = [i for i, c in enumerate(normed) if c and (_norm(text_rest) == c or
                                                                _norm(text_rest).startswith(c) or
                                                                c.startswith(_norm(text_rest)))]
            if matches and index not in matches:
                raise ParseFailure("answer_letter_text_mismatch", spec)
        return index
    target = _norm(_strip_choice(spec).rstrip("."))
    if not target:
        raise ParseFailure("no_answer", spec)
    exact = [i for i, c in enumerate(normed) if c == target]
    if len(exact) == 1:
        return exact[0]
    contained = [i for i, c in enumerate(normed) if c and (c in target or target in c)]
    if len(contained) == 1:
        return contained[0]
    if len(contained) > 1:
        raise ParseFailure("multiple_answers", spec)
    raise ParseFailure("answer_not_in_choices", spec)


def parse_mcq(raw: str) -> ParsedQuestion:
    """Parse one generated question; raises :class:`ParseFailure` with a reason."""
    if not raw or not raw.strip():
        raise ParseFailure("empty_output")
    text = _clean(raw)
    lines = text.split("\n")
    numbered = False
    found = _find_choices(lines, numbered=False)
    if found is None or len(found[0]) < N_CHOICES:
        alt = _find_choices(lines, numbered=True)
        if alt is not None and len(alt[0]) >= N_CHOICES and (found is None or len(alt[0]) > len(found[0])):
            found, numbered = alt, True
    question: str | None = None
    if found is None or len(found[0]) < N_CHOICES:
        # all choices on one line?
        for i, line in enumerate(lines):
            if _is_answer_line(line):
                continue
            inline = _inline_choices(line)
            if inline:
                head = _INLINE_SPLIT.split(line)[0].strip()
                found = (inline, i, i)
                if head:
                    qm = _QUESTION.match(head)
                    question = qm.group("text").strip() if qm else head
                break
    if found is None:
        raise ParseFailure("no_choices")
    choices_raw, first, last = found
    if len(choices_raw) != N_CHOICES:
        raise ParseFailure("wrong_number_of_choices", f"found {len(choices_raw)}")
    choices = [_strip_choice(c) for c in choices_raw]
    if any(not c for c in choices):
        raise ParseFailure("empty_choice")
    placeholder = next((c for c in choices if _PLACEHOLDER.search(c)), None)
    if placeholder is not None:
        raise ParseFailure("template_placeholder", placeholder)
    if len({choice_identity(c) for c in choices}) != N_CHOICES:
        raise ParseFailure("duplicate_choices", " | ".join(choices))
    if question is None:
        before = lines[:first]
        qi = next((i for i in range(len(before) - 1, -1, -1) if _QUESTION.match(before[i])), None)
        if qi is not None:
            parts = [_QUESTION.match(before[qi]).group("text")] + before[qi + 1:]  # type: ignore[union-attr]
        else:
            paragraphs = re.split(r"\n\s*\n", "\n".join(before).strip())
            parts = [paragraphs[-1]] if paragraphs and paragraphs[-1].strip() else []
        question = " ".join(" ".join(parts).split())
    if not question or len(_norm(question)) < 3:
        raise ParseFailure("no_question")
    if _PLACEHOLDER.search(question):
        raise ParseFailure("template_placeholder", question)
    after = "\n".join(lines[last + 1:])
    spec = _answer_spec(after) or _answer_spec("\n".join(lines[:first]))
    if spec is None:
        raise ParseFailure("no_answer")
    answer = _resolve_answer(spec, choices, numbered)
    if not 0 <= answer < N_CHOICES:
        raise ParseFailure("answer_not_in_choices", spec)
    explanation = None
    em = re.search(r"^\s*(?:explanations?|rationale|reason(?:ing)?)\s*[:\-–]\s*(.*)", after, re.I | re.M | re.S)
    if em:
        explanation = " ".join(em.group(1).split()) or None
    return ParsedQuestion(question, tuple(choices), answer, explanation)


def try_parse(raw: str) -> tuple[ParsedQuestion | None, str | None]:
    """``(parsed, None)`` or ``(None, reason)``; never raises on any string."""
    try:
        return parse_mcq(raw), None
    except ParseFailure as exc:
        return None, exc.reason
