"""``irtexam generate``: write a multiple-choice exam from a corpus with an LLM."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .corpus import add_chunk_options, resolve_corpus
from ..options import POSITIVE_INT, SEED, THREADS


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``irtexam generate``."""
    p = subparsers.add_parser(
        "generate", help="generate an exam (MCQ JSONL) from a corpus with an LLM",
        description="Chunk CORPUS (.jsonl/.jsonl.gz, a folder, or 'bundled'), prompt the LLM with the paper's "
                    "prompt (appendix A.1) per chunk, parse and shuffle. Every LLM call is cached on disk, so a "
                    "re-run after an interruption resumes. Writes OUT, OUT's .report.json and .raw.jsonl.")
    p.add_argument("corpus")
    p.add_argument("--llm", required=True, help="packaged model name (smollm2-135m, ...), .gguf, model dir, "
                                                "or http(s)://host:port/v1 of an OpenAI-compatible server")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--per-chunk", "--questions-per-chunk", dest="per_chunk", type=POSITIVE_INT, default=None,
                   help="questions per chunk (default 1)")
    p.add_argument("--max-chunks", "--n-chunks", dest="max_chunks", type=POSITIVE_INT, default=None,
                   help="seeded random sample of N chunks (default: all)")
    p.add_argument("--seed", type=SEED, default=None)
    p.add_argument("--config", type=Path, default=None, help="YAML/TOML with template, task_domain, ...")
    p.add_argument("--task-domain", default=None)
    p.add_argument("--max-new-tokens", type=POSITIVE_INT, default=None)
    p.add_argument("--report", type=Path, default=None, help="report path (default OUT.report.json)")
    p.add_argument("--cache-dir", type=Path, default=None, help="LLM call cache (default $IRTEXAM_CACHE/calls)")
    p.add_argument("--model", default=None, help="model id to request from a server URL")
    p.add_argument("--api-key-env", default=None, help="environment variable holding the server's API key")
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32"],
                   help="number format of a local LLM; auto (default): bfloat16 where the CPU has native bf16 "
                        "units, else float32 (faster there)")
    p.add_argument("--threads", type=THREADS, default=None, help="torch CPU threads")
    add_chunk_options(p)
    p.set_defaults(func=run)


def _sidecar(out: Path, suffix: str) -> Path:
    return out.with_name(out.name.removesuffix(".jsonl") + suffix)


def run(args: argparse.Namespace) -> int:
    """Generate the exam and print the report."""
    from ..corpus import ChunkConfig, chunk_documents, load_corpus
    from ..errors import IrtexamError
    from ..exam.generate import GenerationConfig, generate_exam, load_generation_config
    from ..exam.schema import write_exam
    from ..llm import CachedLLM, load_llm
    from ..llm.registry import cache_root

    from ..paths import check_output_file

    check_output_file(args.out, "--out", inputs=[args.corpus, args.config], formats=["jsonl"])
    if args.report:
        check_output_file(args.report, "--report", inputs=[args.corpus, args.config, args.out], formats=["json"])
    overrides = {"questions_per_chunk": args.per_chunk, "max_chunks": args.max_chunks, "seed": args.seed,
                 "task_domain": args.task_domain, "max_new_tokens": args.max_new_tokens}
    if args.config:
        config = load_generation_config(args.config, **overrides)
    else:
        config = GenerationConfig(**{k: v for k, v in overrides.items() if v is not None})
    docs = load_corpus(resolve_corpus(args.corpus))
    chunks, chunk_report = chunk_documents(docs, ChunkConfig(args.max_sentences, args.min_chars, args.max_chars))
    if not chunks:
        raise IrtexamError(f"the corpus gave no chunks ({chunk_report.documents} documents, "
                           f"{chunk_report.empty_documents} empty)")
    base = load_llm(args.llm, dtype=args.dtype, model=args.model, api_key_env=args.api_key_env,
                    num_threads=args.threads)
    if hasattr(base, "progress"):
        base.progress = True  # per-token bar while a batch decodes
    llm = CachedLLM(base, args.cache_dir or cache_root() / "calls", progress=True)
    items, report = generate_exam(chunks, llm, config, raw_path=_sidecar(args.out, ".raw.jsonl"))
    if items:
        write_exam(items, args.out)
    report_path = args.report or _sidecar(args.out, ".report.json")
    payload = {**report.to_json(), "corpus": str(args.corpus), "chunks_in_corpus": len(chunks),
               "config": {k: v for k, v in vars(config).items() if k != "template"}}
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"generated {report.generated} from {report.chunks_used} chunks with {report.model}: "
          f"{report.parsed} parsed, {report.duplicate_questions} duplicate questions, {report.surviving} items")
    print("parse failures: " + (", ".join(f"{k}={v}" for k, v in report.parse_failures.items()) or "none"))
    print(f"LLM calls: {report.llm_calls_run} run, {report.llm_calls_cached} from cache")
    if items:
        print(f"wrote {args.out}; report {report_path}")
        return 0
    print(f"no item survived parsing; see {_sidecar(args.out, '.raw.jsonl')} for the raw outputs")
    return 1
