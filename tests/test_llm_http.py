"""The OpenAI-compatible client against the real local server serving SmolLM2."""

from __future__ import annotations

import logging
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
torch = pytest.importorskip("torch")

from irtexam.errors import IrtexamError  # noqa: E402
from irtexam.llm import GenerationParams, ScoreRequest, load_llm  # noqa: E402
from irtexam.llm.openai_compat import OpenAICompatibleLLM  # noqa: E402
from irtexam.llm.registry import installed_models  # noqa: E402
from irtexam.llm.server import serve  # noqa: E402

pytestmark = [pytest.mark.llm,
              pytest.mark.skipif("smollm2-135m" not in installed_models(), reason="SmolLM2 not installed")]

SECRET = "sk-test-do-not-log-1234"


@pytest.fixture(scope="module")
def local():
    torch.set_num_threads(1)
    return load_llm("smollm2-135m", dtype="float32")


@pytest.fixture(scope="module")
def server(local):
    srv = serve(local, api_key=SECRET)
    yield srv
    srv.stop()


@pytest.fixture()
def client(server, monkeypatch):
    monkeypatch.setenv("IRTEXAM_TEST_KEY", SECRET)
    return OpenAICompatibleLLM(server.url, api_key_env="IRTEXAM_TEST_KEY", backoff=0.01, max_concurrency=3)


def test_models_endpoint_and_name(client, local):
    assert client.name == local.name == "smollm2-135m"
    assert client.list_models() == ["smollm2-135m"]


def test_http_score_matches_local(client, local):
    reqs = [ScoreRequest("Question: Which SQL command removes a table?\nAnswer:",
                         (" DROP TABLE", " CREATE INDEX", " SELECT * FROM t", " ALTER ROLE"))]
    remote = client.score(reqs)[0]
    near = local.score(reqs)[0]
    for r, n in zip(remote, near):
        assert r.n_tokens == n.n_tokens
        assert r.logprob == pytest.approx(n.logprob, abs=1e-3)


def test_http_generate_matches_local_chat(client, local):
    params = GenerationParams(max_new_tokens=8)
    prompts = ["What does VACUUM do?"]
    assert client.generate(prompts, params) == local.generate(prompts, params)


def test_retries_with_backoff_then_succeeds(client, server):
    server.fail_next = 2
    before = client.requests_sent
    out = client.generate(["Say hi."], GenerationParams(max_new_tokens=4))
    assert isinstance(out[0], str)
    assert client.requests_sent - before == 3


def test_gives_up_with_clear_error_and_never_logs_key(server, monkeypatch, caplog):
    monkeypatch.setenv("IRTEXAM_TEST_KEY", SECRET)
    c = OpenAICompatibleLLM(server.url, api_key_env="IRTEXAM_TEST_KEY", backoff=0.01, max_retries=1)
    server.fail_next = 5
    with caplog.at_level(logging.DEBUG), pytest.raises(IrtexamError, match="after 2 attempts") as exc:
        c.generate(["x"], GenerationParams(max_new_tokens=2))
    server.fail_next = 0
    assert SECRET not in str(exc.value) and SECRET not in caplog.text and SECRET not in repr(c)


def test_wrong_key_and_missing_env(server, monkeypatch):
    monkeypatch.setenv("IRTEXAM_BAD_KEY", "wrong")
    with pytest.raises(IrtexamError, match="401"):
        OpenAICompatibleLLM(server.url, api_key_env="IRTEXAM_BAD_KEY")
    monkeypatch.delenv("IRTEXAM_UNSET_KEY", raising=False)
    with pytest.raises(IrtexamError, match="IRTEXAM_UNSET_KEY"):
        OpenAICompatibleLLM(server.url, api_key_env="IRTEXAM_UNSET_KEY")


def test_unreachable_server_fails_fast():
    with pytest.raises(IrtexamError, match="failed after"):
        OpenAICompatibleLLM("http://127.0.0.1:9/v1", max_retries=1, backoff=0.01, timeout=2)


def test_load_llm_url(server, monkeypatch):
    monkeypatch.setenv("IRTEXAM_TEST_KEY", SECRET)
    llm = load_llm(server.url, api_key_env="IRTEXAM_TEST_KEY")
    assert isinstance(llm, OpenAICompatibleLLM) and llm.name == "smollm2-135m"
