"""The one small interface every LLM backend implements.

Two operations are enough for the whole package:

* ``generate``: prompt text in, completion text out (exam generation, free-form
  answers, self-rating, IDK judging);
* ``score``: for a prompt and several continuations, the log-likelihood of each
  continuation given the prompt (multiple-choice answering). Backends share the
  prompt's forward pass between the continuations where they can.

Backends hold configuration and loaded weights; results are plain dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence, runtime_checkable


@dataclass(frozen=True)
class GenerationParams:
    """Decoding settings; part of every cache key."""

    max_new_tokens: int = 256
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    seed: int = 0
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScoreRequest:
    """One prompt with the continuations to score after it (e.g. the 4 answer texts)."""

    prompt: str
    continuations: tuple[str, ...]


@dataclass(frozen=True)
class ContinuationScore:
    """Log-likelihood of one continuation given its prompt.

    ``logprob`` is the sum over the continuation's tokens of log P(token | prefix);
    ``n_tokens`` and ``n_chars`` allow per-token and per-character normalisation.
    """

    logprob: float
    n_tokens: int
    n_chars: int
    token_logprobs: tuple[float, ...] = field(default=(), compare=False)

    @property
    def per_token(self) -> float:
        """Length-normalised log-likelihood: logprob / n_tokens."""
        return self.logprob / max(self.n_tokens, 1)

    @property
    def per_char(self) -> float:
        """Character-normalised log-likelihood: logprob / n_chars."""
        return self.logprob / max(self.n_chars, 1)


@runtime_checkable
class LLM(Protocol):
    """What the rest of irtexam needs from a language model backend."""

    @property
    def name(self) -> str:
        """Stable model identifier (used in facets, provenance and cache keys)."""
        ...

    def generate(self, prompts: Sequence[str], params: GenerationParams = GenerationParams()) -> list[str]:
        """Complete each prompt; returns one string per prompt (the completion only)."""
        ...

    def score(self, requests: Sequence[ScoreRequest]) -> list[list[ContinuationScore]]:
        """Score every continuation of every request; same nesting as the input."""
        ...
