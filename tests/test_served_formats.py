"""The served-LLM client against irtexam's own server answering like real servers do.

No torch, no llama.cpp: a character-level fake model (each character one token) is served
by :mod:`irtexam.llm.server`; ``server.quirk`` reproduces the response formats that break
log-likelihood scoring in the wild (see ``irtexam.llm.server.QUIRKS``). Every one must be
refused with a clear error, or, where the format carries enough to place the
continuation (``logprobs.content`` with bytes), scored exactly as the legacy format.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from irtexam.errors import IrtexamError
from irtexam.llm.base import ContinuationScore, GenerationParams, ScoreRequest
from irtexam.llm.openai_compat import (OpenAICompatibleLLM, ScoringError, check_not_degenerate, content_offsets,
                                       continuation_logprobs)
from irtexam.llm.server import QUIRKS, serve

DATA = Path(__file__).parent / "data"


class CharLM:
    """Every character is a token. An induction rule: if the last k >= 3 characters occurred
    before, the character that followed them then is predicted (log P = -0.05, others -3);
    else log P(ch | prefix) = -(1 + (ord(ch) + len(prefix)) % 7) / 4."""

    name = "char-lm"

    @staticmethod
    def lp(prefix: str, ch: str) -> float:
        for k in (6, 5, 4, 3):
            if len(prefix) > k:
                j = prefix.rfind(prefix[-k:], 0, len(prefix) - 1)
                if j != -1:
                    return -0.05 if prefix[j + k] == ch else -3.0
        return -(1 + (ord(ch) + len(prefix)) % 7) / 4

    def token_logprobs(self, text: str) -> list[tuple[str, int, float | None]]:
        return [(ch, i, None if i == 0 else self.lp(text[:i], ch)) for i, ch in enumerate(text)]

    def score(self, requests):
        out = []
        for r in requests:
            row = []
            for c in r.continuations:
                ctx = r.prompt.rstrip()
                cont = r.prompt[len(ctx):] + c
                vals = [self.lp(ctx + cont[:j], ch) for j, ch in enumerate(cont)]
                row.append(ContinuationScore(math.fsum(vals), len(vals), len(c), tuple(vals)))
            out.append(row)
        return out

    def generate(self, prompts, params=GenerationParams()):
        return ["B" * min(params.max_new_tokens, 3) for _ in prompts]


REQS = [ScoreRequest("Question: Which SQL command removes a table?\nAnswer:", (" DROP TABLE", " CREATE", " é ünïcode")),
        ScoreRequest("Question: 2+2?\nAnswer: ", ("4", "five", "22"))]


@pytest.fixture(scope="module")
def server():
    srv = serve(CharLM())
    yield srv
    srv.stop()


@pytest.fixture()
def quirk(server):
    def set_quirk(name):
        server.quirk = name
        return OpenAICompatibleLLM(server.url, backoff=0.001, max_retries=1, max_concurrency=3)
    yield set_quirk
    server.quirk = None


def assert_matches_local(scores):
    for got, want in zip(scores, CharLM().score(REQS)):
        for g, w in zip(got, want):
            assert g.n_tokens == w.n_tokens and g.logprob == pytest.approx(w.logprob, abs=1e-9)


@pytest.mark.parametrize("batch", [None, True, False])
def test_legacy_format_scores_exactly(quirk, batch):
    client = quirk(None)
    client.batch_candidates = batch
    before = client.requests_sent
    assert_matches_local(client.score(REQS))
    sent = client.requests_sent - before
    # auto: the first question probes a list prompt (accepted), then one request per question
    assert sent == (2 if batch in (None, True) else 6)
    assert client.batch_candidates is (batch if batch is not None else True)


def test_content_format_with_bytes_is_placed_by_bytes(quirk):
    """``logprobs.content`` (no text_offset) carries bytes: offsets are rebuilt, scores are exact."""
    assert_matches_local(quirk("content").score(REQS))


def test_server_refusing_lists_falls_back_to_one_request_per_candidate(quirk):
    client = quirk("no-list")
    before = client.requests_sent
    assert_matches_local(client.score(REQS))
    assert client.batch_candidates is False
    assert client.requests_sent - before == 1 + 6  # one refused probe (no retry), then one per candidate


@pytest.mark.parametrize("name, message", [
    ("no-echo", "does not echo the prompt"),
    ("generated-only", "zero tokens of the continuation"),
    ("null-logprobs", "log-probability None"),
    ("zeros", "same log-likelihood"),
    ("shifted", "not aligned"),
    ("echo-500", "HTTP 500"),
])
def test_unscorable_formats_are_refused(quirk, name, message):
    assert name in QUIRKS
    client = quirk(name)
    if name != "shifted":  # shifted log-probs look like any others; only the start check can tell
        with pytest.raises(ScoringError, match=message):
            client.score(REQS)
    with pytest.raises(ScoringError, match="cannot do multiple-choice answering") as exc:
        client.check_scoring()
    assert "\n" not in str(exc.value)


def test_take_stops_before_scoring_anything(server, tmp_path):
    """A grid whose served LLM has no prompt logprobs stops at the start check: no answer is logged."""
    from irtexam.pipelines import load_spec, take_exam

    spec_path = tmp_path / "grid.yaml"
    spec_path.write_text(f"exam: {DATA / 'retrieval_exam.jsonl'}\n"
                         f"llms: [{{name: '{server.url}', label: served, max_retries: 0}}]\n"
                         "retrievers: [closed-book]\nicl: [0]\n")
    server.quirk = "no-echo"
    try:
        with pytest.raises(IrtexamError, match=r"llm 'served': the server at .* cannot do multiple-choice") as exc:
            take_exam(load_spec(spec_path), tmp_path / "run", progress=False)
    finally:
        server.quirk = None
    assert "\n" not in str(exc.value)
    log = tmp_path / "run" / "answers.jsonl"
    assert not log.exists() or log.read_text() == ""
    # the same grid against the healthy server answers every item
    res = take_exam(load_spec(spec_path), tmp_path / "run", progress=False)
    n = sum(1 for _ in open(DATA / "retrieval_exam.jsonl"))
    assert res.scored_pairs == n
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    assert all(min(r["n_tokens"]) > 0 for r in rows)


def test_take_cli_prints_one_line(server, tmp_path, capsys):
    from irtexam.cli import main

    spec_path = tmp_path / "grid.yaml"
    spec_path.write_text(f"exam: {DATA / 'retrieval_exam.jsonl'}\n"
                         f"llms: [{{name: '{server.url}', label: served}}]\nretrievers: [closed-book]\nicl: [0]\n")
    server.quirk = "generated-only"
    try:
        code = main(["take", str(spec_path), "--out", str(tmp_path / "run")])
    finally:
        server.quirk = None
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    assert [line for line in err if "cannot do multiple-choice" in line] and "zero tokens" in err[-1]


# ----------------------------------------------------------------------------- pure helpers
def test_continuation_logprobs_boundaries_and_refusals():
    offsets, values = [0, 3, 5, 8, 10], [None, -1.0, -2.0, -3.0, -9.0]
    assert continuation_logprobs(offsets, values, 5, 10) == (-2.0, -3.0)
    with pytest.raises(ScoringError, match="zero tokens"):
        continuation_logprobs(offsets, values, 11, 20)
    for bad in (None, float("nan"), float("inf"), 0.5, "x", True):
        with pytest.raises(ScoringError, match="log-probability"):
            continuation_logprobs(offsets, [None, -1.0, bad, -3.0, -9.0], 5, 10)


def test_content_offsets_bytes_tokens_and_multibyte():
    text = "ab é"
    content = [{"token": "ab", "logprob": -1.0, "bytes": list(b"ab")},
               {"token": " \xc3", "logprob": -2.0, "bytes": [32, 0xC3]},  # a token ending mid-character
               {"token": "\xa9", "logprob": -3.0, "bytes": [0xA9]},
               {"token": "!", "logprob": -4.0, "bytes": [33]}]  # the generated token
    offsets, values = content_offsets(content, text)
    assert offsets == [0, 2, 3, 4 + 5] and values == [-1.0, -2.0, -3.0, -4.0]
    no_bytes = [{"token": "ab", "logprob": -1.0}, {"token": " é", "logprob": -2.0}]
    assert content_offsets(no_bytes, text)[0] == [0, 2]
    with pytest.raises(ScoringError, match="does not echo"):
        content_offsets([{"token": "!", "logprob": -1.0}], text)


def test_identical_scores_across_a_batch_are_refused():
    reqs = [ScoreRequest("q", ("a", "b")), ScoreRequest("r", ("c", "d")), ScoreRequest("s", ("x", "x"))]
    same = [ContinuationScore(-1.0, 1, 1)] * 2
    with pytest.raises(ScoringError, match="same log-likelihood"):
        check_not_degenerate(reqs, [same, same, same])
    check_not_degenerate(reqs, [same, [ContinuationScore(-1.0, 1, 1), ContinuationScore(-2.0, 1, 1)], same])
    check_not_degenerate(reqs[2:], [same])  # identical texts prove nothing


def test_empty_continuation_is_refused(quirk):
    with pytest.raises(ScoringError, match="empty"):
        quirk(None).score([ScoreRequest("Q:", (" yes", " "))])


def test_progress_and_requests_per_second(quirk, capsys):
    client = quirk(None)
    client.progress = True
    client.generate(["a", "b", "c"], GenerationParams(max_new_tokens=2))
    assert client.requests_per_second > 0 and client.requests_ok >= 3


class TurnsFlatLM(CharLM):
    """CharLM for the first ``healthy`` echoed prompts, then log-prob 0 for every token (a server that
    passed the start-up check and then stopped telling the candidates apart)."""

    def __init__(self, healthy: int) -> None:
        self.healthy, self.calls = healthy, 0

    def token_logprobs(self, text):
        self.calls += 1
        rows = super().token_logprobs(text)
        return rows if self.calls <= self.healthy else [(t, o, None if v is None else 0.0) for t, o, v in rows]


def test_take_refuses_an_llm_that_turns_uninformative_after_the_check(tmp_path):
    """Every candidate tying after a passed start-up check: `take` stops with one line naming the LLM and
    the tie count, and no answer of that batch is logged (issue 27: nothing scored that cannot be scored)."""
    from irtexam.pipelines import load_spec, take_exam

    probe = TurnsFlatLM(healthy=10**9)
    with _served(probe) as srv:
        OpenAICompatibleLLM(srv.url, max_retries=0, batch_candidates=False).check_scoring()
    check_calls = probe.calls
    flat = TurnsFlatLM(healthy=check_calls)
    spec_path = tmp_path / "grid.yaml"
    with _served(flat) as srv:
        spec_path.write_text(f"exam: {DATA / 'retrieval_exam.jsonl'}\n"
                             f"llms: [{{name: '{srv.url}', label: served, max_retries: 0, batch_candidates: false}}]\n"
                             "retrievers: [closed-book]\nicl: [0]\n")
        with pytest.raises(IrtexamError, match=r"same log-likelihood|the candidates of (\d+) of \1 items tie") as exc:
            take_exam(load_spec(spec_path), tmp_path / "run", progress=False)
    assert "\n" not in str(exc.value) and flat.calls > check_calls
    log = tmp_path / "run" / "answers.jsonl"
    assert not log.exists() or log.read_text() == ""


class _served:
    def __init__(self, llm):
        self.llm = llm

    def __enter__(self):
        self.srv = serve(self.llm)
        return self.srv

    def __exit__(self, *exc):
        self.srv.stop()


def test_top_tied_and_the_batch_share():
    from irtexam.grading.multiple_choice import check_not_uninformative, top_tied

    a, b = ContinuationScore(-1.0, 1, 1), ContinuationScore(-2.0, 1, 1)
    assert not top_tied([a, b], "sum") and top_tied([a, a, b], "sum") and not top_tied([b, b, a], "sum")
    nan = ContinuationScore(float("nan"), 1, 1)
    assert top_tied([nan, nan], "sum") and not top_tied([nan, a], "sum")
    assert check_not_uninformative([[a, b]] * 3 + [[a, a]] * 2, "sum", "x") == 2  # 2 of 5: kept, counted
    with pytest.raises(IrtexamError, match="x: the candidates of 3 of 5 items tie"):
        check_not_uninformative([[a, b]] * 2 + [[a, a]] * 3, "sum", "x")
    assert check_not_uninformative([[a, a]] * 3, "sum", "x") == 3  # a batch under 4 items is not judged


@pytest.mark.parametrize("kind", ["cut-body", "close", "non-utf8", "not-json", "json-list"])
def test_transport_faults_are_retried_then_answered(server, kind):
    """One faulty reply, then healthy ones: the client retries and the answer equals the healthy one.
    (A well-formed object without ``choices`` is not retried: the next test refuses it at once.)"""
    client = OpenAICompatibleLLM(server.url, backoff=0.001, max_retries=2)
    want = client.generate(["Say hi."], GenerationParams(max_new_tokens=3))
    server.faults = {kind: 1}
    before = client.requests_sent
    try:
        got = client.generate(["Say hi."], GenerationParams(max_new_tokens=3))
    finally:
        server.faults = {}
    assert got == want
    assert client.requests_sent - before == 2


@pytest.mark.parametrize("kind, message", [("cut-body", "IncompleteRead"), ("close", "RemoteDisconnected"),
                                           ("non-utf8", "not UTF-8"), ("not-json", "not JSON"),
                                           ("json-list", "JSON list"),
                                           ("no-choices", r"no choices\[0\]\.message\.content")])
def test_persistent_transport_faults_end_in_one_line_naming_the_endpoint(server, kind, message):
    client = OpenAICompatibleLLM(server.url, backoff=0.001, max_retries=1)
    server.faults = {kind: 5}
    try:
        with pytest.raises(IrtexamError, match=message) as exc:
            client.generate(["Say hi."], GenerationParams(max_new_tokens=3))
    finally:
        server.faults = {}
    assert server.url in str(exc.value) and "\n" not in str(exc.value)
