"""Build a ResponseMatrix from lm-evaluation-harness ``--log_samples`` outputs (0.4.x).

lm-eval writes, per run, into ``<output_path>/<model_name_sanitized>/``:

* ``results_<date>.json``: aggregated metrics plus the run config (``config.model``,
  ``config.model_args`` such as ``pretrained=HuggingFaceTB/SmolLM2-135M,dtype=float32``,
  ``n-shot`` / ``configs.<task>.num_fewshot``, ``model_name``);
* ``samples_<task>_<date>.jsonl``: one line per (document, filter) with ``doc_id``,
  ``filter``, ``filtered_resps`` (stringified by lm-eval's ``sanitize_list``) and the
  per-sample metrics (``acc``, ``acc_norm``, ...).

Each results file is one run = one examinee (``<llm>|icl<k>``, plus ``|<date>`` when
two runs would share an id), with facets ``llm`` (the model name's last path part)
and ``icl`` (``icl<k>``). Items are ``<task>/<doc_id>``. Samples of other filters than
the chosen one, and samples files without a matching results file, are counted and
reported, never silently dropped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..errors import InputError, IrtexamError
from ..jsonl import iter_json_lines

_RESULTS = re.compile(r"^results_(?P<date>.+)\.json$")
_SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.jsonl$")


@dataclass
class ImportReport:
    """Counts of what was read, used and skipped."""

    runs: int = 0
    samples_files: int = 0
    rows: int = 0
    other_filter_rows: int = 0
    orphan_samples_files: list[str] = field(default_factory=list)
    renamed_examinees: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line for the user."""
        return (f"{self.runs} runs, {self.samples_files} samples files, {self.rows} responses; skipped: "
                f"{self.other_filter_rows} rows of other filters, {len(self.orphan_samples_files)} samples files "
                f"without a results file {self.orphan_samples_files[:3]}; "
                f"{len(self.renamed_examinees)} examinees got a date suffix to stay unique")


def parse_model_args(model_args: Any) -> dict[str, str]:
    """``"pretrained=org/name,dtype=float32"`` (or a dict) -> ``{"pretrained": ..., "dtype": ...}``."""
    if isinstance(model_args, dict):
        return {str(k): str(v) for k, v in model_args.items()}
    out: dict[str, str] = {}
    for part in str(model_args or "").split(","):
        if "=" in part:
            key, value = part.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def model_label(results: dict[str, Any]) -> str:
    """LLM facet level: last path component of pretrained/model/path/engine (else model_name)."""
    config = results.get("config") or {}
    args = parse_model_args(config.get("model_args"))
    for key in ("peft", "delta", "pretrained", "model", "path", "engine"):
        if args.get(key):
            return args[key].rstrip("/").split("/")[-1]
    name = results.get("model_name") or config.get("model")
    if not name:
        raise InputError("cannot tell which model made this run: no model_args pretrained=/model= and no "
                         "model_name; pass --llm NAME")
    return str(name).rstrip("/").split("/")[-1]


def num_fewshot(results: dict[str, Any], task: str) -> int:
    """Number of in-context examples of ``task`` in the run (``n-shot``, else the task config, else 0)."""
    nshot = (results.get("n-shot") or {}).get(task)
    if nshot is None:
        nshot = ((results.get("configs") or {}).get(task) or {}).get("num_fewshot")
    if nshot is None:
        nshot = (results.get("config") or {}).get("num_fewshot")
    return int(nshot or 0)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg})", path=str(path), row=exc.lineno) from None
    if not isinstance(data, dict):
        raise InputError("an lm-eval results file holds a JSON object", path=str(path))
    return data


def _response(sample: dict[str, Any], metric: str, path: Path, row: int) -> float:
    if metric not in sample:
        have = [k for k in sample if k in {"acc", "acc_norm", "exact_match", "em", "f1", "mcc"}]
        raise InputError(f"the sample has no metric {metric!r} (it has {have}); choose one with --metric",
                         path=str(path), row=row, column=metric)
    value = sample[metric]
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise InputError(f"metric {metric!r} is not a number: {value!r}", path=str(path), row=row,
                         column=metric) from None
    if value not in (0.0, 1.0):
        raise InputError(f"metric {metric!r} must be 0 or 1 for a binary response matrix, got {value}",
                         path=str(path), row=row, column=metric)
    return value


def find_runs(paths: Iterable[str | Path]) -> tuple[list[tuple[Path, list[Path]]], list[str]]:
    """(results file, its samples files) for every run under ``paths``; plus orphan samples files.

    A samples file belongs to the results file in the same directory with the same date id.
    """
    results_files: list[Path] = []
    samples_files: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise InputError("no such file or directory", path=str(p))
        files = sorted(p.rglob("*")) if p.is_dir() else [p]
        results_files += [f for f in files if _RESULTS.match(f.name)]
        samples_files += [f for f in files if _SAMPLES.match(f.name)]
    runs = []
    claimed: set[Path] = set()
    for r in sorted(set(results_files)):
        date = _RESULTS.match(r.name)["date"]
        mine = [s for s in samples_files if s.parent == r.parent and _SAMPLES.match(s.name)["date"] == date]
        claimed.update(mine)
        runs.append((r, sorted(mine)))
    orphans = sorted(str(s) for s in set(samples_files) - claimed)
    return runs, orphans


def import_lm_eval(paths: Iterable[str | Path], *, metric: str = "acc", filter_name: str = "none",
                   llm: str | None = None):
    """Long response table (item, examinee, response, llm, icl, task) from lm-eval logs.

    Returns ``(DataFrame, ImportReport)``; raises :class:`InputError` naming the file
    and row for unreadable samples or a missing metric.
    """
    import pandas as pd

    runs, orphans = find_runs(paths)
    report = ImportReport(orphan_samples_files=orphans)
    if not runs:
        raise IrtexamError("found no lm-eval results_*.json files; run lm_eval with --output_path DIR "
                           "--log_samples and pass DIR")
    rows: list[dict[str, Any]] = []
    seen_examinees: dict[str, str] = {}
    for results_path, samples in runs:
        results = _read_json(results_path)
        if not samples:
            raise InputError("this results file has no samples_<task>_<date>.jsonl next to it; re-run lm_eval "
                             "with --log_samples", path=str(results_path))
        report.runs += 1
        label = llm or model_label(results)
        date = _RESULTS.match(results_path.name)["date"]
        shots = {num_fewshot(results, _SAMPLES.match(s.name)["task"]) for s in samples}
        if len(shots) > 1:
            raise InputError(f"tasks of one run use different num_fewshot {sorted(shots)}; one examinee needs "
                             "one ICL level, import the tasks separately", path=str(results_path))
        k = shots.pop()
        examinee = f"{label}|icl{k}"
        if examinee in seen_examinees and seen_examinees[examinee] != str(results_path):
            examinee = f"{examinee}|{date}"
            report.renamed_examinees.append(examinee)
        seen_examinees[examinee] = str(results_path)
        for sample_path in samples:
            task = _SAMPLES.match(sample_path.name)["task"]
            report.samples_files += 1
            for row, sample in iter_json_lines(sample_path):
                if sample.get("filter", "none") != filter_name:
                    report.other_filter_rows += 1
                    continue
                if "doc_id" not in sample:
                    raise InputError("sample without doc_id", path=str(sample_path), row=row, column="doc_id")
                rows.append({"item": f"{task}/{sample['doc_id']}", "examinee": examinee,
                             "response": _response(sample, metric, sample_path, row), "llm": label,
                             "icl": f"icl{k}", "item_task": task})
                report.rows += 1
    if not rows:
        raise IrtexamError(f"no samples with filter {filter_name!r} were found; pick one with --filter")
    frame = pd.DataFrame(rows)
    frame["response"] = frame["response"].astype(int)
    return frame, report
