"""The multiple-choice prompt: context passages, demonstrations, question, lettered choices.

Default layout (every piece is a configurable Python format string)::

    Context:
    [1] <passage text>
    [2] <passage text>

    Question: <demo question>
    A. ...
    B. ...
    Answer: <demo correct choice text>

    Question: <test question>
    A. ...
    B. ...
    Answer:

Each candidate is then scored as the continuation ``" <choice text>"``. The sha256 of
the template (all its pieces, as canonical JSON) goes into the provenance and into
every answer record, so results from different templates are never mixed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping, Sequence

from ..exam.schema import LETTERS, ExamItem
from ..retrieval.base import Passage


@dataclass(frozen=True)
class PromptTemplate:
    """Format strings of the multiple-choice prompt.

    Fields available: ``prompt``: {context} {demonstrations} {question} {choices};
    ``context``: {passages}; ``passage``: {rank} {text} {id} {doc_id};
    ``demonstration``: {question} {choices} {answer} {answer_letter};
    ``choice``: {letter} {text}; ``continuation``: {letter} {text}.
    """

    prompt: str = "{context}{demonstrations}Question: {question}\n{choices}\nAnswer:"
    context: str = "Context:\n{passages}\n\n"
    passage: str = "[{rank}] {text}"
    passage_separator: str = "\n"
    demonstration: str = "Question: {question}\n{choices}\nAnswer: {answer}\n\n"
    choice: str = "{letter}. {text}"
    continuation: str = " {text}"

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any] | None) -> "PromptTemplate":
        """Build from a spec's ``prompt`` table; raises ``ValueError`` naming an unknown key."""
        options = dict(options or {})
        known = {f.name for f in fields(cls)}
        unknown = set(options) - known
        if unknown:
            raise ValueError(f"unknown prompt key(s) {sorted(unknown)}; allowed: {sorted(known)}")
        bad = [k for k, v in options.items() if not isinstance(v, str)]
        if bad:
            raise ValueError(f"prompt key(s) {bad} must be strings")
        template = cls(**options)
        template.check()
        return template

    def check(self) -> None:
        """Render a tiny example so that a bad placeholder fails before any LLM call."""
        item = ExamItem(id="x", question="q?", choices=["a", "b"], answer=0)
        try:
            self.render(item, [Passage("p", "d", "t")], [item])
            self.continuations(item)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"prompt template has an unknown or malformed placeholder: {exc}") from None

    @property
    def sha256(self) -> str:
        """sha256 of the canonical JSON of all template pieces."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode("utf-8")).hexdigest()

    def choices_block(self, item: ExamItem) -> str:
        """The lettered choices, one per line."""
        return "\n".join(self.choice.format(letter=LETTERS[i], text=c) for i, c in enumerate(item.choices))

    def render(self, item: ExamItem, passages: Sequence[Passage], demonstrations: Sequence[ExamItem]) -> str:
        """The prompt text for ``item`` given its context passages and demonstrations."""
        context = ""
        if passages:
            body = self.passage_separator.join(self.passage.format(rank=r, text=p.text, id=p.id, doc_id=p.doc_id)
                                               for r, p in enumerate(passages, start=1))
            context = self.context.format(passages=body)
        demos = "".join(self.demonstration.format(question=d.question, choices=self.choices_block(d),
                                                  answer=d.correct_text, answer_letter=LETTERS[d.answer])
                        for d in demonstrations)
        return self.prompt.format(context=context, demonstrations=demos, question=item.question,
                                  choices=self.choices_block(item))

    def continuations(self, item: ExamItem) -> tuple[str, ...]:
        """The scored continuation of each choice (default ``" " + choice text``)."""
        return tuple(self.continuation.format(letter=LETTERS[i], text=c) for i, c in enumerate(item.choices))
