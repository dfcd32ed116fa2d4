"""``irtexam prune RESPONSES --model 3pl --drop 0.1 --steps N --out DIR``: iterative exam pruning."""

from __future__ import annotations

from pathlib import Path

from ..options import HELDOUT, POSITIVE_INT, PROBABILITY_OPEN, SEED, THETA


def register(subparsers) -> None:
    """Add the ``prune`` sub-command."""
    p = subparsers.add_parser("prune", help="iteratively drop the least discriminative items and refit",
                              description="Paper Algorithm 1: fit, drop the lowest fraction of the remaining "
                                          "items, refit warm-started; N drop rounds.")
    p.add_argument("responses", help="response table (CSV/TSV/parquet/JSONL, long format)")
    p.add_argument("--model", default="3pl", choices=("1pl", "2pl", "3pl"), help="IRT model (default 3pl)")
    p.add_argument("--drop", type=PROBABILITY_OPEN, default=0.1, help="fraction of remaining items dropped per round")
    p.add_argument("--steps", type=POSITIVE_INT, default=3, help="number of drop rounds (default 3)")
    p.add_argument("--by", default="discrimination", choices=("discrimination", "information"),
                   help="drop lowest a, or lowest mean information over --theta-range")
    p.add_argument("--theta-range", type=THETA, nargs=2, default=(-2.0, 2.0), metavar=("LOW", "HIGH"),
                   help="theta range for information (default -2 2)")
    p.add_argument("--min-items", type=POSITIVE_INT, default=5, help="never prune below this many items")
    p.add_argument("--method", default="auto", choices=("auto", "em", "map", "nuts"),
                   help="estimator of every refit, as in `irtexam fit` (default auto: marginal EM without "
                        "--facets; with facets NUTS below 50 items, the joint mode above)")
    p.add_argument("--facets", default=None,
                   help="comma-separated examinee facet columns for the hierarchical model, e.g. "
                        "llm,retriever,icl; 'auto' uses every facet column with at least two levels")
    p.add_argument("--heldout", type=HELDOUT, default=0.1,
                   help="fraction of responses held out to score each round (default 0.1; 0 = none)")
    p.add_argument("--scale", default="step0", choices=("step0", "linked", "refit"),
                   help="how rounds are compared: kept items under the step-0 fit (default), refits linked "
                        "to step 0 by mean/sigma on the examinees, or each refit on its own scale")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--exam", help="exam JSONL: also write the pruned exam (exam_pruned.jsonl)")
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(func=run)


def run(args) -> int:
    """Run the pruning, write decisions/steps/curves/pruned responses/figure, print before/after."""
    import matplotlib

    matplotlib.use("Agg")
    from ..analysis.pruning import prune
    from ..responses import ResponseMatrix

    from ..irt.fit import resolve_facets

    from ..options import check_order
    from ..outdirs import hidden_sibling
    from ..paths import check_output_dir

    check_order(args.theta_range[0], args.theta_range[1], "--theta-range LOW", "HIGH")
    check_output_dir(args.out, inputs=[args.responses, args.exam], command="prune")
    from ..exam.schema import read_exam, write_exam

    exam = read_exam(args.exam) if args.exam else None  # a bad exam fails now, not after the fits
    rm = ResponseMatrix.read(args.responses)
    from ..paths import check_density

    check_density(rm.cells, f"{args.responses}: {rm.n_items} items x {rm.n_examinees} examinees")
    notes: list[str] = []
    facets = list(resolve_facets(rm, args.facets, notes)) or None
    for note in notes:
        print(f"note: {note}")
    fit_kwargs = {"facets": facets} if facets else {}
    # each round's fit is kept beside --out until the whole prune is written: a re-run after an
    # interruption loads the finished rounds instead of fitting them again
    out = Path(args.out).resolve()
    checkpoint = hidden_sibling(out, "prune-rounds")
    res = prune(rm, model=args.model, drop=args.drop, steps=args.steps, by=args.by,
                theta_range=tuple(args.theta_range), min_items=args.min_items, method=args.method,
                seed=args.seed, heldout=args.heldout, fit_kwargs=fit_kwargs, scale=args.scale,
                checkpoint=checkpoint)
    suffix = "".join(Path(args.responses).suffixes) or ".csv"
    from ..paths import atomic_output_dir, relocate

    missing: set = set()
    with atomic_output_dir(args.out, "prune") as staging:  # the folder is one complete run, never a mix
        paths = relocate(res.save(staging, response_name=f"responses_pruned{suffix}"), staging, Path(args.out))
        if args.exam:
            kept = set(res.kept_items)
            write_exam([it for it in exam if it.id in kept], staging / "exam_pruned.jsonl")
            missing = kept - {it.id for it in exam}
    import shutil

    shutil.rmtree(checkpoint, ignore_errors=True)  # the prune is written: its rounds are no longer needed
    if missing:
        print(f"note: {len(missing)} kept items are not in {args.exam} (first: {sorted(missing)[:3]})")
    first, last = res.steps.iloc[0], res.steps.iloc[-1]
    if res.uninformative:
        print(f"removed {len(res.uninformative)} item(s) without information before the first fit "
              f"(every examinee answered them alike): {', '.join(sorted(res.uninformative)[:5])}"
              + (" ..." if len(res.uninformative) > 5 else ""))
    print(f"pruned {int(first.n_items)} -> {int(last.n_items)} items in {len(res.steps) - 1} rounds "
          f"({res.stop_reason}); mean item information on {list(args.theta_range)}: "
          f"{first.mean_information:.3f} -> {last.mean_information:.3f} ({args.scale} scale; refit: "
          f"{last.mean_information_refit:.3f}, linked: {last.mean_information_linked:.3f}); test information "
          f"{first.test_information:.2f} -> {last.test_information:.2f}")
    print(res.steps.to_string(index=False))
    print("wrote " + ", ".join(paths.values()))
    return 0
