"""Typed warnings: every warning irtexam emits has a category a user (or the CLI) can filter on.

    import warnings, irtexam
    warnings.simplefilter("error", irtexam.ConvergenceWarning)   # a fit that did not converge raises
    warnings.simplefilter("ignore", irtexam.DataWarning)         # quiet about constant items

A fit keeps its warnings as text too (``FitResult.warnings``, saved in meta.json); each is a
:class:`Message`, a string that remembers its category.
"""

from __future__ import annotations

import warnings
from typing import Iterable


class IrtexamWarning(UserWarning):
    """Base class of irtexam's warnings."""


class DataWarning(IrtexamWarning):
    """Something in the data limits what a fit can say (items everyone got right, examinees with no responses)."""


class ConvergenceWarning(IrtexamWarning):
    """An estimator stopped before converging, or MCMC diagnostics (R-hat, ESS, divergences) failed."""


class IdentificationWarning(IrtexamWarning):
    """A quantity is not identified by the data: its value comes from the prior or the constraints alone."""


class PriorWarning(IrtexamWarning):
    """A prior with a fixed centre sits far from what the data say and pulls the estimates towards that centre."""


class UncertaintyWarning(IrtexamWarning):
    """Reported intervals are approximate in a known direction (too narrow, importance correction failed)."""


class Message(str):
    """A warning's text that remembers its category (a plain ``str`` everywhere else)."""

    category: type[IrtexamWarning]

    def __new__(cls, text: str, category: type[IrtexamWarning] = IrtexamWarning) -> "Message":
        message = super().__new__(cls, text)
        message.category = category
        return message


def category_of(message: str) -> type[IrtexamWarning]:
    """The category of a message (:class:`IrtexamWarning` for plain strings, e.g. read back from meta.json)."""
    return getattr(message, "category", IrtexamWarning)


def emit(messages: Iterable[str], stacklevel: int = 2) -> None:
    """``warnings.warn`` each message with its category."""
    for message in messages:
        warnings.warn(str(message), category_of(message), stacklevel=stacklevel + 1)
