"""Generation with a scripted fake LLM (unit test): parsing, shuffling, seeds, report, resume, config."""

from __future__ import annotations

import json

import pytest

from irtexam.cli import main
from irtexam.corpus import Chunk
from irtexam.errors import InputError
from irtexam.exam.generate import (PAPER_TEMPLATE, GenerationConfig, generate_exam, item_rng,
                                   load_generation_config, shuffle_choices)
from irtexam.exam.schema import read_exam
from irtexam.llm import CachedLLM, GenerationParams

GOOD = ("Question: Which setting limits connections in chunk {n}?\nA) max_connections\nB) work_mem\n"
        "C) shared_buffers\nD) port\nCorrect Answer: A\nExplanation: see docs.")


class ScriptedLLM:
    """Fake backend for unit tests: answers by chunk number, counts calls."""

    name = "scripted"

    def __init__(self):
        self.calls = 0

    def generate(self, prompts, params=GenerationParams()):
        out = []
        for p in prompts:
            self.calls += 1
            n = int(p.split("CHUNK-")[1].split(" ")[0])
            if n % 5 == 4:
                out.append("Sorry, I cannot help with that.")
            elif n % 5 == 3:
                out.append(GOOD.format(n=0))  # duplicate of chunk 0's question
            else:
                text = GOOD.format(n=n)
                out.append(text if params.temperature == 0 else text.replace("?", " when sampling?", 1))
        return out

    def score(self, requests):
        raise NotImplementedError


def chunks(n=10):
    return [Chunk(f"d{i}#0", f"d{i}", 0, f"CHUNK-{i} text about max_connections.") for i in range(n)]


def test_generate_report_and_items(tmp_path):
    llm = ScriptedLLM()
    items, rep = generate_exam(chunks(), llm, GenerationConfig(seed=3), raw_path=tmp_path / "raw.jsonl")
    assert rep.generated == 10 and rep.parsed == 8 and rep.parse_failures == {"no_choices": 2}
    assert rep.duplicate_questions == 2 and rep.surviving == 6 == len(items)
    for it in items:
        assert it.choices[it.answer] == "max_connections"
        assert it.provenance["generator"] == "scripted" and it.provenance["seed"] == 3
        assert it.provenance["prompt_sha"] == GenerationConfig().prompt_sha
        assert "CHUNK-" in it.provenance["document"] and it.chunk_id.startswith(it.doc_id)
    assert len({it.answer for it in items}) > 1  # shuffled
    raw = [json.loads(x) for x in (tmp_path / "raw.jsonl").read_text().splitlines()]
    assert len(raw) == 10 and sum(not r["ok"] for r in raw) == 4
    assert {r["reason"] for r in raw if not r["ok"]} == {"no_choices", "duplicate_question"}
    assert set(rep.baselines["fixed_answer"]) == {"A", "B", "C", "D"}


def test_seeded_shuffle_is_per_item_and_reproducible():
    a = generate_exam(chunks(), ScriptedLLM(), GenerationConfig(seed=1))[0]
    b = generate_exam(chunks(6), ScriptedLLM(), GenerationConfig(seed=1))[0]
    shared = {i.id: i.answer for i in b}
    assert all(shared[i.id] == i.answer for i in a if i.id in shared)
    c = generate_exam(chunks(), ScriptedLLM(), GenerationConfig(seed=2))[0]
    assert [i.answer for i in a] != [i.answer for i in c]
    choices, ans = shuffle_choices(["w", "x", "y", "z"], 2, item_rng(0, "c", 0))
    assert choices[ans] == "y" and sorted(choices) == ["w", "x", "y", "z"]


def test_questions_per_chunk_and_max_chunks():
    llm = ScriptedLLM()
    items, rep = generate_exam(chunks(), llm, GenerationConfig(questions_per_chunk=2, max_chunks=4, seed=0))
    assert rep.chunks_used == 4 and rep.generated == 8 and llm.calls == 8
    assert any(i.id.endswith("/q1") for i in items)


def test_resume_through_cache(tmp_path):
    inner = ScriptedLLM()
    generate_exam(chunks(4), CachedLLM(inner, tmp_path), GenerationConfig())
    assert inner.calls == 4
    again = CachedLLM(inner, tmp_path)
    items, rep = generate_exam(chunks(6), again, GenerationConfig())
    assert inner.calls == 6 and rep.llm_calls_cached == 4 and rep.llm_calls_run == 2


def test_config_files(tmp_path):
    y = tmp_path / "g.yaml"
    y.write_text("task_domain: DevOps\nquestions_per_chunk: 2\ntemplate: 'Doc ({task_domain}): {documentation}'\n")
    cfg = load_generation_config(y, seed=9)
    assert cfg.task_domain == "DevOps" and cfg.questions_per_chunk == 2 and cfg.seed == 9
    assert cfg.prompt(chunks(1)[0]).startswith("Doc (DevOps): CHUNK-0")
    t = tmp_path / "g.toml"
    t.write_text('[generation]\ntemplate = "paper-raw"\n')
    assert load_generation_config(t).template.startswith("Human: Here is some documentation")
    t.write_text('[generation]\ntemplat = "x"\n')
    with pytest.raises(InputError, match="unknown keys"):
        load_generation_config(t)
    with pytest.raises(InputError, match="documentation"):
        GenerationConfig(template="no field")
    assert "{documentation}" in PAPER_TEMPLATE and "Correct Answer: {correct answer}" in GenerationConfig().prompt(
        chunks(1)[0])


def test_filter_cli_cheap_chain(tmp_path, capsys):
    items, _ = generate_exam(chunks(), ScriptedLLM(), GenerationConfig())
    from irtexam.exam.schema import write_exam

    items[0].question = "According to the documentation, which setting limits connections?"
    write_exam(items, tmp_path / "exam.jsonl")
    rc = main(["filter", str(tmp_path / "exam.jsonl"), "--out", str(tmp_path / "kept.jsonl"), "--chain", "cheap",
               "--report", str(tmp_path / "r.csv"), "--dropped", str(tmp_path / "dropped.jsonl")])
    assert rc == 0
    kept = read_exam(tmp_path / "kept.jsonl")
    assert len(kept) == len(items) - 1
    assert read_exam(tmp_path / "dropped.jsonl")[0].provenance["filters"]["self_containment"] == "self_containment_3"
    csv = (tmp_path / "r.csv").read_text()
    assert "self_containment,self_containment_3,1" in csv
    assert "longest answer" in capsys.readouterr().out


def test_stop_strings_reach_the_llm_and_keep_the_item(tmp_path):
    """A config `stop` list is passed to every generation call; items parse the same without the explanation."""
    y = tmp_path / "g.yaml"
    y.write_text('{"stop": ["\\nExplanation"]}\n')  # the demo writes JSON (valid YAML)
    cfg = load_generation_config(y)
    assert cfg.stop == ("\nExplanation",)
    seen = []

    class StoppingLLM(ScriptedLLM):
        def generate(self, prompts, params=GenerationParams()):
            seen.append(params.stop)
            return [text.split(params.stop[0])[0] if params.stop else text
                    for text in super().generate(prompts, params)]

    cut, _ = generate_exam(chunks(4), StoppingLLM(), cfg)
    full, _ = generate_exam(chunks(4), ScriptedLLM(), GenerationConfig())
    assert seen and all(s == ("\nExplanation",) for s in seen)
    assert [(i.question, i.choices, i.answer) for i in cut] == [(i.question, i.choices, i.answer) for i in full]
    assert GenerationConfig(stop="END").stop == ("END",)
