#!/usr/bin/env python3
"""Peak memory and time of reading a long parquet response table into a ResponseMatrix (issue 22).

    .venv/bin/python benchmarks/read_memory.py [--max-cells 1e7] [--old-max-cells 1e7] [--format csv] [--out FILE]

Each size is written once by `irtexam simulate --model 3pl --seed 0 --out X.parquet` (or X.csv with
``--format csv``, written by ``ResponseMatrix.save``, so not beyond 10^7 cells) (complete matrix;
its own peak RSS and time are reported too), then read in a fresh process, once by each path:

- new: ``ResponseMatrix.read(path)`` (the streaming reader, irtexam.io_tables);
- old: ``ResponseMatrix.from_long(read_long_table(path))`` (a pandas frame of the whole table).

Reported: the peak RSS (``ru_maxrss``) of that process minus its RSS after ``import irtexam`` and
``from irtexam.responses import ResponseMatrix``, in MB and in bytes per cell (the float32 matrix
alone is 4), and the seconds of the read. Target: at most ~4 + 6 bytes a cell.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZES = [(100, 10_000), (200, 50_000), (500, 200_000)]  # (items, examinees): 10^6, 10^7, 10^8 cells
IRTEXAM = str(Path(sys.executable).with_name("irtexam"))

READER = """
import json, resource, sys, time
import irtexam
from irtexam.responses import ResponseMatrix, read_long_table

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

path, how = sys.argv[1], sys.argv[2]
base = rss()
t = time.perf_counter()
rm = ResponseMatrix.read(path) if how == "new" else ResponseMatrix.from_long(read_long_table(path), source=path)
seconds = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "growth": peak - base, "base": base, "peak": peak,
                  "shape": list(rm.values.shape)}))
"""

WRAPPER = """
import resource, subprocess, sys, time, json
t = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(json.dumps({"code": code, "seconds": time.perf_counter() - t,
                  "peak": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))
"""


def run_json(args: list[str]) -> dict:
    """Run a Python snippet with arguments; its last stdout line as JSON."""
    out = subprocess.run([sys.executable, "-c", *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    """Simulate each size, read it by the old and the new path, print and write a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-cells", type=float, default=1e7)
    parser.add_argument("--old-max-cells", type=float, default=1e7, help="largest size read by the old path too")
    parser.add_argument("--format", default="parquet", choices=["parquet", "csv", "csv.gz"])
    parser.add_argument("--out", default=None, help="also write the table here (the command line at the top)")
    args = parser.parse_args()
    lines = ["$ " + shlex.join([Path(sys.executable).name, *sys.argv]), "",
             f"{'cells':>11} {'path':>9} {'seconds':>8} {'peak-base MB':>13} {'B/cell':>7} {'total peak MB':>14}"]
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for items, examinees in SIZES:
            cells = items * examinees
            if cells > args.max_cells:
                break
            path = Path(folder) / f"r{cells}.{args.format}"
            sim = run_json([WRAPPER, IRTEXAM, "simulate", "--items", str(items), "--examinees", str(examinees),
                            "--model", "3pl", "--seed", "0", "--out", str(path)])
            rows = [f"{cells:>11,} {'simulate':>9} {sim['seconds']:8.1f} {'':>13} {'':>7} {sim['peak'] / 1e6:14.0f}"]
            for how in ("new", "old"):
                if how == "old" and cells > args.old_max_cells:
                    continue
                got = run_json([READER, str(path), how])
                assert got["shape"] == [items, examinees], got
                rows.append(f"{cells:>11,} {how:>9} {got['seconds']:8.1f} {got['growth'] / 1e6:13.0f} "
                            f"{got['growth'] / cells:7.2f} {got['peak'] / 1e6:14.0f}")
            print("\n".join(rows), flush=True)
            lines += rows
            path.unlink()
    lines += ["", "peak-base: ru_maxrss of the reading process minus its RSS after `import irtexam` (B/cell: "
              "per cell; the float32 matrix is 4). simulate: the whole `irtexam simulate` process."]
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
