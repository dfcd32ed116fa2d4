"""JSONL input/output for the graders: clear errors, resumable appending, counted skips."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator


from ..jsonl import iter_json_lines


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL file of objects; raises :class:`InputError` naming the bad line."""
    return list(iter_jsonl(path))


def iter_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Iterate over the JSON objects of a JSONL file (blank lines skipped); rows are 1-based."""
    for row, record in iter_json_lines(path):
        record.setdefault("_row", row)
        yield record


def write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> None:
    """Write records as JSONL atomically (temp file then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(_clean(record), ensure_ascii=False) + "\n")
    tmp.replace(path)


def _clean(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "_row"}


class ResumableWriter:
    """Append records to a JSONL file, one flush per record, skipping keys already written.

    A crashed run is resumed by constructing the writer on the same path: records whose
    key (``key_fn(record)``) is already in the file are reported by :meth:`done`.
    """

    def __init__(self, path: str | Path, key_fn: Callable[[dict[str, Any]], str]) -> None:
        self.path = Path(path)
        self.key_fn = key_fn
        self.finished: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            with open(self.path, encoding="utf-8") as handle:
                for line in handle:
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a line cut by a crash; it is redone
                    self.finished[key_fn(rec)] = rec
            self._rewrite_valid()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(self.path, "a", encoding="utf-8")

    def _rewrite_valid(self) -> None:
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            for rec in self.finished.values():
                handle.write(json.dumps(rec, ensure_ascii=False) + "\n")
        os.replace(tmp, self.path)

    def done(self, record: dict[str, Any]) -> bool:
        """Whether a record with this key was written by an earlier run."""
        return self.key_fn(record) in self.finished

    def write(self, record: dict[str, Any]) -> None:
        """Append one record and flush it to disk."""
        rec = _clean(record)
        self._handle.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self._handle.flush()
        self.finished[self.key_fn(rec)] = rec

    def close(self) -> None:
        """Close the file."""
        self._handle.close()

    def __enter__(self) -> "ResumableWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Tally:
    """Counts of everything processed, skipped or defaulted, printed at the end of a run."""

    counts: Counter = field(default_factory=Counter)

    def add(self, what: str, n: int = 1) -> None:
        """Count ``n`` occurrences of ``what``."""
        self.counts[what] += n

    def report(self) -> str:
        """One line per counter, sorted by name."""
        return "\n".join(f"  {k}: {v}" for k, v in sorted(self.counts.items()))

    def as_dict(self) -> dict[str, int]:
        """Plain dict of the counts."""
        return dict(self.counts)
