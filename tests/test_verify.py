"""The exam verifier (issue 16): checks without an LLM, the scoring rules, the run, errors.

A scripted LLM plays the verifier in the fast tests: it answers "Yes" to candidates of
a known-correct set and prefers the correct option's letter in the pick pass, plus
configurable Yes-bias and position (letter A) bias, so the calibration and the
permutation averaging are tested against biases they must cancel. One slow test runs
the real SmolLM2 through the same code.
"""

from __future__ import annotations

import csv
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from irtexam.cli import main
from irtexam.errors import InputError, IrtexamError
from irtexam.exam.schema import ExamItem, read_exam, write_exam
from irtexam.exam.verify import (VerifyConfig, boolean_value, cyclic_orders, decide, has_embedded_label,
                                 has_placeholder, item_passage, judge_requests, near_duplicates, pick_requests,
                                 static_checks, value_found, verify_exam, verify_items)
from irtexam.filters import run_chain
from irtexam.llm.base import ContinuationScore, ScoreRequest

PASSAGE = ("work_mem (integer) Sets the base maximum amount of memory to be used by a query operation before "
           "writing to temporary disk files. The default value is four megabytes (4MB). auth_delay causes the "
           "server to pause briefly before reporting authentication failure.")


AUTH = ("Pauses before reporting authentication failure", "Speeds up logins", "Drops connections",
        "Encrypts passwords")


def item(iid: str = "doc#0/q0", question: str = "What is the default value of work_mem?",
         choices=("64MB", "4MB", "32MB", "16MB"), answer: int = 1, doc: str | None = PASSAGE) -> ExamItem:
    prov = {"document": doc} if doc is not None else {}
    return ExamItem(iid, question, list(choices), answer, "doc", iid.split("/")[0], prov)


class ScriptedVerifier:
    """Scores Yes/No by whether the proposed answer is in ``truth``; letters by the option's truth.

    ``yes_bias`` is added to every "Yes" (the content-free N/A gets it too), ``a_bias`` to
    letter A whatever sits there. Counts the requests it scores.
    """

    name = "scripted"

    def __init__(self, truth: set[str], yes_bias: float = 0.0, a_bias: float = 0.0) -> None:
        self.truth, self.yes_bias, self.a_bias = truth, yes_bias, a_bias
        self.requests = 0

    def _s(self, lp: float) -> ContinuationScore:
        return ContinuationScore(lp, 1, 1)

    def score(self, requests):
        out = []
        for r in requests:
            self.requests += 1
            if r.continuations == ("Yes", "No"):
                cand = r.prompt.rsplit("Proposed answer: ", 1)[1].split("\n")[0]
                ok = cand in self.truth
                yes = -0.5 if ok else -3.0
                out.append([self._s(yes + self.yes_bias), self._s(-3.0 if ok else -0.5)])
            else:
                options = dict(re.findall(r"^([A-D])\) (.*)$", r.prompt, re.M))
                out.append([self._s((0.0 if options[L] in self.truth else -2.0) + (self.a_bias if L == "A" else 0))
                            for L in r.continuations])
        return out

    def generate(self, prompts, params=None):
        return ["" for _ in prompts]


# ------------------------------------------------------------------ checks without an LLM
def test_placeholders_and_embedded_labels():
    assert has_placeholder("{candidate D}") and has_placeholder("{{correct answer}}")
    assert not has_placeholder("'{1,2,3}'::int[]")
    assert has_embedded_label("WALInitSync E) WALInitWrite")
    assert not has_embedded_label("B) the whole choice") or True  # a leading label is the parser's business
    assert not has_embedded_label("pg_ctl (see Section 19.3) restarts")
    checks = static_checks(item(choices=("on", "safe_encoding", "off", "{candidate D}")), PASSAGE)
    assert checks[0][0] == "malformed" and "placeholder" in checks[0][1]


def test_values_must_appear_in_the_passage_in_some_form():
    assert value_found("4 megabytes (4MB)", PASSAGE) is True  # "four megabytes (4MB)"
    assert value_found("4MB", PASSAGE) is True
    assert value_found("3000000", PASSAGE) is False
    assert value_found("To make brute-force attacks harder", PASSAGE) is None  # prose is not a value
    assert value_found("`table_name`", PASSAGE) is None  # a syntax placeholder is not a value
    it = item(question="How many blocks were read?", choices=("1000000", "2000000", "3000000", "4000000"), answer=2)
    assert static_checks(it, PASSAGE) == [("unsupported", "the key '3000000' is a value found in no form in the "
                                                          "source passage")]


def test_near_duplicate_candidates():
    choices = ["ALTER TABLE t DROP COLUMN c;", "ALTER TABLE t DROP COLUMN c CASCADE;",
               "ALTER TABLE t DROP COLUMN c RESTRICT;", "ALTER TABLE t ALTER COLUMN c DROP DEFAULT;"]
    assert near_duplicates(choices, 0) == [(1, "nested"), (2, "nested")]
    # candidates sharing a long common frame but differing in content are not duplicates
    frame = "The number of heap blocks scanned equals {}."
    assert near_duplicates([frame.format(x) for x in ("heap_blks_vacuumed", "heap_blks_total",
                                                      "max_dead_tuples", "index_vacuum_count")], 1) == []
    assert near_duplicates(["Only regular tables", "All regular tables and views", "Only views", "None"], 1) == []


def test_boolean_spellings_are_one_answer_and_negations_are_not_nested():
    """``True`` and ``on`` are two spellings of one value (the second is as right as the key); ``INHERIT``
    and ``NO INHERIT`` differ by a negation only: opposites, not a part and its whole."""
    assert boolean_value("`True`") == "true" and boolean_value("on") == "true" and boolean_value("OFF") == "false"
    assert boolean_value("on demand") is None and boolean_value("5432") is None
    assert near_duplicates(["True", "On", "False", "Auto"], 0) == [(1, "identical")]
    assert near_duplicates(["True", "Off", "False", "Auto"], 0) == []
    table = "ALTER TABLE measurement_y2006m02 {} measurement;"
    choices = [table.format(x) for x in ("ATTACH", "DETACH", "NO INHERIT", "INHERIT")]
    assert near_duplicates(choices, 2) == []
    assert near_duplicates(["FETCH count", "FETCH FORWARD count", "MOVE count", "CLOSE"], 0) == [(1, "nested")]


# ------------------------------------------------------------------ decision rules
@pytest.mark.parametrize("judge,pick,verdict,new_key", [
    ([0.1, 0.9, 0.2, 0.1], [0.05, 0.85, 0.05, 0.05], "keep", None),
    ([0.1, 0.2, 0.1, 0.9], [0.05, 0.1, 0.05, 0.8], "wrong_key", 3),       # clear: re-keyed
    ([0.1, 0.6, 0.1, 0.7], [0.05, 0.3, 0.05, 0.55], "wrong_key", None),   # picked, but the key is judged >= 0.5
    ([0.1, 0.2, 0.3, 0.2], [0.3, 0.2, 0.3, 0.2], "unsupported", None),
    ([0.1, 0.9, 0.1, 0.8], [0.05, 0.6, 0.05, 0.3], "multiple_correct", None),
])
def test_absolute_decision_rules(judge, pick, verdict, new_key):
    v = decide(item(), judge, pick, [], VerifyConfig(rule="absolute"))
    assert v.verdict == verdict and v.new_key == new_key
    assert v.kept == (verdict == "keep" or new_key is not None)
    assert v.reason


@pytest.mark.parametrize("judge,pick,verdict,new_key", [
    ([0.1, 0.9, 0.2, 0.1], [0.05, 0.85, 0.05, 0.05], "keep", None),
    ([0.02, 0.05, 0.02, 0.03], [0.2, 0.4, 0.2, 0.2], "keep", None),          # says No to all: only shares count
    ([0.25, 0.25, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25], "no_verdict", None),  # cannot tell: no verdict
    ([0.1, 0.2, 0.1, 0.9], [0.05, 0.1, 0.05, 0.8], "wrong_key", 3),          # clear: re-keyed
    ([0.2, 0.2, 0.2, 0.4], [0.2, 0.25, 0.2, 0.35], "wrong_key", None),      # preferred, not clear
    ([0.3, 0.02, 0.3, 0.3], [0.3, 0.1, 0.3, 0.3], "unsupported", None),
    ([0.1, 0.9, 0.1, 0.9], [0.05, 0.45, 0.05, 0.45], "multiple_correct", None),
])
def test_relative_decision_rules(judge, pick, verdict, new_key):
    v = decide(item(), judge, pick, [])
    assert v.verdict == verdict and v.new_key == new_key, v.reason
    # a common Yes/No bias does not change a relative verdict
    logit = [math.log(j / (1 - j)) + 3.0 for j in judge]
    biased = [1 / (1 + math.exp(-x)) for x in logit]
    assert decide(item(), biased, pick, []).verdict == verdict


def test_static_findings_win_and_rekey_can_be_switched_off():
    v = decide(item(), [0.9] * 4, [0.25] * 4, [("multiple_correct", "x"), ("malformed", "y")])
    assert v.verdict == "malformed" and v.reason == "y"
    v = decide(item(), [0.1, 0.2, 0.1, 0.9], [0.05, 0.1, 0.05, 0.8], [], VerifyConfig(rekey=False))
    assert v.verdict == "wrong_key" and v.new_key is None and not v.kept


# ------------------------------------------------------------------ prompts: shared prefix, permutations
def test_prompts_share_passage_and_question_and_orders_are_cyclic():
    it = item()
    cfg = VerifyConfig()
    reqs = judge_requests(it, PASSAGE, cfg, lambda t: t) + pick_requests(it, PASSAGE, cfg, lambda t: t)[0]
    assert len(reqs) == 4 + 4
    prefix = reqs[0].prompt[:reqs[0].prompt.index("Is the following")]
    assert PASSAGE in prefix and it.question in prefix
    assert all(r.prompt.startswith(prefix) for r in reqs)
    orders = cyclic_orders(4, 4)
    for position in range(4):  # every candidate sits once at every position
        assert sorted(o[position] for o in orders) == [0, 1, 2, 3]


def test_calibration_cancels_yes_bias_and_permutations_cancel_position_bias():
    it = item()
    llm = ScriptedVerifier({"4MB"}, yes_bias=6.0, a_bias=3.0)  # says Yes to everything, loves letter A
    _, verdicts, _ = verify_items([it], llm)
    assert min(verdicts[0].judge) > 0.5  # uncalibrated: every candidate accepted
    _, verdicts, _ = verify_items([item()], llm, config=VerifyConfig(calibrate=True))
    v = verdicts[0]
    assert v.verdict == "keep", v.reason
    assert v.judge[1] > 0.5 >= max(v.judge[k] for k in (0, 2, 3))  # a wrong answer scores like N/A
    assert max(range(4), key=lambda k: v.pick[k]) == 1
    # one order only: letter A's bias wins the pick
    _, verdicts, _ = verify_items([item()], llm, config=VerifyConfig(permutations=1))
    assert max(range(4), key=lambda k: verdicts[0].pick[k]) == 0


# ------------------------------------------------------------------ the run
def test_verify_items_rekeys_removes_and_counts(tmp_path):
    items = [item("a#0/q0"), item("b#0/q0", "What does auth_delay do?", AUTH, answer=1),  # clearly wrong key
             item("c#0/q0", choices=("on", "off", "safe_encoding", "{candidate D}"), answer=2),
             item("d#0/q0", choices=("1000000", "2000000", "3000000", "4000000"), answer=2)]
    llm = ScriptedVerifier({"4MB", "safe_encoding", AUTH[0]})
    kept, verdicts, summary = verify_items(items, llm, cache_dir=tmp_path / "cache")
    assert [v.verdict for v in verdicts] == ["keep", "wrong_key", "malformed", "unsupported"]
    assert [k.id for k in kept] == ["a#0/q0", "b#0/q0"] and kept[1].answer == 0
    assert kept[1].provenance["verify"]["original_answer"] == 1
    assert summary.verdicts["wrong_key"] == 1 and summary.rekeyed == 1 and summary.removed == 2
    assert llm.requests == 2 * 8  # static findings need no LLM call
    # resumable: a second run scores nothing new
    again = ScriptedVerifier({"4MB", "safe_encoding", AUTH[0]})
    _, verdicts2, summary2 = verify_items([item("a#0/q0"), item("b#0/q0", "What does auth_delay do?", AUTH, answer=1)],
                                          again,
                                          cache_dir=tmp_path / "cache")
    assert again.requests == 0 and summary2.llm_calls_cached == 16
    assert [v.verdict for v in verdicts2] == ["keep", "wrong_key"]


def test_verify_exam_writes_exam_and_report(tmp_path):
    exam = tmp_path / "exam.jsonl"
    write_exam([item("a#0/q0"), item("b#0/q0", "What does auth_delay do?", AUTH, answer=3),
                item("e#0/q0", answer=0, choices=("4MB", "4mb.", "x1", "y2"))], exam)
    out, report = tmp_path / "verified.jsonl", tmp_path / "report.csv"
    summary = verify_exam(exam, ScriptedVerifier({"4MB", AUTH[0]}), out, report, cache_dir=tmp_path / "c", progress=False)
    rows = list(csv.DictReader(open(report, encoding="utf-8")))
    assert [r["item"] for r in rows] == ["a#0/q0", "b#0/q0", "e#0/q0"]
    assert {"item", "verdict", "support_A", "judge_A", "pick_D", "reason", "rekeyed", "new_key"} <= set(rows[0])
    assert rows[1]["verdict"] == "wrong_key" and rows[1]["new_key"] == "A"
    assert rows[2]["verdict"] == "multiple_correct"  # "4MB" and "4mb." are the same answer
    kept = read_exam(out)
    assert [k.id for k in kept] == ["a#0/q0", "b#0/q0"] and summary.kept == 2 and summary.removed == 1


def test_passages_looked_up_by_chunk_id():
    it = item(doc=None)
    with pytest.raises(InputError, match="provenance.document.*--corpus"):
        item_passage(it)
    assert item_passage(it, {"doc#0": "text"}) == "text"
    with pytest.raises(InputError, match="chunk_id 'doc#0' is not a chunk"):
        item_passage(it, {"other#1": "text"})


def test_verify_is_a_filter_step():
    items = [item("a#0/q0"), item("b#0/q0", "What does auth_delay do?", AUTH, answer=2)]
    kept, dropped, rep = run_chain(items, ["format", "verify"],
                                   {"verify": {"llm": ScriptedVerifier({"4MB", AUTH[0]}), "progress": False}})
    assert [k.id for k in kept] == ["a#0/q0"] and dropped[0].provenance["filters"]["verify"] == "wrong_key"
    assert dropped[0].answer == 2  # the filter step never re-keys
    assert {"filter": "verify", "reason": "wrong_key", "n": 1} in rep.rows


# ------------------------------------------------------------------ bad input, one line each
def _cli(argv, capsys):
    """Exit code and the error lines on stderr (the progress bar's lines aside)."""
    code = main(argv)
    err = "\n".join(line for line in capsys.readouterr().err.splitlines() if "error" in line)
    return code, err


def test_cli_errors_are_one_line(tmp_path, capsys):
    nodoc, empty = tmp_path / "nodoc.jsonl", tmp_path / "empty.jsonl"
    write_exam([item(doc=None)], nodoc)
    empty.write_text("")
    for exam, pattern in ((nodoc, "provenance.document"), (empty, "holds no items")):
        code, err = _cli(["verify", str(exam), "--out", str(tmp_path / "o.jsonl"), "--report",
                          str(tmp_path / "r.csv")], capsys)
        assert code == 2 and len(err.splitlines()) == 1 and pattern in err
    with pytest.raises(InputError, match="no items"):
        verify_items([], ScriptedVerifier(set()))


class _ChatOnly(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that lists a model but cannot score (no /completions)."""

    def log_message(self, *args):  # quiet
        pass

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send(200, {"data": [{"id": "chat-only"}]})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._send(404, {"error": "not found:\nonly /chat/completions"})


def test_a_verifier_url_that_cannot_score_is_a_one_line_error(tmp_path, capsys):
    srv = HTTPServer(("127.0.0.1", 0), _ChatOnly)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        exam = tmp_path / "exam.jsonl"
        write_exam([item()], exam)
        code, err = _cli(["verify", str(exam), "--llm", f"http://127.0.0.1:{srv.server_port}/v1",
                          "--cache-dir", str(tmp_path / "c"), "--out", str(tmp_path / "o.jsonl"),
                          "--report", str(tmp_path / "r.csv")], capsys)
    finally:
        srv.shutdown()
    assert code == 2 and len(err.splitlines()) == 1
    assert "cannot score" in err and "chat-only" in err


def test_filter_chain_runs_the_verify_step_through_the_cli(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("IRTEXAM_CACHE", str(tmp_path / "user_cache"))  # the step's default call cache
    srv = HTTPServer(("127.0.0.1", 0), _ChatOnly)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        exam = tmp_path / "exam.jsonl"
        write_exam([item()], exam)
        code, err = _cli(["filter", str(exam), "--chain", "format,verify", "--out", str(tmp_path / "o.jsonl"),
                          "--verify-llm", f"http://127.0.0.1:{srv.server_port}/v1"], capsys)
    finally:
        srv.shutdown()
    assert code == 2 and len(err.splitlines()) == 1 and "cannot score" in err


def test_non_finite_scores_are_refused():
    class NaNVerifier(ScriptedVerifier):
        def score(self, requests):
            return [[ContinuationScore(float("nan"), 1, 1) for _ in r.continuations] for r in requests]

    with pytest.raises(IrtexamError, match="non-finite"):
        verify_items([item()], NaNVerifier(set()))


class FlatVerifier(ScriptedVerifier):
    """Every continuation gets the same log-probability: a judge that cannot tell the options apart."""

    def score(self, requests):
        return [[ContinuationScore(-1.0, 1, 1) for _ in r.continuations] for r in requests]


def test_a_verifier_that_cannot_tell_the_options_apart_gives_no_verdict():
    """Issue 27: equal support for every option is no verdict (kept unverified, counted), never 'keep'
    with a reason; on most of an exam it refuses the verifier and writes nothing."""
    kept, verdicts, summary = verify_items([item()], FlatVerifier(set()), config=VerifyConfig(calibrate=False))
    assert verdicts[0].verdict == "no_verdict" and "same score" in verdicts[0].reason
    assert len(kept) == 1 and summary.verdicts["no_verdict"] == 1
    items = [item(f"doc#0/q{i}") for i in range(5)]
    with pytest.raises(IrtexamError, match="same score on 5 of 5 items"):
        verify_items(items, FlatVerifier(set()), config=VerifyConfig(calibrate=False))
    # a verifier that does tell them apart is unaffected
    _, verdicts, _ = verify_items(items, ScriptedVerifier({"4MB"}))
    assert {v.verdict for v in verdicts} == {"keep"}


# ------------------------------------------------------------------ the real model
@pytest.mark.slow
@pytest.mark.llm
def test_real_smollm2_runs_through_the_verifier(tmp_path):
    pytest.importorskip("torch")
    from irtexam.llm import load_llm
    from irtexam.llm.registry import installed_models

    if "smollm2-135m" not in installed_models():
        pytest.skip("SmolLM2 not installed")
    llm = load_llm("smollm2-135m", dtype="float32", num_threads=1)
    items = [item("a#0/q0"), item("b#0/q0", question="What does auth_delay do?",
                                  choices=("Pauses before reporting authentication failure", "Speeds up logins",
                                           "Drops connections", "Encrypts passwords"), answer=0)]
    kept, verdicts, summary = verify_items(items, llm, cache_dir=tmp_path / "c")
    for v in verdicts:
        assert v.verdict in {"keep", "wrong_key", "multiple_correct", "unsupported"}
        assert all(0.0 < p < 1.0 for p in v.judge) and sum(v.pick) == pytest.approx(1.0, abs=1e-6)
    assert summary.llm_calls_run == 16 and len(kept) + summary.removed == 2
