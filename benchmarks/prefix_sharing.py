"""Prefix KV sharing in `TransformersLLM.score`: speed and agreement on the real grid's prompts.

The real run (issue 7) answers each exam item with 15 pipelines of one LLM (5 retrievers
x ICL 0/1/2). Its prompts put the retrieved context first, so the three ICL levels of one
retriever share the context as a token prefix, and retrievers that return the same first
passage share that too. `score` visits the prompts in sorted token order and reuses the
cache of the previous prompt up to their common prefix (``prefix_sharing=True``, the
default); this script scores the same requests with sharing on and off and prints

* prompt tokens run vs reused (from ``llm.prefix_stats``),
* wall seconds of each mode and the speed-up,
* the largest |difference| of the continuation log-likelihoods and the share of
  requests where both modes pick the same candidate (the grid spec's rule, per character).

The requests are rebuilt from the committed answers log of the real run
(experiments/real_run/take/answers.jsonl: passage ids and demonstration ids per answer),
so no retriever is needed and the prompts are exactly the grid's.

Run:  OMP_NUM_THREADS=2 .venv/bin/python benchmarks/prefix_sharing.py --llm qwen2.5-coder-0.5b --items 8 [--dtype float32]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def grid_requests(n_items: int, llm_label: str = "smollm2-135m"):
    """The distinct ScoreRequests of the first ``n_items`` exam items for the 15 pipelines of
    one LLM, and the grid's answer rule (retrieval and demonstrations are the same for every LLM)."""
    from irtexam.exam.schema import read_exam
    from irtexam.llm import ScoreRequest
    from irtexam.pipelines.spec import load_spec
    from irtexam.retrieval.base import load_passages

    spec = load_spec(ROOT / "experiments" / "real_run" / "grid.yaml")
    items = {it.id: it for it in read_exam(spec.exam)}
    passages = {p.id: p for p in load_passages(spec.corpus)}
    wanted = list(items)[:n_items]
    records = []
    with open(ROOT / "experiments" / "real_run" / "take" / "answers.jsonl", encoding="utf-8") as handle:
        for line in handle:
            rec = json.loads(line)
            if rec["llm"] == llm_label and rec["item"] in wanted:
                records.append(rec)
    requests = []
    for rec in records:
        item = items[rec["item"]]
        prompt = spec.prompt.render(item, [passages[i] for i in rec["passage_ids"]], [items[i] for i in rec["demo_ids"]])
        requests.append(ScoreRequest(prompt, spec.prompt.continuations(item)))
    return list(dict.fromkeys(requests)), spec.normalisation  # the grid scores identical prompts once


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llm", default="qwen2.5-coder-0.5b")
    ap.add_argument("--items", type=int, default=8, help="exam items (x 15 pipelines)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="bfloat16", help="bfloat16 (the grid's) or float32 (exact comparison)")
    args = ap.parse_args()

    import torch

    from irtexam.grading.multiple_choice import choose
    from irtexam.llm import load_llm

    torch.set_num_threads(args.threads)
    requests, rule = grid_requests(args.items)
    llm = load_llm(args.llm, dtype=args.dtype)
    llm.score(requests[:1])  # warm-up
    results, seconds, stats = {}, {}, {}
    for mode in (True, False):
        llm.prefix_sharing = mode
        before = dict(llm.prefix_stats)
        t0 = time.perf_counter()
        results[mode] = llm.score(requests)
        seconds[mode] = time.perf_counter() - t0
        stats[mode] = {k: llm.prefix_stats[k] - before[k] for k in before}
    llm.prefix_sharing = True

    diffs = [abs(a.logprob - b.logprob) for ra, rb in zip(results[True], results[False]) for a, b in zip(ra, rb)]
    same = sum(choose(a, rule) == choose(b, rule) for a, b in zip(results[True], results[False]))
    run_on = stats[True]["prompt_tokens"] - stats[True]["reused_tokens"]
    print(f"{args.llm} ({llm.dtype_name}, {args.threads} threads): {len(requests)} distinct requests "
          f"({args.items} items x 15 pipelines of the real grid)")
    print(f"  prompt tokens {stats[True]['prompt_tokens']}, run with sharing {run_on} "
          f"({stats[True]['prompt_tokens'] / max(run_on, 1):.2f}x fewer)")
    print(f"  sharing on {seconds[True]:.1f} s, off {seconds[False]:.1f} s: speed-up {seconds[False] / seconds[True]:.2f}x")
    print(f"  max |d logprob| {max(diffs):.2e} nats, same pick ({rule} rule) {same}/{len(requests)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
