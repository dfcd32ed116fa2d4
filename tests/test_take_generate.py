"""``answer: generate`` levels with the real packaged SmolLM2-135M: the local transformers
backend, and the same model behind a real HTTP server's /v1/chat/completions
(:func:`irtexam.llm.server.serve`), in one take beside a log-likelihood level."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
pytestmark = pytest.mark.llm


def test_generate_local_and_served_beside_loglik(smol, tmp_path):
    from irtexam.exam.schema import read_exam
    from irtexam.grading.reply import ROUTES, grade_reply
    from irtexam.llm.server import serve
    from irtexam.pipelines import load_spec, take_exam
    from irtexam.pipelines.take import generation_params, generation_prompt

    server = serve(smol)
    try:
        spec_path = tmp_path / "grid.yaml"
        spec_path.write_text(
            f"exam: {DATA / 'retrieval_exam.jsonl'}\ncorpus: {DATA / 'retrieval_corpus.jsonl'}\n"
            "llms:\n"
            "  - {name: smollm2-135m, dtype: float32, label: smol-loglik}\n"
            "  - {name: smollm2-135m, dtype: float32, label: smol-gen, answer: generate}\n"
            f"  - {{name: '{server.url}', label: smol-chat, answer: generate, max_concurrency: 2, max_retries: 0}}\n"
            "retrievers: [bm25]\nicl: [0]\ntop_k: 1\ngenerate: {max_new_tokens: 12}\n")
        spec = load_spec(spec_path)
        items = read_exam(spec.exam)[:3]
        out = tmp_path / "run"
        result = take_exam(spec, out, items=items, progress=False)
        served_requests = server.requests_served
    finally:
        server.stop()
    assert result.scored_pairs == 9
    log = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    by = {(r["llm"], r["item"]): r for r in log}
    # the HTTP level went through /chat/completions: one request per item, no scoring requests
    assert served_requests == len(items)
    params = generation_params(spec.generate)
    for it in items:
        ll, gen, chat = by[("smol-loglik", it.id)], by[("smol-gen", it.id)], by[("smol-chat", it.id)]
        assert "logprob_sum" in ll and "reply" not in ll
        assert gen["answer_mode"] == "generate" and gen["grading"] in ROUTES
        # the raw reply is the model's greedy completion of the logged prompt
        prompt = spec.prompt.render(it, [p for p in _bm25_passages(spec, it, ll)], [])
        assert gen["prompt_sha"] == ll["prompt_sha"]
        assert gen["reply"] == smol.generate([generation_prompt(prompt)], params)[0]
        assert chat["reply"] == gen["reply"]  # same model and greedy settings, over HTTP
        graded = grade_reply(gen["reply"], it.choices)
        if graded.route in ("letter", "text", "abstain"):
            assert gen["chosen"] == graded.choice and gen["correct"] == int(graded.choice == it.answer)
    counts = result.grading
    assert set(counts) == {"smol-gen|bm25|icl0", "smol-chat|bm25|icl0"}  # per examinee; loglik levels absent
    assert counts["smol-gen|bm25|icl0"]["n"] == 3 and sum(counts["smol-gen|bm25|icl0"][r] for r in ROUTES) == 3
    assert "smol-gen|bm25|icl0:" in result.summary()
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["models"]["smol-chat"]["answer"] == "generate" and prov["models"]["smol-loglik"]["answer"] == "loglik"


def _bm25_passages(spec, item, record):
    from irtexam.retrieval.base import load_passages

    by_id = {p.id: p for p in load_passages(spec.corpus)}
    return [by_id[i] for i in record["passage_ids"]]
