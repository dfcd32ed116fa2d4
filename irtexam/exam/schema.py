"""The exam: multiple-choice items, one JSON object per line on disk.

An item line looks like::

    {"id": "q0001", "question": "...", "choices": ["...", "...", "...", "..."],
     "answer": 2, "doc_id": "pg-config-42", "chunk_id": "pg-config-42#3",
     "provenance": {"generator": "qwen2.5-coder-1.5b", "prompt_sha": "...", "seed": 0},
     "categories": {"bloom": ["remember"], "question_word": "what"}}

``answer`` is the 0-based index of the correct choice. ``categories`` and
``provenance`` are free-form dictionaries; analysis code reads ``categories``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import InputError
from ..jsonl import iter_json_lines

LETTERS = "ABCDEFGHIJ"


@dataclass
class ExamItem:
    """One multiple-choice question with exactly one correct choice."""

    id: str
    question: str
    choices: list[str]
    answer: int
    doc_id: str | None = None
    chunk_id: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    categories: dict[str, Any] = field(default_factory=dict)

    @property
    def correct_text(self) -> str:
        """The text of the correct choice."""
        return self.choices[self.answer]

    def to_json(self) -> dict[str, Any]:
        """A plain dict for JSON serialisation."""
        return asdict(self)


def _item_from_record(record: dict[str, Any], path: str, row: int) -> ExamItem:
    for name in ("id", "question", "choices", "answer"):
        if name not in record:
            raise InputError("missing required field; an exam item needs id, question, choices, answer",
                             path=path, row=row, column=name)
    choices = record["choices"]
    if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
        raise InputError("choices must be a list of at least 2 strings", path=path, row=row, column="choices")
    answer = record["answer"]
    if isinstance(answer, str) and len(answer) == 1 and answer.upper() in LETTERS:
        answer = LETTERS.index(answer.upper())
    if not isinstance(answer, int) or isinstance(answer, bool) or not 0 <= answer < len(choices):
        raise InputError(f"answer must be a choice index in 0..{len(choices) - 1} (or a letter), got {record['answer']!r}",
                         path=path, row=row, column="answer")
    known = {"id", "question", "choices", "answer", "doc_id", "chunk_id", "provenance", "categories"}
    extra = {k: v for k, v in record.items() if k not in known}
    provenance = dict(record.get("provenance") or {})
    if extra:
        provenance.setdefault("extra", {}).update(extra)
    return ExamItem(id=str(record["id"]), question=str(record["question"]), choices=list(choices),
                    answer=answer, doc_id=record.get("doc_id"), chunk_id=record.get("chunk_id"),
                    provenance=provenance, categories=dict(record.get("categories") or {}))


def read_exam(path: str | Path) -> list[ExamItem]:
    """Read an exam JSONL file; raises :class:`InputError` naming the line and field."""
    path = str(path)
    items: list[ExamItem] = []
    seen: dict[str, int] = {}
    for row, record in iter_json_lines(path):
        item = _item_from_record(record, path, row)
        if item.id in seen:
            raise InputError(f"duplicate item id {item.id!r} (first on row {seen[item.id]})",
                             path=path, row=row, column="id")
        seen[item.id] = row
        items.append(item)
    if not items:
        raise InputError("the exam file holds no items", path=path)
    return items


def write_exam(items: Iterable[ExamItem], path: str | Path) -> None:
    """Write items as JSONL atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item.to_json(), ensure_ascii=False) + "\n")
    tmp.replace(path)


def iter_exam(path: str | Path) -> Iterator[ExamItem]:
    """Iterate over the items of an exam file."""
    yield from read_exam(path)
