"""The documentation runs as written, like README.md (see tests/test_readme.py for the rules).

* README.md is a front page: at most 250 lines; every relative link of README.md and of
  docs/**/*.md points to a file that exists (a broken link fails here as on GitHub).
* ```bash blocks of docs/**/*.md: every ``irtexam ...`` line is parsed by the real CLI parser
  and every input file it names must exist, be written by an earlier line of the docs (pages in
  the order of mkdocs.yml's nav) or be one of the files tests/test_readme.py stands in for the
  LLM stages (runs/exam/exam.jsonl, runs/grid/). ``.venv/bin/python examples/X.py --opt ...``
  lines name a script that exists and options its ``--help`` lists (tests/test_python_jobs.py
  runs the scripts). The offline commands (test_readme.OFFLINE) are executed in a scratch copy
  of the repository, except those README.md also has: tests/test_readme.py runs those.
* ```python blocks run as written from the repository root, except the ones README.md also has
  (run by tests/test_readme.py) and snippet includes (``--8<-- "examples/x.py"``), whose file
  must exist.
* The examples gallery (scripts/run_gallery.py, run by scripts/docs.sh): every examples/ script is in
  the gallery or named as left out, every script docs/examples.md shows is one of those, and the
  pages' docs/gallery/ figures (git-ignored, made by the build) are the ones the gallery declares.
* ``slow``: scripts/docs.sh builds the site (``mkdocs build --strict``) and writes site/index.html;
  the gallery's examples that tests/test_python_jobs.py does not run draw their figures.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from test_readme import (OFFLINE, OUTPUT_OPTIONS, README, REPO, bash_commands, code_blocks, input_paths,
                         irtexam_argv, is_template, parse, scratch_root, spec_exam)

DOCS = REPO / "docs"
MAX_README_LINES = 250
SNIPPET = re.compile(r'^\s*--8<--\s+"([^"]+)"\s*$')


def load_gallery():
    """scripts/run_gallery.py as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("run_gallery", REPO / "scripts" / "run_gallery.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gallery = load_gallery()


def nav_pages(nav) -> list[str]:
    """The Markdown files of mkdocs.yml's nav, in reading order."""
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def doc_pages() -> list[Path]:
    """docs/**/*.md in nav order, then any page the nav leaves out (docs/figures, a link to figures/, excluded)."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    ordered = [DOCS / page for page in nav_pages(config["nav"])]
    every = sorted(p for p in DOCS.rglob("*.md") if not p.relative_to(DOCS).parts[0] == "figures")
    return ordered + [p for p in every if p not in ordered]


def test_the_nav_names_every_page_and_only_pages_that_exist():
    pages = doc_pages()
    assert all(p.exists() for p in pages), [str(p) for p in pages if not p.exists()]
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    in_nav = {DOCS / page for page in nav_pages(config["nav"])}
    assert set(pages) == in_nav, sorted(str(p) for p in set(pages) - in_nav)


def test_readme_is_a_front_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines (at most {MAX_README_LINES}): move text to docs/"


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|<img\s[^>]*src=\"([^\"]+)\"")


def relative_links(text: str) -> list[str]:
    """Targets of Markdown links, images and <img src> outside code, without #anchors; no URLs."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # fenced code
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code
    targets = []
    for match in LINK.finditer(text):
        target = (match.group(1) or match.group(2)).split("#")[0]
        if target and not re.match(r"[a-z][a-z0-9+.-]*:", target):
            targets.append(target)
    return targets


@pytest.mark.parametrize("page", [README] + doc_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_points_to_a_file(page):
    def exists(target: str) -> bool:
        path = (page.parent / target).resolve()
        if path.parent == gallery.FIGURES:  # made by the docs build (scripts/run_gallery.py), git-ignored
            return path.name in gallery.figure_names()
        return path.exists()

    missing = [t for t in relative_links(page.read_text(encoding="utf-8")) if not exists(t)]
    assert not missing, f"{page.relative_to(REPO)} links to missing files: {missing}"


def test_the_readme_links_into_the_docs():
    targets = relative_links(README.read_text(encoding="utf-8"))
    assert "docs/index.md" in targets and any(t.startswith("docs/api/") for t in targets)


def docs_text() -> list[tuple[Path, str]]:
    return [(page, page.read_text(encoding="utf-8")) for page in doc_pages()]


def readme_commands() -> list[list[str]]:
    return bash_commands(README.read_text(encoding="utf-8"))


def test_docs_have_the_blocks_this_test_checks():
    commands = [c for _, text in docs_text() for c in bash_commands(text)]
    assert any(irtexam_argv(c) and irtexam_argv(c)[0] == "fit" for c in commands)
    assert any(c[:2] == [".venv/bin/python", "examples/fit_abilities.py"] for c in commands)
    assert any(code_blocks(text, "python") for _, text in docs_text())


ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def without_env(argv: list[str]) -> list[str]:
    """``argv`` without its leading ``NAME=value`` environment assignments (``XLA_FLAGS=... irtexam fit ...``)."""
    while argv and ENV_ASSIGNMENT.match(argv[0]):
        argv = argv[1:]
    return argv


def pyproject_extras() -> set[str]:
    """The optional-dependency groups of pyproject.toml (what ``pip install -e '.[X]'`` may name)."""
    import tomllib

    return set(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"])


def example_help(script: str) -> str:
    done = subprocess.run([sys.executable, script, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{script} --help failed:\n{done.stderr[-2000:]}"
    return done.stdout


def test_every_docs_command_is_known_and_parses():
    # files the LLM stages would write, stood in for by tests/test_readme.py's scratch root
    written: list[Path] = [(REPO / "runs/exam/exam.jsonl").resolve(), (REPO / "runs/grid").resolve()]
    helps: dict[str, str] = {}

    def available(path: Path) -> bool:
        return path.exists() or any(path == w or w in path.parents for w in written)

    for page, text in docs_text():
        where = page.relative_to(REPO)
        for argv in map(without_env, bash_commands(text)):
            cli = irtexam_argv(argv)
            if cli is not None:
                args = parse(cli)
                assert getattr(args, "func", None), f"{where}: `irtexam {' '.join(cli)}` names no sub-command"
                if is_template(cli):
                    continue
                for token in input_paths(cli):
                    assert available((REPO / token).resolve()), \
                        f"{where}: `irtexam {' '.join(cli)}` reads {token}, which neither the repository nor an earlier line has"
                if cli[0] == "take":
                    assert available(spec_exam(REPO / cli[1])), f"{where}: {cli[1]} names an exam no earlier line writes"
                for option in OUTPUT_OPTIONS & set(cli):
                    written.append((REPO / cli[cli.index(option) + 1]).resolve())
            elif argv[0] == "scripts/setup.sh":
                assert set(argv[1:]) <= {"--all-models", "--core"}, argv
            elif argv[:3] == [".venv/bin/python", "-m", "pytest"]:
                continue
            elif argv[:3] == ["pip", "install", "-e"] and len(argv) == 4:
                extras = re.fullmatch(r"\.\[([a-z0-9,-]+)\]", argv[3])
                assert extras and set(extras.group(1).split(",")) <= pyproject_extras(), f"{where}: {argv[3]}"
            elif argv[0] == ".venv/bin/python" and len(argv) > 1 and argv[1].startswith(("examples/", "benchmarks/")):
                script = argv[1]
                assert (REPO / script).is_file(), f"{where}: {script} does not exist"
                helps.setdefault(script, example_help(script))
                for option in (t for t in argv[2:] if t.startswith("--")):
                    assert option in helps[script], f"{where}: {script} has no option {option}"
            else:
                pytest.fail(f"{where}: command {shlex.join(argv)!r} is not checked by tests/test_docs.py: teach it here")


def test_inline_irtexam_mentions_name_real_sub_commands():
    from irtexam.cli import build_parser

    names = set(build_parser()._subparsers._group_actions[0].choices)
    for page, text in docs_text():
        for span in re.findall(r"`(?:\.venv/bin/)?irtexam ([a-z][a-z-]*)", text):
            assert span in names, f"{page.relative_to(REPO)} mentions `irtexam {span}`, which is no sub-command"


def offline(cli: list[str], root: Path) -> bool:
    return cli[0] in OFFLINE or (cli[0] == "take" and "--tables-only" in cli and
                                 (root / cli[cli.index("--out") + 1] / "answers.jsonl").exists())


def test_docs_commands_without_an_llm_run_as_written(tmp_path, monkeypatch, capsys):
    """The docs' offline commands that README.md does not have, after the README's (their inputs)."""
    from irtexam.cli import main

    root = scratch_root(tmp_path)
    monkeypatch.chdir(root)
    in_readme = {tuple(c) for c in readme_commands()}
    docs_cli = [irtexam_argv(c) for _, text in docs_text() for c in map(without_env, bash_commands(text))
                if irtexam_argv(c) is not None and not is_template(irtexam_argv(c)) and tuple(c) not in in_readme]
    docs_cli = [c for c in docs_cli if c[0] in OFFLINE or (c[0] == "take" and "--tables-only" in c)]
    if not docs_cli:
        return  # every offline command of the docs is one of the README's: tests/test_readme.py ran it
    first = [irtexam_argv(c) for c in readme_commands() if irtexam_argv(c) and not is_template(irtexam_argv(c))]
    for cli in first + docs_cli:
        if not offline(cli, root):
            continue
        code = main(cli)
        printed = capsys.readouterr()
        assert code == 0, f"`irtexam {' '.join(cli)}` failed:\n{printed.out[-2000:]}\n{printed.err[-2000:]}"


def test_snippet_includes_name_files_that_exist():
    for page, text in docs_text():
        for line in text.splitlines():
            match = SNIPPET.match(line)
            if match:
                assert (REPO / match.group(1)).is_file(), f"{page.relative_to(REPO)} includes missing {match.group(1)}"


def docs_python_blocks() -> list[tuple[Path, str]]:
    seen = set(code_blocks(README.read_text(encoding="utf-8"), "python"))  # run by tests/test_readme.py
    blocks = []
    for page, text in docs_text():
        for block in code_blocks(text, "python"):
            if block in seen or all(SNIPPET.match(line) for line in block.splitlines() if line.strip()):
                continue
            seen.add(block)  # a block repeated on another page runs once
            blocks.append(pytest.param(page, block, id=f"{page.relative_to(REPO)}:{len(blocks)}"))
    return blocks


@pytest.mark.parametrize("page,block", docs_python_blocks())
def test_docs_python_blocks_run_as_written(page, block):
    done = subprocess.run([sys.executable, "-c", block], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{page.relative_to(REPO)} python block failed:\n{block}\n{done.stderr[-3000:]}"


def examples_shown(text: str) -> set[str]:
    """examples/*.py files a page includes as snippets or runs in a ```bash block."""
    included = {m.group(1) for m in map(SNIPPET.match, text.splitlines()) if m}
    run = {c[1] for c in bash_commands(text) if len(c) > 1 and c[0] == ".venv/bin/python"}
    return {path for path in included | run if path.startswith("examples/") and path.endswith(".py")}


def test_the_gallery_runs_every_example_the_examples_page_shows():
    scripts = [e.script for e in gallery.GALLERY]
    assert len(set(scripts)) == len(scripts), scripts
    assert not set(scripts) & set(gallery.NOT_IN_GALLERY)
    for script in scripts + list(gallery.NOT_IN_GALLERY):
        assert (REPO / script).is_file(), f"scripts/run_gallery.py names {script}, which does not exist"
    every = {str(p.relative_to(REPO)) for p in (REPO / "examples").glob("*.py")}
    assert every == set(scripts) | set(gallery.NOT_IN_GALLERY), \
        "an examples/ script is neither in scripts/run_gallery.py's GALLERY nor in its NOT_IN_GALLERY"
    page = (DOCS / "examples.md").read_text(encoding="utf-8")
    shown = examples_shown(page)
    assert set(scripts) <= shown, f"docs/examples.md does not show {sorted(set(scripts) - shown)}"
    assert shown <= set(scripts) | set(gallery.NOT_IN_GALLERY), sorted(shown - set(scripts))


def test_the_examples_page_shows_every_gallery_figure():
    on_page = {Path(t).name for t in relative_links((DOCS / "examples.md").read_text(encoding="utf-8"))
               if t.startswith("gallery/")}
    declared = gallery.figure_names()
    assert on_page == declared, f"missing on docs/examples.md: {sorted(declared - on_page)}, " \
                                f"not made by the gallery: {sorted(on_page - declared)}"
    for example in gallery.GALLERY:  # every example takes --figures (and --out where it writes results)
        text = (REPO / example.script).read_text(encoding="utf-8")
        assert '"--figures"' in text and ('"--out"' in text) == example.writes_out, example.script


RUN_BY_PYTHON_JOBS = {"fit_abilities", "information_curves", "prune_exam"}  # tests/test_python_jobs.py


@pytest.mark.slow
def test_the_new_gallery_examples_draw_their_figures(tmp_path):
    names = [e.name for e in gallery.GALLERY if e.name not in RUN_BY_PYTHON_JOBS]
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "run_gallery.py"), "--figures", str(tmp_path),
                           "--only", *names], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    for example in gallery.GALLERY:
        if example.name in names:
            assert f"gallery: {example.script} " in done.stdout
            for name in example.figures:
                png = (tmp_path / name).read_bytes()
                assert png[:4] == b"\x89PNG" and len(png) > 10_000, name


def test_a_failing_gallery_example_fails_the_run_with_its_name(tmp_path, monkeypatch, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("raise SystemExit('no data here')\n")
    monkeypatch.setattr(gallery, "GALLERY", (gallery.Example(str(broken), ("broken.png",)),))
    assert gallery.main(["--figures", str(tmp_path / "figures")]) == 1
    printed = capsys.readouterr().err
    assert f"gallery: {broken} FAILED" in printed and "no data here" in printed


@pytest.mark.slow
def test_docs_site_builds(tmp_path):
    """scripts/docs.sh installs the pinned tools (docs/requirements.txt) and runs `mkdocs build --strict`."""
    done = subprocess.run(["bash", str(REPO / "scripts" / "docs.sh")], cwd=REPO, capture_output=True, text=True,
                          timeout=1200)
    if done.returncode != 0:
        importable = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-c", "import mkdocs, material, mkdocstrings"],
                                    capture_output=True).returncode == 0
        if not importable:
            pytest.skip(f"the docs tools could not be installed:\n{done.stdout[-1000:]}\n{done.stderr[-1000:]}")
    assert done.returncode == 0, f"scripts/docs.sh failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert (REPO / "site" / "index.html").is_file()
    examples_html = (REPO / "site" / "examples" / "index.html").read_text(encoding="utf-8")
    for name in gallery.figure_names():
        assert (REPO / "site" / "gallery" / name).is_file() and f"../gallery/{name}" in examples_html, name
