"""Multiple-choice answering by log-likelihood of each candidate's text.

For a prompt x and candidate continuation y = (y_1..y_T) with |y| characters:

* sum:   LL(y)       = sum_t log P(y_t | x, y_<t)
* token: LL(y) / T   (mean log-likelihood per token)
* char:  LL(y) / |y| (lm-eval's ``acc_norm``; the default: the paper selects "the answer
                      with maximal length-penalized log-likelihood" with lm-eval, and its
                      task files score ``acc`` (= sum) and ``acc_norm``)

The chosen answer is argmax over candidates of the configured normalisation (first
index on ties). :func:`score_deduplicated` sends each distinct ScoreRequest once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..llm.base import LLM, ContinuationScore, ScoreRequest

NORMALISATIONS = ("token", "char", "sum")


def normalised(score: ContinuationScore, normalisation: str) -> float:
    """The value of ``score`` under ``normalisation`` (token, char or sum)."""
    if normalisation == "token":
        return score.per_token
    if normalisation == "char":
        return score.per_char
    if normalisation == "sum":
        return score.logprob
    raise ValueError(f"unknown normalisation {normalisation!r}; use one of {NORMALISATIONS}")


def choose(scores: Sequence[ContinuationScore], normalisation: str = "token") -> int:
    """Index of the best candidate under ``normalisation``; NaN scores never win; ties -> first."""
    best, best_value = -1, -math.inf
    for i, s in enumerate(scores):
        v = normalised(s, normalisation)
        if not math.isnan(v) and v > best_value:
            best, best_value = i, v
    return best if best >= 0 else 0


def top_tied(scores: Sequence[ContinuationScore], normalisation: str, tolerance: float = 1e-9) -> bool:
    """True when the best value under ``normalisation`` is shared by two or more candidates (within
    ``tolerance``) or every value is NaN: the scores cannot tell the answer, and a pick would be a guess."""
    values = [normalised(s, normalisation) for s in scores]
    finite = sorted((v for v in values if not math.isnan(v)), reverse=True)
    return len(finite) == 0 or (len(finite) >= 2 and finite[0] - finite[1] <= tolerance)


# A batch in which more than this share of the items tie at the top is refused: the LLM (or server) gives the
# same log-probability to every candidate and passed the start-up check by chance or changed since.
MAX_TIED_SHARE = 0.5
MIN_BATCH_FOR_TIE_CHECK = 4


def check_not_uninformative(all_scores: Sequence[Sequence[ContinuationScore]], normalisation: str,
                            who: str) -> int:
    """The number of items in a scored batch whose top candidates tie; raises :class:`IrtexamError` when
    more than :data:`MAX_TIED_SHARE` of a batch of at least :data:`MIN_BATCH_FOR_TIE_CHECK` items tie
    (nothing of the batch is kept: an uninformative scorer is refused, never scored)."""
    from ..errors import IrtexamError

    tied = sum(top_tied(s, normalisation) for s in all_scores)
    if len(all_scores) >= MIN_BATCH_FOR_TIE_CHECK and tied > MAX_TIED_SHARE * len(all_scores):
        raise IrtexamError(f"{who}: the candidates of {tied} of {len(all_scores)} items tie at the top under "
                           f"'{normalisation}' normalisation; its log-probabilities cannot tell the choices apart "
                           "(a server returning equal or constant log-probs?), so nothing of this batch is scored")
    return tied


@dataclass
class DedupStats:
    """How much work deduplication saved: requests asked for vs distinct requests scored."""

    requested: int = 0
    unique: int = 0

    @property
    def saved(self) -> int:
        """Requests answered from another pipeline's identical request."""
        return self.requested - self.unique


def score_deduplicated(llm: LLM, requests: Sequence[ScoreRequest], stats: DedupStats | None = None,
                       *, dedup: bool = True) -> list[list[ContinuationScore]]:
    """``llm.score(requests)`` with identical requests (same prompt and continuations) scored once.

    Returns the same nesting as ``requests``; ``stats`` (if given) is updated in place.
    """
    if not dedup:
        out = list(llm.score(list(requests)))
        if stats is not None:
            stats.requested += len(requests)
            stats.unique += len(requests)
        return out
    index: dict[ScoreRequest, int] = {}
    unique: list[ScoreRequest] = []
    for r in requests:
        if r not in index:
            index[r] = len(unique)
            unique.append(r)
    results = list(llm.score(unique)) if unique else []
    if len(results) != len(unique):
        raise RuntimeError(f"LLM {llm.name!r} returned {len(results)} results for {len(unique)} requests")
    if stats is not None:
        stats.requested += len(requests)
        stats.unique += len(unique)
    return [results[index[r]] for r in requests]
