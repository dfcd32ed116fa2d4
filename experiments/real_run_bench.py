"""Batched generation throughput on the real-run model: batch 1 vs 8 vs 16 on the same prompts.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/real_run_bench.py [--model qwen2.5-coder-1.5b]
        [--prompts 16] [--max-new-tokens 96] [--batch-sizes 1,8,16]

Prompts are the exam-generation prompts (paper template, appendix A.1) of a seeded
sample of chunks of the bundled corpus; decoding is greedy. Prints, per batch size,
wall time, generated tokens, tokens/s, questions/s, the speed-up over the first batch
size and how many outputs are identical to the first batch size's. Results also go to
experiments/real_run/bench_generate.json with every output, to compare by eye.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--batch-sizes", default="1,8,16")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "real_run" / "bench_generate.json")
    args = parser.parse_args()

    import torch

    from irtexam.corpus import ChunkConfig, bundled_corpus_path, chunk_documents, load_corpus
    from irtexam.exam.generate import GenerationConfig, select_chunks
    from irtexam.llm import GenerationParams, load_llm

    torch.set_num_threads(args.threads)
    chunks, _ = chunk_documents(load_corpus(bundled_corpus_path()), ChunkConfig())
    config = GenerationConfig()
    prompts = [config.prompt(c) for c in select_chunks(chunks, args.prompts, seed=1)]
    t0 = time.perf_counter()
    llm = load_llm(args.model)
    print(f"loaded {llm.name} in {time.perf_counter() - t0:.1f}s; {len(prompts)} prompts, "
          f"prompt tokens {sum(len(llm.tokenizer(llm.format_prompt(p))['input_ids']) for p in prompts)}")
    params = GenerationParams(max_new_tokens=args.max_new_tokens, temperature=0.0)
    rows, reference, texts = [], None, {}
    for bs in [int(b) for b in args.batch_sizes.split(",")]:
        llm.batch_size = bs
        t0 = time.perf_counter()
        outs = llm.generate(prompts, params)
        wall = time.perf_counter() - t0
        n_tok = sum(len(llm.tokenizer(o, add_special_tokens=False)["input_ids"]) for o in outs)
        reference = reference or outs
        row = {"batch_size": bs, "wall_s": round(wall, 1), "generated_tokens": n_tok,
               "tokens_per_s": round(n_tok / wall, 2), "questions_per_s": round(len(outs) / wall, 4),
               "speedup": round(rows[0]["wall_s"] / wall, 2) if rows else 1.0,
               "identical_to_first": sum(a == b for a, b in zip(reference, outs))}
        rows.append(row)
        texts[bs] = outs
        print(json.dumps(row), flush=True)
        print("   e.g.:", outs[0][:160].replace("\n", " | "), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"model": args.model, "prompts": len(prompts), "threads": args.threads,
                                    "max_new_tokens": args.max_new_tokens, "results": rows,
                                    "outputs": texts}, indent=2) + "\n")
    print(f"{'batch':>5} {'wall s':>8} {'tokens':>7} {'tok/s':>7} {'q/s':>7} {'speed-up':>8} {'same':>5}")
    for r in rows:
        print(f"{r['batch_size']:>5} {r['wall_s']:>8} {r['generated_tokens']:>7} {r['tokens_per_s']:>7} "
              f"{r['questions_per_s']:>7} {r['speedup']:>8} {r['identical_to_first']:>5}")


if __name__ == "__main__":
    main()
