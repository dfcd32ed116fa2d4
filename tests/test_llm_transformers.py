"""Real SmolLM2: shared-KV scoring equals naive scoring; generation; registry errors."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")

from irtexam.errors import IrtexamError  # noqa: E402
from irtexam.llm import GenerationParams, ScoreRequest, load_llm  # noqa: E402
from irtexam.llm.transformers_backend import common_prefix_length  # noqa: E402
from irtexam.llm.registry import PACKAGED_MODELS, installed_models, resolve_model_dir  # noqa: E402

pytestmark = [pytest.mark.llm,
              pytest.mark.skipif("smollm2-135m" not in installed_models(), reason="SmolLM2 not installed")]


@pytest.fixture(scope="module")
def smol32():
    torch.set_num_threads(1)
    return load_llm("smollm2-135m", dtype="float32")


REQUESTS = [
    ScoreRequest("Question: Which command creates a new PostgreSQL database?\nAnswer:",
                 (" CREATE DATABASE", " DROP TABLE users;", " pg_dump --schema-only mydb > out.sql", " VACUUM")),
    ScoreRequest("The capital of France is ", ("Paris", "a city with many bridges over the Seine.", "Marseille", "Lyon")),
    ScoreRequest("SELECT", (" 1;", "")),
]


def test_shared_kv_score_equals_naive_fp32(smol32):
    fast = smol32.score(REQUESTS)
    naive = smol32.score_naive(REQUESTS)
    assert [len(r) for r in fast] == [4, 4, 2]
    for row_f, row_n in zip(fast, naive):
        for f, n in zip(row_f, row_n):
            assert f.n_tokens == n.n_tokens
            assert f.logprob == pytest.approx(n.logprob, abs=1e-3)
            assert f.logprob <= 0.0
    # trailing prompt whitespace belongs to the continuation: "" after "... is " scores " "
    assert fast[1][0].n_chars == 5
    empty = fast[2][1]
    assert empty.logprob == 0.0 and empty.n_tokens == 0
    # the model prefers the true answer over the distractor
    assert fast[1][0].logprob > fast[1][3].logprob


CONTEXT = ("Context:\n[1] CREATE DATABASE creates a new PostgreSQL database. Only superusers or users "
           "with the CREATEDB privilege can create databases.\n[2] DROP DATABASE removes a database.\n\n")
DEMO = "Question: Which command removes a database?\nA. DROP DATABASE\nB. VACUUM\nAnswer: DROP DATABASE\n\n"
QUESTION = "Question: Which command creates a new database?\nA. CREATE DATABASE\nB. VACUUM\nAnswer:"
CHOICES = (" CREATE DATABASE", " VACUUM", " pg_dump --schema-only", "")
SHARED_PREFIX_REQUESTS = [  # the ICL levels of one retriever: the context is a common prefix
    ScoreRequest(CONTEXT + DEMO + DEMO + QUESTION, CHOICES),
    ScoreRequest("Question: unrelated\nAnswer:", (" yes", " no")),
    ScoreRequest(CONTEXT + QUESTION, CHOICES),
    ScoreRequest(CONTEXT + DEMO + QUESTION, CHOICES),
    ScoreRequest(CONTEXT + QUESTION, CHOICES),  # the same prompt twice: all but one token reused
]


def test_common_prefix_length():
    assert common_prefix_length([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix_length([], [1]) == 0
    assert common_prefix_length([7, 8], [7, 8]) == 2
    assert common_prefix_length([1], [2, 1]) == 0


def test_prefix_sharing_equals_naive_and_full_prompts_fp32(smol32):
    before = dict(smol32.prefix_stats)
    shared = smol32.score(SHARED_PREFIX_REQUESTS)
    reused = smol32.prefix_stats["reused_tokens"] - before["reused_tokens"]
    run = smol32.prefix_stats["prompt_tokens"] - before["prompt_tokens"]
    context_tokens = len(smol32.encode_pair(CONTEXT + QUESTION, " x")[0]) - len(
        smol32.tokenizer(QUESTION, add_special_tokens=False)["input_ids"])
    # sorted visiting order: three prompts reuse at least the context, the repeat reuses all but one token
    assert reused >= 3 * (context_tokens - 2)
    assert reused < run
    naive = smol32.score_naive(SHARED_PREFIX_REQUESTS)
    smol32.prefix_sharing = False
    try:
        full = smol32.score(SHARED_PREFIX_REQUESTS)
    finally:
        smol32.prefix_sharing = True
    assert [[s.n_tokens for s in row] for row in shared] == [[s.n_tokens for s in row] for row in naive]
    for row_s, row_n, row_f in zip(shared, naive, full):  # results come back in request order
        for s, n, f in zip(row_s, row_n, row_f):
            assert s.logprob == pytest.approx(n.logprob, abs=1e-3)
            assert s.logprob == pytest.approx(f.logprob, abs=1e-4)
            assert len(s.token_logprobs) == s.n_tokens
    assert shared[1][0].n_tokens >= 1 and shared[0][3].n_tokens == 0
    assert shared[2][0].logprob == pytest.approx(shared[4][0].logprob, abs=1e-4)


def test_trailing_whitespace_moves_to_continuation(smol32):
    a = smol32.score([ScoreRequest("The capital of France is ", ("Paris",))])[0][0]
    b = smol32.score([ScoreRequest("The capital of France is", (" Paris",))])[0][0]
    assert a.logprob == pytest.approx(b.logprob, abs=1e-5)
    assert a.n_chars == 5 and b.n_chars == 6


def test_bf16_default_close_to_fp32(smol32):
    bf = load_llm("smollm2-135m")
    assert next(bf.model.parameters()).dtype == torch.bfloat16
    f32 = smol32.score(REQUESTS[:1])[0]
    b16 = bf.score(REQUESTS[:1])[0]
    for x, y in zip(f32, b16):
        assert abs(x.logprob - y.logprob) < 1.5


def test_generate_greedy_is_deterministic_and_respects_stop(smol32):
    p = GenerationParams(max_new_tokens=10)
    a = smol32.generate(["What is a database index? Answer briefly."], p)
    b = smol32.generate(["What is a database index? Answer briefly."], p)
    assert a == b and isinstance(a[0], str) and a[0].strip()
    stopped = smol32.generate(["Count: 1, 2, 3,"], GenerationParams(max_new_tokens=10, stop=(",",)))[0]
    assert "," not in stopped
    assert smol32.chat  # SmolLM2-Instruct has a chat template


def test_registry_names_and_errors(tmp_path):
    assert set(PACKAGED_MODELS) == {"smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    assert "smollm2-135m" in installed_models()
    with pytest.raises(IrtexamError, match="packaged names"):
        resolve_model_dir("no-such-model")
    with pytest.raises(IrtexamError, match="config.json"):
        resolve_model_dir(tmp_path)
    for name in set(PACKAGED_MODELS) - set(installed_models()):
        with pytest.raises(IrtexamError, match="setup.sh --all-models"):
            resolve_model_dir(name)


def test_cached_dir_is_keyed_by_gguf_hash():
    from irtexam.llm.registry import packaged_gguf, sha256_file

    d, name = resolve_model_dir("smollm2-135m")
    assert name == "smollm2-135m"
    assert d.name == sha256_file(packaged_gguf("smollm2-135m"))[:16]
    assert (d / "config.json").exists()
