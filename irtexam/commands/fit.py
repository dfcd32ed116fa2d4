"""`irtexam fit RESPONSES --model 3pl [--facets llm,retriever,icl] [--method auto|em|map|nuts] --out DIR`."""

from __future__ import annotations

import argparse
import warnings

from ..config import OPTIONS, add_arguments


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fit", help="fit a (hierarchical) IRT model to a response matrix",
        description="Fit a 1PL/2PL/3PL (or graded) IRT model to a long response table (CSV/parquet/JSONL with "
                    "columns item, examinee, response and optional facet columns) or a wide one (one row per "
                    "examinee, ids in a column 'examinee' or the first column, one column per item). Writes "
                    "items.csv, examinees.csv, facets.csv (with --facets), contrasts.csv, fit.nc (arviz) and "
                    "meta.json.")
    parser.add_argument("responses", help="long response table: item, examinee, response (+ facet columns); or a "
                                          "wide one: one row per examinee, one column per item")
    parser.add_argument("--facets", default=None,
                        help="comma-separated examinee facet columns for the hierarchical model, e.g. "
                             "llm,retriever,icl; 'auto' uses every facet column with at least two levels")
    add_arguments(parser)  # --model, --method, --seed, ...: the option table of irtexam.config
    parser.add_argument("--out", required=True, help="output directory")
    parser.set_defaults(func=run)


def _guessing_summary(items) -> str:
    """The c column in a fit's summary line: its median where estimated, its value where fixed (``guessing=``),
    nothing where there is none (a 2PL's c is 0)."""
    if "c" not in items:
        return ""
    c = items["c"]
    if len(c) and c.nunique(dropna=False) == 1:
        return "" if c.iloc[0] == 0 else f"; c: fixed {c.iloc[0]:.2f}"
    return f"; c: median {c.median():.2f}"


def format_summary(result) -> str:
    """A short human-readable summary of a fit."""
    stats = result.fit_stats
    lines = [f"{result.spec.kind.upper()} fit by {result.method.upper()}: {result.design.n_items} items x "
             f"{result.design.n_examinees} examinees ({stats['n_observed']} responses)",
             f"  {'marginal ' if result.method == 'em' else ''}log-likelihood {stats['loglik']:.3f}; RMSE {stats['rmse']:.4f} vs mean baseline "
             f"{stats['rmse_baseline']:.4f}"]
    if result.method == "em":
        lines.append(f"  marginal estimation (EM, {stats['optimizer']['cycles']} cycles): AIC {stats['aic']:.1f}, "
                     f"BIC {stats['bic']:.1f}, {stats['n_parameters']} parameters; abilities by "
                     f"{stats['abilities'].upper()}; information: {stats['information'] or 'none'}")
        for name, group in (stats.get("population") or {}).items():
            if group["estimated"]:
                lines.append(f"  group {name}: ability mean {group['mean']:+.3f}, sd {group['sd']:.3f}")
    if "heldout_loglik" in stats:
        base = stats.get("heldout_loglik_baseline")
        lines.append(f"  held-out log-likelihood per cell {stats['heldout_loglik']:.4f}"
                     + (f" (baseline {base:.4f})" if base is not None else ""))
    items = result.items
    lines.append(f"  a: median {items['a'].median():.2f}; b: {items['b'].min():.2f}..{items['b'].max():.2f}"
                 + _guessing_summary(items))
    prior = stats.get("item_prior") or {}
    if prior.get("kind") == "hierarchical":
        parts = [f"{name} {prior[key]:.2f}" for key, name in (("d_location", "d centre"),
                                                              ("b1_location", "b1 centre"), ("c_mean", "c mean"))
                 if key in prior and not (key == "c_mean" and prior.get("guessing_centre") == "fixed")]
        if prior.get("slope_centre") == "learned" and "a_median" in prior:
            parts.insert(0, f"a centre {prior['a_median']:.2f}")
        lines.append("  item priors learned from the exam: " + ", ".join(parts))
        if prior.get("guessing_centre") == "fixed":
            lines.append(f"  c prior centre {prior['c_mean']:.2f}, not learned: "
                         + (prior.get("guessing_centre_rule") or "guessing_centre fixed"))
        elif prior.get("guessing_centre_rule"):
            lines.append(f"  c prior centre {prior['c_mean']:.2f}, {prior['guessing_centre_rule']}")
    if prior.get("bias_reduction") == "firth":
        from ..irt.fit import FIRTH_MAX_RESPONSES
        lines.append(f"  items with Firth's penalty (under {FIRTH_MAX_RESPONSES:,} answers an item's slope at its maximum "
                     "runs high; --method map for the plain joint mode)")
    if result.spec.ability_nodes > 1:
        lines.append(f"  item step over each ability's posterior ({result.spec.ability_nodes} Gauss-Hermite points, "
                     "ModelSpec.ability_nodes)")
    if result.facets is not None:
        for facet, group in result.facets.groupby("facet", sort=False):
            ranked = group.sort_values("theta", ascending=False)
            parts = [f"{r.level} {r.theta:+.2f} [{r.theta_low:+.2f}, {r.theta_high:+.2f}]" for r in ranked.itertuples()]
            lines.append(f"  {facet}: " + "; ".join(parts))
    else:
        top = result.examinees.sort_values("theta", ascending=False).head(5)
        lines.append("  top examinees: " + "; ".join(f"{e} {t:+.2f}" for e, t in zip(top.index, top["theta"])))
    if result.method == "nuts" and result.diagnostics is not None and len(result.diagnostics):
        sampler = stats.get("sampler", {})
        lines.append(f"  NUTS: max R-hat {result.diagnostics['r_hat'].max():.3f}, min ESS "
                     f"{result.diagnostics['ess_bulk'].min():.0f}, divergences {sampler.get('divergences', 0)}")
    return "\n".join(lines)


# peak bytes a cell of a whole-process fit, with a margin: the marginal EM (blocks of examinees, int8 scores)
# measured 15.6 at 10^8 cells; the joint mode and NUTS about 230 at 10^7
FIT_BYTES_PER_CELL = {"em": 24, "map": 250, "nuts": 250}


def run(args: argparse.Namespace) -> int:
    from ..cli import print_warning
    from ..warning_types import IrtexamWarning
    from ..irt.fit import (LEADERBOARD_ITEMS, auto_note, fit, items_per_examinee, marginal_only_options, resolve_facets,
                           resolve_method)
    from ..irt.saturation import saturated_3pl
    from ..irt.kinds import get_kind
    from ..responses import ResponseMatrix

    from ..irt.io import check_output_folder

    check_output_folder(args.out)  # before any work: an unusable --out fails now, not after the fit
    from ..memory import large_blocks_from_mmap
    large_blocks_from_mmap()  # freed temporaries of a large fit go back to the system (irtexam.memory)
    responses = ResponseMatrix.read(args.responses, graded=get_kind(args.model).graded)
    from ..paths import check_density, check_memory

    notes: list[str] = []
    facets = list(resolve_facets(responses, args.facets, notes)) or None  # unknown facets fail before any work
    for note in notes:
        print(f"note: {note}")
    given = {option.name: getattr(args, option.name) for option in OPTIONS if option.cli}
    per_examinee = items_per_examinee(responses.observed) if args.method == "auto" else None
    cells = responses.n_items * responses.n_examinees
    saturated = (saturated_3pl(responses, args.model, given, None) if args.method == "auto" and not facets
                 and per_examinee is not None and per_examinee >= LEADERBOARD_ITEMS else 0)
    method = resolve_method(args.method, facets, responses.n_items, per_examinee,
                            marginal_only_options(given) + (["saturated"] if saturated else []), cells)
    # refuse before the fit what would not fit in memory: the measured peak of a whole-process fit a cell
    # (benchmarks/results/marginal_scaling.txt), less the matrix already read
    size = f"{args.responses}: {responses.n_items} items x {responses.n_examinees} examinees"
    check_memory(cells, FIT_BYTES_PER_CELL.get(method, 250) - 4, size)
    check_density(responses.cells, size)
    if args.method == "auto" and method == "nuts":
        print(f"method: NUTS (auto: a hierarchical fit of {responses.n_items} items, where MAP's facet intervals "
              f"are too narrow; --method map forces MAP)", flush=True)
    elif note := auto_note(args.method, method, facets, per_examinee, cells, responses.n_items, saturated):
        print(f"method: {'joint mode (MAP)' if method == 'map' else 'marginal EM'} ({note})", flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IrtexamWarning)  # the fit's own warnings are printed below, once
        # every option the parser has a flag for (irtexam.config.OPTIONS, cli=True), so a new row cannot be
        # parsed and dropped; fit() resolves "auto" as above (and then notes its rule in meta.json)
        result = fit(responses, facets=facets, **{**given, "method": args.method}, progress=method in ("nuts", "map"))
    out = result.save(args.out)
    print(format_summary(result))
    for message in result.warnings:
        print_warning(message)
    print(f"wrote {out}/items.csv, examinees.csv{', facets.csv, contrasts.csv' if result.facets is not None else ''}, "
          f"fit.nc, meta.json")
    return 0
