"""`irtexam simulate --items N --examinees M --model 3pl --out responses.csv`."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ..options import FRACTION_HALF_OPEN, POSITIVE_INT, SEED


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("simulate", help="simulate a response matrix from known IRT parameters",
                                   description="Draw responses from a 1PL/2PL/3PL/GRM model; writes the long "
                                               "table and the true parameters next to it (<out>.truth.json).")
    parser.add_argument("--items", type=POSITIVE_INT, default=100)
    parser.add_argument("--examinees", type=POSITIVE_INT, default=50)
    parser.add_argument("--model", default="3pl", choices=["1pl", "2pl", "3pl", "grm"])
    parser.add_argument("--facets", default=None, help="facet grid, e.g. llm=4,retriever=5,icl=3 (replaces --examinees)")
    parser.add_argument("--missing", type=FRACTION_HALF_OPEN, default=0.0)
    parser.add_argument("--seed", type=SEED, default=0)
    parser.add_argument("--out", required=True)
    parser.set_defaults(func=run)


def parse_facet_grid(text: str | None) -> dict[str, int] | None:
    """'llm=4,retriever=5' -> {'llm': 4, 'retriever': 5}."""
    from ..errors import IrtexamError

    if not text:
        return None
    grid = {}
    for part in text.split(","):
        name, _, count = part.partition("=")
        if not name.strip() or not count.strip().isdigit() or int(count) < 1:
            raise IrtexamError(f"--facets expects name=levels pairs with levels >= 1, like llm=4,retriever=5; "
                               f"got '{part}'")
        if name.strip() in grid:
            raise IrtexamError(f"--facets names the facet '{name.strip()}' twice ('{text}'); give each facet once")
        grid[name.strip()] = int(count)
    return grid


# peak bytes per simulated cell: probabilities and draws (float64), the long table's three columns
SIMULATE_BYTES_PER_CELL = 120
# the same with --out X.parquet, whose long table is streamed a block of items at a time (no frame of it):
# measured 42 at 10^8 cells (benchmarks/results/read_memory.txt)
SIMULATE_PARQUET_BYTES_PER_CELL = 50


def run(args: argparse.Namespace) -> int:
    import json

    from ..io_tables import write_long_parquet
    from ..irt.simulate import simulate
    from ..paths import check_memory, check_output_file

    from ..outdirs import check_own_file

    check_output_file(args.out, "--out", formats=["csv", "csv.gz", "tsv", "tsv.gz", "parquet", "jsonl"])
    check_own_file(Path(args.out), "simulate", Path(str(args.out) + ".truth.json"))  # a user's table stays
    grid = parse_facet_grid(args.facets)
    examinees = math.prod(grid.values()) if grid else args.examinees
    parquet = Path(args.out).suffix.lower() == ".parquet"
    check_memory(args.items * examinees, SIMULATE_PARQUET_BYTES_PER_CELL if parquet else SIMULATE_BYTES_PER_CELL,
                 f"--items {args.items} x {examinees} examinees")
    responses, truth = simulate(args.items, args.examinees, model=args.model, seed=args.seed,
                                facets=grid, missing=args.missing)
    out = write_long_parquet(responses, args.out) if parquet else responses.save(args.out)
    truth_path = Path(str(out) + ".truth.json")
    truth_path.write_text(json.dumps({k: v.tolist() for k, v in truth.items() if k != "p"}))
    print(f"wrote {responses.n_items} items x {responses.n_examinees} examinees to {out} (truth: {truth_path})")
    return 0
