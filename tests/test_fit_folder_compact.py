"""The fit folder's compact copies (issue 42: a leaderboard-sized fit spent 3 s writing 26.6 million rows of
item and examinee text): responses.npz holds the fitted matrix exactly, fit.nc's observed data decodes to the
same scores with NaN where missing, and folders from before (responses.parquet) still load."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import irtexam
from irtexam.irt import io as fit_io
from irtexam.irt.idata import FilledScores, compact_observed
from irtexam.paths import file_sha256
from irtexam.responses import ResponseMatrix


def _with_missing(responses: ResponseMatrix, seed: int = 0, fraction: float = 0.1) -> ResponseMatrix:
    values = responses.values.copy()
    values[np.random.default_rng(seed).random(values.shape) < fraction] = np.nan
    return ResponseMatrix(values, responses.items, responses.examinees, examinee_facets=responses.examinee_facets,
                          max_score=responses.max_score)


def _same_matrix(a: ResponseMatrix, b: ResponseMatrix) -> None:
    np.testing.assert_array_equal(a.values, b.values)  # NaN where NaN
    assert a.items == b.items and a.examinees == b.examinees and a.max_score == b.max_score
    pd.testing.assert_frame_equal(a.examinee_facets, b.examinee_facets, check_names=False)
    assert a.fingerprint() == b.fingerprint()


def test_fit_folder_keeps_the_matrix_as_int8_and_reads_it_back_exactly(tmp_path):
    responses, _ = irtexam.simulate(12, 30, model="2pl", seed=3, facets={"llm": 3})
    responses = _with_missing(responses)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = irtexam.fit(responses, model="2pl", method="map", draws=50)
    result.save(tmp_path / "fit")
    assert not (tmp_path / "fit" / "responses.parquet").exists()
    with np.load(tmp_path / "fit" / "responses.npz", allow_pickle=False) as arrays:
        assert arrays["values"].dtype == np.int8
        np.testing.assert_array_equal(arrays["values"] == -1, np.isnan(responses.values))
    loaded = irtexam.load_fit(tmp_path / "fit")
    _same_matrix(loaded.responses, responses)
    assert result.samples["a"].dtype == np.float32  # the draws are kept (and written) as float32


def test_graded_scores_and_item_metadata_choose_their_copy(tmp_path):
    graded = ResponseMatrix(np.array([[0, 3, np.nan], [2, 1, 0]], dtype=np.float32), ["q1", "q2"],
                            ["m1", "m2", "m3"], max_score=3)
    fit_io.write_matrix_npz(graded, tmp_path / "graded.npz")
    _same_matrix(fit_io.read_matrix_npz(tmp_path / "graded.npz"), graded)
    with_meta = ResponseMatrix(graded.values, graded.items, graded.examinees, max_score=3,
                               item_meta=pd.DataFrame({"text": ["a?", "b?"]}, index=["q1", "q2"]))
    assert fit_io._save_responses(with_meta, tmp_path).name == "responses.parquet"  # the long table keeps metadata
    halves = ResponseMatrix(np.array([[0.5, 1.0]], dtype=np.float32), ["q1"], ["m1", "m2"], max_score=1)
    assert fit_io.matrix_copy_dtype(halves) is None                                # not whole numbers
    with pytest.raises(ValueError):
        fit_io.write_matrix_npz(halves, tmp_path / "halves.npz")


def test_a_damaged_copy_is_one_clear_error(tmp_path):
    (tmp_path / "responses.npz").write_bytes(b"not a zip file")
    with pytest.raises(irtexam.errors.InputError, match="responses copy is damaged"):
        fit_io.read_matrix_npz(tmp_path / "responses.npz")


def test_a_folder_written_with_the_long_parquet_copy_still_loads(tmp_path):
    responses, _ = irtexam.simulate(10, 25, model="2pl", seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        irtexam.fit(responses, model="2pl", method="map", draws=20).save(tmp_path / "fit")
    folder = tmp_path / "fit"
    (folder / "responses.npz").unlink()
    responses.save(folder / "responses.parquet")
    meta = json.loads((folder / "meta.json").read_text())
    for table in ("files", "sha256"):
        meta[table].pop("responses.npz")
    meta["files"]["responses.parquet"] = (folder / "responses.parquet").stat().st_size
    meta["sha256"]["responses.parquet"] = file_sha256(folder / "responses.parquet")
    (folder / "meta.json").write_text(json.dumps(meta))
    _same_matrix(irtexam.load_fit(folder).responses, responses)


def test_netcdf_observed_data_is_int8_with_a_fill_value_that_reads_back_as_nan(tmp_path):
    az = pytest.importorskip("arviz")
    values = np.array([[1, 0, np.nan], [np.nan, 1, 1]], dtype=np.float32)
    compact = compact_observed(values)
    assert isinstance(compact, FilledScores) and compact.scores.dtype == np.int8
    np.testing.assert_array_equal(compact.scores, [[1, 0, -1], [-1, 1, 1]])
    assert compact_observed(values * 0.5) is not None and not isinstance(compact_observed(values * 0.5), FilledScores)
    responses, _ = irtexam.simulate(15, 20, model="2pl", seed=5)
    responses = _with_missing(responses, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        irtexam.fit(responses, model="2pl", method="map", draws=20).save(tmp_path / "fit")
        data = az.from_netcdf(str(tmp_path / "fit" / "fit.nc"))
    observed = data.observed_data["response"].values
    assert observed.dtype.kind == "f"
    np.testing.assert_array_equal(observed, responses.values)  # NaN exactly where missing
