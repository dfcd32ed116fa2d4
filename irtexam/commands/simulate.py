"""`irtexam simulate --items N --examinees M --model 3pl --out responses.csv`."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("simulate", help="simulate a response matrix from known IRT parameters",
                                   description="Draw responses from a 1PL/2PL/3PL/GRM model; writes the long "
                                               "table and the true parameters next to it (<out>.truth.json).")
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--examinees", type=int, default=50)
    parser.add_argument("--model", default="3pl", choices=["1pl", "2pl", "3pl", "grm"])
    parser.add_argument("--facets", default=None, help="facet grid, e.g. llm=4,retriever=5,icl=3 (replaces --examinees)")
    parser.add_argument("--missing", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
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
        if not name.strip() or not count.strip().isdigit():
            raise IrtexamError(f"--facets expects name=levels pairs like llm=4,retriever=5; got '{part}'")
        grid[name.strip()] = int(count)
    return grid


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ..irt.simulate import simulate

    responses, truth = simulate(args.items, args.examinees, model=args.model, seed=args.seed,
                                facets=parse_facet_grid(args.facets), missing=args.missing)
    out = responses.save(args.out)
    truth_path = Path(str(out) + ".truth.json")
    truth_path.write_text(json.dumps({k: v.tolist() for k, v in truth.items() if k != "p"}))
    print(f"wrote {responses.n_items} items x {responses.n_examinees} examinees to {out} (truth: {truth_path})")
    return 0
