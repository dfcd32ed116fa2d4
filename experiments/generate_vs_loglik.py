"""Generate vs log-likelihood answering on MMLU with one packaged model, in one `take`.

Two levels of the same model take the same closed-book MMLU exam (the seeded,
topic-balanced sample of experiments/mmlu_grid.py): ``answer: loglik`` (the default,
length-normalised log-likelihood) and ``answer: generate`` (asked for a letter, the
free-text reply graded by irtexam.grading.reply). Prints both accuracies, the agreement
of the picks, the share of each grading route, and questions/s of each mode (from the
per-answer timings). Resumable: re-run the same command. Replies are kept in
<out>/answers.jsonl for hand labelling.

    PYTHONPATH=. .venv/bin/python experiments/generate_vs_loglik.py --model qwen2.5-coder-0.5b --items 40
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    """Run the two levels and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--out", default="runs/generate_vs_loglik")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from mmlu_grid import mmlu_items

    from irtexam.exam.schema import write_exam
    from irtexam.grading.reply import ROUTES
    from irtexam.pipelines import load_spec, take_exam

    out = Path(args.out) / args.model
    out.mkdir(parents=True, exist_ok=True)
    exam, _ = mmlu_items(args.items, 0, seed=0)
    write_exam(exam, out / "exam.jsonl")
    (out / "spec.yaml").write_text(
        "exam: exam.jsonl\nllms:\n"
        f"  - {{name: {args.model}, label: loglik}}\n"
        f"  - {{name: {args.model}, label: generate, answer: generate, max_new_tokens: {args.max_new_tokens}}}\n"
        "retrievers: [closed-book]\nicl: [0]\nbatch_items: 8\n")
    spec = load_spec(out / "spec.yaml")
    result = take_exam(spec, out / "run", progress=True)
    print(result.summary())
    import pandas as pd

    table = pd.read_parquet(out / "run" / "answers.parquet")  # the tables hold the current grading
    ll = {r["item"]: r for r in table[table["llm"] == "loglik"].to_dict("records")}
    gen = {r["item"]: r for r in table[table["llm"] == "generate"].to_dict("records")}
    both = sorted(set(ll) & set(gen))
    n = len(both)
    routes = {r: sum(gen[i]["grading"] == r for i in both) for r in ROUTES}
    graded = [i for i in both if gen[i]["grading"] in ("letter", "text", "embedding")]
    agree = sum(gen[i]["chosen"] == ll[i]["chosen"] for i in graded)
    print(f"model {args.model}, {n} MMLU items, closed-book, ICL 0")
    print(f"accuracy loglik {sum(ll[i]['correct'] for i in both) / n:.3f}, "
          f"generate {sum(gen[i]['correct'] for i in both) / n:.3f} (abstained/unparseable score 0)")
    print(f"generate pick == loglik pick on {agree}/{len(graded)} graded replies "
          f"({agree / max(len(graded), 1):.3f}); {agree}/{n} of all items")
    print("grading routes: " + ", ".join(f"{r} {c} ({c / n:.0%})" for r, c in routes.items()))
    for mode, rows in (("loglik", ll), ("generate", gen)):
        seconds = sum(rows[i]["seconds"] for i in both)
        print(f"{mode}: {n / seconds:.2f} questions/s ({seconds:.0f} s of model time)")


if __name__ == "__main__":
    main()
