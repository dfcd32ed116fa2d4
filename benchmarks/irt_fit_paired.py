#!/usr/bin/env python3
"""Paired old/new timing of ``irtexam.fit`` in fresh processes: a speed-regression check.

    git archive dc803ec irtexam | tar -x -C /tmp/old     # the tree to compare against
    .venv/bin/python benchmarks/irt_fit_paired.py --old-tree /tmp/old --sizes 2000x200,10000x1000 --reps 5
    .venv/bin/python benchmarks/irt_fit_paired.py --old-tree /tmp/old --nuts --reps 3

For each size, ``--reps`` pairs of subprocesses (old, new, old, new, ...) simulate the same 3PL
matrix (``irtexam.simulate(items, examinees, model="3pl", seed=0)``) and time the first
``irtexam.fit`` call in the process, each side with its own JAX compile cache (the first rep fills it:
"cold"; the others are "warm", as a refit or the next command is). ``--nuts`` times the hierarchical
case of benchmarks/irt_fit.py instead (3PL, 400 items, facets 4 x 5 x 3, 4 chains x 500 + 500).
Prints the medians and new/old ratios. Both trees run with this interpreter and its packages.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r'''
import json, sys, time, warnings
if sys.argv[1] != "-":
    sys.path.insert(0, sys.argv[1])
warnings.filterwarnings("ignore")
import irtexam
if sys.argv[2] == "nuts":
    facets = {"llm": 4, "retriever": 5, "icl": 3}
    rm, _ = irtexam.simulate(400, model="3pl", seed=0, facets=facets)
    kwargs = dict(facets=list(facets), method="nuts", chains=4, warmup=500, samples=500)
else:
    n_items, n_examinees = map(int, sys.argv[2].split("x"))
    rm, _ = irtexam.simulate(n_items, n_examinees, model="3pl", seed=0)
    kwargs = {}
started = time.perf_counter()
irtexam.fit(rm, model="3pl", **kwargs)
print(json.dumps({"seconds": time.perf_counter() - started, "module": irtexam.__file__}))
'''


def run_once(tree: str, case: str, cache: str) -> float:
    env = dict(os.environ, IRTEXAM_JAX_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", CHILD, tree, case], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{tree} {case} failed:\n{out.stderr[-2000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-tree", required=True, help="folder holding the old irtexam/ package")
    parser.add_argument("--sizes", default="2000x200,10000x1000")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--nuts", action="store_true", help="time the hierarchical NUTS case instead")
    args = parser.parse_args(argv)
    cases = ["nuts"] if args.nuts else args.sizes.split(",")
    for case in cases:
        times: dict[str, list[float]] = {"old": [], "new": []}
        caches = {side: tempfile.mkdtemp(prefix=f"irtexam-jax-{side}-") for side in times}
        for _ in range(args.reps):
            for side, tree in (("old", args.old_tree), ("new", "-")):
                times[side].append(run_once(tree, case, caches[side]))
        for side, values in times.items():
            warm = statistics.median(values[1:]) if len(values) > 1 else float("nan")
            print(f"{case} {side}: cold {values[0]:.2f} s, warm median {warm:.2f} s, runs "
                  + ", ".join(f"{v:.2f}" for v in values), flush=True)
        if args.reps > 1:
            ratio = statistics.median(times["new"][1:]) / statistics.median(times["old"][1:])
            print(f"{case} new/old warm ratio {ratio:.3f}", flush=True)


if __name__ == "__main__":
    main()
