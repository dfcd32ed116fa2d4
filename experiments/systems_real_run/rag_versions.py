"""Two versions of one small RAG assistant, written as a user would wrap their own system.

v1 asks SmolLM2-135M-Instruct the question closed-book; v2 first retrieves the top 3
passages of the PostgreSQL manual with BM25 and puts them in the prompt. Both return the
model's free-text reply and (v2) the passages, as irtexam's ``python:`` systems expect.
"""

from __future__ import annotations

import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data" / "corpus" / "postgresql15-manual.jsonl.gz"
_lock = threading.Lock()
_state: dict = {}


def _llm():
    from irtexam.llm import load_llm

    with _lock:
        if "llm" not in _state:
            _state["llm"] = load_llm("smollm2-135m", dtype="float32")
        return _state["llm"]


def _retriever():
    from irtexam.retrieval.base import load_passages
    from irtexam.retrieval.registry import build_retriever, normalise_retriever_spec

    with _lock:
        if "bm25" not in _state:
            _state["bm25"] = build_retriever(normalise_retriever_spec("bm25"), load_passages(CORPUS),
                                             index_dir=ROOT / "runs" / "systems_real_run" / "index")
        return _state["bm25"]


def _ask(question: str, choices: list[str], contexts: list[str]) -> str:
    from irtexam.llm.base import GenerationParams

    lettered = "\n".join(f"{'ABCDEFGHIJ'[i]}. {c}" for i, c in enumerate(choices))
    context = ("Context:\n" + "\n".join(contexts) + "\n\n") if contexts else ""
    prompt = (f"{context}Question: {question}\n{lettered}\n\n"
              "Answer with the letter of the correct choice. If you do not know, say so.")
    return _llm().generate([prompt], GenerationParams(max_new_tokens=24))[0]


def answer_v1(question: str, choices: list[str]) -> str:
    """Version 1: closed-book."""
    return _ask(question, choices, [])


def answer_v2(question: str, choices: list[str]) -> dict:
    """Version 2: BM25 top-3 passages in the prompt; the passages are reported back."""
    contexts = [h.passage.text for h in _retriever().retrieve(question, 3)]
    return {"answer": _ask(question, choices, contexts), "contexts": contexts}
