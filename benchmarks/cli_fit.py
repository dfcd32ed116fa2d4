#!/usr/bin/env python3
"""Whole-process `irtexam fit` against the equivalent mirt script, as a user runs them.

    .venv/bin/python benchmarks/cli_fit.py --peers-python /tmp/peers-venv/bin/python

Each run is a fresh process, timed from start to exit (imports, reading the long CSV,
the fit, writing the output tables): ``irtexam fit CSV --model 3pl [--facets ...] --out DIR``
against a mirt (PyPI) script that reads the same long CSV with pandas, pivots it to a
persons x items matrix, fits a 3PL (EM, ``compute_standard_errors=False``), scores EAP
abilities and writes items.csv and abilities.csv. The two tools run in pairs, in
alternating order, ``--repeats`` times per case; medians and the ratio irtexam / mirt
are printed. Cases:

* ``real_run``: data/real_run/responses.csv.gz (202 items x 60 pipelines), without facets;
* ``real_run+facets``: the same with ``--facets llm,retriever,icl`` (mirt has no facets: its
  time is that of the plain 3PL on the same data);
* ``sim2000x200``: a simulated 3PL, 2000 items x 200 examinees (irtexam.simulate, seed 0),
  written as a long CSV.

irtexam runs with a warm JAX compilation cache (one unpaired warm-up run fills a cache
folder used by the timed runs: JAX's compiled executables and irtexam's stored L-BFGS
objective, which is loaded without tracing) and, for the ``cold`` column, with an empty cache
folder per run (``IRTEXAM_JAX_CACHE_DIR`` pointing at a new folder). mirt has nothing to cache. The
load average is printed at start and end: on a shared machine the absolute times move with
whatever else runs; the paired ratios move less.

Targets (issue 13): at 2000 x 200 irtexam's whole process <= 0.5x mirt's; real_run with
facets <= 2 s warm and <= 4 s cold.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REAL_RUN = REPO / "data" / "real_run" / "responses.csv.gz"
FACETS = "llm,retriever,icl"

MIRT_SCRIPT = r"""
import sys
import numpy as np
import pandas as pd
import mirt
src, out = sys.argv[1], sys.argv[2]
long = pd.read_csv(src, usecols=["item", "examinee", "response"])
wide = long.pivot(index="examinee", columns="item", values="response")  # persons x items, NaN = missing
data = wide.to_numpy(dtype=float)
fit = mirt.fit_mirt(data, model="3PL", compute_standard_errors=False)
coef = fit.coef()
coef.index = wide.columns
coef.to_csv(f"{out}/items.csv")
scores = mirt.fscores(fit, data, method="EAP")
pd.DataFrame({"theta": np.asarray(scores.theta).reshape(-1)}, index=wide.index).to_csv(f"{out}/abilities.csv")
"""


def loadavg() -> str:
    """The 1/5/15-minute load averages, or '?' where /proc is absent."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def irtexam_command() -> list[str]:
    """The `irtexam` console script of this interpreter's environment (else `python -m irtexam.cli`)."""
    script = Path(sys.executable).parent / "irtexam"
    return [str(script)] if script.exists() else [sys.executable, "-m", "irtexam.cli"]


CPU_SECONDS: list[float] = []  # CPU time (user + system) of each timed run, in call order


def timed(argv: list[str], env: dict[str, str], timeout: float) -> tuple[float, str]:
    """Run ``argv`` to completion; (wall seconds, '' or the tail of its stderr if it failed).

    The run's CPU time (user + system of the child) is appended to ``CPU_SECONDS``: on a
    shared machine it moves less than the wall time.
    """
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SECONDS.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall, "" if proc.returncode == 0 else (proc.stderr or proc.stdout)[-400:]


def simulated_csv(folder: Path, n_items: int, n_examinees: int) -> Path:
    """Write a simulated 3PL response matrix (seed 0) as a long CSV; returns its path."""
    import irtexam

    path = folder / f"sim_{n_items}x{n_examinees}.csv"
    responses, _ = irtexam.simulate(n_items, n_examinees, model="3pl", seed=0)
    responses.save(path)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers-python", default=None, help="python of a virtualenv with mirt (see README)")
    parser.add_argument("--cases", default="real_run,real_run+facets,sim2000x200")
    parser.add_argument("--repeats", type=int, default=5, help="paired runs per case (default 5)")
    parser.add_argument("--cold-repeats", type=int, default=3, help="irtexam runs with an empty cache (default 3)")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--out", default=None, help="CSV of every run (e.g. benchmarks/results/cli_fit.csv)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="cli_fit_"))
    env = dict(os.environ)
    warm_cache = work / "jax-warm"
    env_warm = {**env, "IRTEXAM_JAX_CACHE_DIR": str(warm_cache)}
    cases = {}
    for name in args.cases.split(","):
        if name == "real_run":
            cases[name] = (REAL_RUN, [])
        elif name == "real_run+facets":
            cases[name] = (REAL_RUN, ["--facets", FACETS])
        elif name.startswith("sim"):
            n_items, n_examinees = map(int, name[3:].split("x"))
            cases[name] = (simulated_csv(work, n_items, n_examinees), [])
        else:
            parser.error(f"unknown case {name!r}")
    print(f"cli_fit: {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average at start {loadavg()}; "
          f"repeats {args.repeats} (paired, alternating order), cold {args.cold_repeats}")
    rows: list[dict] = []
    summary = []
    try:
        for name, (csv_path, extra) in cases.items():
            irtexam_argv = [*irtexam_command(), "fit", str(csv_path), "--model", "3pl", *extra, "--out"]
            warmup, error = timed(irtexam_argv + [str(work / "warmup")], env_warm, args.timeout)
            if error:
                print(f"{name}: irtexam failed: {error}")
                continue
            times: dict[str, list[float]] = {"irtexam": [], "irtexam-cold": [], "mirt": []}
            for r in range(args.repeats):
                order = ["irtexam", "mirt"] if r % 2 == 0 else ["mirt", "irtexam"]
                for tool in order:
                    out = work / f"{name}-{tool}-{r}"
                    out.mkdir()
                    if tool == "irtexam":
                        wall, error = timed(irtexam_argv + [str(out)], env_warm, args.timeout)
                    elif args.peers_python:
                        wall, error = timed([args.peers_python, "-c", MIRT_SCRIPT, str(csv_path), str(out)], env,
                                            args.timeout)
                    else:
                        continue
                    rows.append({"case": name, "tool": tool, "run": r, "wall_s": round(wall, 3),
                                 "cpu_s": round(CPU_SECONDS[-1], 3),
                                 "status": "ok" if not error else "failed: " + error.strip().splitlines()[-1]})
                    if error:
                        print(f"{name}: {tool} failed: {error}")
                    else:
                        times[tool].append(wall)
            for r in range(args.cold_repeats):
                cold_env = {**env, "IRTEXAM_JAX_CACHE_DIR": str(work / f"jax-cold-{name}-{r}")}
                wall, error = timed(irtexam_argv + [str(work / f"{name}-cold-{r}")], cold_env, args.timeout)
                rows.append({"case": name, "tool": "irtexam-cold", "run": r, "wall_s": round(wall, 3),
                             "cpu_s": round(CPU_SECONDS[-1], 3), "status": "ok" if not error else "failed"})
                if not error:
                    times["irtexam-cold"].append(wall)
            med = {tool: statistics.median(v) if v else float("nan") for tool, v in times.items()}
            cpu = {tool: statistics.median([row["cpu_s"] for row in rows if row["case"] == name and row["tool"] == tool
                                            and row["status"] == "ok"] or [float("nan")]) for tool in times}
            ratio = med["irtexam"] / med["mirt"] if times["mirt"] else float("nan")
            summary.append((name, med, ratio, times))
            print(f"{name:18s} irtexam warm {med['irtexam']:6.2f} s  cold {med['irtexam-cold']:6.2f} s  "
                  f"mirt {med['mirt']:6.2f} s  ratio irtexam/mirt {ratio:5.2f}  "
                  f"(runs: irtexam {', '.join(f'{t:.2f}' for t in times['irtexam'])}; "
                  f"mirt {', '.join(f'{t:.2f}' for t in times['mirt'])}; "
                  f"cold {', '.join(f'{t:.2f}' for t in times['irtexam-cold'])}; warm-up {warmup:.2f})\n"
                  f"{'':18s} CPU time (user + system): irtexam warm {cpu['irtexam']:.2f} s, cold {cpu['irtexam-cold']:.2f} s, "
                  f"mirt {cpu['mirt']:.2f} s, ratio {cpu['irtexam'] / cpu['mirt'] if cpu['mirt'] else float('nan'):.2f}",
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average at end {loadavg()}")
    results = {name: (med, ratio) for name, med, ratio, _ in summary}

    def check(label: str, ok: bool | None, detail: str) -> None:
        print(f"{'PASS' if ok else 'FAIL' if ok is not None else 'N/A '}  {label}: {detail}")

    if "sim2000x200" in results:
        med, ratio = results["sim2000x200"]
        check("2000x200 irtexam whole process <= 0.5x mirt", ratio <= 0.5 if ratio == ratio else None,
              f"{med['irtexam']:.2f} s vs {med['mirt']:.2f} s, ratio {ratio:.2f}")
    if "real_run+facets" in results:
        med, _ = results["real_run+facets"]
        check("real_run with facets <= 2 s (warm cache)", med["irtexam"] <= 2.0, f"{med['irtexam']:.2f} s")
        check("real_run with facets <= 4 s (empty cache)", med["irtexam-cold"] <= 4.0, f"{med['irtexam-cold']:.2f} s")
    if args.out:
        with open(args.out, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=["case", "tool", "run", "wall_s", "cpu_s", "status"])
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
