"""LLM backends: transformers (local dir / GGUF), OpenAI-compatible HTTP, on-disk cache."""

from .base import LLM, ContinuationScore, GenerationParams, ScoreRequest

__all__ = ["LLM", "ContinuationScore", "GenerationParams", "ScoreRequest"]
