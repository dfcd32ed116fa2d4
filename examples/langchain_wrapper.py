"""A LangChain / LlamaIndex-style RAG chain as an irtexam `python:` system.

irtexam calls ``answer(question, choices)`` once per exam item and grades the returned
text (or ``{"answer": ..., "contexts": [...]}``) into a choice. Put the choices into the
prompt with their letters, in the order given, and ask for the letter. Replace ``retrieve``
and ``llm`` with your chain's retriever and model, e.g. with LangChain::

    docs = retriever.invoke(question)               # your vector store retriever
    text = chain.invoke({"context": docs, "question": prompt}).content

This file runs as is: a keyword retriever over the test corpus and a rule-based "LLM",
so that the wiring can be tried without a model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "retrieval_corpus.jsonl"
PASSAGES = [json.loads(line)["text"] for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def retrieve(question: str, k: int = 2) -> list[str]:
    """Stand-in for ``retriever.invoke``: passages sharing the most words with the question."""
    words = set(re.findall(r"\w+", question.lower()))
    ranked = sorted(PASSAGES, key=lambda p: -len(words & set(re.findall(r"\w+", p.lower()))))
    return ranked[:k]


def llm(prompt: str, choices: list[str], contexts: list[str]) -> str:
    """Stand-in for ``chain.invoke``: the choice with most words in the context, or a refusal."""
    text = " ".join(contexts).lower()
    overlap = [len(set(re.findall(r"\w+", c.lower())) & set(re.findall(r"\w+", text))) for c in choices]
    if max(overlap) == 0:
        return "I don't know; the context does not say."
    best = overlap.index(max(overlap))
    return f"The answer is {'ABCDEFGHIJ'[best]}."


def answer(question: str, choices: list[str]) -> dict:
    """The function irtexam calls: retrieve, prompt with lettered choices, return reply and contexts."""
    contexts = retrieve(question)
    lettered = "\n".join(f"{'ABCDEFGHIJ'[i]}. {c}" for i, c in enumerate(choices))
    prompt = ("Answer with the letter of the correct choice, or say you don't know.\n\n"
              "Context:\n" + "\n".join(contexts) + f"\n\nQuestion: {question}\n{lettered}\nAnswer:")
    return {"answer": llm(prompt, choices, contexts), "contexts": contexts}
