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


# the largest graded score read: 101 categories (a percentage); a larger score is a typo or a raw measure, and
# its categories would cost the graded fit memory and time in proportion (a 300 among 0-2 ran for minutes)
MAX_GRADED_SCORE = 100
# a number as a table writes it: no '0_1' (Python's float reads it as 1), no 'infinity', no hex
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _score_problem(number: float, value: object, *, graded: bool) -> str | None:
    """What is wrong with a number as a score (naming the value), or None where it is a valid score."""
    kind = "0 or 1" if not graded else f"an integer score 0..{MAX_GRADED_SCORE}"
    if not np.isfinite(number):
        return f"response {value!r} is not a finite number; a score is {kind} (blank = missing)"
    if number < 0:
        return f"response {value!r} is negative; a score is {kind} (blank = missing)"
    if not graded:
        if number in (0.0, 1.0):
            return None
        if float(number).is_integer() and number <= MAX_GRADED_SCORE:
            return (f"response {value!r} is not valid: a binary model needs 0/1 responses; use a graded model "
                    f"(e.g. model='grm') for scores")
        if not float(number).is_integer():
            return f"response {value!r} is not 0 or 1 (a fraction: round it, or score it 0..K with a graded model)"
        return f"response {value!r} is not 0 or 1 (a binary model's score; blank = missing)"
    if not float(number).is_integer():
        return f"response {value!r} is not valid: graded responses must be integers 0..K"
    if number > MAX_GRADED_SCORE:
        return (f"response {value!r} is above {MAX_GRADED_SCORE}, the largest graded score irtexam reads "
                f"({MAX_GRADED_SCORE + 1} categories); a typo, or scores to rescale to 0..K")
    return None


def _parse_score(value: object, *, graded: bool) -> tuple[float, str | None]:
    """Score of one distinct cell value: (score, None), (NaN, None) if missing, or (NaN, error message).

    Binary: 0/1, true/false, yes/no, 0.0/1.0. Graded: integers 0..:data:`MAX_GRADED_SCORE`. Blank, NaN, None
    and the words nan/na/null/none are missing. Text must be a plain decimal number (``0_1`` is refused, not
    read as 1), and one that underflows to 0 (``1e-400``) is refused, not read as 0.
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
        kind = "0 or 1" if not graded else f"an integer score 0..{MAX_GRADED_SCORE}"
        if not _NUMBER.match(text):
            if lowered.lstrip("+-") in ("inf", "infinity", "nan"):
                return np.nan, f"response {value!r} is not a finite number; a score is {kind} (blank = missing)"
            return np.nan, f"response {value!r} is not {kind}; leave the cell blank for a missing answer"
        number = float(text)
        if number == 0 and re.search(r"[1-9]", text.split("e")[0].split("E")[0]):
            return np.nan, f"response {value!r} is too small to be read as a number (it would read as 0)"
    message = _score_problem(number, value, graded=graded)
    return (np.nan, message) if message else (number, None)


def _invalid_numbers(values: np.ndarray, *, graded: bool) -> np.ndarray:
    """Mask of the scores that are not valid (NaN is missing, so valid): binary 0/1, graded integers >= 0."""
    finite = ~np.isnan(values)
    if graded:
        return finite & ((values < 0) | (values != np.round(values)) | (values > MAX_GRADED_SCORE))
    return finite & (values != 0.0) & (values != 1.0)


def float_scores(block: np.ndarray) -> np.ndarray:
    """A block of a stored response matrix as float scores with NaN where missing: a float block as it is, a block
    of integer codes (:meth:`irtexam.responses.ResponseMatrix.from_codes`: -1 where missing) as float32. The
    helpers that go over a matrix a block of rows at a time take either form through this."""
    if np.issubdtype(block.dtype, np.floating):
        return block
    out = block.astype(np.float32)
    out[block < 0] = np.nan
    return out
