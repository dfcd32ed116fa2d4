"""Black-box systems take the exam: a real HTTP server (standard library, in a thread) and Python functions.

The server answers every item in a fixed style per item (letter, text, abstention, ...),
so the expected grading is written down here independently of the grader; bad endpoints
(down, HTTP 500, malformed JSON, no answer field, timeout) must stop with one line naming
the system and the item, log nothing for it, and a re-run must resume without re-asking.
"""

from __future__ import annotations

import json
import socket
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from irtexam.errors import IrtexamError
from irtexam.exam.schema import read_exam
from irtexam.pipelines import load_spec, take_exam
from irtexam.pipelines.systems import SystemCallError
from irtexam.responses import ResponseMatrix

DATA = Path(__file__).parent / "data"
EXAM = DATA / "retrieval_exam.jsonl"
ITEMS = {it.id: it for it in read_exam(EXAM)}
LETTERS = "ABCD"

# how the "good" system replies to each item, and what that must grade to
# (style, expected route, expected correct)
STYLES = {
    "q1": ("letter_right", "letter", 1),
    "q2": ("paren_right", "letter", 1),
    "q3": ("text_right", "text", 1),
    "q4": ("letter_wrong", "letter", 0),
    "q5": ("idk", "abstain", 0),
    "q6": ("answer_is_right", "letter", 1),
    "q7": ("gibberish", "unparseable", 0),
    "q8": ("text_wrong", "text", 0),
}


def reply_for(item_id: str, choices: list[str]) -> str:
    """The good system's free-text reply (choices as received: the test checks they arrive in order)."""
    it = ITEMS[item_id]
    assert choices == it.choices
    right, wrong = it.answer, (it.answer + 1) % len(choices)
    style = STYLES[item_id][0]
    return {"letter_right": f"{LETTERS[right]}. {choices[right]}",
            "paren_right": f"({LETTERS[right]})",
            "text_right": f"It is {choices[right]}, according to the manual.",
            "letter_wrong": f"Answer: {LETTERS[wrong]}",
            "idk": "I don't know; the context does not mention it.",
            "answer_is_right": f"Based on the documents, the answer is {LETTERS[right]}.",
            "gibberish": "zzzz qqqq",
            "text_wrong": choices[wrong]}[style]


class Handler(BaseHTTPRequestHandler):
    """POST /good, /v2 answer; /500, /badjson, /noanswer, /slow misbehave."""

    calls: dict[str, list[str]] = {}
    lock = threading.Lock()

    def log_message(self, *args):  # quiet
        pass

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            self.calls.setdefault(self.path, []).append(body["id"])
        if self.path == "/good":
            chunk = ITEMS[body["id"]].chunk_id
            contexts = [f"passage {chunk}"] if body["id"] in ("q1", "q2") else ["unrelated text"]
            self._send(200, json.dumps({"answer": reply_for(body["id"], body["choices"]),
                                        "contexts": contexts}).encode())
        elif self.path == "/auth":
            ok = self.headers.get("Authorization") == "Bearer sk-test-1"
            self._send(200 if ok else 401, b'{"answer": "B"}' if ok else b'{"error": "bad key"}')
        elif self.path == "/v2":
            self._send(200, json.dumps({"answer": "A"}).encode())
        elif self.path == "/500":
            self._send(500, b'{"error": "boom"}')
        elif self.path == "/badjson":
            self._send(200, b"<html>not json")
        elif self.path == "/noanswer":
            self._send(200, b'{"text": "B"}')
        elif self.path == "/slow":
            time.sleep(1.5)
            self._send(200, b'{"answer": "B"}')


@pytest.fixture()
def server():
    Handler.calls = {}
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def write_spec(tmp_path: Path, systems: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(f"exam: {EXAM}\nsystems:\n" + textwrap.indent(textwrap.dedent(systems), "  "))
    return path


def test_http_system_graded_and_faceted(server, tmp_path):
    spec = load_spec(write_spec(tmp_path, f"""\
        - {{label: assistant-v1, url: "{server}/good", facets: {{version: v1, retriever: bm25}}, max_concurrency: 3}}
        - {{label: assistant-v2, url: "{server}/v2", facets: {{version: v2}}}}
        """))
    out = tmp_path / "run"
    result = take_exam(spec, out, progress=False)
    assert result.scored_pairs == 16 and result.n_pipelines == 2
    log = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    v1 = {r["item"]: r for r in log if r["pipeline"] == "assistant-v1"}
    for item, (style, route, correct) in STYLES.items():
        assert v1[item]["grading"] == route, (item, v1[item])
        assert v1[item]["correct"] == correct, (item, v1[item])
        assert v1[item]["reply"] == reply_for(item, ITEMS[item].choices)  # raw reply kept
    assert v1["q5"]["chosen"] is None and v1["q7"]["chosen"] is None
    # version 2 always says "A": correct exactly where the key is A
    v2 = [r for r in log if r["pipeline"] == "assistant-v2"]
    assert sum(r["correct"] for r in v2) == sum(it.answer == 0 for it in ITEMS.values())
    # facet columns for fit --facets; a facet a system does not declare is "-"
    rm = ResponseMatrix.read(out / "responses.csv")
    assert set(rm.examinees) == {"assistant-v1", "assistant-v2"}
    assert rm.examinee_facets.loc["assistant-v1", "version"] == "v1"
    assert rm.examinee_facets.loc["assistant-v2", "retriever"] == "-"
    # counts in grading.csv, provenance.json and the summary line
    grading = pd.read_csv(out / "grading.csv").set_index("examinee")
    assert grading.loc["assistant-v1", "abstain"] == 1 and grading.loc["assistant-v1", "unparseable"] == 1
    assert grading.loc["assistant-v1", "correct"] == 4 and grading.loc["assistant-v1", "letter"] == 4
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["grading"]["counts"]["assistant-v1"]["text"] == 2 and prov["systems"] == ["assistant-v1", "assistant-v2"]
    assert "assistant-v1: 4/8 correct" in result.summary() and "1 abstained" in result.summary()
    assert len(pd.read_csv(out / "retrieval_recall.csv")) == 0  # no corpus: the contexts cannot be checked
    # a re-run asks nothing again
    before = {k: len(v) for k, v in Handler.calls.items()}
    again = take_exam(spec, out, progress=False)
    assert again.scored_pairs == 0 and again.resumed_pairs == 16
    assert {k: len(v) for k, v in Handler.calls.items()} == before


def test_contexts_give_system_recall(tmp_path, monkeypatch):
    from irtexam.retrieval.base import load_passages

    texts = {p.id: p.text for p in load_passages(DATA / "retrieval_corpus.jsonl")}
    module = tmp_path / "ctx_rag_a.py"
    module.write_text(f"TEXTS = {texts!r}\n"
                      "def answer(question, choices):\n"
                      "    hit = [t for t in TEXTS.values() if question.split()[-1].strip('?').lower() in t.lower()]\n"
                      "    return {'answer': 'A', 'contexts': hit[:1]}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(f"exam: {EXAM}\ncorpus: {DATA / 'retrieval_corpus.jsonl'}\n"
                         "systems: [{label: ctx, python: 'ctx_rag_a:answer'}]\n")
    take_exam(load_spec(spec_path), tmp_path / "run", progress=False)
    answers = pd.read_parquet(tmp_path / "run" / "answers.parquet")
    expected = sum(bool(c is not None and len(c) and c[0] == texts[ITEMS[i].chunk_id])
                   for i, c in zip(answers["item"], answers["contexts"]))
    recall = pd.read_csv(tmp_path / "run" / "retrieval_recall.csv").set_index("retriever")
    assert recall.loc["ctx", "n_found"] == expected and recall.loc["ctx", "kind"] == "system"


def test_python_system_and_grid_side_by_side(tmp_path, monkeypatch):
    (tmp_path / "my_rag_b.py").write_text(textwrap.dedent("""\
        def answer(question, choices):
            if "VACUUM" in question:
                return "I cannot answer this from the context."
            return {"answer": "The answer is " + choices[0], "contexts": []}
        """))
    monkeypatch.chdir(tmp_path)  # module importable from the working directory
    spec = load_spec(write_spec(tmp_path, """\
        - {label: mine, python: "my_rag_b:answer", facets: {llm: my-llm}}
        """))
    result = take_exam(spec, tmp_path / "run", progress=False)
    rec = {r["item"]: r for r in map(json.loads, (tmp_path / "run" / "answers.jsonl").read_text().splitlines())}
    assert rec["q1"]["grading"] == "abstain" and rec["q1"]["correct"] == 0
    assert all(r["grading"] == "text" and r["chosen"] == 0 for k, r in rec.items() if k != "q1")
    assert result.grading["mine"]["abstain"] == 1
    rm = ResponseMatrix.read(tmp_path / "run" / "responses.csv")
    assert rm.examinee_facets.loc["mine", "llm"] == "my-llm"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("path, message", [
    ("/500", "HTTP 500"), ("/badjson", "reply is not JSON"), ("/noanswer", "no 'answer' field"),
    ("/slow", "no reply within 0.5 s"), ("DOWN", "cannot reach the endpoint")])
def test_bad_endpoint_one_line_nothing_scored_and_resume(server, tmp_path, path, message):
    url = f"http://127.0.0.1:{free_port()}/x" if path == "DOWN" else server + path
    spec = load_spec(write_spec(tmp_path, f"""\
        - {{label: good, url: "{server}/good", max_concurrency: 1}}
        - {{label: broken, url: "{url}", max_retries: 0, timeout: 0.5, max_concurrency: 1}}
        """))
    out = tmp_path / "run"
    with pytest.raises(SystemCallError) as info:
        take_exam(spec, out, progress=False)
    text = str(info.value)
    assert "\n" not in text and text.startswith("system 'broken', item 'q") and message in text, text
    logged = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert not [r for r in logged if r["pipeline"] == "broken"]  # nothing scored for the broken system
    good_before = len(Handler.calls.get("/good", []))
    assert good_before == len(logged)  # every good answer that came back is logged
    # the endpoint is fixed: the re-run asks only what is missing
    fixed = load_spec(write_spec(tmp_path, f"""\
        - {{label: good, url: "{server}/good", max_concurrency: 1}}
        - {{label: broken, url: "{server}/v2"}}
        """, "fixed.yaml"))
    result = take_exam(fixed, out, progress=False)
    assert result.resumed_pairs == len(logged) and result.missing_pairs == 0
    assert sorted(Handler.calls["/good"]) == sorted(ITEMS)  # each good item asked exactly once over both runs


def test_cli_prints_one_line_for_a_broken_system(server, tmp_path, capsys):
    from irtexam.cli import main

    spec = write_spec(tmp_path, f"- {{label: b, url: \"{server}/noanswer\", max_retries: 0}}\n")
    assert main(["take", str(spec), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "system 'b', item 'q" in err and "no 'answer' field" in err


@pytest.mark.parametrize("body, message", [
    ("import not_a_module_xyz\ndef answer(q, c):\n    return 'A'\n", "cannot import"),
    ("def answer(q, c):\n    raise ValueError('index not built')\n", "raised ValueError: index not built"),
    ("def answer(q, c):\n    return 42\n", "reply must be a JSON object or a string")])
def test_bad_python_target(tmp_path, monkeypatch, body, message):
    name = f"bad_rag_{abs(hash(body)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = load_spec(write_spec(tmp_path, f"- {{label: py, python: '{name}:answer', max_concurrency: 1}}\n"))
    with pytest.raises(IrtexamError, match=message) as info:
        take_exam(spec, tmp_path / "run", progress=False)
    assert str(info.value).startswith("system 'py', item 'q1'")
    log = tmp_path / "run" / "answers.jsonl"
    assert not log.exists() or log.read_text() == ""


@pytest.mark.parametrize("entry, message", [
    ("{label: a}", "exactly one of 'url'"),
    ("{label: a, url: x, python: 'm:f'}", "exactly one of 'url'"),
    ("{label: 'a|b', url: 'http://x'}", "without '|'"),
    ("{label: a, python: 'nocolon'}", "module:function"),
    ("{label: a, url: 'http://x', facets: [1]}", "'facets' must map"),
    ("{label: a, url: 'http://x', retries: 3}", "unknown key(s) ['retries']"),
])
def test_spec_errors_name_the_entry(tmp_path, entry, message):
    from irtexam.pipelines import SpecError

    with pytest.raises(SpecError) as info:
        load_spec(write_spec(tmp_path, f"- {entry}\n"))
    assert "systems[0]" in str(info.value) and message in str(info.value)


def test_examples_wrapper_and_service_take_the_exam(tmp_path, monkeypatch):
    """examples/http_service.py and examples/langchain_wrapper.py as the example spec wires them."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    monkeypatch.syspath_prepend(str(examples))
    import http_service

    srv = ThreadingHTTPServer(("127.0.0.1", 0), http_service.Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        spec = load_spec(write_spec(tmp_path, f"""\
            - {{label: v1, url: "http://127.0.0.1:{srv.server_address[1]}/answer", facets: {{version: v1}}}}
            - {{label: v2, python: "langchain_wrapper:answer", facets: {{version: v2}}}}
            """))
        result = take_exam(spec, tmp_path / "run", progress=False)
    finally:
        srv.shutdown()
        srv.server_close()
    answers = pd.read_parquet(tmp_path / "run" / "answers.parquet")
    v1, v2 = (answers[answers.pipeline == v].set_index("item") for v in ("v1", "v2"))
    assert (v1["reply"] == v2["reply"]).all()  # the service wraps the same chain
    assert result.grading["v1"]["letter"] + result.grading["v1"]["abstain"] == 8
    assert v1["correct"].sum() >= 4  # the keyword chain finds most answers in the test corpus
    assert all(len(c) == 2 for c in v1["contexts"])
    # the example spec parses (its service and models are not needed to validate it)
    example = load_spec(examples / "specs" / "systems.yaml", check_files=False)
    assert [s["label"] for s in example.systems] == ["assistant-v1", "assistant-v2"]


class SlowFakeLLM:
    """Unit-test LLM behind a real HTTP server: answers "A" after 0.3 s and records when it ran."""

    def __init__(self, name):
        self.name = name
        self.spans: list[tuple[float, float]] = []

    def generate(self, prompts, params=None):
        start = time.perf_counter()
        time.sleep(0.3)
        self.spans.append((start, time.perf_counter()))
        return ["A" for _ in prompts]

    def score(self, requests):
        raise AssertionError("a generate level must not score")


def test_served_levels_run_concurrently(tmp_path):
    from irtexam.llm.server import serve

    fakes = [SlowFakeLLM("m1"), SlowFakeLLM("m2")]
    servers = [serve(f) for f in fakes]
    try:
        path = tmp_path / "spec.yaml"
        path.write_text(f"exam: {EXAM}\nretrievers: [closed-book]\nllms:\n" + "".join(
            f"  - {{name: '{s.url}', label: m{i}, answer: generate, max_concurrency: 1}}\n"
            for i, s in enumerate(servers)))
        result = take_exam(load_spec(path), tmp_path / "run", progress=False)
    finally:
        for s in servers:
            s.stop()
    assert result.scored_pairs == 16
    first, second = fakes[0].spans, fakes[1].spans
    overlap = sum(1 for a0, a1 in first for b0, b1 in second if a0 < b1 and b0 < a1)
    assert overlap >= 4, (first, second)  # the two endpoints were busy at the same time


def test_api_key_sent_from_the_environment(server, tmp_path, monkeypatch):
    spec = load_spec(write_spec(tmp_path, f"- {{label: k, url: '{server}/auth', api_key_env: RAG_KEY, max_retries: 0}}\n"))
    monkeypatch.delenv("RAG_KEY", raising=False)
    with pytest.raises(SystemCallError, match="environment variable RAG_KEY"):
        take_exam(spec, tmp_path / "none", progress=False)
    monkeypatch.setenv("RAG_KEY", "sk-wrong")
    with pytest.raises(SystemCallError, match="HTTP 401"):
        take_exam(spec, tmp_path / "wrong", progress=False)
    monkeypatch.setenv("RAG_KEY", "sk-test-1")
    assert take_exam(spec, tmp_path / "right", progress=False).scored_pairs == 8
