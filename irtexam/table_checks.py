"""Checks of a long response table's shape and cells before anything is built from it (issue 41).

Each function takes what the reader has (the path, the frame, a column) and raises :class:`InputError`
naming the file, the row and the column at fault, or returns quietly: a CSV row cut short (``q009,m0``
in the last line, read by pandas as a blank response: a phantom examinee), a header that names a column
twice or leaves one unnamed, a JSON array where JSON Lines are expected, the header repeated as a data
row, cells that are lists or dicts (a parquet ``tags`` column), and a graded table whose categories
would not fit in memory.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import InputError
from .scores import REQUIRED_COLUMNS, float_scores

# pandas renames a repeated header name 'x' to 'x.1', 'x.2', ...
_MANGLED = re.compile(r"^(.*)\.(\d+)$")
# the kinds pd.api.types.infer_dtype gives for columns that may hold lists, dicts or arrays
_MAYBE_NESTED = frozenset({"mixed", "unknown-array", "mixed-integer"})
# how much of a file :func:`check_json_lines` reads to tell a JSON array from JSON Lines
_PEEK_BYTES = 4096


def _open_text(path: Path) -> io.TextIOBase:
    """The file as text (gzip-decompressed where it ends in .gz)."""
    if path.suffix.lower() == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace", newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


def first_short_row(path: Path, sep: str) -> tuple[int, int, int] | None:
    """(row, fields, expected) of the first data row of a CSV/TSV with fewer fields than its header (rows
    numbered from 1 after the header), or None. Blank lines are skipped, as pandas skips them."""
    with _open_text(path) as handle:
        reader = csv.reader(handle, delimiter=sep)
        header = next(reader, None)
        if header is None:
            return None
        row = 0
        for fields in reader:
            if not fields:
                continue
            row += 1
            if len(fields) < len(header):
                return row, len(fields), len(header)
    return None


def check_short_rows(path: Path, sep: str) -> None:
    """Refuse a CSV/TSV row with fewer fields than the header (a file cut off in its last line): pandas
    would read the missing response as blank, a missing answer that nobody gave."""
    short = first_short_row(path, sep)
    if short is not None:
        row, fields, expected = short
        raise InputError(f"has {fields} field(s) where the header has {expected}: the row is cut short (a file "
                         f"cut off while written?); complete it, or end it with '{sep}' for a blank response",
                         path=str(path), row=row)


def check_json_lines(path: Path) -> None:
    """Refuse a JSON array file where JSON Lines (one object a line) are expected."""
    try:
        with _open_text(path) as handle:
            head = handle.read(_PEEK_BYTES).lstrip("\ufeff \t\r\n")
    except (OSError, EOFError):
        return  # the reader itself reports an unreadable file
    if head.startswith("["):
        raise InputError("is one JSON array, not JSON Lines (one JSON object a line); write one record a line "
                         "(e.g. `jq -c '.[]' FILE > FILE.jsonl`)", path=str(path))


def check_header(columns: list, source: str | None) -> None:
    """Refuse a header that names a column twice (pandas reads the second as 'name.1') or leaves one
    unnamed (a trailing separator: pandas calls it 'Unnamed: N')."""
    names = [str(c) for c in columns]
    for position, name in enumerate(names, start=1):
        if name.strip() == "" or name.startswith("Unnamed: "):
            raise InputError(f"column {position} of the header has no name (a separator at the end of the lines?); "
                             f"name it or remove it", path=source, column=name)
        mangled = _MANGLED.match(name)
        if mangled and mangled.group(1) in names[:position - 1]:
            raise InputError(f"the header names column '{mangled.group(1)}' twice (columns "
                             f"{names.index(mangled.group(1)) + 1} and {position}); keep one",
                             path=source, column=mangled.group(1))


def check_repeated_header(frame: pd.DataFrame, source: str | None) -> None:
    """Refuse the header repeated as a data row (two files joined with ``cat``)."""
    column = frame["response"]
    if pd.api.types.is_numeric_dtype(column.dtype) or pd.api.types.is_bool_dtype(column.dtype):
        return
    repeated = (column.astype(str) == "response") & (frame["item"].astype(str) == "item")
    if repeated.any():
        row = int(np.flatnonzero(repeated.to_numpy())[0]) + 1
        raise InputError("repeats the header (item, examinee, response) as data: two tables joined with their "
                         "headers? remove the line", path=source, row=row)


def _is_nested(value: object) -> bool:
    """True for a cell that holds several values (a list, tuple, dict, set or array)."""
    return isinstance(value, (list, tuple, dict, set, np.ndarray))


def check_scalar_cells(frame: pd.DataFrame, source: str | None) -> None:
    """Refuse a column holding lists, dicts or arrays (a parquet list column such as ``tags``): every column
    of a long table holds one value a row. Names the column, the row and what is there."""
    for column in frame.columns:
        values = frame[column]
        if values.dtype != object or pd.api.types.infer_dtype(values, skipna=True) not in _MAYBE_NESTED:
            continue
        nested = values.map(_is_nested).to_numpy(dtype=bool)
        if nested.any():
            row = int(np.flatnonzero(nested)[0])
            kind = "list" if isinstance(values.iloc[row], np.ndarray) else type(values.iloc[row]).__name__
            use = ("it is one of item, examinee, response" if column in REQUIRED_COLUMNS else
                   "facet and item_ columns hold one value a row: drop the column or join its values into text")
            raise InputError(f"holds a {kind} ({_short(values.iloc[row])}), not a single value; {use}",
                             path=source, row=row + 1, column=str(column))


def _short(value: object, limit: int = 40) -> str:
    """A cell's repr, cut to ``limit`` characters, for a message."""
    text = repr(value.tolist() if isinstance(value, np.ndarray) else value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_constant_within(column: pd.Series, owner_codes: np.ndarray, owners: list[str], name: str,
                          source: str | None, owner_kind: str = "item") -> None:
    """Refuse a metadata column whose (non-missing) value changes within one owner (an item's ``item_*``
    column must say one thing about the item). Names the owner, both rows and both values."""
    codes, labels = pd.factorize(column.astype(object).where(column.notna(), None), use_na_sentinel=True)
    present = codes >= 0
    if not present.any():
        return
    owner, code = owner_codes[present].astype(np.int64), codes[present].astype(np.int64)
    pairs = np.unique(owner * max(len(labels), 1) + code)
    changes = np.bincount(pairs // max(len(labels), 1), minlength=len(owners)) > 1
    if not changes.any():
        return
    which = int(np.flatnonzero(changes)[0])
    rows = np.flatnonzero(present & (owner_codes == which))
    other = int(rows[codes[rows] != codes[rows[0]]][0])
    raise InputError(f"{name} changes within {owner_kind} {owners[which]!r}: {labels[codes[rows[0]]]!r} on row "
                     f"{rows[0] + 1} but {labels[codes[other]]!r} on row {other + 1}; an item_ column "
                     f"describes the {owner_kind}, so it must be the same on all its rows",
                     path=source, row=other + 1, column=name)



def category_gaps(values: np.ndarray, max_score: int) -> dict[int, list[int]]:
    """For a graded matrix (items x examinees, NaN missing, scores 0..``max_score``): the scores each item never
    takes between its lowest and its highest observed score ({item position: [missing scores]}); counted a
    block of items at a time (one bincount of (item, score) pairs, no items x categories x examinees array)."""
    from .memory import row_blocks

    gaps: dict[int, list[int]] = {}
    width = max_score + 1
    for rows in row_blocks(values.shape[0], values.shape[1]):
        block = float_scores(values[rows])
        item, examinee = np.nonzero(~np.isnan(block))
        counts = np.bincount(item * width + block[item, examinee].astype(np.int64),
                             minlength=block.shape[0] * width).reshape(block.shape[0], width)
        present = counts > 0
        low, high = present.argmax(axis=1), width - 1 - present[:, ::-1].argmax(axis=1)
        n_present = present.sum(axis=1)
        for k in np.flatnonzero((n_present > 0) & (high - low + 1 > n_present)):
            gaps[rows.start + int(k)] = [int(c) for c in range(low[k], high[k] + 1) if not present[k, c]]
    return gaps


def check_json_fields(path: Path, frame: pd.DataFrame) -> None:
    """Refuse a JSON Lines record without a ``response`` key (a record cut short, like a CSV row; pandas reads
    it as a blank response). Read only where the table has blank responses."""
    import json

    if "response" not in frame.columns or not frame["response"].isna().any():
        return
    with _open_text(path) as handle:
        row = 0
        for line in handle:
            if not line.strip():
                continue
            row += 1
            try:
                record = json.loads(line)
            except ValueError:
                return  # pandas read it: leave its reading be
            if isinstance(record, dict) and "response" not in record:
                raise InputError("has no 'response' key (a record cut short?); write \"response\": null for a "
                                 "blank response", path=str(path), row=row)


def check_categories_used(values: np.ndarray, source: str | None) -> None:
    """Refuse a graded table in which a score between 0 and its highest never occurs anywhere (0, 1, 4 with
    no 2 or 3): those categories' thresholds have no data at all, and the graded fit diverged on them."""
    from .memory import row_blocks

    counts = np.zeros(0, dtype=np.int64)
    for rows in row_blocks(values.shape[0], values.shape[1]):
        block = float_scores(values[rows])
        part = np.bincount(block[~np.isnan(block)].astype(np.int64))
        counts = np.pad(counts, (0, max(len(part) - len(counts), 0)))
        counts[:len(part)] += part
    unused = np.flatnonzero(counts == 0)
    if unused.size:
        used = ", ".join(map(str, np.flatnonzero(counts)[:8]))
        raise InputError(f"the graded scores skip {', '.join(map(str, unused[:8]))} (the table uses {used}): no "
                         f"response has those scores, so the model cannot place their categories; recode the "
                         f"scores to consecutive categories 0..K", path=source, column="response")
