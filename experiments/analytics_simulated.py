"""Exam analytics on a simulated exam with planted pure-noise items.

Simulates a hierarchical 3PL exam (llm x retriever x icl pipelines) where 10% of
the items are pure noise (a = 0: the answer does not depend on ability), gives
every item a templated question text so the Bloom / question-word categories are
exercised, fits the model (MAP + Laplace), writes all analytics tables/figures to
``figures/analytics_simulated/``, then prunes (drop 10% per round, 3 rounds) and
prints the exam information before and after, and where the noise items went.

Run:  .venv/bin/python experiments/analytics_simulated.py [--items 100] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import irtexam  # noqa: E402
from irtexam.analysis.information import mean_information  # noqa: E402
from irtexam.analysis.pruning import prune  # noqa: E402
from irtexam.analysis.summary import analyze_fit  # noqa: E402

TEMPLATES = [
    "What is the default value of setting {k}?",
    "Which option should you configure to enable feature {k}?",
    "How would you troubleshoot error {k} after a deploy?",
    "Why should you monitor queue {k} and decide on a limit?",
    "Name the service that stores record {k}.",
    "Where is the configuration file of module {k} located?",
    "You are an engineer building service {k}. When it fails, which component should you design first?",
    "Who maintains library {k}?",
    "Explain what happens when cache {k} is full: what does the server do?",
    "Select the statement that is true of protocol {k}.",
]


def main() -> None:
    """Run the experiment and print the headline numbers."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=100)
    ap.add_argument("--noise", type=float, default=0.1, help="fraction of pure-noise items")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="figures/analytics_simulated")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    rng = np.random.default_rng(args.seed)
    n_noise = int(round(args.noise * args.items))
    a = rng.lognormal(0.2, 0.3, args.items)
    a[args.items - n_noise:] = 0.0
    facets = {"llm": 4, "retriever": 5, "icl": 3}
    rm, truth = irtexam.simulate(args.items, None, model="3pl", seed=args.seed, a=a, facets=facets)
    noise = set(list(rm.items)[args.items - n_noise:])
    qs = pd.DataFrame({"question": [TEMPLATES[k % len(TEMPLATES)].format(k=k) for k in range(rm.n_items)]},
                      index=list(rm.items))
    rm = rm.with_item_meta(qs)
    print(f"simulated {rm.n_items} items ({n_noise} pure noise) x {rm.n_examinees} pipelines "
          f"({' x '.join(f'{k}={v}' for k, v in facets.items())})")

    t0 = time.perf_counter()
    fit = irtexam.fit(rm, model="3pl", facets=list(facets), heldout=0.1, seed=args.seed)
    print(f"fit 3PL hierarchical MAP in {time.perf_counter() - t0:.1f}s: RMSE {fit.fit_stats['rmse']:.3f} "
          f"(mean baseline {fit.fit_stats['rmse_baseline']:.3f}), held-out loglik "
          f"{fit.fit_stats['heldout_loglik']:.3f}/response (baseline {fit.fit_stats['heldout_loglik_baseline']:.3f})")
    manifest = analyze_fit(fit, out, n_draws=200, seed=args.seed)
    items = pd.read_csv(manifest["tables"]["items"], index_col="item")
    flagged = set(items.index[items["low_discrimination"]])
    print(f"low-discrimination flags: {len(flagged)} items, {len(flagged & noise)} of {n_noise} noise items "
          f"among them")
    for note in manifest["notes"]:
        print("note:", note)

    t0 = time.perf_counter()
    res = prune(rm, model="3pl", drop=0.1, steps=3, heldout=0.1, seed=args.seed,
                fit_kwargs={"facets": list(facets)}, progress=False)
    paths = res.save(out / "pruning", response_name="responses_pruned.csv", save_fit=False)
    dec = res.decisions.set_index("item")
    first = set(dec.index[dec["step_dropped"] == 1])
    print(f"pruning (drop 10%/round, 3 rounds) in {time.perf_counter() - t0:.1f}s; {res.stop_reason}")
    print(res.steps[["step", "n_items", "mean_information_step0_params", "mean_information_linked",
                     "mean_information_refit", "test_information",
                     "theta_sd", "heldout_loglik", "heldout_loglik_baseline"]].round(4).to_string(index=False))
    s0, s1 = res.steps.iloc[0], res.steps.iloc[-1]
    print(f"mean item information on [-2, 2] (step-0 calibration): {s0.mean_information:.4f} -> "
          f"{s1.mean_information:.4f} "
          f"({100 * (s1.mean_information / s0.mean_information - 1):+.1f}%); test information "
          f"{s0.test_information:.2f} -> {s1.test_information:.2f}")
    true_items = pd.DataFrame({"a": truth["a"], "b": truth["b"], "c": truth["c"]}, index=list(rm.items))
    true_all = mean_information(true_items).mean()
    true_kept = mean_information(true_items.loc[res.kept_items]).mean()
    print(f"with the TRUE parameters: mean item information on [-2, 2] of all items {true_all:.4f}, "
          f"of the kept items {true_kept:.4f} ({100 * (true_kept / true_all - 1):+.1f}%)")
    print(f"round 1 dropped {len(first)} items, {len(first & noise)} of them noise; noise items still kept "
          f"at the end: {len(noise - set(dec.index[dec['step_dropped'].notna()]))}")
    print("figures:", ", ".join(sorted(manifest["figures"].values()) + [paths["figure"]]))


if __name__ == "__main__":
    main()
