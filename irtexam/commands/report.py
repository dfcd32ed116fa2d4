"""``irtexam report FITDIR --out report.html``: a self-contained HTML (or Markdown) report."""

from __future__ import annotations

from pathlib import Path

from .info import add_analysis_options


def register(subparsers) -> None:
    """Add the ``report`` sub-command."""
    p = subparsers.add_parser("report", help="HTML or Markdown report of a fit (tables and figures)",
                              description="Render the `irtexam info` analytics of a fit as one "
                                          "self-contained HTML page (figures embedded) or Markdown.")
    p.add_argument("fitdir", help="folder written by `irtexam fit --out`")
    p.add_argument("--out", required=True, help="report file (report.html or report.md)")
    p.add_argument("--format", choices=("html", "md"), default=None,
                   help="output format (default: from the --out extension, else html)")
    p.add_argument("--title", default=None, help="report title")
    add_analysis_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    """Run ``irtexam report``: analytics into ``<stem>_files/`` next to the report, then render."""
    import matplotlib

    matplotlib.use("Agg")
    from ..analysis.report import render_html, render_markdown
    from .info import analyze

    from ..paths import atomic_output_dir, check_output_dir, check_output_file, relocate

    out = Path(args.out)
    check_output_file(out, inputs=[args.fitdir], formats=[args.format] if args.format else ["html", "md"])
    fmt = args.format or ("md" if out.suffix.lower() in (".md", ".markdown") else "html")
    files = out.with_name(out.stem + "_files")
    from ..outdirs import check_own_file

    check_own_file(out, "report", files)  # a user's page of that name stays
    # the tables and figures folder beside the report: a user's folder of that name is refused, not filled
    check_output_dir(files, "--out (its _files folder)", inputs=[args.fitdir], command="report")
    with atomic_output_dir(files, "report") as staging:
        manifest = relocate(analyze(args, staging), staging, files)
    summary = manifest["summary"]
    what = " ".join(str(summary.get(k) or "").upper() for k in ("model", "method")).strip()
    title = args.title or f"irtexam report: {summary.get('data') or Path(args.fitdir).name}" + (f", {what}" if what else "")
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "html":
        out.write_text(render_html(manifest, title), encoding="utf-8")
    else:
        out.write_text(render_markdown(manifest, out.parent, title), encoding="utf-8")
    print(f"wrote {out} ({fmt}); tables and figures in {files}")
    for note in manifest["notes"]:
        print(f"note: {note}")
    return 0
