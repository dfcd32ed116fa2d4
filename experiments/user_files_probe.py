"""Issue 41's probe, re-run with files the bad-input table does not hold: every command that takes --out given a
folder with a user's files (LOST when one of them is gone afterwards), and malformed tables, bad cells and bad
options (HANG past the timeout, TRACEBACK, SILENT when it exits 0 with neither an error nor a warning that
names the problem, else one-line / warned). Each run is a fresh `irtexam` process.

    .venv/bin/python experiments/user_files_probe.py [--timeout 90] [--show]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

IRTEXAM = [sys.executable, "-m", "irtexam.cli"]


def _rows(seed: int = 5, examinees: int = 30, items: int = 10) -> list[tuple[str, str, int]]:
    rng = np.random.default_rng(seed)
    ability = rng.normal(size=examinees)
    return [(f"m{j}", f"q{i:03d}", int(rng.random() < 1 / (1 + np.exp(-ability[j] + i / 5))))
            for j in range(examinees) for i in range(items)]


def tables(root: Path) -> dict[str, tuple[Path, list[str], str]]:
    """name -> (file, extra fit options, what the run must name: an error or warning word)."""
    rows = _rows()
    body = "".join(f"{a},{b},{c}\n" for a, b, c in rows)
    head = "examinee,item,response\n"
    graded = "".join(f"{a},{b},{k % 3}\n" for k, (a, b, _) in enumerate(rows))
    files = {
        "gz_cut.csv.gz": (gzip.compress((head + body + "m3,q009\n").encode()), [], "cut short"),
        "tsv_cut.tsv": ((head + body + "m3,q009\n").replace(",", "\t"), [], "cut short"),
        "no_key.jsonl": ("".join(json.dumps({"examinee": a, "item": b, "response": c}) + "\n" for a, b, c in rows)
                         + '{"examinee": "m99", "item": "q001"}\n', [], "no 'response' key"),
        "plus_inf.csv": (head + body + "m99,q001,+Infinity\n", [], "not a finite number"),
        "hex.csv": (head + body + "m99,q001,0x1\n", [], "is not 0 or 1"),
        "underscore.csv": (head + body + "m99,q001,1_0\n", [], "is not 0 or 1"),
        "tiny.csv": (head + body + "m99,q001,5e-999\n", [], "too small"),
        "negative.csv": (head + body + "m99,q001,-1\n", [], "negative"),
        "graded_huge.csv": (head + graded + "m99,q001,99999\n", ["--model", "grm"], "above 100"),
        "graded_skip.csv": (head + "".join(f"{a},{b},{(0, 1, 4)[k % 3]}\n" for k, (a, b, _) in enumerate(rows)),
                            ["--model", "grm"], "skip"),
        "graded_gap.csv": (head + graded.replace(",q003,2\n", ",q003,3\n").replace(",q003,1\n", ",q003,2\n"),
                           ["--model", "grm"], "skip a score"),
        "blank_llm.csv": ("examinee,item,response,llm\n" + "".join(
            f"{a},{b},{c},{'x' if a != 'm3' else ''}\n" for a, b, c in rows), [], "blank facet"),
        "tab_trailing.tsv": ("examinee\titem\tresponse\t\n" + "".join(f"{a}\t{b}\t{c}\t\n" for a, b, c in rows), [],
                             "no name"),
        "two_headers.csv": (head + body + head + body.replace("m", "n"), [], "repeats the header"),
        "dup_column.csv": ("examinee,item,item,response\n" + "".join(f"{a},{b},{b},{c}\n" for a, b, c in rows), [],
                           "twice"),
        "array.ndjson": (json.dumps([{"examinee": a, "item": b, "response": c} for a, b, c in rows]), [],
                         "JSON array"),
        "meta_changes.csv": ("examinee,item,response,item_bloom\n" + "".join(
            f"{a},{b},{c},{'apply' if a != 'm5' else 'recall'}\n" for a, b, c in rows), [], "changes within item"),
        "per_row.csv": ("examinee,item,response,seconds\n" + "".join(
            f"{a},{b},{c},{k}\n" for k, (a, b, c) in enumerate(rows)), [], "read as a facet"),
        "nobody.csv": (head + body + "".join(f"m77,q{i:03d},\n" for i in range(10)), [], "no responses at all"),
        "sparse.csv": (head + "".join(f"e{(i * 7 + k) % 1500},q{i},{k % 2}\n" for i in range(2000) for k in range(2)),
                       [], "cells hold"),
    }
    out = {}
    for name, (content, options, word) in files.items():
        path = root / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
        out[name] = (path, options, word)
    frame = pd.DataFrame(rows, columns=["examinee", "item", "response"])
    for name, column in (("dict_meta.parquet", [{"k": 1}] * len(frame)), ("item_tags.parquet", [["a"]] * len(frame))):
        frame.assign(**{"item_tags" if "tags" in name else "meta": column}).to_parquet(root / name)
        out[name] = (root / name, [], "not a single value")
    return out


def run(argv: list[str], timeout: float, cwd: Path) -> tuple[str, int | None, str]:
    try:
        done = subprocess.run(IRTEXAM + argv, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        return "HANG", None, ""
    text = done.stderr
    if "Traceback (most recent call last)" in text:
        return "TRACEBACK", done.returncode, text
    return "exit", done.returncode, text


def classify(kind: str, code: int | None, text: str, word: str) -> str:
    if kind != "exit":
        return kind
    named = word.lower() in text.lower()
    if code == 0:
        return "warned" if named else "SILENT"
    errors = [line for line in text.splitlines() if ": error: " in line]
    return "one-line" if len(errors) == 1 and named else "MISLEADING"


def user_folder(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "thesis.tex").write_text("precious\n")
    (folder / "figures").mkdir(exist_ok=True)
    (folder / "figures" / "f.txt").write_text("mine\n")


def survived(folder: Path) -> bool:
    return (folder / "thesis.tex").exists() and (folder / "figures" / "f.txt").exists()


def data_loss(root: Path, data: Path, timeout: float) -> list[tuple[str, str]]:
    """Each --out command into a user's folder, then into its own earlier output with the user's files added."""
    fit, fit1 = root / "fitA", root / "fitB"
    subprocess.run(IRTEXAM + ["fit", str(data), "--model", "2pl", "--out", str(fit)], capture_output=True, check=True)
    subprocess.run(IRTEXAM + ["fit", str(data), "--model", "2pl", "--seed", "1", "--out", str(fit1)],
                   capture_output=True, check=True)
    commands = {
        "fit": ["fit", str(data), "--model", "2pl"], "info": ["info", str(fit), "--draws", "20"],
        "prune": ["prune", str(data), "--model", "2pl", "--method", "em", "--steps", "1", "--heldout", "0"],
        "link": ["link", str(fit), str(fit1), "--method", "mean-sigma", "--draws", "20"],
        "adapt": ["adapt", str(fit), "--replay", str(data), "--examinee", "m1", "--draws", "20"],
    }
    results = []
    for name, argv in commands.items():
        for how in ("user folder", "rerun with user files"):
            out = root / f"loss-{name}-{how.split()[0]}"
            if how == "rerun with user files":
                run(argv + ["--out", str(out)], timeout, root)
            user_folder(out)
            kind, code, text = run(argv + ["--out", str(out)], timeout, root)
            results.append((f"{name}: {how}", "LOST" if not survived(out) else
                            ("TRACEBACK" if kind == "TRACEBACK" else "kept")))
    refit = root / "refit"
    subprocess.run(IRTEXAM + ["fit", str(data), "--model", "2pl", "--out", str(refit)], capture_output=True)
    (refit / "mydata.csv").write_text(data.read_text())
    user_folder(refit)
    run(["info", str(refit), "--out", str(refit / "analysis")], timeout, root)
    run(["fit", str(refit / "mydata.csv"), "--model", "1pl", "--out", str(refit)], timeout, root)
    ok = survived(refit) and (refit / "mydata.csv").exists() and (refit / "analysis").is_dir()
    results.append(("fit: refit keeps its input, notes, info folder", "kept" if ok else "LOST"))
    report_dir = root / "report-here"
    user_folder(report_dir)
    run(["report", str(fit), "--draws", "20", "--out", str(report_dir / "r.html")], timeout, root)
    run(["simulate", "--items", "5", "--examinees", "6", "--out", str(report_dir / "s.csv")], timeout, root)
    results.append(("report + simulate beside a user's files", "kept" if survived(report_dir) else "LOST"))
    return results


def options(root: Path, fit: Path, timeout: float) -> list[tuple[str, str]]:
    """Bad option values not in the table, with the word the error must contain."""
    cases = {
        "info --theta-max=1e300": (["info", str(fit), "--theta-max=1e300", "--out", "o1"], "--theta-max"),
        "report --theta-min -1E3": (["report", str(fit), "--theta-min", "-1E3", "--out", "o2.html"], "--theta-min"),
        "prune --theta-range -9e99 0": (["prune", str(root / "sparse.csv"), "--theta-range", "-9e99", "0",
                                         "--out", "o3"], "--theta-range"),
        "simulate --facets a=2,b=2,a=1": (["simulate", "--facets", "a=2,b=2,a=1", "--out", "o4.csv"], "twice"),
        "link 3pl to 1pl": (["link", str(root / "fit3"), str(root / "fit1pl"), "--out", "o5"], "fit but"),
    }
    subprocess.run(IRTEXAM + ["fit", str(root / "nobody.csv"), "--model", "3pl", "--out", str(root / "fit3")],
                   capture_output=True)
    subprocess.run(IRTEXAM + ["fit", str(root / "nobody.csv"), "--model", "1pl", "--out", str(root / "fit1pl")],
                   capture_output=True)
    out = []
    for name, (argv, word) in cases.items():
        out.append((name, classify(*run(argv, timeout, root), word)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--show", action="store_true", help="print every run's outcome")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = tables(root)
        outcomes: list[tuple[str, str]] = []
        for name, (path, extra, word) in files.items():
            outcomes.append((f"fit {name}", classify(*run(["fit", str(path), *extra, "--out", f"out-{name}"],
                                                          args.timeout, root), word)))
        good = root / "good.csv"
        good.write_text("examinee,item,response\n" + "".join(f"{a},{b},{c}\n" for a, b, c in _rows()))
        outcomes += data_loss(root, good, args.timeout)
        outcomes += options(root, root / "fitA", args.timeout)
    counts = Counter(kind for _, kind in outcomes)
    for name, kind in outcomes:
        if args.show or kind.isupper():
            print(f"{kind:11s} {name}")
    print(f"{len(outcomes)} runs: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
