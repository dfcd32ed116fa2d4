"""One reader for every JSONL file irtexam takes in (exams, corpora, records, lm-eval samples)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Iterator

from .errors import InputError, reading


def iter_json_lines(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (row, object) for each non-blank line of a JSONL file (``.gz`` allowed); rows are 1-based.

    Raises :class:`InputError` naming the file and row for invalid JSON or a line
    that is not a JSON object.
    """
    path = str(path)
    opener = gzip.open if path.endswith(".gz") else open
    with reading(path), opener(path, "rt", encoding="utf-8") as handle:
        for row, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON ({exc.msg}); fix or remove the line", path=path, row=row) from None
            if not isinstance(record, dict):
                raise InputError("each line must be a JSON object", path=path, row=row)
            yield row, record
