#!/usr/bin/env python3
"""Where the time of a default 3PL fit goes on the host (issue 43): whole-fit seconds, peak RSS, and a cProfile
breakdown in the categories of the issue's GPU profile (input checks, design and blocks, EM, ability draws, fit
statistics, XLA compiles).

    .venv/bin/python benchmarks/fit_profile.py                          # 10^7 and 10^8 cells, 3PL
    .venv/bin/python benchmarks/fit_profile.py --sizes 500x200000       # one size, items x examinees
    .venv/bin/python benchmarks/fit_profile.py --parts --sizes 500x200000   # the moved parts alone, old and new

Each size runs twice, each time in a fresh process with a cold compile cache (a temporary
``IRTEXAM_JAX_CACHE_DIR``): once timed whole (``irtexam.fit(responses, model="3pl")``, method auto; the peak
resident memory of the fit, the process's peak reset after the responses are simulated), once under cProfile.
The breakdown's rows are cumulative times of the named functions in the profiled run (slower than the timed one
by the profiler's overhead); the rows marked "inside" are parts of the rows above them (the EM cycles, the
response blocks and most XLA compiles lie inside EM).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def _sibling(name: str):
    """A script beside this one as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


result_of_child = _sibling("gpu_fit").result_of_child  # a child process's RESULT line, with a cold compile cache

SIZES = ["200x50000", "500x200000"]  # 10^7 and 10^8 cells

# category -> (file suffix, function name) pairs whose cumulative times add up to it (none calls another)
CATEGORIES = {
    "input checks": [("irtexam/responses.py", "warnings"), ("irtexam/irt/fit.py", "items_per_examinee"),
                     ("irtexam/irt/fit.py", "resolve_facets"),
                     ("irtexam/irt/marginal/guessing.py", "guessing_centre_by_size")],
    "design and blocks": [("irtexam/irt/design.py", "build_design"), ("irtexam/irt/stats.py", "heldout_split")],
    "EM (em_estimate, with its compiles and information)": [("irtexam/irt/marginal/em.py", "em_estimate")],
    "ability draws and quantiles": [("irtexam/irt/marginal/fit.py", "posterior_quantiles"),
                                    ("irtexam/irt/marginal/fit.py", "sample_abilities"),
                                    ("irtexam/irt/marginal/fit.py", "map_abilities"),
                                    ("irtexam/irt/marginal/abilities.py", "posterior_summary")],
    "item draws": [("irtexam/irt/marginal/fit.py", "_item_draws")],
    "guessing shares": [("irtexam/irt/marginal/guessing.py", "guessing_complete_data_share"),
                        ("irtexam/irt/marginal/guessing.py", "guessing_data_share")],
    "fit statistics": [("irtexam/irt/stats.py", "fit_statistics")],
    "EM cycles (em_map: E- and M-steps, inside EM)": [("irtexam/irt/marginal/em.py", "em_map")],
    "response blocks (inside EM)": [("irtexam/irt/examinee_blocks.py", "response_blocks")],
    "XLA compiles (inside the above)": [("jax/_src/compiler.py", "backend_compile_and_load"),
                                        ("jax/_src/compiler.py", "backend_compile")],
}

ONE = r"""
import cProfile, json, pstats, resource, sys, time, warnings
import numpy as np
import irtexam
from irtexam.irt.simulate import simulate

n_items, n_examinees, profile = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "profile"
categories = json.loads(sys.argv[4])
responses, truth = simulate(n_items, n_examinees, model="3pl", seed=1)
try:  # the peak resident memory from here on: the fit's, not the simulation's
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
except OSError:
    pass
profiler = cProfile.Profile() if profile else None
started = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    if profiler:
        profiler.enable()
    result = irtexam.fit(responses, model="3pl")
    if profiler:
        profiler.disable()
seconds = time.perf_counter() - started
peak = None
with open("/proc/self/status") as f:
    for line in f:
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 2 ** 20
out = {"seconds": seconds, "method": result.method, "peak_rss_gib": peak,
       "em_seconds": (result.fit_stats.get("optimizer") or {}).get("em_seconds"),
       "cycles": (result.fit_stats.get("optimizer") or {}).get("cycles"),
       "nodes": (result.fit_stats.get("optimizer") or {}).get("nodes")}
if profiler:
    stats = pstats.Stats(profiler).stats
    breakdown = {}
    for name, parts in categories.items():
        total = 0.0
        for (path, line, func), (cc, nc, tt, ct, callers) in stats.items():
            if any(path.replace("\\", "/").endswith(suffix) and func == fn for suffix, fn in parts):
                total += ct
        breakdown[name] = total
    out["breakdown"] = breakdown
print("RESULT " + json.dumps(out))
"""


PARTS = r"""
import sys, time
import numpy as np
from irtexam.irt.marginal import fit as mf
from irtexam.irt.marginal.abilities import posterior_summary
from irtexam.irt.marginal.steps import quadrature
from irtexam.responses import _row_range, cell_ranges
from irtexam.irt.fit import default_draws
from irtexam.irt.simulate import simulate

n_items, n_examinees = int(sys.argv[1]), int(sys.argv[2])
n_draws = default_draws("em", n_examinees)
rng = np.random.default_rng(0)
nodes = np.asarray(quadrature(61), dtype=np.float64)
mu, sd = rng.normal(size=n_examinees), rng.uniform(0.1, 0.5, size=n_examinees)  # 3PL posteriors at 200-500 items
w = np.exp(-0.5 * ((nodes[None, :] - mu[:, None]) / sd[:, None]) ** 2)
w /= w.sum(axis=1, keepdims=True)


def seconds(fn):
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


host = seconds(lambda: (mf.eap(w, nodes), mf.posterior_quantiles(w, nodes, (0.05, 0.95)),
                        mf.sample_abilities(w, nodes, n_draws, np.random.default_rng(1))))
cold = seconds(lambda: posterior_summary(w, nodes, (0.05, 0.95), n_draws, seed=1))
warm = seconds(lambda: posterior_summary(w, nodes, (0.05, 0.95), n_draws, seed=1))
print(f"| ability EAP, sd, 90% interval, {n_draws} draws | {host:.2f} | {cold:.2f} | {warm:.2f} |")
values = simulate(n_items, n_examinees, model="3pl", seed=1)[0].values
old = seconds(lambda: (_row_range(values), _row_range(values), _row_range(values.T)))
new = seconds(lambda: cell_ranges(values))
print(f"| input checks: constant and separating items, constant examinees | {old:.2f} | {new:.2f} | {new:.2f} |")
"""


def run_parts(items: int, examinees: int, timeout: float) -> str:
    """The moved parts alone (:data:`PARTS`) in a fresh process with a cold compile cache: its table rows."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "IRTEXAM_JAX_CACHE_DIR": cache}
        out = subprocess.run([sys.executable, "-c", PARTS, str(items), str(examinees)], env=env,
                             capture_output=True, text=True, timeout=timeout)
    return out.stdout.strip() if out.returncode == 0 else f"failed: {out.stderr.strip()[-300:]}"


def run_one(items: int, examinees: int, profile: bool, timeout: float) -> dict:
    """One fit in a fresh process with a cold compile cache: its RESULT line as a dict (or the error)."""
    return result_of_child(ONE, [str(items), str(examinees), "profile" if profile else "timed",
                                 json.dumps(CATEGORIES)], timeout, error_chars=300)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=SIZES, help="items x examinees, e.g. 500x200000")
    parser.add_argument("--no-profile", action="store_true", help="the timed run only")
    parser.add_argument("--parts", action="store_true",
                        help="time the moved parts alone: the host NumPy versions against the new ones (cold, warm)")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds for one run")
    args = parser.parse_args()
    for size in args.sizes:
        items, examinees = (int(x) for x in size.lower().split("x"))
        if args.parts:
            print(f"## {items:,} items x {examinees:,} examinees: seconds of the parts alone")
            print("| part | before (host NumPy) | now, cold compile | now, warm |")
            print("| --- | --- | --- | --- |")
            print(run_parts(items, examinees, args.timeout), flush=True)
            continue
        timed = run_one(items, examinees, False, args.timeout)
        print(f"## 3PL {items:,} items x {examinees:,} examinees ({items * examinees:,} cells)")
        if "error" in timed:
            print(f"timed run failed: {timed['error']}", flush=True)
            continue
        print(f"whole fit {timed['seconds']:.1f} s (method {timed['method']}, EM {timed['em_seconds']:.1f} s, "
              f"{timed['cycles']} cycles, {timed['nodes']} nodes), peak RSS of the fit {timed['peak_rss_gib']:.2f} GiB",
              flush=True)
        if args.no_profile:
            continue
        profiled = run_one(items, examinees, True, args.timeout)
        if "error" in profiled:
            print(f"profiled run failed: {profiled['error']}", flush=True)
            continue
        print(f"\nunder cProfile: {profiled['seconds']:.1f} s\n")
        print("| part | seconds | share |")
        print("| --- | --- | --- |")
        for name, seconds in profiled["breakdown"].items():
            print(f"| {name} | {seconds:.2f} | {100 * seconds / profiled['seconds']:.0f}% |")
        print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
