"""Declared option values: one type per kind of value, with its bounds, read by argparse and the spec loader.

Every numeric option of the CLI and every numeric field of a take spec is declared with one
of these value types, so a value out of bounds is refused where it is read, with one line
that names the option and the allowed range, before any work::

    parser.add_argument("--chains", type=POSITIVE_INT, default=4)
    POSITIVE_INT.check(spec_value, "systems[0].max_retries")   # the spec loader

``OneLineArgumentParser`` prints argparse's errors as a single line
(``irtexam fit: error: argument --chains: must be an integer >= 1, got '0' (see irtexam fit --help)``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass
from typing import Any

from .errors import IrtexamError


@dataclass(frozen=True)
class Number:
    """A number with bounds: ``integer`` or float, ``low``/``high`` inclusive unless ``open_low``/``open_high``.

    Calling it on a string (argparse's ``type=``) parses and checks; :meth:`check` checks a value
    from a spec. Floats must be finite.
    """

    integer: bool
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    __name__: str = "number"  # argparse names the type in some messages

    def describe(self) -> str:
        """The allowed values in words, e.g. ``an integer >= 1`` or ``a number in (0, 1)``."""
        what = "an integer" if self.integer else "a finite number"
        if self.low is not None and self.high is not None:
            left, right = "(" if self.open_low else "[", ")" if self.open_high else "]"
            return f"{what} in {left}{_fmt(self.low)}, {_fmt(self.high)}{right}"
        if self.low is not None:
            return f"{what} {'>' if self.open_low else '>='} {_fmt(self.low)}"
        if self.high is not None:
            return f"{what} {'<' if self.open_high else '<='} {_fmt(self.high)}"
        return what

    def _valid(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (self.open_low and value == self.low)):
            return False
        if self.high is not None and (value > self.high or (self.open_high and value == self.high)):
            return False
        return True

    def __call__(self, text: str) -> int | float:
        try:
            value: int | float = int(text) if self.integer else float(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be {self.describe()}, got {text!r}") from None
        if not self._valid(float(value)):
            raise argparse.ArgumentTypeError(f"must be {self.describe()}, got {text!r}")
        return value

    def check(self, value: Any, where: str) -> int | float:
        """``value`` from a spec or a Python call, checked; :class:`IrtexamError` naming ``where`` otherwise."""
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok and self.integer and isinstance(value, float):
            ok = value.is_integer()
        if not ok or not self._valid(float(value)):
            raise IrtexamError(f"{where}: must be {self.describe()}, got {value!r}")
        return int(value) if self.integer else float(value)


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


POSITIVE_INT = Number(True, 1, __name__="positive integer")
NONNEG_INT = Number(True, 0, __name__="non-negative integer")
SEED = Number(True, 0, 2**32 - 1, __name__="seed")
PROBABILITY_OPEN = Number(False, 0, 1, open_low=True, open_high=True, __name__="probability in (0, 1)")
FRACTION_HALF_OPEN = Number(False, 0, 1, open_high=True, __name__="fraction in [0, 1)")
PROBABILITY = Number(False, 0, 1, __name__="probability")
POSITIVE_FLOAT = Number(False, 0, open_low=True, __name__="positive number")
FINITE_FLOAT = Number(False, __name__="finite number")
THREADS = Number(True, 1, 1024, __name__="threads")
# an ability on the fit's N(0, 1) scale: a grid end past +-50 is no ability any exam measures, and the
# grid's width must stay finite (--theta-min=-1e308 --theta-max=1e308 gave NaN rows)
THETA = Number(False, -50, 50, __name__="ability")
NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse with its errors on one line (no usage block), exit code 2; ``--help`` unchanged.

    A negative number in scientific notation (``--theta-min -1e308``) is read as a value, as ``-4`` and
    ``-0.5`` are, not as an unknown option ("expected one argument").
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_NUMBER

    def error(self, message: str) -> None:  # type: ignore[override]
        message = " ".join(message.split())
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        sys.exit(2)

HELDOUT = Number(False, 0, 0.5, __name__="held-out fraction in [0, 0.5]")
GUESSING = Number(False, 0, 1, open_high=True, __name__="guessing parameter in [0, 1)")
N_CHOICES = Number(True, 2, __name__="number of choices")
GRADE = Number(True, 0, 5, __name__="grade 0-5")


def check_order(low: float, high: float, low_name: str, high_name: str) -> None:
    """Two bounds given as options must be ordered: ``low < high`` (one-line error naming both)."""
    if not low < high:
        raise IrtexamError(f"{low_name} ({low:g}) must be below {high_name} ({high:g})")
