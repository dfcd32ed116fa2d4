"""The cell values of a response table: the required columns, natural order of ids, and how one cell's text or
number becomes a score. Shared by :mod:`irtexam.responses` (pandas) and :mod:`irtexam.io_tables` (streaming)."""

from __future__ import annotations

import re
from typing import Iterable

import numpy as np
import pandas as pd

REQUIRED_COLUMNS = ("item", "examinee", "response")
ITEM_META_PREFIX = "item_"


def _natural_key(value: str) -> tuple:
    """Sort key that orders 'icl2' before 'icl10' and '2' before '10'."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(value)))


def natural_sorted(values: Iterable[str]) -> list[str]:
    """Sort strings in natural (human) order."""
    return sorted(values, key=_natural_key)


_TRUE_TEXT = frozenset({"1", "1.0", "true", "t", "yes"})
_FALSE_TEXT = frozenset({"0", "0.0", "false", "f", "no"})
_MISSING_TEXT = frozenset({"", "nan", "na", "null", "none"})


def _parse_score(value: object, *, graded: bool) -> tuple[float, str | None]:
    """Score of one distinct cell value: (score, None), (NaN, None) if missing, or (NaN, error message).

    Binary: 0/1, true/false, yes/no, 0.0/1.0. Graded: non-negative integers. Blank,
    NaN, None and the words nan/na/null/none are missing.
    """
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return np.nan, None
    if isinstance(value, (bool, np.bool_)):
        return float(value), None
    if isinstance(value, (int, np.integer, float, np.floating)):
        number = float(value)
    else:
        text = str(value).strip()
        lowered = text.lower()
        if lowered in _MISSING_TEXT:
            return np.nan, None
        if not graded and lowered in _TRUE_TEXT:
            return 1.0, None
        if not graded and lowered in _FALSE_TEXT:
            return 0.0, None
        try:
            number = float(text)
        except ValueError:
            kind = "0 or 1" if not graded else "a non-negative integer score"
            return np.nan, f"response {value!r} is not {kind}; leave the cell blank for a missing answer"
    ok = number in (0.0, 1.0) if not graded else (number >= 0 and float(number).is_integer())
    if not ok:
        hint = ("a binary model needs 0/1 responses; use a graded model (e.g. model='grm') for scores"
                if not graded else "graded responses must be integers 0..K")
        return np.nan, f"response {value!r} is not valid: {hint}"
    return number, None


def _invalid_numbers(values: np.ndarray, *, graded: bool) -> np.ndarray:
    """Mask of the scores that are not valid (NaN is missing, so valid): binary 0/1, graded integers >= 0."""
    finite = ~np.isnan(values)
    if graded:
        return finite & ((values < 0) | (values != np.round(values)))
    return finite & (values != 0.0) & (values != 1.0)
