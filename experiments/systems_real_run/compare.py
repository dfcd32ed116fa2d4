"""Compare the two assistant versions with the packaged grid on the real-run exam, with intervals.

Reads the systems' responses (runs/systems_real_run/take/responses.csv, from spec.yaml) and the
grid's (data/real_run/responses.csv.gz: 4 LLMs x 5 retrievers x ICL 0-2), stacks them (a facet
an examinee lacks gets the level "-"), fits a faceted 2PL by MAP with `irtexam fit`, and prints
each system's accuracy and the facet contrasts (version v2 - v1 among them) with their intervals.

    PYTHONPATH=. .venv/bin/python experiments/systems_real_run/compare.py

Measured on one run (202 items; SmolLM2-135M in both versions, 24 new tokens, greedy):
accuracy v1 0.188, v2 0.183 (53 and 47 replies unparseable, mostly "A. <text of another
choice>"; no abstention); v2's BM25 contexts held the source passage for 162/202 items (0.80);
2PL MAP with llm, retriever, version facets next to the 60 grid pipelines: version v2 - v1 =
-0.27, 90% interval -0.76 to 0.20, P(v2 > v1) = 0.18: no evidence that retrieval helped this
assistant, while in the grid BM25 beats closed-book by 0.25 (0.15 to 0.34).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "runs" / "systems_real_run"


def main() -> None:
    """Stack, fit, print."""
    systems = pd.read_csv(RUN / "take" / "responses.csv")
    grid = pd.read_csv(ROOT / "data" / "real_run" / "responses.csv.gz")
    both = pd.concat([grid, systems], ignore_index=True)
    facets = ["llm", "retriever", "icl", "version"]
    for column in facets:
        both[column] = both[column].fillna("-").astype(str) if column in both else "-"
    both = both[["item", "examinee", "response", *facets]]
    both.to_csv(RUN / "combined.csv", index=False)
    print("accuracy: " + ", ".join(f"{e} {g.response.mean():.3f}" for e, g in systems.groupby("examinee"))
          + f"; grid mean {grid.response.mean():.3f}, best pipeline "
          f"{grid.groupby('examinee').response.mean().max():.3f}")
    subprocess.run([sys.executable, "-m", "irtexam.cli", "fit", str(RUN / "combined.csv"), "--model", "2pl",
                    "--facets", "llm,retriever,version", "--method", "map", "--out", str(RUN / "fit")], check=True)
    contrasts = pd.read_csv(RUN / "fit" / "contrasts.csv")
    with pd.option_context("display.width", 200):
        print(contrasts[contrasts.facet.isin(["version", "retriever"])].round(3).to_string(index=False))


if __name__ == "__main__":
    main()
