"""The on-disk call cache: keys, hits, and resuming after a killed run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from irtexam.llm import CachedLLM, ContinuationScore, GenerationParams, ScoreRequest
from irtexam.llm.cache import cache_key


class CountingLLM:
    """Fake backend for unit tests only: echoes prompts and counts calls."""

    name = "fake"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def generate(self, prompts, params=GenerationParams()):
        self.prompts.extend(prompts)
        return [f"{p}|{params.temperature}" for p in prompts]

    def score(self, requests):
        self.prompts.extend(r.prompt for r in requests)
        return [[ContinuationScore(-float(len(c)), len(c), len(c), (-1.0,) * len(c)) for c in r.continuations]
                for r in requests]


def test_key_depends_on_every_part():
    base = cache_key("B", "m", "generate", "p", {"t": 0})
    assert len(base) == 64
    assert len({base, cache_key("C", "m", "generate", "p", {"t": 0}), cache_key("B", "n", "generate", "p", {"t": 0}),
                cache_key("B", "m", "score", "p", {"t": 0}), cache_key("B", "m", "generate", "q", {"t": 0}),
                cache_key("B", "m", "generate", "p", {"t": 1})}) == 6


def test_hits_and_params_in_key(tmp_path):
    inner = CountingLLM()
    llm = CachedLLM(inner, tmp_path)
    assert llm.generate(["a", "b"]) == ["a|0.0", "b|0.0"]
    assert llm.generate(["b", "a", "c"]) == ["b|0.0", "a|0.0", "c|0.0"]
    assert inner.prompts == ["a", "b", "c"]
    assert (llm.hits, llm.misses) == (2, 3)
    llm.generate(["a"], GenerationParams(temperature=0.7))
    assert inner.prompts[-1] == "a"
    s1 = llm.score([ScoreRequest("q", ("xx", "yyy"))])
    s2 = CachedLLM(inner, tmp_path).score([ScoreRequest("q", ("xx", "yyy"))])
    assert s1 == s2 and s1[0][1].logprob == -3.0 and s2[0][1].token_logprobs == (-1.0,) * 3
    assert inner.prompts.count("q") == 1


SCRIPT = textwrap.dedent('''
    import os, sys, json
    from irtexam.llm import CachedLLM, GenerationParams
    log = open(sys.argv[2], "a")
    class Dying:
        name = "dying"
        n = 0
        def generate(self, prompts, params=GenerationParams()):
            out = []
            for p in prompts:
                Dying.n += 1
                if Dying.n > int(sys.argv[3]):
                    os._exit(9)  # simulate kill -9 in the middle of the run
                log.write(p + "\\n"); log.flush()
                out.append(p.upper())
            return out
        def score(self, requests):
            raise NotImplementedError
    llm = CachedLLM(Dying(), sys.argv[1])
    res = llm.generate([f"prompt {i}" for i in range(10)])
    print(json.dumps(res))
''')


def test_killed_run_resumes_without_repeating(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    calls = tmp_path / "calls.log"
    env = dict(os.environ)
    first = subprocess.run([sys.executable, str(script), str(tmp_path / "c"), str(calls), "4"], env=env,
                           capture_output=True, text=True)
    assert first.returncode == 9
    assert calls.read_text().splitlines() == [f"prompt {i}" for i in range(4)]
    second = subprocess.run([sys.executable, str(script), str(tmp_path / "c"), str(calls), "100"], env=env,
                            capture_output=True, text=True, check=True)
    done = calls.read_text().splitlines()
    assert done == [f"prompt {i}" for i in range(10)]  # 0-3 not repeated
    assert json.loads(second.stdout) == [f"PROMPT {i}" for i in range(10)]
    assert Path(tmp_path / "c" / "llm_cache.sqlite").exists()
