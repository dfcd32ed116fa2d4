#!/usr/bin/env python3
"""Do two trees of irtexam give the same fits? The guard of a refactoring (issue 25).

    git archive 3cf4c23 irtexam | tar -x -C /tmp/old      # the tree to compare against
    .venv/bin/python benchmarks/fit_tables_equal.py --old-tree /tmp/old
    .venv/bin/python benchmarks/fit_tables_equal.py --old-tree /tmp/old --cases em-3pl,map-facets

Each case fits in a fresh subprocess per tree (the same interpreter and packages) and writes its
items, examinees and facets tables; the script prints, per case and table, the largest absolute
difference between the trees over every numeric column, and exits 1 when any exceeds ``--tol``.
Cases: the real run (data/real_run/responses.csv.gz, 202 items x 60 pipelines) fitted by the
default marginal EM (3PL and 2PL, no facets), by the joint mode with facets llm, retriever, icl
(3PL), by NUTS with facets (2PL, 2 chains x 150 + 150), and a simulated graded (GRM) matrix by
EM and by the joint mode.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
REAL = str(ROOT / "data" / "real_run" / "responses.csv.gz")
FACETS = ["llm", "retriever", "icl"]

CASES = {
    "em-3pl": dict(data="real", model="3pl"),
    "em-2pl": dict(data="real", model="2pl"),
    "map-facets": dict(data="real", model="3pl", facets=FACETS, method="map"),
    "nuts-facets": dict(data="real", model="2pl", facets=FACETS, method="nuts", chains=2, warmup=150,
                        samples=150),
    "em-grm": dict(data="grm", model="grm"),
    "map-grm": dict(data="grm", model="grm", method="map"),
}

CHILD = r'''
import json, sys, warnings
if sys.argv[1] != "-":
    sys.path.insert(0, sys.argv[1])
warnings.filterwarnings("ignore")
import irtexam
kwargs = json.loads(sys.argv[2])
data = kwargs.pop("data")
if data == "grm":
    responses, _ = irtexam.simulate(30, 400, model="grm", seed=3)
else:
    responses = data
fit = irtexam.fit(responses, seed=0, **kwargs)
out = sys.argv[3]
fit.items.to_csv(out + "/items.csv")
fit.examinees.to_csv(out + "/examinees.csv")
if fit.facets is not None and len(fit.facets):
    fit.facets.to_csv(out + "/facets.csv")
print(irtexam.__file__)
'''


def run_case(tree: str, kwargs: dict, folder: str) -> str:
    """Fit one case with the irtexam of ``tree`` ("-": this checkout) and write its tables into ``folder``."""
    import json
    env = dict(os.environ, IRTEXAM_JAX_CACHE_DIR=os.path.join(folder, "..", "jax-" + os.path.basename(folder)))
    payload = dict(kwargs)
    if payload["data"] == "real":
        payload["data"] = REAL
    out = subprocess.run([sys.executable, "-c", CHILD, tree, json.dumps(payload), folder], capture_output=True,
                         text=True, env=env, cwd=str(ROOT))
    if out.returncode != 0:
        raise SystemExit(f"{tree}: {kwargs} failed:\n{out.stderr[-3000:]}")
    return out.stdout.strip().splitlines()[-1]


def max_difference(old: pd.DataFrame, new: pd.DataFrame) -> float:
    """Largest absolute difference over the numeric columns both tables share (inf if rows or columns differ)."""
    if list(old.index) != list(new.index):
        return float("inf")
    columns = [c for c in old.columns if c in new.columns and pd.api.types.is_numeric_dtype(old[c])]
    if set(old.columns) != set(new.columns):
        print(f"    columns differ: only old {sorted(set(old.columns) - set(new.columns))}, "
              f"only new {sorted(set(new.columns) - set(old.columns))}")
    diffs = {c: float(np.nanmax(np.abs(old[c].to_numpy(float) - new[c].to_numpy(float)))) if len(old) else 0.0
             for c in columns}
    worst = max(diffs, key=diffs.get, default=None)
    if worst is not None and diffs[worst] > 0:
        print(f"    largest in column {worst}; point estimates: "
              + ", ".join(f"{c} {d:.3g}" for c, d in diffs.items() if not c.endswith(("_sd", "_low", "_high"))))
    return float(max(diffs.values(), default=0.0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-tree", required=True, help="folder holding the old irtexam/ package")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {', '.join(CASES)}")
    parser.add_argument("--tol", type=float, default=1e-6)
    args = parser.parse_args(argv)
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases.split(","):
            folders = {}
            for side, tree in (("old", args.old_tree), ("new", "-")):
                folders[side] = os.path.join(tmp, f"{name}-{side}")
                os.makedirs(folders[side])
                module = run_case(tree, CASES[name], folders[side])
                if side == "old" and not module.startswith(os.path.abspath(args.old_tree)):
                    raise SystemExit(f"the old tree was not imported ({module})")
            for table in ("items", "examinees", "facets"):
                paths = [os.path.join(folders[s], f"{table}.csv") for s in ("old", "new")]
                if not any(os.path.exists(p) for p in paths):
                    continue
                if not all(os.path.exists(p) for p in paths):
                    print(f"{name} {table}: written by one tree only")
                    worst = float("inf")
                    continue
                diff = max_difference(*(pd.read_csv(p, index_col=0) for p in paths))
                worst = max(worst, diff)
                print(f"{name} {table}: max |new - old| = {diff:.3g}", flush=True)
    print(f"largest difference {worst:.3g} (tolerance {args.tol:g})")
    return 0 if worst <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
