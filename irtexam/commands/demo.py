"""`irtexam demo`: a small live run of every stage, then the full analysis of a bundled real matrix.

Stages (each writes its artifact under --out, and each is the same command a user
would run by hand; all LLM calls are cached, so a re-run resumes):

  1. corpus stats     on the corpus (default: the bundled PostgreSQL 15 manual subset)
  2. models           the packaged LLMs are prepared once per machine (GGUF -> transformers)
  3. generate         a few multiple-choice questions with a packaged LLM (or a served one)
  4. filter, verify   the paper's a-priori filters, every drop counted; the generator
                      checks each answer key against its source passage (irtexam verify)
  5. take             a small grid of pipelines (LLMs x retrievers x ICL) answers them
  6. fit              a hierarchical 3PL on the live responses, and a plain sentence on
                      which LLM ranks first and whether the live questions separate them
  7. fit              the full IRT fit of the bundled real response matrix (data/real_run/
                      when its grid is complete, else data/responses/)
  8. report           information, Bloom categories, diagnostics: an HTML report
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..options import NONNEG_INT, POSITIVE_INT, SEED, THREADS

EPILOG = """\
Point the same flow at your own corpus and a served model:

  irtexam demo --corpus my_docs/ --generator http://localhost:8000/v1 --generator-model my-model \\
      --llms http://localhost:8000/v1 --retrievers closed-book,bm25,dense-minilm --icl 0,1,2 --chunks 50

--corpus takes a folder of .txt/.md/.rst/.html files or a JSONL file (doc_id, text);
--generator and --llms take packaged model names (smollm2-135m, gemma3-270m,
qwen2.5-coder-0.5b, qwen2.5-coder-1.5b), a .gguf file, a transformers model folder, or
the base URL of an OpenAI-compatible server (vLLM, llama.cpp server); the API key is
read from the variable named by --api-key-env. For the full-size run, use the stage
commands directly (irtexam generate / filter / take / fit / info / report; see docs/guide/index.md).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="run a small live slice of the whole pipeline, then the full IRT analysis",
        description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="bundled", help="corpus folder/JSONL (default: the bundled manual)")
    parser.add_argument("--generator", default="qwen2.5-coder-0.5b", help="LLM that writes the questions")
    parser.add_argument("--generator-model", default=None, help="model id to request when --generator is a URL")
    parser.add_argument("--api-key-env", default=None, help="environment variable holding a server's API key")
    parser.add_argument("--chunks", type=POSITIVE_INT, default=8, help="corpus chunks to write questions from")
    parser.add_argument("--max-new-tokens", type=POSITIVE_INT, default=200,
                        help="longest generated question, in tokens (default 200: the answer line comes by then in "
                             "~80%% of the real run's questions; the explanation after it is not used)")
    parser.add_argument("--doc-chars", type=POSITIVE_INT, default=1200,
                        help="characters of each chunk shown to the generator (default 1200; the prompt's length "
                             "sets the cost of generation on a CPU)")
    parser.add_argument("--llms", default="smollm2-135m,qwen2.5-coder-0.5b", help="comma-separated answering LLMs")
    parser.add_argument("--retrievers", default="closed-book,bm25,oracle", help="comma-separated retrievers")
    parser.add_argument("--icl", default="0,1", help="comma-separated numbers of in-context examples")
    parser.add_argument("--responses", default=None,
                        help="real response matrix for the full analysis (default: the bundled one)")
    parser.add_argument("--out", default="runs/demo", help="output folder (default runs/demo)")
    parser.add_argument("--seed", type=SEED, default=0)
    parser.add_argument("--top-k", type=POSITIVE_INT, default=1, help="passages each retriever passes to the LLM (default 1)")
    parser.add_argument("--no-verify", dest="verify", action="store_false",
                        help="skip the answer-key verification (`irtexam verify` with the generator as judge)")
    parser.add_argument("--verify-permutations", type=NONNEG_INT, default=2,
                        help="cyclic candidate orders in the verifier's pick pass (default 2)")
    parser.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32"],
                        help="number format of local LLMs; auto: bfloat16 where the CPU has native bf16, "
                             "else float32 (faster there)")
    parser.add_argument("--threads", type=THREADS, default=2, help="torch CPU threads")
    parser.set_defaults(func=run)


BUNDLED_MATRICES = ("real_run", "responses")  # preference order under data/


def bundled_responses(data_dir: Path | None = None) -> Path | None:
    """The real response matrix shipped with this checkout, if any.

    Prefers the real run (data/real_run/: the generated PostgreSQL exam taken by the
    60-pipeline grid) once its grid is complete (``counts.missing_pairs == 0`` in its
    provenance.json), else the MMLU grid in data/responses/.
    """
    data_dir = data_dir or Path(__file__).resolve().parents[2] / "data"
    for folder in BUNDLED_MATRICES:
        root = data_dir / folder
        provenance = root / "provenance.json"
        if folder == "real_run":
            try:
                if json.loads(provenance.read_text(encoding="utf-8"))["counts"]["missing_pairs"] != 0:
                    continue
            except (OSError, KeyError, TypeError, json.JSONDecodeError):
                continue
        for name in ("responses.parquet", "responses.csv.gz", "responses.csv"):
            if (root / name).exists():
                return root / name
    return None


def _stage(title: str) -> float:
    print(f"\n=== {title} ===", flush=True)
    return time.perf_counter()


def _call(argv: list[str]) -> None:
    from ..cli import main
    from ..errors import IrtexamError

    print("$ irtexam " + " ".join(argv), flush=True)
    code = main(argv)
    if code != 0:
        raise IrtexamError(f"stage `irtexam {argv[0]}` failed (exit {code}); its message is above")


def write_spec(path: Path, exam: Path, corpus: str, llms: list[str], retrievers: list[str], icl: list[int],
               seed: int, api_key_env: str | None, dtype: str = "bfloat16", top_k: int = 2) -> Path:
    """Write the grid spec (JSON, a subset of YAML) for the live `take` stage."""
    from ..corpus import bundled_corpus_path

    corpus_path = str(bundled_corpus_path()) if corpus == "bundled" else str(Path(corpus).resolve())

    def entry(llm: str) -> str | dict:
        if llm.startswith("http"):
            return {"name": llm, "api_key_env": api_key_env} if api_key_env else llm
        return {"name": llm, "dtype": dtype}

    spec = {"name": "demo", "exam": str(exam.resolve()), "corpus": corpus_path, "llms": [entry(m) for m in llms],
            "retrievers": retrievers, "icl": icl, "top_k": top_k, "seed": seed, "normalisation": "char"}
    path.write_text(json.dumps(spec, indent=2))
    return path


def prepare_models(names: list[str]) -> None:
    """Make every local model ready to load (assemble packaged parts, dequantise GGUF once), one at a time.

    Prints each model's size and whether it was already prepared; the preparation
    itself reports its steps (see :func:`irtexam.llm.registry.gguf_to_transformers_dir`).
    """
    from ..llm.registry import PACKAGED_MODELS, cache_root, resolve_model_dir

    for name in dict.fromkeys(names):
        if name.startswith(("http://", "https://")):
            print(f"{name}: served model, nothing to prepare")
            continue
        t = time.perf_counter()
        described = PACKAGED_MODELS[name].description if name in PACKAGED_MODELS else name
        model_dir, _ = resolve_model_dir(name)
        size = sum(f.stat().st_size for f in Path(model_dir).iterdir() if f.is_file())
        print(f"{name}: {described}; {size / 1e9:.1f} GB in {model_dir} ({time.perf_counter() - t:.0f} s)",
              flush=True)
    print(f"prepared models are kept in {cache_root()}; a re-run loads them in seconds")


def live_verdict(take_dir: Path, fit_dir: Path, facet: str = "llm") -> str:
    """A plain sentence on what the live grid showed: which LLM ranks first and whether the data separate them.

    Reads the live fit's facet abilities (90% intervals) and the share of correct
    answers per level in the take's responses.csv. Two levels are *separated* when
    their 90% intervals do not overlap.
    """
    import pandas as pd

    facets_csv = fit_dir / "facets.csv"
    if not facets_csv.exists():
        return (f"the live fit has no '{facet}' facet (one LLM, or too few responses), so the live slice "
                f"cannot rank LLMs; the bundled real run below does")
    levels = pd.read_csv(facets_csv, dtype={"level": str})
    levels = levels[levels["facet"] == facet].sort_values("theta", ascending=False)
    if len(levels) < 2:
        return f"the live grid has fewer than two LLMs, so it cannot rank them"
    responses = pd.read_csv(take_dir / "responses.csv", dtype={facet: str})
    n_items = responses["item"].nunique()
    accuracy = responses.groupby(facet)["response"].mean().to_dict() if facet in responses else {}

    def describe(row) -> str:
        acc = f"{accuracy[row.level]:.0%} correct, " if row.level in accuracy else ""
        return f"{row.level} ({acc}ability {row.theta:+.2f} [{row.theta_low:+.2f}, {row.theta_high:+.2f}])"

    wide = responses.pivot_table(index="examinee", columns="item", values="response")
    if len(wide) > 1 and bool((wide.nunique(axis=0, dropna=True) <= 1).all()):
        right = int(wide.iloc[0].sum())
        fitted = ", ".join(f"{r.level} {r.theta:+.2f} [{r.theta_low:+.2f}, {r.theta_high:+.2f}]"
                           for r in levels.itertuples())
        return (f"all {len(wide)} live pipelines answered the {n_items} questions the generator wrote the same way "
                f"({right} of {n_items} right), so the live slice cannot rank the LLMs (the fit's levels {fitted} "
                f"say the same); the real run below, 202 questions, separates all four LLMs")
    top, rest = levels.iloc[0], levels.iloc[1:]
    separated = all(top.theta_low > r.theta_high for r in rest.itertuples())
    ranking = " > ".join(describe(r) for r in levels.itertuples())
    if separated:
        return (f"on the {n_items} questions the generator wrote, the live grid ranks {ranking}; the 90% "
                f"intervals do not overlap, so {top.level} is the stronger LLM on this exam")
    return (f"on the {n_items} questions the generator wrote, the live grid ranks {ranking}; the 90% "
            f"intervals overlap, so {n_items} questions are too few to say which LLM is stronger "
            f"(more --chunks would; the real run below, 202 questions, separates all four LLMs)")


def _verifier_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("irtexam.commands.verify") is not None


def run(args: argparse.Namespace) -> int:
    import os

    from ..errors import IrtexamError

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # stage lines show at once when piped (| tee log)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    timings: dict[str, float] = {}
    threads = ["--threads", str(args.threads)]
    llms = [s for s in args.llms.split(",") if s]
    dtype = args.dtype
    if dtype == "auto":
        from ..llm.transformers_backend import resolve_dtype

        dtype = resolve_dtype("auto")
        print(f"LLM number format: {dtype} (this CPU {'has' if dtype == 'bfloat16' else 'lacks'} native bfloat16; "
              f"--dtype overrides)")
    n_stages = 8

    cpu: dict[str, float] = {}
    cpu_start = [time.process_time()]

    def stage(number: int, title: str) -> float:
        cpu_start[0] = time.process_time()
        return _stage(f"{number}/{n_stages} {title}")

    def done(name: str, t: float) -> None:
        timings[name] = time.perf_counter() - t
        cpu[name] = time.process_time() - cpu_start[0]
        print(f"--- {name}: {timings[name]:.0f} s (CPU {cpu[name]:.0f} s)", flush=True)

    t = stage(1, "corpus")
    _call(["corpus", "stats", args.corpus])
    done("corpus", t)

    t = stage(2, "prepare the models (once per machine)")
    prepare_models([args.generator, *llms])
    done("models", t)

    t = stage(3, "generate questions")
    raw_exam = out / "exam.generated.jsonl"
    config = out / "generation.yaml"  # (JSON is YAML): the paper's prompt on the first --doc-chars of each chunk
    # decoding stops before the explanation that follows the answer line (same items, ~half the tokens)
    config.write_text(json.dumps({"max_doc_chars": args.doc_chars, "stop": ["\nExplanation"]}) + "\n",
                      encoding="utf-8")
    generate = ["generate", args.corpus, "--llm", args.generator, "--out", str(raw_exam), "--config", str(config),
                "--max-chunks", str(args.chunks), "--seed", str(args.seed), "--max-new-tokens",
                str(args.max_new_tokens), "--dtype", dtype, *threads]
    if args.generator_model:
        generate += ["--model", args.generator_model]
    if args.api_key_env:
        generate += ["--api-key-env", args.api_key_env]
    _call(generate)
    done("generate", t)

    t = stage(4, "filter and verify")
    filtered = out / "exam.filtered.jsonl"
    _call(["filter", str(raw_exam), "--out", str(filtered), "--report", str(out / "filter_report.csv")])
    exam = out / "exam.jsonl"
    if args.verify and _verifier_available():
        verify = ["verify", str(filtered), "--llm", args.generator, "--out", str(exam), "--report",
                  str(out / "verify_report.csv"), "--permutations", str(args.verify_permutations),
                  "--dtype", dtype, "--corpus", args.corpus, *threads]
        if args.generator_model:
            verify += ["--model", args.generator_model]
        if args.api_key_env:
            verify += ["--api-key-env", args.api_key_env]
        _call(verify)
    else:
        print("answer keys not verified (--no-verify, or no `irtexam verify` in this installation)")
        exam.write_bytes(filtered.read_bytes())
    done("filter", t)
    n_items = sum(1 for line in exam.read_text().splitlines() if line.strip())
    if n_items < 2:
        raise IrtexamError(f"only {n_items} question(s) survived generation, filtering and verification (see "
                           f"{out}/exam.generated.report.json, {out}/filter_report.csv and "
                           f"{out}/verify_report.csv); use more --chunks or a stronger --generator")

    t = stage(5, "pipelines take the exam")
    spec = write_spec(out / "grid.json", exam, args.corpus, llms,
                      [s for s in args.retrievers.split(",") if s], [int(k) for k in args.icl.split(",")],
                      args.seed, args.api_key_env, dtype=dtype, top_k=args.top_k)
    _call(["take", str(spec), "--out", str(out / "take"), *threads])
    done("take", t)

    t = stage(6, "fit the live responses")
    # `--method auto` (the default) fits a live exam of fewer than 50 questions by NUTS: on an exam this small
    # the MAP fit's facet intervals are too narrow (docs/guide/uncertainty.md: 80% coverage of 90% intervals at
    # 5-20 items), and NUTS on a few items takes seconds
    _call(["fit", str(out / "take" / "responses.csv"), "--model", "3pl", "--facets", "auto",
           "--out", str(out / "fit_live")])
    verdict = live_verdict(out / "take", out / "fit_live")
    print(f"\nlive result: {verdict}")
    (out / "live_result.txt").write_text(verdict + "\n", encoding="utf-8")
    done("fit_live", t)

    t = stage(7, "full analysis of the bundled real response matrix")
    real = Path(args.responses) if args.responses else bundled_responses()
    if real is None:
        print("no bundled real response matrix in this checkout (data/real_run/, data/responses/); "
              "reporting on the live run")
        fit_dir, exam_for_report = out / "fit_live", exam
    else:
        fit_dir = out / "fit_real"
        _call(["fit", str(real), "--model", "3pl", "--facets", "auto", "--heldout", "0.1", "--out", str(fit_dir)])
        bundled_exam = real.parent / "exam.jsonl"
        exam_for_report = bundled_exam if bundled_exam.exists() else None
    done("fit_real", t)

    t = stage(8, "report")
    report = out / "report.html"
    _call(["report", str(fit_dir), "--out", str(report)] + (["--exam", str(exam_for_report)] if exam_for_report else []))
    done("report", t)

    total = time.perf_counter() - started
    print("\n=== done in {:.0f} s ({}); CPU time {:.0f} s ===".format(
        total, ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()), sum(cpu.values())))
    print(f"live result: {verdict}")
    print(f"report: {report.resolve()}")
    return 0
