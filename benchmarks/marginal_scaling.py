#!/usr/bin/env python3
"""Scaling of the whole `irtexam fit` process (method auto: marginal EM without facets) from 10^4 to
10^8 cells: wall time, peak resident memory and memory per cell, as a user runs it.

    .venv/bin/python benchmarks/marginal_scaling.py [--max-cells 1e7] [--model 3pl]

Each size is simulated once (`irtexam simulate ... --out X.parquet`, complete matrix), then fitted in
a fresh process (`irtexam fit X.parquet --model 3pl --out DIR`) whose peak RSS is read from
``resource.getrusage(RUSAGE_CHILDREN)`` of a wrapper process that runs only that fit. Items x
examinees per size are in ``SIZES``. Target (issue 22): at most 16 bytes per cell at 10^8 cells.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZES = [(20, 500), (50, 2000), (100, 10_000), (200, 50_000), (500, 200_000)]  # (items, examinees)
IRTEXAM = str(Path(sys.executable).with_name("irtexam"))

WRAPPER = """
import resource, subprocess, sys, time, json
t = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(json.dumps({"code": code, "seconds": time.perf_counter() - t,
                  "peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def measured(cmd: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-cells", type=float, default=1e7)
    parser.add_argument("--model", default="3pl")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for items, examinees in SIZES:
            cells = items * examinees
            if cells > args.max_cells:
                continue
            data = Path(tmp) / f"sim{cells}.parquet"
            t0 = time.perf_counter()
            subprocess.run([IRTEXAM, "simulate", "--items", str(items), "--examinees", str(examinees), "--model",
                            args.model, "--seed", "0", "--out", str(data)], check=True, capture_output=True)
            sim_seconds = time.perf_counter() - t0
            fit = measured([IRTEXAM, "fit", str(data), "--model", args.model, "--out", str(Path(tmp) / f"fit{cells}")])
            meta = json.loads((Path(tmp) / f"fit{cells}" / "meta.json").read_text()) if fit["code"] == 0 else {}
            rows.append((cells, items, examinees, meta.get("method", "?"), fit["seconds"], fit["peak_mb"],
                         fit["peak_mb"] * 2**20 / cells, sim_seconds, fit["code"]))
            print(f"{cells:>11,} cells ({items} x {examinees}): {fit['seconds']:.1f} s, peak {fit['peak_mb']:.0f} MB",
                  flush=True)
    print(f"\n{'cells':>12} {'items':>6} {'examinees':>10} {'method':>7} {'seconds':>8} {'peak MB':>8} "
          f"{'bytes/cell':>10} {'exit':>5}")
    for cells, items, examinees, method, seconds, peak, per_cell, _, code in rows:
        print(f"{cells:>12,} {items:>6} {examinees:>10,} {method:>7} {seconds:>8.1f} {peak:>8.0f} {per_cell:>10.1f} "
              f"{code:>5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
