#!/usr/bin/env python3
"""The GPU table of docs/guide/devices.md (issue 43): the whole default fit (``irtexam.fit``, method auto, cold
compile cache) at 10^7, 10^8 and 10^9 binary cells 3PL (marginal EM) and at 12,032 items x 2,211 models 2PL and
3PL (auto's joint mode for leaderboards: no EM column), with whole-fit seconds, EM seconds, peak device memory
and recovery (a ratio and b slope against the sample-standardised truth).

    .venv/bin/python benchmarks/gpu_fit.py                       # every size (a GPU: pip install -e '.[gpu]')
    .venv/bin/python benchmarks/gpu_fit.py --min-cells 0 --max-cells 1e6   # checked on a CPU: small sizes only

Each size runs in a fresh process (its own peak memory, a cold compile cache in a temporary folder): the
responses are simulated there (not timed), then ``irtexam.fit(responses, model=...)`` is timed whole. Peak
memory is the device's ``peak_bytes_in_use`` (a GPU; the CPU reports none: the process's peak RSS instead).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

# (model, items, examinees): 10^7, 10^8, 10^9 cells 3PL, then the 12,032 x 2,211 exam; small ones to check on a CPU
SIZES = [("3pl", 20, 2_000), ("3pl", 100, 10_000), ("3pl", 200, 50_000), ("3pl", 500, 200_000),
         ("3pl", 1_000, 1_000_000), ("2pl", 12_032, 2_211), ("3pl", 12_032, 2_211)]

ONE = r"""
import json, resource, sys, time, warnings
import numpy as np
import jax
import irtexam
from irtexam.irt.devices import fit_devices
from irtexam.irt.simulate import simulate

model, n_items, n_examinees = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
responses, truth = simulate(n_items, n_examinees, model=model, seed=0)
started = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    result = irtexam.fit(responses, model=model)
seconds = time.perf_counter() - started
theta = truth["theta"]
m, s = theta.mean(), theta.std()
table = result.items.reindex(list(responses.items))
stats = [d.memory_stats() or {} for d in fit_devices()]
print("RESULT " + json.dumps({
    "backend": jax.default_backend(), "devices": len(fit_devices()), "device": str(jax.devices()[0].device_kind),
    "seconds": seconds, "method": result.method,
    "em_seconds": (result.fit_stats.get("optimizer") or {}).get("em_seconds") if result.method == "em" else None,
    "peak_device_gb": sum(st.get("peak_bytes_in_use", 0) for st in stats) / 1e9 if any(stats) else None,
    "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
    "a_ratio": float(np.exp(np.mean(np.log(table["a"].to_numpy() / (truth["a"] * s))))),
    "b_slope": float(np.polyfit((truth["b"] - m) / s, table["b"].to_numpy(), 1)[0])}))
"""


def result_of_child(code: str, argv: list[str], timeout: float, error_chars: int = 200) -> dict:
    """Run ``python -c code argv...`` in a fresh process with a cold compile cache: its last ``RESULT {json}`` line
    as a dict, or {"error": ...} (timeout, failure: the last stderr line, cut to ``error_chars``)."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "IRTEXAM_JAX_CACHE_DIR": cache}
        try:
            out = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True,
                                 timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"over {timeout:.0f} s"}
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode or not lines:
        return {"error": (out.stderr.strip().splitlines() or ["no output"])[-1][:error_chars]}
    return json.loads(lines[-1][len("RESULT "):])


def run_one(model: str, items: int, examinees: int, timeout: float) -> dict:
    """One size in a fresh process with a cold compile cache: its RESULT line as a dict (or the error)."""
    return result_of_child(ONE, [model, str(items), str(examinees)], timeout)


def row(model: str, items: int, examinees: int, rec: dict) -> str:
    """A Markdown table row for one size."""
    size = f"{model.upper()} {items:,} x {examinees:,} ({items * examinees:,} cells)"
    if "error" in rec:
        return f"| {size} | failed: {rec['error']} | | | | |"
    memory = rec["peak_device_gb"] if rec["peak_device_gb"] is not None else rec["peak_rss_gb"]
    where = "device" if rec["peak_device_gb"] is not None else "RSS"
    em = f"{rec['em_seconds']:.1f}" if rec["em_seconds"] is not None else f"({rec['method']})"
    return (f"| {size} | {rec['seconds']:.1f} | {em} | {memory:.2f} ({where}) | "
            f"{rec['a_ratio']:.3f} | {rec['b_slope']:.3f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-cells", type=float, default=1e9, help="skip sizes above this many cells")
    parser.add_argument("--min-cells", type=float, default=1e7, help="skip sizes below this many cells")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for one size")
    args = parser.parse_args()
    print("| fit | whole fit, s | EM, s | peak memory, GB | a ratio | b slope |")
    print("| --- | --- | --- | --- | --- | --- |", flush=True)
    first = None
    for model, items, examinees in SIZES:
        if not args.min_cells <= items * examinees <= args.max_cells:
            continue
        rec = run_one(model, items, examinees, args.timeout)
        first = first or rec
        print(row(model, items, examinees, rec), flush=True)
    if first and "error" not in first:
        print(f"\n{first['backend']}: {first['devices']} x {first['device']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
