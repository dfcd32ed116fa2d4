"""Import of lm-evaluation-harness --log_samples outputs into a ResponseMatrix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from irtexam.errors import InputError, IrtexamError
from irtexam.pipelines.lm_eval_import import import_lm_eval, model_label, parse_model_args
from irtexam.responses import ResponseMatrix

LOGS = Path(__file__).parent / "data" / "lm_eval_logs"


def test_parse_model_args():
    assert parse_model_args("pretrained=org/m,dtype=float32") == {"pretrained": "org/m", "dtype": "float32"}
    assert model_label({"config": {"model_args": "pretrained=EleutherAI/pythia-160m,revision=x"}}) == "pythia-160m"
    assert model_label({"config": {"model_args": ""}, "model_name": "a/b"}) == "b"


def test_import_fixture_logs(tmp_path):
    frame, report = import_lm_eval([LOGS])
    assert report.runs == 3 and report.samples_files == 3 and report.rows == 12
    rm = ResponseMatrix.from_long(frame)
    assert sorted(rm.examinees) == ["SmolLM2-135M-Instruct|icl0", "SmolLM2-135M-Instruct|icl2", "pythia-160m|icl0"]
    assert list(rm.items) == ["irtexam_mc/0", "irtexam_mc/1", "irtexam_mc/2", "irtexam_mc/3"]
    assert rm.examinee_facets.loc["SmolLM2-135M-Instruct|icl2", "icl"] == "icl2"
    assert rm.examinee_facets.loc["pythia-160m|icl0", "llm"] == "pythia-160m"
    assert list(rm.item_meta["task"]) == ["irtexam_mc"] * 4
    col = list(rm.examinees).index("SmolLM2-135M-Instruct|icl2")
    assert list(rm.values[:, col]) == [1, 1, 1, 0]
    # the per-run mean equals the acc that lm-eval aggregated in results_*.json
    for results in LOGS.rglob("results_*.json"):
        data = json.loads(results.read_text())
        label = model_label(data) + f"|icl{data['n-shot']['irtexam_mc']}"
        assert np.mean(rm.values[:, list(rm.examinees).index(label)]) == data["results"]["irtexam_mc"]["acc,none"]
    norm, _ = import_lm_eval([LOGS], metric="acc_norm")
    assert norm.response.sum() != frame.response.sum()


def test_cli_writes_response_matrix(tmp_path, capsys):
    from irtexam.cli import main

    out = tmp_path / "responses.csv"
    assert main(["import-lm-eval", str(LOGS), "--out", str(out)]) == 0
    rm = ResponseMatrix.read(out)
    assert rm.values.shape == (4, 3)
    assert "3 runs" in capsys.readouterr().out


def test_counts_other_filters_orphans_and_duplicate_runs(tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(LOGS, logs)
    smol = logs / "HuggingFaceTB__SmolLM2-135M-Instruct"
    samples = next(smol.glob("samples_*10-15-42*.jsonl"))
    extra = json.loads(samples.read_text().splitlines()[0])
    extra["filter"] = "strict-match"
    with open(samples, "a") as fh:
        fh.write(json.dumps(extra) + "\n")
    (smol / "samples_irtexam_mc_2025-01-01T00-00-00.000001.jsonl").write_text(samples.read_text())
    # the same model and shots run twice (another date) -> distinct examinees
    copy = logs / "again"
    copy.mkdir()
    for f in smol.glob("*10-15-42*"):
        shutil.copy(f, copy / f.name.replace("10-15-42", "23-59-59"))
    frame, report = import_lm_eval([logs])
    assert report.other_filter_rows == 2 and len(report.orphan_samples_files) == 1
    assert report.runs == 4 and len(report.renamed_examinees) == 1
    assert frame.examinee.nunique() == 4


def test_errors_name_file_and_fix(tmp_path):
    with pytest.raises(IrtexamError, match="no lm-eval results"):
        import_lm_eval([tmp_path])
    logs = tmp_path / "l"
    shutil.copytree(LOGS / "EleutherAI__pythia-160m", logs)
    with pytest.raises(InputError, match=r"row 1.*no metric 'exact_match'.*--metric"):
        import_lm_eval([logs], metric="exact_match")
    samples = next(logs.glob("samples_*.jsonl"))
    samples.write_text(samples.read_text() + "{broken\n")
    with pytest.raises(InputError, match=r"samples_irtexam_mc.*row 5.*not valid JSON"):
        import_lm_eval([logs])
