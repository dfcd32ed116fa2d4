"""Precision of each grading route on real replies labelled by hand (tests/data/real_replies.jsonl).

The 140 replies come from experiments/generate_vs_loglik.py (Qwen2.5-Coder-0.5B-Instruct on
100 MMLU questions, SmolLM2-135M-Instruct on 40; greedy, 48 new tokens). ``label`` is what
the reply chose as a person reads it: a choice index, or "unclear" (a derivation cut off
before choosing; a letter followed by another choice's text). Prints, per route, how many
replies it took and how many of its picks equal the label, and how the "unclear" replies ended.

    PYTHONPATH=. .venv/bin/python experiments/grading_accuracy.py
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from irtexam.grading.embeddings import load_encoder
from irtexam.grading.reply import ROUTES, grade_reply

rows = [json.loads(line) for line in
        (Path(__file__).resolve().parents[1] / "tests" / "data" / "real_replies.jsonl").read_text("utf-8").split("\n")
        if line.strip()]
encoder = load_encoder()
taken: Counter = Counter()
right: Counter = Counter()
unclear_end: Counter = Counter()
for row in rows:
    graded = grade_reply(row["reply"], row["choices"], encoder=encoder, question=row["question"])
    taken[graded.route] += 1
    if graded.choice is not None:
        right[graded.route] += int(graded.choice == row["label"])
    if row["label"] == "unclear":
        unclear_end[graded.route] += 1
labelled = Counter("unclear" if r["label"] == "unclear" else "choice" for r in rows)
print(f"{len(rows)} real replies: {labelled['choice']} chose a choice, {labelled['unclear']} unclear (by hand)")
for route in ROUTES:
    if route in ("letter", "text", "embedding"):
        prec = f", precision {right[route]}/{taken[route]}" if taken[route] else ""
        print(f"  {route:11s} took {taken[route]:3d}{prec}")
    else:
        print(f"  {route:11s} took {taken[route]:3d}")
picked = sum(taken[r] for r in ("letter", "text", "embedding"))
print(f"overall: {sum(right.values())}/{picked} picks right; unclear replies ended as {dict(unclear_end)}; "
      f"recall of chosen replies {sum(right.values())}/{labelled['choice']}")
