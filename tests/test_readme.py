"""README.md runs as written: every ```bash command and every ```python block is executed.

* ```python blocks run as written with this interpreter from the repository root.
* ```bash blocks: every ``irtexam ...`` line is parsed by the real CLI parser (an option
  that drifted fails here) and every input file it names must exist in the repository or
  be written by an earlier README line. The lines that need no LLM (corpus, fit, info,
  prune, report, simulate, import-lm-eval, filter, take --tables-only) are executed in a
  scratch copy of the repository root, where the files that the LLM stages (generate,
  filter, take) would have written are stood in for by the bundled real run
  (data/real_run/: its exam and its 60-pipeline responses). The LLM stages run for real,
  on a tiny slice, in the ``slow``/``llm`` test.
* ``scripts/setup.sh`` lines are syntax-checked (running them would reinstall .venv/),
  the pytest line is this run.

Sub-commands outside OFFLINE and LLM_STAGES (added by later sections) are parsed and
their input files checked; add them to OFFLINE to have them executed here. Usage patterns
with an upper-case placeholder (``irtexam adapt FIT ...``) are parsed only. A non-irtexam
command this file does not know how to run fails the test.
"""

from __future__ import annotations

import gzip
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

# sub-commands executed in the default run (no LLM, seconds each)
OFFLINE = {"corpus", "fit", "info", "prune", "report", "simulate", "import-lm-eval"}
# sub-commands that load an LLM (parsed here, executed in the slow test)
LLM_STAGES = {"generate", "verify", "take", "demo", "grade", "filter"}


def code_blocks(text: str, language: str) -> list[str]:
    """Contents of the fenced blocks of ``language`` in a Markdown text, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def bash_commands(text: str) -> list[list[str]]:
    """Every command of the ```bash blocks as argv lists; comments dropped, `a && b` split."""
    commands = []
    for block in code_blocks(text, "bash"):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            words = shlex.split(line, comments=True)
            while words:
                if "&&" in words:
                    cut = words.index("&&")
                    commands.append(words[:cut])
                    words = words[cut + 1:]
                else:
                    commands.append(words)
                    words = []
    return commands


def irtexam_argv(argv: list[str]) -> list[str] | None:
    """The CLI arguments of an ``irtexam ...`` / ``.venv/bin/irtexam ...`` command, else None."""
    if argv and Path(argv[0]).name == "irtexam":
        return argv[1:]
    return None


def parse(argv: list[str]):
    """Parse with the real CLI parser; a SystemExit (unknown option, bad choice) fails the test."""
    from irtexam.cli import build_parser

    try:
        return build_parser().parse_args(argv)
    except SystemExit as exc:  # pragma: no cover - the failure message names the line
        pytest.fail(f"README command `irtexam {' '.join(argv)}` does not parse (exit {exc.code})")


def test_readme_has_the_blocks_this_test_runs():
    text = README.read_text(encoding="utf-8")
    commands = bash_commands(text)
    assert any(irtexam_argv(c) and irtexam_argv(c)[0] == "demo" for c in commands)
    assert any(irtexam_argv(c) and irtexam_argv(c)[0] == "fit" for c in commands)
    assert code_blocks(text, "python"), "the README's 'From a script' block is gone"


OUTPUT_OPTIONS = {"--out", "--report", "--dropped"}


def input_paths(cli: list[str]) -> list[str]:
    """Path-like arguments of a command that are read, not written (not the value of --out/--report)."""
    paths = []
    for previous, token in zip([""] + cli[:-1], cli):
        if previous in OUTPUT_OPTIONS or token.startswith("-"):
            continue
        if "/" in token or re.search(r"\.(csv|jsonl|yaml|toml|json|gz|parquet)$", token):
            paths.append(token)
    return paths


def is_template(cli: list[str]) -> bool:
    """Whether a command is a usage pattern: an upper-case placeholder argument such as FIT or FIT_V2."""
    return any(re.fullmatch(r"[A-Z][A-Z0-9_]*", token) for token in cli)


def spec_exam(spec: Path) -> Path:
    """The exam file a grid spec names, resolved against the spec's folder (as `take` does)."""
    match = re.search(r"^exam:\s*(\S+)", spec.read_text(encoding="utf-8"), flags=re.M)
    assert match, f"{spec} names no exam"
    return (spec.parent / match.group(1)).resolve()


def test_every_readme_command_is_known_and_parses():
    written: list[Path] = []  # outputs of earlier README lines (files or folders)

    def available(path: Path) -> bool:
        return path.exists() or any(path == w or w in path.parents for w in written)

    for argv in bash_commands(README.read_text(encoding="utf-8")):
        cli = irtexam_argv(argv)
        if cli is not None:
            args = parse(cli)
            assert getattr(args, "func", None), f"`irtexam {' '.join(cli)}` names no sub-command"
            if is_template(cli):
                continue  # a usage pattern with placeholders (FIT, DIR): parsed only
            for token in input_paths(cli):
                assert available((REPO / token).resolve()), \
                    f"`irtexam {' '.join(cli)}` reads {token}, which neither the repository nor an earlier line has"
            if cli[0] == "take":
                exam = spec_exam(REPO / cli[1])
                assert available(exam), f"{cli[1]} reads {exam}, which no earlier README line writes"
            for option in OUTPUT_OPTIONS & set(cli):
                written.append((REPO / cli[cli.index(option) + 1]).resolve())
        elif argv[0] == "scripts/setup.sh":
            assert set(argv[1:]) <= {"--all-models", "--core"}, argv
            assert subprocess.run(["bash", "-n", str(REPO / argv[0])]).returncode == 0
        elif argv[:3] == [".venv/bin/python", "-m", "pytest"]:
            continue
        else:
            pytest.fail(f"README command {shlex.join(argv)!r} is not run by tests/test_readme.py: teach it here")


def test_inline_irtexam_mentions_name_real_sub_commands():
    """`irtexam X ...` in running text names a sub-command that exists."""
    from irtexam.cli import build_parser

    names = set(build_parser()._subparsers._group_actions[0].choices)
    for span in re.findall(r"`(?:\.venv/bin/)?irtexam ([a-z][a-z-]*)", README.read_text(encoding="utf-8")):
        assert span in names, f"README mentions `irtexam {span}`, which is no sub-command"


def scratch_root(tmp_path: Path) -> Path:
    """A copy of the repository root for the README's relative paths, with the LLM stages' files stood in.

    data/ is linked (read only), examples/ and tests/data/ copied; runs/exam/exam.jsonl is the real
    run's exam and runs/grid/responses.csv its 60-pipeline response matrix.
    """
    root = tmp_path / "repo"
    root.mkdir()
    (root / "data").symlink_to(REPO / "data")
    shutil.copytree(REPO / "examples", root / "examples")
    shutil.copytree(REPO / "tests" / "data", root / "tests" / "data")
    (root / "runs" / "exam").mkdir(parents=True)
    (root / "runs" / "grid").mkdir(parents=True)
    shutil.copy(REPO / "data" / "real_run" / "exam.jsonl", root / "runs" / "exam" / "exam.jsonl")
    with gzip.open(REPO / "data" / "real_run" / "responses.csv.gz", "rb") as src:
        (root / "runs" / "grid" / "responses.csv").write_bytes(src.read())
    return root


def run_cli(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "irtexam.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_readme_commands_without_an_llm_run_as_written(tmp_path, monkeypatch, capsys):
    """Run in this process (one import of jax for all), from the scratch root."""
    from irtexam.cli import main

    root = scratch_root(tmp_path)
    monkeypatch.chdir(root)
    ran = []
    for argv in bash_commands(README.read_text(encoding="utf-8")):
        cli = irtexam_argv(argv)
        if cli is None:
            continue
        if is_template(cli):
            continue
        offline = cli[0] in OFFLINE or (cli[0] == "take" and "--tables-only" in cli and
                                        (root / cli[cli.index("--out") + 1] / "answers.jsonl").exists())
        if not offline:
            continue
        code = main(cli)
        printed = capsys.readouterr()
        assert code == 0, f"`irtexam {' '.join(cli)}` failed:\n{printed.out[-2000:]}\n{printed.err[-2000:]}"
        ran.append(cli[0])
    assert {"corpus", "fit", "info", "prune", "report"} <= set(ran), ran
    assert (root / "runs" / "report.html").exists()


def test_readme_python_blocks_run_as_written():
    for block in code_blocks(README.read_text(encoding="utf-8"), "python"):
        done = subprocess.run([sys.executable, "-c", block], cwd=REPO, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"README python block failed:\n{block}\n{done.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.llm
def test_readme_llm_stages_run_on_a_tiny_slice(tmp_path):
    """generate -> filter -> take from the README, with 2 chunks and the small packaged LLMs (minutes)."""
    from irtexam.llm import installed_models

    root = scratch_root(tmp_path)
    shutil.rmtree(root / "runs")
    small = [m for m in ("qwen2.5-coder-0.5b", "smollm2-135m") if m in installed_models()]
    if len(small) < 2:
        pytest.skip("needs the packaged Qwen2.5-Coder-0.5B and SmolLM2 (scripts/setup.sh)")
    spec_dir = root / "examples" / "specs"
    for argv in bash_commands(README.read_text(encoding="utf-8")):
        cli = irtexam_argv(argv)
        if cli is None or cli[0] not in {"generate", "filter", "take"} or "--tables-only" in cli:
            continue
        if cli[0] == "generate":
            cli[cli.index("--llm") + 1] = small[0]
            cli[cli.index("--max-chunks") + 1] = "3"
        if cli[0] == "take":  # the spec as written, on the small LLMs, two retrievers, ICL 0
            spec = (root / cli[1]).read_text(encoding="utf-8")
            spec = re.sub(r"llms:\n(  - .*\n)+", "llms:\n" + "".join(f"  - {m}\n" for m in small), spec)
            spec = re.sub(r"retrievers:\n(  - .*\n)+", "retrievers:\n  - closed-book\n  - bm25\n", spec)
            spec = re.sub(r"icl: \[.*\]", "icl: [0]", spec)
            (spec_dir / "tiny.yaml").write_text(spec, encoding="utf-8")
            cli[1] = str(Path("examples/specs/tiny.yaml"))
        done = run_cli(cli, root, timeout=3000)
        assert done.returncode == 0, f"`irtexam {' '.join(cli)}` failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert (root / "runs" / "grid" / "responses.csv").exists()
