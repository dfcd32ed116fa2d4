"""`irtexam demo`: a small live run of every stage, then the full analysis of a bundled real matrix.

Stages (each writes its artifact under --out, and each is the same command a user
would run by hand; all LLM calls are cached, so a re-run resumes):

  1. corpus stats     on the corpus (default: the bundled PostgreSQL 15 manual subset)
  2. generate         a few multiple-choice questions with a packaged LLM (or a served one)
  3. filter           the paper's a-priori filters, every drop counted
  4. take             a small grid of pipelines (LLMs x retrievers x ICL) answers them
  5. fit              a hierarchical 3PL on the live responses
  6. fit + report     the full IRT analysis and an HTML report on the bundled real
                      response matrix (data/real_run/ when its grid is complete, else
                      data/responses/)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

EPILOG = """\
Point the same flow at your own corpus and a served model:

  irtexam demo --corpus my_docs/ --generator http://localhost:8000/v1 --generator-model my-model \\
      --llms http://localhost:8000/v1 --retrievers closed-book,bm25,dense-minilm --icl 0,1,2 --chunks 50

--corpus takes a folder of .txt/.md/.rst/.html files or a JSONL file (doc_id, text);
--generator and --llms take packaged model names (smollm2-135m, gemma3-270m,
qwen2.5-coder-0.5b, qwen2.5-coder-1.5b), a .gguf file, a transformers model folder, or
the base URL of an OpenAI-compatible server (vLLM, llama.cpp server); the API key is
read from the variable named by --api-key-env. For the full-size run, use the stage
commands directly (irtexam generate / filter / take / fit / info / report; see README).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="run a small live slice of the whole pipeline, then the full IRT analysis",
        description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="bundled", help="corpus folder/JSONL (default: the bundled manual)")
    parser.add_argument("--generator", default="qwen2.5-coder-0.5b", help="LLM that writes the questions")
    parser.add_argument("--generator-model", default=None, help="model id to request when --generator is a URL")
    parser.add_argument("--api-key-env", default=None, help="environment variable holding a server's API key")
    parser.add_argument("--chunks", type=int, default=8, help="corpus chunks to write questions from")
    parser.add_argument("--llms", default="smollm2-135m,qwen2.5-coder-0.5b", help="comma-separated answering LLMs")
    parser.add_argument("--retrievers", default="closed-book,bm25,oracle", help="comma-separated retrievers")
    parser.add_argument("--icl", default="0,1", help="comma-separated numbers of in-context examples")
    parser.add_argument("--responses", default=None,
                        help="real response matrix for the full analysis (default: the bundled one)")
    parser.add_argument("--out", default="runs/demo", help="output folder (default runs/demo)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
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
               seed: int, api_key_env: str | None) -> Path:
    """Write the grid spec (JSON, a subset of YAML) for the live `take` stage."""
    from ..corpus import bundled_corpus_path

    corpus_path = str(bundled_corpus_path()) if corpus == "bundled" else str(Path(corpus).resolve())
    spec = {"name": "demo", "exam": str(exam.resolve()), "corpus": corpus_path,
            "llms": [({"name": llm, "api_key_env": api_key_env} if llm.startswith("http") and api_key_env else llm)
                     for llm in llms],
            "retrievers": retrievers, "icl": icl, "top_k": 2, "seed": seed, "normalisation": "char"}
    path.write_text(json.dumps(spec, indent=2))
    return path


def run(args: argparse.Namespace) -> int:
    import os

    from ..errors import IrtexamError

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    timings: dict[str, float] = {}
    threads = ["--threads", str(args.threads)]

    t = _stage("1/6 corpus")
    _call(["corpus", "stats", args.corpus])
    timings["corpus"] = time.perf_counter() - t

    t = _stage("2/6 generate questions")
    raw_exam = out / "exam.raw.jsonl"
    generate = ["generate", args.corpus, "--llm", args.generator, "--out", str(raw_exam),
                "--max-chunks", str(args.chunks), "--seed", str(args.seed), "--max-new-tokens", "280", *threads]
    if args.generator_model:
        generate += ["--model", args.generator_model]
    if args.api_key_env:
        generate += ["--api-key-env", args.api_key_env]
    _call(generate)
    timings["generate"] = time.perf_counter() - t

    t = _stage("3/6 filter")
    exam = out / "exam.jsonl"
    _call(["filter", str(raw_exam), "--out", str(exam), "--report", str(out / "filter_report.csv")])
    timings["filter"] = time.perf_counter() - t
    n_items = sum(1 for line in exam.read_text().splitlines() if line.strip())
    if n_items < 2:
        raise IrtexamError(f"only {n_items} question(s) survived generation and filtering (see "
                           f"{out}/exam.raw.jsonl.report.json and {out}/filter_report.csv); use more --chunks "
                           f"or a stronger --generator")

    t = _stage("4/6 pipelines take the exam")
    spec = write_spec(out / "grid.json", exam, args.corpus, [s for s in args.llms.split(",") if s],
                      [s for s in args.retrievers.split(",") if s], [int(k) for k in args.icl.split(",")],
                      args.seed, args.api_key_env)
    _call(["take", str(spec), "--out", str(out / "take"), *threads])
    timings["take"] = time.perf_counter() - t

    t = _stage("5/6 fit the live responses")
    _call(["fit", str(out / "take" / "responses.csv"), "--model", "3pl", "--facets", "auto",
           "--out", str(out / "fit_live")])
    timings["fit_live"] = time.perf_counter() - t

    t = _stage("6/6 full analysis of the bundled real response matrix")
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
    report = out / "report.html"
    _call(["report", str(fit_dir), "--out", str(report)] + (["--exam", str(exam_for_report)] if exam_for_report else []))
    timings["analysis"] = time.perf_counter() - t

    total = time.perf_counter() - started
    print("\n=== done in {:.0f} s ({}) ===".format(total, ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())))
    print(f"report: {report.resolve()}")
    return 0
