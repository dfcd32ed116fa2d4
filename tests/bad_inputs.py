"""The table of bad inputs and faults every CLI command is walked through (issue 27).

Each case is a command line with placeholders filled from generated fixtures: junk bytes,
truncated gzip, non-UTF-8 text, header-only tables, damaged fit folders, every output-path
problem and each numeric option at and past its bounds. A case passes when the command ends
with a non-zero exit code and exactly one line on stderr of the form
``irtexam COMMAND: error: ...`` (no traceback). Used by ``tests/test_bad_input.py`` and by
``experiments/bad_input_sweep.py`` (which prints the count per command). New commands and
options join :func:`cases`.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import re
import shutil
import traceback
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAM = REPO / "data" / "real_run" / "exam.jsonl"


@dataclass(frozen=True)
class Case:
    """One command line; ``argv`` may hold ``{name}`` placeholders for fixture paths."""

    command: str
    argv: tuple[str, ...]
    why: str

    @property
    def id(self) -> str:
        return f"{self.command}: {self.why}"

    def names(self, fixtures: dict[str, str]) -> list[str]:
        """What the error line must name (one of): the options of ``why`` and the files the case points at."""
        options = [w.rstrip(":") for w in self.why.split() if w.startswith("--")]
        files = [Path(fixtures[key]).name for key in re.findall(r"{(\w+)}", " ".join(self.argv))
                 if key in fixtures and key not in ("tmp",)]
        return options + files


@dataclass
class Outcome:
    """How a case ended: ``kind`` is one-line, multi-line, traceback, silent (exit 0) or hang."""

    kind: str
    code: int | None
    stderr: str


def _write_responses(path: Path, items: int = 8, examinees: int = 40, seed: int = 0) -> None:
    import numpy as np

    rng = np.random.default_rng(seed)
    theta, b = rng.normal(size=examinees), rng.normal(size=items)
    p = 1 / (1 + np.exp(-(theta[:, None] - b[None, :])))
    x = (rng.random(p.shape) < p).astype(int)
    lines = ["examinee,item,response"]
    lines += [f"e{j},q{i},{x[j, i]}" for j in range(examinees) for i in range(items)]
    path.write_text("\n".join(lines) + "\n")


# malformed long tables (issue 41): name -> (file name, text); {rows} is a valid body of 8 items x 40 examinees
MALFORMED = {
    "cut": ("cut-short.csv", "{rows}q009,m0\n"),
    "cut_tsv": ("cut-short.tsv", "{tsv}q009\tm0\n"),
    "dup_header": ("dup-header.csv", "examinee,item,response,response\ne1,q1,1,1\n"),
    "repeated_header": ("repeated-header.csv", "{rows}examinee,item,response\ne0,q99,1\n"),
    "unnamed": ("unnamed-column.csv", "examinee,item,response,\ne1,q1,1,\ne2,q1,0,\n"),
    "per_row": ("per-row-column.csv", "examinee,item,response,stamp\ne1,q1,1,10:00\ne1,q2,0,10:01\n"),
    "meta_changes": ("meta-changes.csv", "examinee,item,response,item_topic\ne1,q1,1,sql\ne2,q1,0,index\n"),
    "blank_facet": ("blank-facet.csv", "examinee,item,response,llm\ne1,q1,1,a\ne2,q1,0,\ne1,q2,0,a\n"),
    "space_facet": ("space-facet.csv", "examinee,item,response,llm\ne1,q1,1,a\ne2,q1,0, \ne1,q2,0,a\n"),
    "json_array": ("array.json", '[{"item": "q1", "examinee": "e1", "response": 1}]\n'),
    "jsonl_array": ("array.jsonl", '[{"item": "q1", "examinee": "e1", "response": 1},\n'
                    ' {"item": "q2", "examinee": "e1", "response": 0}]\n'),
    "no_key": ("no-response-key.jsonl", '{"item": "q1", "examinee": "e1", "response": 1}\n'
               '{"item": "q2", "examinee": "e1"}\n'),
    "tsv_unnamed": ("unnamed-column.tsv", "examinee\titem\tresponse\t\ne1\tq1\t1\t\n"),
    "list_cell": ("list-cell.jsonl", '{"item": "q1", "examinee": "e1", "response": [1]}\n'),
    "dict_cell": ("dict-cell.jsonl", '{"item": "q1", "examinee": {"name": "e1"}, "response": 1}\n'),
}
# one bad score among valid ones: value -> what it is (binary tables unless graded)
BAD_SCORES = {"0_1": "underscore digits", "1e-400": "underflows to 0", "inf": "infinite", "-nan": "NaN text",
              "-1.0": "negative", "0.5": "a fraction"}
BAD_GRADED = {"300": "300 among 0-2", "1e12": "1e12", "16777217": "2^24 + 1", "1e300": "1e300", "-inf": "-inf"}


def _malformed_tables(root: Path, f: dict) -> None:
    """Write the malformed tables of :data:`MALFORMED`, one bad score a table, a parquet with a list
    column, an all-blank examinee for adapt --replay and an almost empty 1200 x 900 table."""
    import numpy as np
    import pandas as pd

    rows = f["resp"].read_text().split("\n", 1)[1]
    tsv = rows.replace(",", "\t")
    for key, (name, text) in MALFORMED.items():
        f[key] = root / name
        body = text.replace("{rows}", rows).replace("{tsv}", tsv)
        header = "examinee\titem\tresponse\n" if key == "cut_tsv" else (
            "examinee,item,response\n" if "{rows}" in text else "")
        f[key].write_text(header + body)
    for kind, values in (("score", BAD_SCORES), ("graded", BAD_GRADED)):
        for k, value in enumerate(values):
            f[f"{kind}{k}"] = root / f"{kind}-{k}.csv"
            good = rows if kind == "score" else "".join(f"e{j},q{i},{(i + j) % 3}\n" for j in range(20)
                                                          for i in range(5))
            f[f"{kind}{k}"].write_text("examinee,item,response\n" + good + f"e99,q1,{value}\n")
    f["gz_cut"] = root / "cut-short.csv.gz"
    f["gz_cut"].write_bytes(gzip.compress(("examinee,item,response\n" + rows + "q009,m0\n").encode()))
    f["graded_skip"] = root / "graded-skips-2-3.csv"
    f["graded_skip"].write_text("examinee,item,response\n" + "".join(
        f"e{j},q{i},{(0, 1, 4)[(i + j) % 3]}\n" for j in range(20) for i in range(5)))
    f["graded_gap"] = root / "graded-item-skips-1.csv"  # q003 scores 0, 2, 3 only: the grm EM diverged
    scores = {(j, i): (j * 10 + i) % 3 for j in range(30) for i in range(10)}
    f["graded_gap"].write_text("examinee,item,response\n" + "".join(
        f"m{j},q{i:03d},{s + (i == 3 and s > 0)}\n" for (j, i), s in scores.items()))
    frame = pd.read_csv(f["resp"])
    f["dict_column"] = root / "dict-column.parquet"
    frame.assign(meta=[{"k": k} for k in range(len(frame))]).to_parquet(f["dict_column"])
    frame["tags"] = [["sql", "index"] if k % 2 else [] for k in range(len(frame))]
    f["tags"] = root / "tags.parquet"
    frame.to_parquet(f["tags"])
    f["user_page"] = root / "my-page.html"
    f["user_page"].write_text("<p>mine</p>\n")
    f["user_table"] = root / "my-data.csv"
    f["user_table"].write_text("examinee,item,response\n" + rows)
    f["replay_blank"] = root / "replay-blank.csv"
    f["replay_blank"].write_text("examinee,item,response\n" + rows + "".join(f"e_blank,q{i},\n" for i in range(8)))
    rng = np.random.default_rng(0)
    f["sparse"] = root / "sparse.csv"
    f["sparse"].write_text("examinee,item,response\n" + "".join(
        f"e{e},q{i},{rng.integers(2)}\n" for i in range(1200) for e in rng.choice(900, 3, replace=False)))


def make_fixtures(root: Path) -> dict[str, str]:
    """Write every fixture under ``root``; returns the placeholder -> path map."""
    from irtexam.cli import main

    root.mkdir(parents=True, exist_ok=True)
    f: dict[str, Path] = {}
    f["resp"] = root / "responses.csv"
    _write_responses(f["resp"])
    f["resp1"] = root / "responses1.csv"
    _write_responses(f["resp1"], seed=1)
    f["missing"] = root / "no-such-file.csv"
    f["empty"] = root / "empty.csv"
    f["empty"].write_text("")
    f["header"] = root / "header.csv"
    f["header"].write_text("examinee,item,response\n")
    f["junk"] = root / "junk.csv"
    f["junk"].write_bytes(bytes(range(256)) * 8)
    f["nonutf8"] = root / "latin1.csv"
    f["nonutf8"].write_bytes("examinee,item,response\nJos\xe9,q1,1\n".encode("latin-1"))
    data = gzip.compress(f["resp"].read_bytes())
    f["truncgz"] = root / "truncated.csv.gz"
    f["truncgz"].write_bytes(data[: len(data) // 2])
    f["fakegz"] = root / "fake.csv.gz"
    f["fakegz"].write_text(f["resp"].read_text())
    _malformed_tables(root, f)
    f["dir"] = root / "a-directory"
    f["dir"].mkdir(exist_ok=True)
    f["nonempty"] = root / "a-folder-with-notes"
    f["nonempty"].mkdir(exist_ok=True)
    (f["nonempty"] / "notes.txt").write_text("my notes\n")
    f["file"] = root / "a-file.txt"
    f["file"].write_text("not a folder\n")
    f["underfile"] = f["file"] / "out"
    # exams
    exam_lines = EXAM.read_text().splitlines()[:12]
    f["exam"] = root / "exam.jsonl"
    f["exam"].write_text("\n".join(exam_lines) + "\n")
    f["exam_nonutf8"] = root / "exam-latin1.jsonl"
    f["exam_nonutf8"].write_bytes(b'{"id": "x", "question": "Jos\xe9?"}\n')
    f["exam_junk"] = root / "exam-junk.jsonl"
    f["exam_junk"].write_bytes(bytes(range(256)) * 4)
    f["exam_badjson"] = root / "exam-bad.jsonl"
    f["exam_badjson"].write_text('{"id": "q1", "question": "ok?"\n')
    f["exam_other"] = root / "exam-other-ids.jsonl"
    f["exam_other"].write_text("\n".join(
        json.dumps(dict(json.loads(line), id=f"zz{i}")) for i, line in enumerate(exam_lines)) + "\n")
    # corpora
    f["corpus_nonutf8"] = root / "corpus-latin1.jsonl"
    f["corpus_nonutf8"].write_bytes(b'{"doc_id": "d1", "text": "caf\xe9 ' + b"word " * 200 + b'"}\n')
    f["corpus"] = root / "corpus.jsonl"
    f["corpus"].write_text(json.dumps({"doc_id": "d1", "text": "A sentence about tables. " * 60}) + "\n")
    f["corpus_truncgz"] = root / "corpus.jsonl.gz"
    cz = gzip.compress(f["corpus"].read_bytes())
    f["corpus_truncgz"].write_bytes(cz[: len(cz) // 2])
    # specs
    f["spec_nonutf8"] = root / "spec-latin1.yaml"
    f["spec_nonutf8"].write_bytes(b"exam: exam.jsonl\n# caf\xe9\n")
    f["spec_badyaml"] = root / "spec-bad.yaml"
    f["spec_badyaml"].write_text("exam: [unclosed\n  llms: {\n")
    f["spec_list"] = root / "spec-list.yaml"
    f["spec_list"].write_text("- a\n- b\n")
    down = "url: http://127.0.0.1:9/answer"
    for key, name, system in (("spec_timeout", "spec-timeout.yaml", f"{down}\n    timeout: fast"),
                              ("spec_retries", "spec-retries.yaml", f"{down}\n    max_retries: -1"),
                              ("spec_nosystem", "spec-python.yaml", "python: no_such_module_xyz:answer")):
        f[key] = root / name  # a spec with one system entry
        f[key].write_text(f"exam: {f['exam']}\nsystems:\n  - label: s1\n    {system}\n")
    f["spec_llmopt"] = root / "spec-llmopt.yaml"
    f["spec_llmopt"].write_text(f"exam: {f['exam']}\nllms:\n  - name: smollm2-135m\n    temprature: 0.5\n"
                                "retrievers: [none]\nicl: [0]\n")
    f["config_nonutf8"] = root / "config-latin1.yaml"
    f["config_nonutf8"].write_bytes(b"task_domain: caf\xe9\n")
    f["answers_nonutf8"] = root / "answers-latin1.jsonl"
    f["answers_nonutf8"].write_bytes(b'{"id": "q1", "answer": "caf\xe9"}\n')
    f["xlsx"] = root / "report.xlsx"
    # fits
    f["fit"] = root / "fit"
    f["fit1"] = root / "fit1"
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        for resp, out in ((f["resp"], f["fit"]), (f["resp1"], f["fit1"])):
            if not (out / "meta.json").exists():
                code = main(["fit", str(resp), "--model", "2pl", "--method", "em", "--out", str(out)])
                assert code == 0, quiet.getvalue()
        f["fit3"] = root / "fit-3pl"
        if not (f["fit3"] / "meta.json").exists():
            assert main(["fit", str(f["resp1"]), "--model", "3pl", "--method", "em", "--out",
                         str(f["fit3"])]) == 0, quiet.getvalue()
        f["fit3pl"] = root / "fit3pl"
        if not (f["fit3pl"] / "meta.json").exists():
            assert main(["fit", str(f["resp1"]), "--model", "1pl", "--method", "em", "--out",
                         str(f["fit3pl"])]) == 0, quiet.getvalue()

    def damaged(name: str, change) -> None:
        target = root / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(f["fit"], target)
        change(target)
        f[name] = target

    f["info_out"] = root / "info-out"
    if not (f["info_out"] / "items.csv").exists():
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            assert main(["info", str(f["fit"]), "--draws", "10", "--out", str(f["info_out"])]) == 0, quiet.getvalue()
    f["nonempty_report"] = root / "a-folder-with-notes.html"  # its _files folder below is a user's
    (root / "a-folder-with-notes_files").mkdir(exist_ok=True)
    (root / "a-folder-with-notes_files" / "notes.txt").write_text("my notes\n")

    damaged("fit_metajunk", lambda d: (d / "meta.json").write_text("{not json"))
    damaged("fit_metalist", lambda d: (d / "meta.json").write_text("[1, 2, 3]"))
    damaged("fit_nometa", lambda d: (d / "meta.json").unlink())
    damaged("fit_itemsrows", lambda d: (d / "items.csv").write_text(
        "\n".join((d / "items.csv").read_text().splitlines()[:3]) + "\n"))
    damaged("fit_npzjunk", lambda d: (d / "params.npz").write_bytes(b"PK\x03\x04 junk"))

    def nan_items(d: Path) -> None:
        lines = (d / "items.csv").read_text().splitlines()
        head = lines[0].split(",")
        col = head.index("a") if "a" in head else 1
        row = lines[1].split(",")
        row[col] = "nan"
        lines[1] = ",".join(row)
        (d / "items.csv").write_text("\n".join(lines) + "\n")

    damaged("fit_nan", nan_items)

    def same_size_edit(d: Path) -> None:
        """One digit of one slope changed: the file keeps its byte size (issue 41: a check by size missed it)."""
        text = (d / "items.csv").read_text()
        row = text.splitlines()[1]
        cell = row.split(",")[1]
        digit = next(k for k, ch in enumerate(cell) if ch.isdigit() and ch != "9")
        edited = row.replace(cell, cell[:digit] + "9" + cell[digit + 1:], 1)
        (d / "items.csv").write_text(text.replace(row, edited, 1))

    damaged("fit_sameedit", same_size_edit)
    return {k: str(v) for k, v in f.items()}


def cases() -> list[Case]:
    """Every bad input, per command."""
    c: list[Case] = []

    def add(command: str, why: str, *argv: str) -> None:
        c.append(Case(command, (command, *argv) if command not in ("corpus", "grade") else argv, why))

    bad_tables = {"missing": "missing file", "empty": "empty file", "header": "header-only table",
                  "junk": "junk bytes", "nonutf8": "non-UTF-8 bytes", "truncgz": "truncated gzip",
                  "fakegz": "text named .gz", "dir": "a directory as input"}
    # fit
    for key, why in bad_tables.items():
        add("fit", f"responses: {why}", f"{{{key}}}", "--out", "{tmp}/fit-out")
    for opt, value, method in (("--chains", "0", "nuts"), ("--samples", "0", "nuts"), ("--warmup", "-5", "nuts"),
                               ("--target-accept", "2", "nuts"), ("--target-accept", "0", "nuts"),
                               ("--heldout", "1.5", "em"), ("--heldout", "-0.1", "em"),
                               ("--n-choices", "0", "em"), ("--n-choices", "1", "em"),
                               ("--guessing", "1.5", "em"), ("--guessing", "nan", "em"), ("--seed", "-1", "em")):
        add("fit", f"{opt} {value}", "{resp}", "--method", method, opt, value, "--out", "{tmp}/fit-out")
    add("fit", "--out is a file", "{resp}", "--out", "{file}")
    add("fit", "--out under a file", "{resp}", "--out", "{underfile}")
    add("fit", "--out is a non-empty non-fit folder", "{resp}", "--out", "{nonempty}")
    # malformed tables and bad cells (issue 41), for fit and prune
    malformed = {"cut": "last row cut short", "cut_tsv": "TSV row cut short",
                 "dup_header": "header names a column twice",
                 "repeated_header": "header repeated as a row", "unnamed": "unnamed extra column",
                 "per_row": "a per-row extra column", "meta_changes": "item_ metadata changes within an item",
                 "blank_facet": "blank facet value", "space_facet": "facet value a space",
                 "json_array": "a JSON array in .json", "jsonl_array": "a JSON array in .jsonl",
                 "list_cell": "a list as a response", "dict_cell": "a dict as an examinee id",
                 "tags": "a list-valued parquet column", "sparse": "1200 x 900 with 3 responses an item",
                 "no_key": "a JSON Lines record without response", "tsv_unnamed": "unnamed TSV column",
                 "gz_cut": "gzipped CSV row cut short", "dict_column": "a dict-valued parquet column"}
    for key, why in malformed.items():
        add("fit", f"responses: {why}", f"{{{key}}}", "--out", "{tmp}/fit-out")
    for key in ("cut", "tags", "blank_facet", "sparse"):
        add("prune", f"responses: {malformed[key]}", f"{{{key}}}", "--out", "{tmp}/prune-out")
    for k, why in enumerate(BAD_SCORES.values()):
        add("fit", f"response {why}", f"{{score{k}}}", "--out", "{tmp}/fit-out")
    add("fit", "graded item skips a score (0, 2, 3)", "{graded_gap}", "--model", "grm", "--out", "{tmp}/fit-out")
    add("fit", "graded scores skip 2 and 3", "{graded_skip}", "--model", "grm", "--out", "{tmp}/fit-out")
    for k, why in enumerate(BAD_GRADED.values()):
        add("fit", f"graded response {why}", f"{{graded{k}}}", "--model", "grm", "--out", "{tmp}/fit-out")
    # info / report
    damaged = {"fit_metajunk": "meta.json not JSON", "fit_metalist": "meta.json a list",
               "fit_nometa": "no meta.json", "fit_itemsrows": "items.csv lost rows",
               "fit_npzjunk": "params.npz junk", "fit_nan": "non-finite item parameter",
               "fit_sameedit": "items.csv edited by hand, same byte size",
               "missing": "missing folder", "file": "a file as fit folder"}
    for command, out in (("info", "{tmp}/info-out"), ("report", "{tmp}/report.html")):
        for key, why in damaged.items():
            add(command, f"fit folder: {why}", f"{{{key}}}", "--out", out)
        for opt, value in (("--draws", "0"), ("--draws", "-5"), ("--theta-min", "nan"), ("--theta-max", "inf")):
            add(command, f"{opt} {value}", "{fit}", opt, value, "--out", out)
        add(command, "--theta-min above --theta-max", "{fit}", "--theta-min", "3", "--theta-max", "-3", "--out", out)
        add(command, "--exam non-UTF-8", "{fit}", "--exam", "{exam_nonutf8}", "--out", out)
        add(command, "--exam junk", "{fit}", "--exam", "{exam_junk}", "--out", out)
        add(command, "--exam broken JSON", "{fit}", "--exam", "{exam_badjson}", "--out", out)
        add(command, "--out under a file", "{fit}", "--out", "{underfile}/x")
    for command, out in (("info", "{tmp}/info-out"), ("report", "{tmp}/report.html")):
        add(command, "--theta-min and --theta-max at -1e308 and 1e308 (= form)", "{fit}", "--theta-min=-1e308",
            "--theta-max=1e308", "--out", out)
        add(command, "--theta-min -1e308 (a separate argument)", "{fit}", "--theta-min", "-1e308", "--out", out)
        add(command, "--theta-max 1e5", "{fit}", "--theta-max", "1e5", "--out", out)
    add("info", "--exam ids match no item", "{fit}", "--exam", "{exam_other}", "--out", "{tmp}/info-out")
    add("report", "--out is a directory", "{fit}", "--out", "{dir}")
    add("report", "--out .pdf (not html or md)", "{fit}", "--out", "{tmp}/report.pdf")
    add("report", "--out .html with --format md", "{fit}", "--format", "md", "--out", "{tmp}/report.html")
    # prune
    for key, why in bad_tables.items():
        add("prune", f"responses: {why}", f"{{{key}}}", "--out", "{tmp}/prune-out")
    for opt, values in (("--drop", ("0", "1", "1.5", "-0.1")), ("--steps", ("0", "-1")), ("--min-items", ("0",)),
                        ("--heldout", ("1", "-0.5"))):
        for value in values:
            add("prune", f"{opt} {value}", "{resp}", opt, value, "--method", "em", "--out", "{tmp}/prune-out")
    add("prune", "--theta-range -1e308 1e308", "{resp}", "--theta-range", "-1e308", "1e308", "--out", "{tmp}/prune-out")
    add("prune", "--theta-range reversed", "{resp}", "--theta-range", "2", "-2", "--out", "{tmp}/prune-out")
    add("prune", "--exam junk", "{resp}", "--exam", "{exam_junk}", "--out", "{tmp}/prune-out")
    add("prune", "--out under a file", "{resp}", "--out", "{underfile}")
    # adapt
    for key, why in (("missing", "missing file"), ("junk", "junk bytes"), ("truncgz", "truncated gzip"),
                     ("nonutf8", "non-UTF-8 bytes")):
        add("adapt", f"--replay {why}", "{fit}", "--replay", f"{{{key}}}", "--examinee", "e0", "--out",
            "{tmp}/adapt-out")
    for key, why in damaged.items():
        add("adapt", f"fit folder: {why}", f"{{{key}}}", "--replay", "{resp}", "--examinee", "e0", "--out",
            "{tmp}/adapt-out")
    for opt, value in (("--se-target", "0"), ("--se-target", "-1"), ("--max-items", "0"), ("--min-items", "-1"),
                       ("--randomesque", "0"), ("--draws", "0")):
        add("adapt", f"{opt} {value}", "{fit}", "--replay", "{resp}", "--examinee", "e0", opt, value, "--out",
            "{tmp}/adapt-out")
    add("adapt", "--replay examinee with blank answers", "{fit}", "--replay", "{replay_blank}", "--examinee",
        "e_blank", "--out", "{tmp}/adapt-out")
    add("adapt", "--replay cut short", "{fit}", "--replay", "{cut}", "--examinee", "e0", "--out", "{tmp}/adapt-out")
    add("adapt", "--replay without --examinee", "{fit}", "--replay", "{resp}", "--out", "{tmp}/adapt-out")
    add("adapt", "--examinee not in the table", "{fit}", "--replay", "{resp}", "--examinee", "nobody", "--out",
        "{tmp}/adapt-out")
    add("adapt", "--min-items above --max-items", "{fit}", "--replay", "{resp}", "--examinee", "e0", "--min-items", "9",
        "--max-items", "3", "--out", "{tmp}/adapt-out")
    # tiny
    for key, why in (("missing", "missing file"), ("junk", "junk bytes"), ("truncgz", "truncated gzip"),
                     ("nonutf8", "non-UTF-8 bytes"), ("header", "header-only table")):
        add("tiny", f"score answers: {why}", "score", "{fit}", f"{{{key}}}", "--out", "{tmp}/tiny.csv")
        add("tiny", f"validate responses: {why}", "validate", f"{{{key}}}", "--out", "{tmp}/tiny-out")
    for key, why in damaged.items():
        add("tiny", f"score fit folder: {why}", "score", f"{{{key}}}", "{resp}", "--out", "{tmp}/tiny.csv")
    add("tiny", "score --prior-sd 0", "score", "{fit}", "{resp}", "--prior-sd", "0", "--out", "{tmp}/tiny.csv")
    add("tiny", "score --weights junk", "score", "{fit}", "{resp}", "--weights", "{junk}", "--out", "{tmp}/tiny.csv")
    add("tiny", "score --out under a file", "score", "{fit}", "{resp}", "--out", "{underfile}")
    for opt, value in (("--k", "0"), ("--k", "100000"), ("--rule", "best")):
        add("tiny", f"select {opt} {value}", "select", "{fit}", opt, value, "--out", "{tmp}/tiny-sel")
    add("tiny", "select --exam junk", "select", "{fit}", "--k", "3", "--exam", "{exam_junk}", "--out", "{tmp}/tiny-sel")
    for opt, value in (("--holdout", "0"), ("--holdout", "1"), ("--k", "a,b"), ("--k", "0"), ("--rules", "best"),
                       ("--splits", "0")):
        add("tiny", f"validate {opt} {value}", "validate", "{resp}", opt, value, "--out", "{tmp}/tiny-out")
    # link
    for key, why in damaged.items():
        add("link", f"new fit: {why}", f"{{{key}}}", "{fit1}", "--out", "{tmp}/link-out")
    add("link", "model kinds differ (2PL and 3PL)", "{fit}", "{fit3}", "--out", "{tmp}/link-out")
    add("link", "model kinds differ (3PL and 2PL)", "{fit3}", "{fit}", "--out", "{tmp}/link-out")
    add("link", "model kinds differ (2PL and 1PL)", "{fit}", "{fit3pl}", "--out", "{tmp}/link-out")
    add("link", "--draws 0", "{fit}", "{fit1}", "--draws", "0", "--out", "{tmp}/link-out")
    add("link", "--draws -5", "{fit}", "{fit1}", "--draws", "-5", "--out", "{tmp}/link-out")
    add("link", "--out under a file", "{fit}", "{fit1}", "--out", "{underfile}")
    # a folder irtexam did not write, or another command's, is refused untouched (issue 41)
    for command, argv in (("info", ("{fit}",)), ("prune", ("{resp}", "--method", "em")), ("link", ("{fit}", "{fit1}")),
                          ("adapt", ("{fit}", "--replay", "{resp}", "--examinee", "e0")),
                          ("take", ("{spec_nosystem}",))):
        add(command, "--out is a non-empty folder irtexam did not write", *argv, "--out", "{nonempty}")
        if command != "take":
            add(command, "--out holds another command's output", *argv, "--out", "{fit3pl}")
    add("fit", "--out holds another command's output", "{resp}", "--out", "{info_out}")
    add("report", "--out is a user's file", "{fit}", "--out", "{user_page}")
    add("simulate", "--out is a user's table (no .truth.json)", "--out", "{user_table}")
    add("report", "--out: its _files folder is a user's folder", "{fit}", "--out", "{nonempty_report}")
    # simulate
    for opt, value in (("--items", "0"), ("--items", "-3"), ("--examinees", "0"), ("--missing", "2"),
                       ("--missing", "1"), ("--missing", "-0.1"), ("--seed", "-1"), ("--facets", "llm=0"),
                       ("--facets", "llm"), ("--facets", "llm=2,llm=3"), ("--facets", "llm=2, llm=2"),
                       ("--items", "100000000")):
        add("simulate", f"{opt} {value}", opt, value, *(("--examinees", "100000000") if value == "100000000" else ()),
            "--out", "{tmp}/sim.csv")
    add("simulate", "--out under a file", "--out", "{underfile}/sim.csv")
    add("simulate", "--out is a directory", "--out", "{dir}")
    # filter
    for key, why in (("exam_nonutf8", "non-UTF-8"), ("exam_junk", "junk bytes"), ("exam_badjson", "broken JSON"),
                     ("missing", "missing file"), ("empty", "empty file")):
        add("filter", f"exam: {why}", f"{{{key}}}", "--out", "{tmp}/filtered.jsonl", "--no-embeddings")
    for value in ("-1", "2"):
        add("filter", f"--target-rate {value}", "{exam}", "--target-rate", value, "--out", "{tmp}/filtered.jsonl",
            "--no-embeddings")
    add("filter", "--report .xlsx", "{exam}", "--report", "{xlsx}", "--out", "{tmp}/filtered.jsonl", "--no-embeddings")
    add("filter", "--out is the input", "{exam}", "--out", "{exam}", "--no-embeddings")
    add("filter", "--out under a file", "{exam}", "--out", "{underfile}/x.jsonl", "--no-embeddings")
    # verify (each fails before any model is loaded)
    add("verify", "exam non-UTF-8", "{exam_nonutf8}", "--llm", "smollm2-135m", "--out", "{tmp}/v.jsonl",
        "--report", "{tmp}/v.csv")
    add("verify", "--out is the input", "{exam}", "--llm", "smollm2-135m", "--out", "{exam}", "--report",
        "{tmp}/v.csv")
    add("verify", "--permutations -1", "{exam}", "--llm", "smollm2-135m", "--permutations", "-1", "--out",
        "{tmp}/v.jsonl", "--report", "{tmp}/v.csv")
    add("verify", "--threads -1", "{exam}", "--llm", "smollm2-135m", "--threads", "-1", "--out", "{tmp}/v.jsonl",
        "--report", "{tmp}/v.csv")
    add("verify", "--out under a file", "{exam}", "--llm", "smollm2-135m", "--out", "{underfile}/v.jsonl",
        "--report", "{tmp}/v.csv")
    # corpus
    add("corpus", "chunk: non-UTF-8 corpus", "corpus", "chunk", "{corpus_nonutf8}", "--out", "{tmp}/chunks.jsonl")
    add("corpus", "chunk: truncated gzip", "corpus", "chunk", "{corpus_truncgz}", "--out", "{tmp}/chunks.jsonl")
    add("corpus", "stats: junk bytes", "corpus", "stats", "{junk}")
    add("corpus", "chunk: --out is the input", "corpus", "chunk", "{corpus}", "--out", "{corpus}")
    add("corpus", "chunk: --out under a file", "corpus", "chunk", "{corpus}", "--out", "{underfile}/c.jsonl")
    for opt, value in (("--max-sentences", "0"), ("--min-chars", "-1"), ("--max-chars", "0")):
        add("corpus", f"chunk: {opt} {value}", "corpus", "chunk", "{corpus}", opt, value, "--out",
            "{tmp}/chunks.jsonl")
    # generate (each fails before any model is loaded)
    for opt, value in (("--max-chunks", "-1"), ("--max-chunks", "0"), ("--per-chunk", "0"),
                       ("--max-new-tokens", "0"), ("--threads", "-1")):
        add("generate", f"{opt} {value}", "{corpus}", "--llm", "smollm2-135m", opt, value, "--out",
            "{tmp}/gen.jsonl")
    add("generate", "--config non-UTF-8", "{corpus}", "--llm", "smollm2-135m", "--config", "{config_nonutf8}",
        "--out", "{tmp}/gen.jsonl")
    add("generate", "--config broken YAML", "{corpus}", "--llm", "smollm2-135m", "--config", "{spec_badyaml}",
        "--out", "{tmp}/gen.jsonl")
    add("generate", "corpus non-UTF-8", "{corpus_nonutf8}", "--llm", "smollm2-135m", "--out", "{tmp}/gen.jsonl")
    add("generate", "--out under a file", "{corpus}", "--llm", "smollm2-135m", "--out", "{underfile}/g.jsonl")
    # take
    for key, why in (("spec_nonutf8", "non-UTF-8 spec"), ("spec_badyaml", "broken YAML"),
                     ("spec_list", "a list, not a mapping"), ("spec_timeout", "timeout: fast"),
                     ("spec_retries", "max_retries: -1"), ("spec_nosystem", "python system not importable"),
                     ("spec_llmopt", "misspelt LLM option"), ("missing", "missing spec"), ("junk", "junk bytes")):
        add("take", f"spec: {why}", f"{{{key}}}", "--out", "{tmp}/take-out")
    add("take", "--threads -1", "{spec_nosystem}", "--threads", "-1", "--out", "{tmp}/take-out")
    add("take", "--out is a file", "{spec_nosystem}", "--out", "{file}")
    # grade
    add("grade", "avert: answers non-UTF-8", "grade", "avert", "--exam", "{exam}", "--answers", "{answers_nonutf8}",
        "--output", "{tmp}/avert.csv")
    add("grade", "avert: exam junk", "grade", "avert", "--exam", "{exam_junk}", "--answers", "{answers_nonutf8}",
        "--output", "{tmp}/avert.csv")
    add("grade", "avert: --top-k 0", "grade", "avert", "--exam", "{exam}", "--answers", "{answers_nonutf8}",
        "--aggregate", "topk", "--top-k", "0", "--output", "{tmp}/avert.csv")
    add("grade", "mtrag: input non-UTF-8", "grade", "mtrag", "--input", "{answers_nonutf8}", "--output",
        "{tmp}/mtrag.csv", "--no-bertscore")
    add("grade", "correlate: junk CSV", "grade", "correlate", "--a-col", "x", "--b-col", "y", "{junk}", "{junk}")
    add("grade", "correlate: missing file", "grade", "correlate", "--a-col", "x", "--b-col", "y", "{missing}",
        "{missing}")
    return c


def fill(case: Case, fixtures: dict[str, str], tmp: Path) -> list[str]:
    """The command line with its placeholders replaced."""
    values = dict(fixtures, tmp=str(tmp))
    return [arg.format(**values) for arg in case.argv]


def run_case(case: Case, fixtures: dict[str, str], tmp: Path) -> Outcome:
    """Run one case in this process (``irtexam.cli.main``) and classify how it ended."""
    from irtexam.cli import main

    argv = fill(case, fixtures, tmp)
    err, out = io.StringIO(), io.StringIO()
    code: int | None
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 2
    except BaseException:  # noqa: BLE001 - a traceback is the finding
        return Outcome("traceback", None, err.getvalue() + traceback.format_exc())
    text = err.getvalue()
    lines = [line for line in text.splitlines() if line.strip()]
    if "Traceback (most recent call last)" in text:
        return Outcome("traceback", code, text)
    if code == 0:
        return Outcome("silent", code, text)
    errors = [line for line in lines if ": error: " in line]
    if (len(errors) == 1 and errors[0].startswith(f"irtexam {case.command}")
            and not any(line.startswith("usage:") for line in lines)):
        return Outcome("one-line", code, text)
    return Outcome("multi-line", code, text)
