#!/usr/bin/env python3
"""Whole-process `irtexam fit` (default estimator: marginal EM) against the Python `mirt` package, paired.

For each size (examinees x items) one simulated 3PL data set (irtexam.simulate, seed 0) is written as a
long CSV; then, alternating, fresh processes run

* irtexam: ``irtexam fit DATA.csv --model 3pl --out DIR`` (the CLI a user runs: reading the CSV, the
  fit with standard errors, 500 item draws, EAP abilities, writing the folder); its own JAX cache
  folder, so the first run is cold (compiles) and the next ones warm;
* mirt: ``mirt.fit_mirt(Y, model="3PL", compute_standard_errors=False)`` + ``fscores(EAP)`` in the
  peers' virtualenv (benchmarks/requirements-peers.txt), timed from reading the same CSV.

Recovery is scored against the generating parameters on the sample-standardised scale (true abilities
standardised by their sample mean and sd, a* = a s, b* = (b - m) / s): geometric mean of a_hat / a*,
slope of b_hat on b*, mean c_hat - c. Prints medians and the time ratio irtexam / mirt.

    .venv/bin/python benchmarks/marginal_vs_mirt.py --peers-python /tmp/peers-venv/bin/python \\
        --sizes 2000x200,10000x1000 --reps 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]

MIRT = r"""
import sys, time, json
t0 = time.perf_counter()
import numpy as np, pandas as pd
import mirt
long = pd.read_csv(sys.argv[1])
wide = long.pivot(index="examinee", columns="item", values="response")
data = wide.to_numpy().astype(int)
r = mirt.fit_mirt(data, model="3PL", compute_standard_errors=False)
co = r.coef()
scores = mirt.fscores(r, data, method="EAP")
seconds = time.perf_counter() - t0
json.dump({"seconds": seconds, "items": list(map(str, wide.columns)), "a": co["discrimination"].tolist(),
           "b": co["difficulty"].tolist(), "c": co["guessing"].tolist()}, open(sys.argv[2], "w"))
"""


def recovery(items: pd.DataFrame, truth: dict, ids: list[str]) -> dict[str, float]:
    """a ratio, b slope, c bias against the sample-standardised truth."""
    theta = truth["theta"]
    m, s = theta.mean(), theta.std()
    a_true, b_true = truth["a"] * s, (truth["b"] - m) / s
    table = items.reindex(ids)
    return {"a_ratio": float(np.exp(np.mean(np.log(table["a"].to_numpy() / a_true)))),
            "b_slope": float(np.polyfit(b_true, table["b"].to_numpy(), 1)[0]),
            "c_bias": float(np.mean(table["c"].to_numpy() - truth["c"]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2000x200,10000x1000", help="examinees x items, comma-separated")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--peers-python", default=None)
    args = parser.parse_args()
    import irtexam

    irtexam_bin = str(Path(sys.executable).with_name("irtexam"))
    print(f"# marginal_vs_mirt  cpus {os.cpu_count()}  load {open('/proc/loadavg').read().split()[0]}  "
          f"irtexam {irtexam.__version__}")
    print("size          tool      run   seconds  a_ratio  b_slope  c_bias")
    for size in args.sizes.split(","):
        n_examinees, n_items = map(int, size.split("x"))
        responses, truth = irtexam.simulate(n_items, n_examinees, model="3pl", seed=0)
        ids = list(responses.items)
        with tempfile.TemporaryDirectory() as work:
            work = Path(work)
            data = work / "data.csv"
            responses.to_long(include_missing=False)[["item", "examinee", "response"]].to_csv(data, index=False)
            env = dict(os.environ, IRTEXAM_JAX_CACHE_DIR=str(work / "jax"))
            times: dict[str, list[float]] = {"irtexam": [], "mirt": []}
            for rep in range(args.reps):
                out = work / f"fit{rep}"
                started = time.perf_counter()
                subprocess.run([irtexam_bin, "fit", str(data), "--model", "3pl", "--out", str(out)], check=True,
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                seconds = time.perf_counter() - started
                times["irtexam"].append(seconds)
                rec = recovery(pd.read_csv(out / "items.csv", index_col="item", dtype={"item": str}), truth, ids)
                print(f"{size:<13} irtexam   {'cold' if rep == 0 else 'warm'}  {seconds:8.2f}  {rec['a_ratio']:.3f}    "
                      f"{rec['b_slope']:.3f}   {rec['c_bias']:+.3f}", flush=True)
                if args.peers_python:
                    result = work / f"mirt{rep}.json"
                    started = time.perf_counter()
                    subprocess.run([args.peers_python, "-c", MIRT, str(data), str(result)], check=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    wall = time.perf_counter() - started
                    times["mirt"].append(wall)
                    est = json.loads(result.read_text())
                    rec = recovery(pd.DataFrame({k: est[k] for k in ("a", "b", "c")}, index=est["items"]), truth, ids)
                    print(f"{size:<13} mirt      {rep:>4}  {wall:8.2f}  {rec['a_ratio']:.3f}    {rec['b_slope']:.3f}   "
                          f"{rec['c_bias']:+.3f}", flush=True)
            warm = times["irtexam"][1:] or times["irtexam"]
            if times["mirt"]:
                ratio = statistics.median(warm) / statistics.median(times["mirt"])
                print(f"{size:<13} median irtexam warm {statistics.median(warm):.2f} s, mirt "
                      f"{statistics.median(times['mirt']):.2f} s: ratio {ratio:.2f}", flush=True)


if __name__ == "__main__":
    main()
