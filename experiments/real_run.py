"""Issue 7, the real run: a generated exam on the bundled PostgreSQL corpus, then the grid.

Rerunnable and resumable across sessions: every LLM call is cached in
``experiments/real_run/cache/llm_cache.sqlite`` (committed, checkpointed), so a re-run
repeats no finished generation, and every output is rebuilt from that cache.

Stages (``--stage``):

* ``generate``: chunk the bundled corpus (irtexam.corpus defaults), take the first
  ``--n-chunks`` chunks of the run order (below), and generate one question per chunk
  with qwen2.5-coder-1.5b (paper prompt, greedy, ``max_new_tokens=300``) through the
  cache, ``--block`` chunks at a time with ``--batch-size`` prompts per decoding batch.
  After each block the progress and the parse rate so far go to the log (and
  ``experiments/real_run/progress.json``); at the end the ``report`` stage runs.
* ``report``: from the cache alone (no model load, works on a partial run): parse,
  shuffle, the paper filter chain (``irtexam filter`` defaults: format, length,
  self-containment, extra/intra-candidate with thresholds calibrated to 5% removal,
  MiniLM embeddings), bias baselines. Writes ``data/real_run/exam.raw.jsonl`` (every raw
  output and its parse outcome), ``exam.parsed.jsonl``, ``exam.jsonl`` (the filtered
  exam), ``generation_report.json`` and ``generation_report.md`` (the paper's Table 4).
* ``status``: counts only (generated / parsed so far), no filters.
* ``checkpoint``: fold the SQLite write-ahead log into the database file so it can be
  committed (safe while ``generate`` runs).
* ``take``: stage 2, ``irtexam take experiments/real_run/grid.yaml --out
  experiments/real_run/take`` (4 LLMs x 5 retrievers x ICL 0/1/2; resumable). Refuses to
  start before generation is complete unless ``--force``.
* ``publish``: ``irtexam take ... --tables-only`` (rebuild the tables from the answers
  logged so far, no LLM), then copy answers.parquet (zstd), responses.csv.gz,
  accuracy.csv, retrieval_recall.csv, provenance.json and grid.yaml to ``data/real_run/``.
  Works on a partial grid (``counts.missing_pairs`` in provenance.json says how partial).

Run order of the chunks (prefix-stable, so raising ``--n-chunks`` keeps every finished
generation): first the 260-chunk seeded sample ``select_chunks(chunks, 260, seed)`` that
the first, cut-off session of this run had started on (its 46 finished generations are
in the cache), then the rest of the corpus; each part in seeded random order, so any
prefix is a random sample of the corpus.

    nice -n 10 .venv/bin/python experiments/real_run.py --stage generate --n-chunks 320 \\
        > experiments/real_run/generate.log 2>&1 &
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
RUN_DIR = ROOT / "experiments" / "real_run"
CACHE_DIR = RUN_DIR / "cache"
CACHE_DB = CACHE_DIR / "llm_cache.sqlite"
DATA_DIR = ROOT / "data" / "real_run"
GRID_SPEC = RUN_DIR / "grid.yaml"
TAKE_DIR = RUN_DIR / "take"
PROGRESS = RUN_DIR / "progress.json"

MODEL = "qwen2.5-coder-1.5b"
BACKEND = "TransformersLLM"  # the cache key's backend: CachedLLM uses the wrapped class's name
MAX_NEW_TOKENS = 300  # what the first session used; its cached generations keep their keys
FIRST_SAMPLE = 260  # size of the first session's seeded chunk sample


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_chunks() -> list[Any]:
    from irtexam.corpus import ChunkConfig, bundled_corpus_path, chunk_documents, load_corpus

    chunks, _ = chunk_documents(load_corpus(bundled_corpus_path()), ChunkConfig())
    return chunks


def chunk_order(chunks: Sequence[Any], seed: int) -> list[Any]:
    """The first session's seeded sample, then the other chunks, each shuffled with ``seed``."""
    from irtexam.exam.generate import select_chunks

    first = select_chunks(chunks, FIRST_SAMPLE, seed)
    taken = {c.chunk_id for c in first}
    rest = [c for c in chunks if c.chunk_id not in taken]
    rng = random.Random(seed)
    rng.shuffle(first)
    rng.shuffle(rest)
    return first + rest


def generation_config(seed: int) -> Any:
    from irtexam.exam.generate import GenerationConfig

    return GenerationConfig(max_new_tokens=MAX_NEW_TOKENS, seed=seed)


class CacheReplay:
    """An LLM that only answers from the cache (for rebuilding outputs without the model)."""

    def __init__(self, seed: int) -> None:
        from irtexam.exam.generate import generation_params
        from irtexam.llm.cache import CallCache

        self.cache = CallCache(CACHE_DB)
        self.params = generation_params(generation_config(seed), 0)
        self.hits = 0
        self.misses = 0

    name = MODEL

    def key(self, prompt: str) -> str:
        from irtexam.llm.cache import cache_key

        extra = asdict(self.params)
        extra["stop"] = list(self.params.stop)
        return cache_key(BACKEND, MODEL, "generate", prompt, extra)

    def lookup(self, prompt: str) -> str | None:
        return self.cache.get(self.key(prompt))

    def generate(self, prompts: Sequence[str], params: Any = None) -> list[str]:
        if params is not None and params != self.params:
            raise RuntimeError(f"replay has only {self.params}, not {params}")
        out = [self.lookup(p) for p in prompts]
        missing = sum(o is None for o in out)
        if missing:
            raise RuntimeError(f"{missing} prompts are not in the cache; run --stage generate")
        self.hits += len(out)
        return [str(o) for o in out]


def planned_chunks(args: argparse.Namespace) -> list[Any]:
    return chunk_order(load_chunks(), args.seed)[:args.n_chunks]


def read_progress() -> dict[str, Any]:
    if PROGRESS.exists():
        return json.loads(PROGRESS.read_text())
    return {"generated_here": 0, "generation_seconds": 0.0, "sessions": []}


def write_progress(progress: dict[str, Any]) -> None:
    tmp = PROGRESS.with_suffix(".tmp")
    tmp.write_text(json.dumps(progress, indent=2) + "\n")
    tmp.replace(PROGRESS)


# --------------------------------------------------------------------------- stages
def stage_generate(args: argparse.Namespace) -> None:
    from irtexam.exam.generate import generation_params
    from irtexam.exam.parse import try_parse
    from irtexam.llm import CachedLLM, load_llm

    import torch

    torch.set_num_threads(args.threads)
    plan = planned_chunks(args)
    config = generation_config(args.seed)
    params = generation_params(config, 0)
    replay = CacheReplay(args.seed)
    todo = [c for c in plan if replay.lookup(config.prompt(c)) is None]
    log(f"{len(plan)} chunks planned, {len(plan) - len(todo)} already in the cache, {len(todo)} to generate "
        f"(batch {args.batch_size}, block {args.block}, {args.threads} thread(s))")
    if todo:
        t0 = time.perf_counter()
        base = load_llm(MODEL, num_threads=args.threads)
        base.batch_size = args.batch_size
        llm = CachedLLM(base, CACHE_DIR, chunk_size=args.batch_size)
        if llm.backend != BACKEND:
            raise RuntimeError(f"cache keys use backend {BACKEND!r}, the model loaded as {llm.backend!r}")
        log(f"loaded {MODEL} in {time.perf_counter() - t0:.0f}s")
        progress = read_progress()
        session = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "batch_size": args.batch_size,
                   "threads": args.threads, "generated": 0, "seconds": 0.0}
        progress["sessions"].append(session)
        for start in range(0, len(todo), args.block):
            block = todo[start:start + args.block]
            t1 = time.perf_counter()
            llm.generate([config.prompt(c) for c in block], params)
            dt = time.perf_counter() - t1
            session["generated"] += len(block)
            session["seconds"] = round(session["seconds"] + dt, 1)
            progress["generated_here"] += len(block)
            progress["generation_seconds"] = round(progress["generation_seconds"] + dt, 1)
            write_progress(progress)
            done = start + len(block)
            rate = session["seconds"] / session["generated"]
            log(f"block of {len(block)} in {dt:.0f}s ({dt / len(block):.1f} s/question); {done}/{len(todo)} new "
                f"done, {rate:.1f} s/question this session, ETA {rate * (len(todo) - done) / 60:.0f} min")
    outputs = [replay.lookup(config.prompt(c)) for c in plan]
    parsed = sum(o is not None and try_parse(o)[0] is not None for o in outputs)
    log(f"generation complete: {len(plan)} chunks, {parsed} parse")
    stage_report(args)


def stage_status(args: argparse.Namespace) -> None:
    from collections import Counter

    from irtexam.exam.parse import try_parse

    plan = planned_chunks(args)
    config = generation_config(args.seed)
    replay = CacheReplay(args.seed)
    outputs = [o for o in (replay.lookup(config.prompt(c)) for c in plan) if o is not None]
    reasons = Counter(str(try_parse(o)[1] or "ok") for o in outputs)
    progress = read_progress()
    per_q = progress["generation_seconds"] / max(progress["generated_here"], 1)
    print(f"{len(outputs)}/{len(plan)} planned chunks generated; parse outcomes {dict(reasons)}; "
          f"{progress['generated_here']} generated by this script in {progress['generation_seconds'] / 60:.0f} min "
          f"({per_q:.1f} s/question)")


def filter_options() -> dict[str, dict[str, Any]]:
    """``irtexam filter``'s defaults: thresholds calibrated to 5% removal, MiniLM embeddings."""
    return {name: {"target_rate": 0.05, "use_embeddings": True} for name in ("extra_candidate", "intra_candidate")}


def stage_report(args: argparse.Namespace) -> None:
    from irtexam.exam.generate import generate_exam
    from irtexam.exam.schema import write_exam
    from irtexam.filters import bias_baselines, run_chain

    plan = planned_chunks(args)
    config = generation_config(args.seed)
    replay = CacheReplay(args.seed)
    done = [c for c in plan if replay.lookup(config.prompt(c)) is not None]
    if not done:
        raise SystemExit("nothing generated yet; run --stage generate")
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    items, gen = generate_exam(done, replay, replace(config, max_chunks=None), raw_path=DATA_DIR / "exam.raw.jsonl")
    write_exam(items, DATA_DIR / "exam.parsed.jsonl")
    kept, dropped, chain = run_chain(items, "paper", filter_options())
    write_exam(kept, DATA_DIR / "exam.jsonl")
    progress = read_progress()
    report = {
        "model": MODEL, "corpus": "data/corpus/postgresql15-manual.jsonl.gz", "seed": args.seed,
        "chunks_in_corpus": len(load_chunks()), "chunks_planned": len(plan), "chunks_generated": len(done),
        "complete": len(done) == len(plan),
        "generation_config": {k: v for k, v in asdict(config).items() if k != "template"},
        "generation": gen.to_json(),
        "filters": {"chain": chain.chain, "input": chain.n_in, "kept": chain.n_out,
                    "counts": chain.table().to_dict(orient="records"), "params": chain.params},
        "surviving": len(kept),
        "baselines": bias_baselines(kept) if kept else {},
        "avg_question_chars": sum(len(i.question) for i in kept) / max(len(kept), 1),
        "avg_question_words": sum(len(i.question.split()) for i in kept) / max(len(kept), 1),
        "generation_seconds_per_question": (round(progress["generation_seconds"] / progress["generated_here"], 1)
                                            if progress["generated_here"] else None),
        "progress": progress,
    }
    (DATA_DIR / "generation_report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (DATA_DIR / "generation_report.md").write_text(markdown_report(report))
    print(markdown_report(report))


def markdown_report(r: dict[str, Any]) -> str:
    """The paper's Table 4 for this run, as Markdown."""
    gen, filt, base = r["generation"], r["filters"], r["baselines"]
    rows = [("Chunks in corpus / planned / generated",
             f"{r['chunks_in_corpus']} / {r['chunks_planned']} / {r['chunks_generated']}"),
            ("Generated questions", gen["generated"])]
    rows += [(f"Parse failure: {k}", v) for k, v in gen["parse_failures"].items()]
    rows += [("Duplicate questions", gen["duplicate_questions"]), ("Parsed items", gen["surviving"])]
    rows += [(f"Filter {c['filter']}: {c['reason']}", c["n"]) for c in filt["counts"]
             if c["reason"] not in ("(input)", "(kept)")]
    rows += [("**Surviving items**", f"**{r['surviving']}**")]
    if base:
        rows += [("Fixed-answer accuracy A / B / C / D",
                  " / ".join(f"{v:.1%}" for v in base["fixed_answer"].values())),
                 ("Longest-answer accuracy", f"{base['longest_answer']:.1%}")]
    rows += [("Average question length (chars / words)",
              f"{r['avg_question_chars']:.0f} / {r['avg_question_words']:.1f}")]
    if r.get("generation_seconds_per_question"):
        rows += [("Generation wall time per question (s, 1 CPU thread, batched)",
                  r["generation_seconds_per_question"])]
    head = (f"# Generation report: {r['model']} on the bundled PostgreSQL 15 manual (paper Table 4 analogue)\n\n"
            + ("" if r["complete"] else "**Partial run**: generation is still in progress.\n\n")
            + "| | |\n|---|---:|\n")
    return head + "".join(f"| {k} | {v} |\n" for k, v in rows)


def stage_checkpoint(args: argparse.Namespace) -> None:
    for attempt in range(30):
        con = sqlite3.connect(str(CACHE_DB), timeout=60)
        busy, wal_pages, moved = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        n = con.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
        con.close()
        if not busy:
            print(f"checkpointed {CACHE_DB} ({n} calls, {CACHE_DB.stat().st_size} bytes)")
            return
        time.sleep(1)
    raise SystemExit("checkpoint stayed busy for 30 tries; retry")


def stage_take(args: argparse.Namespace) -> None:
    report = DATA_DIR / "generation_report.json"
    complete = report.exists() and json.loads(report.read_text()).get("complete")
    if not complete and not args.force:
        raise SystemExit("generation is not complete (see data/real_run/generation_report.json); "
                         "finish --stage generate first or pass --force")
    from irtexam.cli import main as cli

    sys.exit(cli(["take", str(GRID_SPEC), "--out", str(TAKE_DIR), "--threads", str(args.threads)]))


PUBLISHED = ("answers.parquet", "responses.csv", "accuracy.csv", "retrieval_recall.csv", "provenance.json")


def stage_publish(args: argparse.Namespace) -> None:
    """Rebuild the take tables from answers.jsonl (no LLM) and copy them, compressed, to data/real_run/."""
    import shutil

    import pandas as pd

    from irtexam.cli import main as cli

    code = cli(["take", str(GRID_SPEC), "--out", str(TAKE_DIR), "--tables-only", "--no-progress"])
    if code:
        raise SystemExit(code)
    missing = [name for name in PUBLISHED if not (TAKE_DIR / name).exists()]
    if missing:
        raise SystemExit(f"{TAKE_DIR} lacks {missing}: nothing answered yet?")
    answers = pd.read_parquet(TAKE_DIR / "answers.parquet")
    answers.to_parquet(DATA_DIR / "answers.parquet", index=False, compression="zstd")
    pd.read_csv(TAKE_DIR / "responses.csv", dtype=str, keep_default_na=False).to_csv(
        DATA_DIR / "responses.csv.gz", index=False, compression={"method": "gzip", "mtime": 0})
    for name in ("accuracy.csv", "retrieval_recall.csv", "provenance.json"):
        shutil.copyfile(TAKE_DIR / name, DATA_DIR / name)
    shutil.copyfile(GRID_SPEC, DATA_DIR / "grid.yaml")
    prov = json.loads((DATA_DIR / "provenance.json").read_text())
    sizes = {p.name: p.stat().st_size for p in sorted(DATA_DIR.iterdir()) if p.name.startswith(
        ("answers", "responses", "accuracy", "retrieval", "provenance", "grid"))}
    log(f"published {len(answers)} answers ({prov['counts']['missing_pairs']} pairs missing) to {DATA_DIR}: {sizes}")


STAGES = {"generate": stage_generate, "report": stage_report, "status": stage_status,
          "checkpoint": stage_checkpoint, "take": stage_take, "publish": stage_publish}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", choices=sorted(STAGES), required=True)
    parser.add_argument("--n-chunks", type=int, default=300, help="chunks to generate from (prefix of the run order)")
    parser.add_argument("--batch-size", type=int, default=8, help="prompts decoded together")
    parser.add_argument("--block", type=int, default=32, help="chunks per progress step")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--force", action="store_true", help="take: start on a partial exam")
    args = parser.parse_args()
    STAGES[args.stage](args)


if __name__ == "__main__":
    main()
