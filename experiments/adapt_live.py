"""Issue 14: a live adaptive run of a pipeline that is not in data/real_run's grid.

1. Calibrate the bank: ``irtexam fit data/real_run/responses.csv.gz --model 3pl`` (all 60 pipelines).
2. ``irtexam adapt FIT --exam data/real_run/exam.jsonl --spec experiments/bank/live_grid.yaml
   --pipeline "smollm2-135m|bm25|icl0" --max-items 20``: the real LLM answers the chosen items
   (answers logged in OUT/take/answers.jsonl, LLM calls cached in OUT/take/llm_cache; a re-run resumes).
3. The same pipeline answers the whole exam into the same folder (the adapted items are
   resumed from the log, not scored again) and its actual accuracy and full-exam ability
   (EAP under the same bank, all 202 answers) are compared with the adaptive estimate.

    OMP_NUM_THREADS=2 nice -n 5 .venv/bin/python experiments/adapt_live.py [--skip-full]

Writes data/real_run/bank/live/ (fit/, adapt/, comparison.json).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

import irtexam
from irtexam.bank.adapt import ItemBank, run_cat

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = "smollm2-135m|bm25|icl0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "data/real_run/bank/live"))
    parser.add_argument("--max-items", type=int, default=20)
    parser.add_argument("--skip-full", action="store_true", help="do not let the pipeline take the whole exam")
    args = parser.parse_args()
    out = Path(args.out)
    fitdir = out / "fit"
    started = time.perf_counter()
    if not (fitdir / "items.csv").exists():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            irtexam.fit(str(ROOT / "data/real_run/responses.csv.gz"), model="3pl", draws=200).save(fitdir)
    exam = ROOT / "data/real_run/exam.jsonl"
    spec = ROOT / "experiments/bank/live_grid.yaml"
    res = irtexam.adapt(str(fitdir), exam=str(exam), spec=str(spec), pipeline=PIPELINE, max_items=args.max_items,
                        out=out / "adapt")
    adapt_seconds = time.perf_counter() - started
    s = res.summary
    print(f"adaptive: {s['items_used']} items ({s['stop_reason']}), calls saved {s['calls_saved']} of "
          f"{s['exam_items']}; theta {s['theta']:.3f} [{s['theta_low']:.3f}, {s['theta_high']:.3f}]; predicted "
          f"accuracy {s['accuracy']:.3f} [{s['accuracy_low']:.3f}, {s['accuracy_high']:.3f}]; {adapt_seconds:.0f}s")
    comparison = {"adaptive": s, "adapt_seconds": adapt_seconds}
    if not args.skip_full:
        from irtexam.bank.live import live_answerer

        answerer = live_answerer(exam, spec, PIPELINE, out_dir=out / "adapt" / "take", progress=False)
        from irtexam.pipelines.take import take_exam

        t0 = time.perf_counter()
        take_exam(answerer.spec, out / "adapt" / "take", progress=True)
        full_seconds = time.perf_counter() - t0
        records = [json.loads(line) for line in (out / "adapt" / "take" / "answers.jsonl").read_text().splitlines()]
        answers = {r["item"]: float(r["correct"]) for r in records if r["pipeline"] == PIPELINE}
        bank = ItemBank.load(fitdir)
        full = run_cat(bank, answers.get, se_target=1e-9, max_items=bank.n_items, min_items=0).summary
        actual = float(np.mean([answers[i] for i in bank.ids if i in answers]))
        comparison.update(actual_accuracy=actual, answered=len(answers), full_theta=full["theta"],
                          full_theta_low=full["theta_low"], full_theta_high=full["theta_high"],
                          full_seconds=full_seconds)
        print(f"whole exam: {len(answers)} answers, actual accuracy {actual:.3f} (adaptive predicted "
              f"{s['accuracy']:.3f} [{s['accuracy_low']:.3f}, {s['accuracy_high']:.3f}]); theta from all answers "
              f"{full['theta']:.3f} [{full['theta_low']:.3f}, {full['theta_high']:.3f}] vs adaptive {s['theta']:.3f}; "
              f"{full_seconds:.0f}s for the rest of the exam")
    (out / "comparison.json").write_text(json.dumps(comparison, indent=2, default=str))


if __name__ == "__main__":
    main()
