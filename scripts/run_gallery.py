"""Run the examples of the documentation's gallery; their figures are the ones the site shows.

    .venv/bin/python scripts/run_gallery.py [--figures docs/gallery] [--only wright_map ...]

scripts/docs.sh runs this before ``mkdocs build``: each example of :data:`GALLERY` runs as a user
would run it, from the repository root, on the bundled data, writing its figures into
``docs/gallery/`` (git-ignored, built only) and its other outputs into a scratch folder. The
time of each example is printed; an example that fails, or that does not write the figures
declared for it, fails the run with its name and the end of its output.

``IRTEXAM_DOCS_SKIP_GALLERY=1`` (quick local iterations only, never CI) runs nothing: figures of an
earlier run are kept and a missing one is replaced by a placeholder that says it was skipped.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "gallery"
SKIP_ENV = "IRTEXAM_DOCS_SKIP_GALLERY"
TAIL = 3000  # characters of a failed example's output shown


@dataclass(frozen=True)
class Example:
    """One gallery entry: the script, its extra arguments, whether it takes ``--out``, the figures it writes."""

    script: str
    figures: tuple[str, ...]
    args: tuple[str, ...] = ()
    writes_out: bool = False

    @property
    def name(self) -> str:
        """The script's stem, e.g. ``fit_abilities``."""
        return Path(self.script).stem


GALLERY: tuple[Example, ...] = (
    Example("examples/fit_abilities.py", ("facet_abilities.png",), writes_out=True),
    Example("examples/information_curves.py",
            ("item_information.png", "exam_information.png", "information_by_bloom.png")),
    Example("examples/prune_exam.py", ("pruning.png",), ("--drop", "0.1", "--steps", "2"), writes_out=True),
    Example("examples/wright_map.py", ("wright_map.png",)),
    Example("examples/adaptive_test.py", ("cat_trajectory.png",), writes_out=True),
    Example("examples/link_forms.py", ("linking.png",), writes_out=True),
    Example("examples/tiny_benchmark.py", ("tiny_benchmark.png",), writes_out=True),
)

# examples/ scripts the build does not run, and why (docs/examples.md shows their source only)
NOT_IN_GALLERY: dict[str, str] = {
    "examples/http_service.py": "an HTTP service: it serves until stopped, a take spec calls it",
    "examples/langchain_wrapper.py": "a system for `irtexam take`, called by a take spec, draws nothing",
}


def figure_names() -> set[str]:
    """Every figure file name the gallery writes."""
    return {name for example in GALLERY for name in example.figures}


def run_example(example: Example, figures: Path, scratch: Path) -> tuple[float, str | None]:
    """Run one example from the repository root; returns (seconds, None) or (seconds, why it failed)."""
    argv = [sys.executable, example.script, *example.args, "--figures", str(figures)]
    if example.writes_out:
        argv += ["--out", str(scratch / example.name)]
    env = dict(os.environ, MPLBACKEND="Agg")
    # the checkout's irtexam, whichever one the virtual environment has installed
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        return seconds, f"exit status {done.returncode}:\n{(done.stdout + done.stderr)[-TAIL:]}"
    missing = [name for name in example.figures if not (figures / name).is_file()]
    if missing:
        return seconds, f"did not write {', '.join(missing)} into {figures}:\n{done.stdout[-TAIL:]}"
    return seconds, None


def placeholder(path: Path) -> None:
    """A small PNG saying that the gallery was skipped (IRTEXAM_DOCS_SKIP_GALLERY=1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(4, 1))
    fig.text(0.5, 0.5, f"{path.name}: not generated ({SKIP_ENV}=1)", ha="center", va="center", fontsize=8)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the gallery (or the ``--only`` examples); 0 when every example ran and drew its figures, else 1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", default=str(FIGURES), help="folder for the figures (default docs/gallery)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run these examples only (script stems)")
    args = parser.parse_args(argv)
    figures = Path(args.figures).resolve()
    chosen = [e for e in GALLERY if not args.only or e.name in args.only]
    unknown = set(args.only or ()) - {e.name for e in GALLERY}
    if unknown:
        parser.error(f"no gallery example named {', '.join(sorted(unknown))}")

    if os.environ.get(SKIP_ENV) == "1":
        figures.mkdir(parents=True, exist_ok=True)
        for name in sorted(figure_names()):
            if not (figures / name).is_file():
                placeholder(figures / name)
        print(f"gallery: skipped ({SKIP_ENV}=1): the figures of an earlier run, or placeholders")
        return 0

    if not args.only:
        shutil.rmtree(figures, ignore_errors=True)  # nothing stale: every figure comes from this run
    figures.mkdir(parents=True, exist_ok=True)
    failed = []
    total = 0.0
    with tempfile.TemporaryDirectory(prefix="irtexam-gallery-") as scratch:
        for example in chosen:
            seconds, error = run_example(example, figures, Path(scratch))
            total += seconds
            if error is None:
                print(f"gallery: {example.script} {seconds:.1f} s ({', '.join(example.figures)})", flush=True)
            else:
                failed.append(example.script)
                print(f"gallery: {example.script} FAILED after {seconds:.1f} s, {error}", file=sys.stderr, flush=True)
    if failed:
        print(f"gallery: {len(failed)} example(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    shown = figures.relative_to(ROOT) if figures.is_relative_to(ROOT) else figures
    print(f"gallery: {len(chosen)} examples in {total:.1f} s, figures in {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
