#!/usr/bin/env python3
"""Leaderboard-shaped fits (thousands of items per model): irtexam's default against the peers, paired, whole process.

    .venv/bin/python benchmarks/leaderboard.py --peers-python /tmp/peers-venv/bin/python \\
        --sizes 2000x200,2000x1000 --models 2pl,3pl --tools irtexam,mirt,girth,py-irt

For each size (items x models) and model one matrix is simulated (``irtexam.simulate``, seed 0) and written
twice: a long parquet table (item, examinee, response) for ``irtexam fit`` and a 0/1 .npy for the peers.
Every (tool, size, model) then runs in its own fresh process:

* irtexam: the command a user runs, ``irtexam fit DATA.parquet --model M --out DIR`` (reading the table, the
  default method "auto", intervals, draws, writing the folder), with its own empty JAX cache folder the first
  time (``cold``) and the same folder again (``warm``);
* mirt (``fit_mirt`` + EAP), girth (``twopl_mml`` / ``threepl_mml`` + EAP) and py-irt (Pyro SVI), in the
  peers' virtualenv (benchmarks/requirements-peers.txt), timed around the fit and the scoring only;
* cbmm, the code of the 2026 cBMM paper (Qu, Heng, Zeng & Liu, arXiv:2605.07046: a 2PL fitted by
  majorization-minimization, X = u v^T + 1 w^T with v >= 0), 2PL only, from a checkout of
  https://github.com/JackQuu/cBMM given as ``--cbmm-path`` (its ``quickstart/cBMM.py``, called with the
  paper's settings r = 1, sigma = 1, tol = 1e-4, max_iter = 1000 and its own thread rule), in the peers'
  Python or, without one, this one; timed around the call. Its abilities u have no fixed scale, so they are
  standardised (theta = (u - mean u) / sd u) and the items re-expressed on that scale (a = v sd u,
  b = -(w + v mean u) / a), the scale the other rows report.

    git clone https://github.com/JackQuu/cBMM /tmp/cBMM
    .venv/bin/python benchmarks/leaderboard.py --sizes 12032x2211 --models 2pl --tools irtexam,cbmm \\
        --cbmm-path /tmp/cBMM

Printed per row: wall seconds, peak resident memory (the process's VmHWM) and bytes per cell, recovery on the
sample-standardised scale (true abilities standardised by their sample mean and sd, a* = a s, b* = (b - m) / s):
geometric mean of a_hat / a*, slope of b_hat on b*, slope of theta_hat on theta*; and each peer's time over
irtexam's (warm). Results are appended to ``--out`` (CSV).
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _script(name: str, path: Path):
    """A sibling script as a module (benchmarks/ and experiments/ are not packages)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


irt_fit = _script("irt_fit_bench", REPO / "benchmarks" / "irt_fit.py")   # peers' workers, run_child, parse_sizes
# the truth on the sample-standardised scale, as the recovery experiment computes it
standardised_truth = _script("marginal_recovery", REPO / "experiments" / "marginal_recovery.py").true_on_sample_scale

PEER_SCRIPTS = {
    "mirt": irt_fit.MIRT,
    "girth": irt_fit.GIRTH,
    "py-irt": irt_fit.PYIRT,
}

# cBMM's 2PL on the 0/1 matrix (items x models): Y in {-1, +1}, models x items, as its quickstart takes it; the
# checkout's quickstart folder is the first argument after the work and output folders
CBMM = irt_fit._COMMON + r"""
sys.path.insert(0, sys.argv[3])
from cBMM import cBMM
Y_pm = np.where(Y.T > 0, 1.0, -1.0)  # models x items
t0 = time.perf_counter()
fit = cBMM(Y_pm, r=1, sigma=1, tol=1e-4, max_iter=1000, verbose=0, num_threads="auto")
fit_s = time.perf_counter() - t0
u, v, w = fit["U1"][:, 0], fit["V1"][:, 0], fit["v2"]
scale, centre = u.std(), u.mean()
a = v * scale
with np.errstate(divide="ignore", invalid="ignore"):
    b = -(w + v * centre) / a
save(a, b, np.zeros(n_items), (u - centre) / scale, fit_s, version="github.com/JackQuu/cBMM (quickstart/cBMM.py)",
     method="cBMM r=1 sigma=1 tol=1e-4 (MM), abilities standardised", note=f"iterations={fit['n_iter']}")
"""


def peer_script(tool: str, model: str) -> str:
    """The peer's 3PL worker of benchmarks/irt_fit.py, or its 2PL form (c reported as 0)."""
    script = PEER_SCRIPTS[tool]
    if model == "3pl":
        return script
    if tool == "mirt":
        return script.replace('model="3PL"', 'model="2PL"').replace(
            'co["guessing"].to_numpy()', 'np.zeros(n_items)')
    if tool == "girth":
        return (script.replace("est = girth.threepl_mml(data)", "est = girth.twopl_mml(data)")
                .replace('theta = girth.ability_3pl_eap(data, est["Difficulty"], est["Discrimination"], est["Guessing"])',
                         'theta = girth.ability_eap(data, est["Difficulty"], est["Discrimination"])')
                .replace('est["Guessing"], theta', 'np.zeros(n_items), theta'))
    return script.replace('model_type="3pl"', 'model_type="2pl"').replace(
        'order(p["lambdas"], item_pos)', 'np.zeros(n_items)')


def recovery(a: np.ndarray, b: np.ndarray, theta: np.ndarray, star: dict[str, np.ndarray]) -> dict[str, float]:
    a, b, theta = (np.asarray(x, float) for x in (a, b, theta))
    ok = np.isfinite(a) & (a > 0) & np.isfinite(b)
    return {"a_ratio": float(np.exp(np.mean(np.log(a[ok] / star["a"][ok])))) if ok.any() else float("nan"),
            "b_slope": float(np.polyfit(star["b"][ok], b[ok], 1)[0]) if ok.sum() > 2 else float("nan"),
            "theta_slope": float(np.polyfit(star["theta"], theta, 1)[0]) if np.all(np.isfinite(theta)) else float("nan")}


def simulate(work: Path, n_items: int, n_examinees: int, model: str, seed: int) -> dict[str, np.ndarray]:
    import irtexam
    responses, truth = irtexam.simulate(n_items, n_examinees, model=model, seed=seed)
    Y = responses.values.astype(np.int8)
    np.save(work / "Y.npy", Y)
    items = np.repeat(np.asarray(responses.items, dtype=object), n_examinees)
    examinees = np.tile(np.asarray(responses.examinees, dtype=object), n_items)
    pd.DataFrame({"item": items, "examinee": examinees, "response": Y.reshape(-1)}).to_parquet(
        work / "responses.parquet", index=False)
    (work / "ids.json").write_text(json.dumps({"items": list(responses.items), "examinees": list(responses.examinees)}))
    return {k: np.asarray(v, float) for k, v in truth.items() if k in ("a", "b", "c", "theta")}


def run_irtexam(work: Path, out: Path, model: str, cache: Path, args) -> dict:
    env = {**os.environ, "IRTEXAM_JAX_CACHE_DIR": str(cache)}
    cmd = [str(Path(sys.executable).parent / "irtexam"), "fit", str(work / "responses.parquet"), "--model", model,
           "--out", str(out)]
    result = irt_fit.run_child(cmd, out.parent / f"{out.name}.log", args.timeout, args.max_rss_gb * 1024, env=env)
    if result["status"] == "ok":
        ids = json.loads((work / "ids.json").read_text())
        items = pd.read_csv(out / "items.csv", index_col=0).reindex(ids["items"])
        abilities = pd.read_csv(out / "examinees.csv", index_col=0).reindex(ids["examinees"])
        meta = json.loads((out / "meta.json").read_text())
        result.update(a=items["a"].to_numpy(), b=items["b"].to_numpy(), theta=abilities["theta"].to_numpy(),
                      method=meta.get("method") or meta.get("fit_stats", {}).get("method"))
    return result


def run_peer(tool: str, model: str, work: Path, out: Path, args) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    if tool == "cbmm":
        cmd = [args.peers_python or sys.executable, "-c", CBMM, str(work), str(out),
               str(Path(args.cbmm_path) / "quickstart")]
    else:
        cmd = [args.peers_python, "-c", peer_script(tool, model), str(work), str(out)]
    result = irt_fit.run_child(cmd, out / "log.txt", args.timeout, args.max_rss_gb * 1024)
    if result["status"] == "ok":
        est = np.load(out / "est.npz")
        info = json.loads((out / "result.json").read_text())
        result.update(a=est["a"], b=est["b"], theta=est["theta"], fit_s=info.get("fit_s"))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2000x200,2000x1000", help="items x models, comma-separated")
    parser.add_argument("--models", default="2pl,3pl")
    parser.add_argument("--tools", default="irtexam,mirt,girth,py-irt")
    parser.add_argument("--peers-python", default=None)
    parser.add_argument("--cbmm-path", default=None, help="a checkout of github.com/JackQuu/cBMM (tool cbmm, 2PL only)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--max-rss-gb", type=float, default=12)
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "leaderboard.csv"))
    args = parser.parse_args(argv)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    rows = []
    print("size         model tool          seconds  peak_MiB bytes/cell a_ratio b_slope th_slope  peer/irtexam  status")
    with tempfile.TemporaryDirectory(prefix="irtexam-leaderboard-") as tmp:
        root = Path(tmp)
        for n_items, n_examinees in irt_fit.parse_sizes(args.sizes):
            for model in [m.strip() for m in args.models.split(",")]:
                work = root / f"{n_items}x{n_examinees}-{model}"
                work.mkdir()
                star = standardised_truth(simulate(work, n_items, n_examinees, model, args.seed))
                cells = n_items * n_examinees
                reference = None
                runs = ([("irtexam cold", lambda: run_irtexam(work, work / "fit-cold", model, work / "cache", args)),
                         ("irtexam warm", lambda: run_irtexam(work, work / "fit-warm", model, work / "cache", args))]
                        if "irtexam" in tools else [])
                runs += [(tool, lambda tool=tool: run_peer(tool, model, work, work / tool, args))
                         for tool in tools if tool not in ("irtexam", "cbmm") and args.peers_python]
                if "cbmm" in tools and args.cbmm_path and model == "2pl":  # cBMM has no guessing parameter
                    runs.append(("cbmm", lambda: run_peer("cbmm", model, work, work / "cbmm", args)))
                for name, call in runs:
                    result = call()
                    seconds = result["wall_s"] if name.startswith("irtexam") else (result.get("fit_s") or result["wall_s"])
                    rec = recovery(result["a"], result["b"], result["theta"], star) if "a" in result else {}
                    if name == "irtexam warm":
                        reference = seconds
                    ratio = (seconds / reference) if reference and not name.startswith("irtexam") else None
                    row = {"size": f"{n_items}x{n_examinees}", "model": model, "tool": name, "seconds": seconds,
                           "peak_mib": result["peak_mib"], "bytes_per_cell": result["peak_mib"] * 2 ** 20 / cells,
                           **rec, "ratio": ratio, "status": result["status"], "method": result.get("method")}
                    rows.append(row)
                    print(f"{row['size']:<12} {model:<5} {name:<13} {seconds:7.1f} {row['peak_mib']:9.0f} "
                          f"{row['bytes_per_cell']:9.1f}  {rec.get('a_ratio', float('nan')):.3f}   "
                          f"{rec.get('b_slope', float('nan')):.3f}   {rec.get('theta_slope', float('nan')):.3f}   "
                          f"{'' if ratio is None else f'{ratio:.2f}':>12}  {result['status']}"
                          + (f" ({row['method']})" if row["method"] else ""), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    new = not out.exists()
    with open(out, "a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["size"])
        if new:
            writer.writeheader()
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
