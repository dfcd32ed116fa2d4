"""Benchmarks too easy or too hard for their examinees: items nearly everyone answers the same way.

Such an item barely identifies its slope, which then follows the slope prior. The joint mode holds that prior's
centre at a = 1, which assumes the examinees spread about as much as the slopes are steep; on a table where many
items are saturated (``experiments/off_prior_recovery.py --theta shifted``: Gamma(2, 1) abilities on N(0, 1)
questions, 11% of the items answered right by more than 95% of the models) that put the slopes 15-21% low. So
(:func:`irtexam.irt.fit.fit`, ``method="auto"``) the 2PL's joint mode learns the centre there, and a 3PL, whose
joint mode cannot (its guessing collapses with a free slope centre), is fitted by the marginal estimator.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..responses import ResponseMatrix
from . import model as mdl

SATURATED = 0.95         # an item this many examinees answer the same way barely identifies its slope
SATURATED_SHARE = 0.05   # from this share of such items the joint mode's note below is given


def saturated_responses(responses: ResponseMatrix) -> int:
    """How many items of a binary response matrix were answered the same way by more than :data:`SATURATED` of their
    examinees (a benchmark too easy or too hard for its models), 0 below :data:`SATURATED_SHARE` of the items; a
    block of rows at a time (no copy of the matrix), before any design is built (``auto`` decides from it). Their
    slopes lean on the slope prior: with its centre fixed at a = 1 the joint mode's come out low
    (``experiments/off_prior_recovery.py --theta shifted``, 11% such items: 2PL 2,000 x 200 seed 4 x0.787 with
    Firth's penalty, 2,000 x 1,000 seed 5 x0.933; 3PL 2,000 x 200 x0.845), with the centre learned from all the items
    x1.004 / x0.986 (the marginal estimator, which learns it too: x1.005 / x0.964; 3PL x0.998)."""
    from ..memory import row_blocks
    from ..scores import float_scores

    right, answered = np.zeros(responses.n_items), np.zeros(responses.n_items)
    for rows in row_blocks(responses.n_items, responses.n_examinees):
        block = float_scores(responses.cells[rows])
        right[rows], answered[rows] = np.nansum(block, axis=1), np.count_nonzero(~np.isnan(block), axis=1)
    share_right = right / np.maximum(answered, 1)
    count = int(np.count_nonzero((share_right > SATURATED) | (share_right < 1.0 - SATURATED)))
    return count if count >= SATURATED_SHARE * responses.n_items else 0


def guesses_freely(model: str, given: dict[str, Any], spec: mdl.ModelSpec | None) -> bool:
    """Whether the model asked for is a 3PL with free guessing (from ``spec`` when given, else ``model`` and the
    ``guessing`` option)."""
    return spec.free_guessing if spec is not None else (str(model).lower() == "3pl" and given.get("guessing") is None)


def saturated_3pl(responses: ResponseMatrix, model: str, given: dict[str, Any], spec: mdl.ModelSpec | None) -> int:
    """For ``method="auto"``: the saturated items (:func:`saturated_responses`) of a 3PL with free guessing, whose
    joint mode cannot learn its slope centre (its guessing collapses), so that ``auto`` takes the marginal estimator
    there (2,000 x 200, 11% such items: the joint mode x0.845, em x0.998); 0 for other models."""
    return saturated_responses(responses) if guesses_freely(model, given, spec) and responses.is_binary else 0


def saturated_em_note(count: int, n_items: int) -> str:
    """What ``auto`` did on a saturated 3PL table (:func:`saturated_3pl`)."""
    return (f"{count} of {n_items} items were answered the same way by more than {SATURATED:.0%} of the examinees (a "
            "benchmark too easy or too hard for them): auto fitted the marginal estimator, which learns the slope "
            "prior's centre (the 3PL's joint mode holds it at a = 1 and put such slopes 15% low)")


def saturated_note(count: int, n_items: int, learned: bool) -> str:
    """The fit's warning about :func:`saturated_responses` on the joint mode, saying what the joint mode did about it."""
    said = (f"{count} of {n_items} items were answered the same way by more than {SATURATED:.0%} of the examinees "
            "(a benchmark too easy or too hard for them): their slopes and difficulties lean on the slope prior")
    if learned:
        return said + ("; the joint mode learned the prior's centre from all the items (slope_centre learned, no "
                       "Firth's penalty: held at a = 1 it put such slopes 7-21% low)")
    return said + (", whose centre the joint mode holds at a = 1 here (15-21% low slopes where 11% of the items were "
                   "such); --method em learns it")
