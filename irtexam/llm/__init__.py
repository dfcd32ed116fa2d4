"""LLM backends: transformers (local dir / GGUF), OpenAI-compatible HTTP, on-disk cache.

Entry point: :func:`load_llm`. Heavy dependencies (torch, transformers) are imported
only when a local model is loaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .base import LLM, ContinuationScore, GenerationParams, ScoreRequest
from .cache import CachedLLM
from .registry import PACKAGED_MODELS, cache_root, installed_models

__all__ = ["LLM", "ContinuationScore", "GenerationParams", "ScoreRequest", "CachedLLM", "PACKAGED_MODELS",
           "load_llm", "installed_models", "cache_root"]

_LOADED: dict[tuple[Any, ...], Any] = {}


def load_llm(name_or_path: str | Path, *, dtype: str = "bfloat16", device: str = "cpu",
             cache_dir: str | Path | None = None, chat: bool | None = None, num_threads: int | None = None,
             model: str | None = None, api_key_env: str | None = None, max_concurrency: int = 4,
             timeout: float = 120.0, reuse: bool = True, **http_options: Any) -> LLM:
    """Load an LLM backend by packaged name, GGUF file, transformers dir or server URL.

    * ``smollm2-135m`` / ``gemma3-270m`` / ``qwen2.5-coder-0.5b`` / ``qwen2.5-coder-1.5b``:
      the packaged models (GGUF dequantised once and cached under
      ``$IRTEXAM_CACHE`` or ``~/.cache/irtexam``);
    * a ``.gguf`` file or a transformers directory;
    * ``http(s)://host:port/v1``: an OpenAI-compatible server (``model`` names the
      served model, ``api_key_env`` the environment variable holding the key; other
      ``http_options`` such as ``batch_candidates``, ``max_retries``, ``progress`` go to
      :class:`~irtexam.llm.openai_compat.OpenAICompatibleLLM`).

    ``cache_dir`` wraps the backend in :class:`CachedLLM` (every call cached on disk).
    With ``reuse`` (default) a local model already loaded in this process with the same
    settings is returned again instead of loading a second copy.
    """
    text = str(name_or_path)
    llm: Any
    if text.startswith(("http://", "https://")):
        from .openai_compat import OpenAICompatibleLLM

        llm = OpenAICompatibleLLM(text, model, api_key_env=api_key_env, max_concurrency=max_concurrency,
                                  timeout=timeout, chat=True if chat is None else chat, **http_options)
    elif http_options:
        raise TypeError(f"load_llm() got unexpected keyword argument(s) {sorted(http_options)} for a local model")
    else:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from .registry import resolve_model_dir
        from .transformers_backend import TransformersLLM

        key = (text, dtype, device, chat)
        if reuse and key in _LOADED:
            llm = _LOADED[key]
        else:
            model_dir, name = resolve_model_dir(text)
            llm = TransformersLLM(model_dir, name=name, dtype=dtype, device=device, chat=chat,
                                  num_threads=num_threads)
            if reuse:
                _LOADED[key] = llm
    if cache_dir is not None:
        llm = CachedLLM(llm, cache_dir, chunk_size=getattr(llm, "cache_chunk_size", None))
    return llm
