"""The streaming reader (irtexam.io_tables) gives what from_long gives, and the streaming parquet writer
writes what ResponseMatrix.save writes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from irtexam import io_tables
from irtexam.cli import main
from irtexam.errors import InputError
from irtexam.io_tables import read_plain_long, write_long_parquet
from irtexam.irt.simulate import simulate
from irtexam.responses import ResponseMatrix, _format_for, read_long_table


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    """Batches of a few rows, so that every file is read in several batches."""
    monkeypatch.setattr(io_tables, "BATCH_ROWS", 3)
    monkeypatch.setattr(io_tables, "CSV_BLOCK_BYTES", 64)


def old_read(path, graded=False) -> ResponseMatrix:
    return ResponseMatrix.from_long(read_long_table(path), graded=graded, source=str(path))


def assert_same(new: ResponseMatrix, old: ResponseMatrix) -> None:
    assert new.items == old.items and new.examinees == old.examinees
    assert new.values.dtype == old.values.dtype == np.float32
    np.testing.assert_array_equal(new.values, old.values)  # NaN where NaN
    assert new.max_score == old.max_score and new.source == old.source
    assert new.facet_names == old.facet_names == []
    assert new.fingerprint() == old.fingerprint()
    assert new.warnings() == old.warnings()


def frame_of(rows, *, ids=str) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["item", "examinee", "response"]).astype({"item": object, "examinee": object})


ROWS = [("q10", "e2", "1"), ("q2", "e2", ""), ("q1", "e2", "0"), ("q10", "e1", "0"), ("q2", "e1", "1"),
        ("q1", "e3", "true"), ("q2", "e3", None), ("q1", "e1", " yes "), ("01", "e1", "0"), ("1", "e1", "1"),
        ("q10", "e3", "NA")]


def write_parquet(frame: pd.DataFrame, path, *, schema: pa.Schema | None = None, row_group_size: int = 2):
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def write_text(frame: pd.DataFrame, path, sep=","):
    frame.to_csv(path, sep=sep, index=False, compression="gzip" if str(path).endswith(".gz") else None)
    return path


CASES = {
    "text": (frame_of(ROWS), False),
    "graded": (frame_of([("a", "x", "2"), ("b", "x", "0"), ("a", "y", ""), ("b", "y", "5"), ("c", "z", "1.0")]), True),
    "numeric": (pd.DataFrame({"item": ["i1", "i2", "i1", "i2", "i10"], "examinee": ["m1", "m1", "m2", "m2", "m3"],
                              "response": [1.0, np.nan, 0.0, 1.0, 1.0]}), False),
    "all missing": (frame_of([("a", "x", None), ("b", "x", "")]), False),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("name", ["r.parquet", "r.csv", "r.csv.gz", "r.tsv"])
def test_streaming_read_equals_from_long(tmp_path, case, name):
    frame, graded = CASES[case]
    path = tmp_path / name
    if name.endswith(".parquet"):
        write_parquet(frame, path)
    else:
        write_text(frame, path, sep="\t" if ".tsv" in name else ",")
    assert read_plain_long(path, _format_for(path), graded=graded) is not None  # the streaming path read it
    assert_same(ResponseMatrix.read(path, graded=graded), old_read(path, graded))


@pytest.mark.parametrize("types", [
    {"item": pa.int64(), "examinee": pa.int32(), "response": pa.int8()},
    {"item": pa.dictionary(pa.int32(), pa.string()), "examinee": pa.large_string(), "response": pa.bool_()},
    {"item": pa.string(), "examinee": pa.dictionary(pa.int8(), pa.string()),
     "response": pa.dictionary(pa.int32(), pa.string())},
    {"item": pa.uint16(), "examinee": pa.string(), "response": pa.float32()},
])
def test_streaming_read_of_typed_parquet_columns(tmp_path, types):
    items, examinees = [10, 2, 1, 10, 2, 1, 3], [5, 5, 5, 7, 7, 7, 5]
    responses = [1, 0, None, 0, 1, 1, 1]
    frame = pd.DataFrame({"item": items, "examinee": examinees, "response": responses}, dtype=object)
    if pa.types.is_string(types["item"]) or pa.types.is_dictionary(types["item"]):
        frame["item"] = [f"q{i}" for i in items]
    if not pa.types.is_integer(types["examinee"]):
        frame["examinee"] = [f"e{m}" for m in examinees]
    if pa.types.is_dictionary(types["response"]):
        frame["response"] = [None if r is None else str(r) for r in responses]
    elif pa.types.is_boolean(types["response"]):
        frame["response"] = [None if r is None else bool(r) for r in responses]
    schema = pa.schema([pa.field(name, dtype) for name, dtype in types.items()])
    path = write_parquet(frame, tmp_path / "r.parquet", schema=schema, row_group_size=3)
    assert read_plain_long(path, "parquet", graded=False) is not None
    assert_same(ResponseMatrix.read(path), old_read(path))


def test_tables_with_facets_or_metadata_are_read_by_from_long(tmp_path):
    frame = pd.DataFrame({"item": ["q1", "q1", "q2"], "examinee": ["a", "b", "a"], "response": [1, 0, 1],
                          "llm": ["x", "y", "x"], "item_text": ["t1", "t1", "t2"]})
    for name in ("r.parquet", "r.csv"):
        path = tmp_path / name
        write_parquet(frame, path) if name.endswith("parquet") else write_text(frame, path)
        assert read_plain_long(path, _format_for(path), graded=False) is None
        rm = ResponseMatrix.read(path)
        assert rm.facet_names == ["llm"] and rm.item_meta.loc["q2", "text"] == "t2"


BAD = {  # rows, expected message
    "duplicate": ([("q1", "e1", "1"), ("q2", "e1", "0"), ("q1", "e2", "1"), ("q1", "e1", "0")],
                  r", row 4, column 'item': item 'q1' / examinee 'e1' appears more than once \(conflicting"),
    "identical duplicate": ([("q1", "e1", "1"), ("q2", "e1", "0"), ("q2", "e2", "1"), ("q2", "e1", "0")],
                            r", row 4, column 'item': .*identical duplicate rows"),
    "bad score": ([("q1", "e1", "1"), ("q2", "e1", "0"), ("q1", "e2", "1"), ("q2", "e2", "2")],
                  r", row 4, column 'response': response '2' is not valid"),
    "bad text": ([("q1", "e1", "1"), ("q2", "e1", "0"), ("q1", "e2", "1"), ("q2", "e2", "maybe")],
                 r", row 4, column 'response': response 'maybe' is not 0 or 1"),
    "empty examinee": ([("q1", "e1", "1"), ("q2", "e1", "0"), ("q1", "e2", "1"), ("q2", None, "1")],
                       r", row 4, column 'examinee': empty examinee id"),
    "blank item": ([("q1", "e1", "1"), ("q2", "e1", "0"), ("q1", "e2", "1"), ("  ", "e2", "1")],
                   r", row 4, column 'item': empty item id"),
}


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("name", ["r.parquet", "r.csv"])
def test_bad_input_names_file_row_and_column(tmp_path, case, name):
    rows, message = BAD[case]
    path = tmp_path / name
    frame = frame_of(rows)
    write_parquet(frame, path) if name.endswith("parquet") else write_text(frame, path)
    with pytest.raises(InputError, match=r"^" + str(path).replace(".", r"\.") + message) as new:
        ResponseMatrix.read(path)
    with pytest.raises(InputError) as old:
        old_read(path)
    assert str(new.value) == str(old.value)


@pytest.mark.parametrize("name", ["r.parquet", "r.csv"])
def test_missing_column_and_empty_tables(tmp_path, name):
    path = tmp_path / name
    frame = pd.DataFrame({"item": ["q1"], "examinee": ["e1"], "score": ["1"]})
    write_parquet(frame, path) if name.endswith("parquet") else write_text(frame, path)
    with pytest.raises(InputError, match=r"r\.(parquet|csv).*column 'response'"):
        ResponseMatrix.read(path)
    empty = frame_of([]).astype(str)
    write_parquet(empty, path) if name.endswith("parquet") else write_text(empty, path)
    with pytest.raises(InputError, match="header but no rows"):
        ResponseMatrix.read(path)


def test_ragged_csv_keeps_the_parser_error(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("item,examinee,response\nq1,e1,1\nq1,e2,1,9\n")
    with pytest.raises(InputError, match=r"r\.csv: could not be parsed as csv"):
        ResponseMatrix.read(path)


@pytest.mark.parametrize("model, facets, missing", [("3pl", None, 0.0), ("2pl", None, 0.3), ("grm", None, 0.1),
                                                    ("2pl", {"llm": 3, "icl": 2}, 0.2)])
def test_streaming_parquet_writer_writes_what_save_writes(tmp_path, model, facets, missing):
    responses, _ = simulate(7, 11, model=model, seed=2, facets=facets, missing=missing)
    old = responses.save(tmp_path / "old.parquet")
    new = write_long_parquet(responses, tmp_path / "new.parquet", rows_per_group=20)
    assert pq.ParquetFile(new).metadata.num_row_groups > 1
    pd.testing.assert_frame_equal(pd.read_parquet(new), pd.read_parquet(old))
    back = ResponseMatrix.read(new, graded=model == "grm")
    assert back.fingerprint() == ResponseMatrix.read(old, graded=model == "grm").fingerprint()
    np.testing.assert_array_equal(back.values, responses.values)


def test_simulate_command_parquet_reads_back_as_the_simulated_matrix(tmp_path, capsys):
    out = tmp_path / "x.parquet"
    assert main(["simulate", "--items", "12", "--examinees", "30", "--model", "3pl", "--seed", "0",
                 "--out", str(out)]) == 0
    responses, _ = simulate(12, 30, model="3pl", seed=0)
    pd.testing.assert_frame_equal(pd.read_parquet(out), responses.to_long())
    assert ResponseMatrix.read(out).fingerprint() == responses.fingerprint()


def test_a_codes_backed_matrix_behaves_as_its_float_twin(tmp_path):
    """ResponseMatrix.from_codes (what reading a plain long table gives): values made on first use equal the float
    matrix's, and everything a fit reads (observed, ranges, fingerprint, describe, the checks) agrees without
    making them; pickling and dataclasses.replace keep it whole; bad codes are refused."""
    import dataclasses
    import pickle

    rng = np.random.default_rng(3)
    codes = rng.integers(-1, 3, size=(7, 11)).astype(np.int8)
    values = np.where(codes < 0, np.nan, codes).astype(np.float32)
    ids = ([f"i{k}" for k in range(7)], [f"m{k}" for k in range(11)])
    twin = ResponseMatrix(values, *ids, max_score=2)
    compact = ResponseMatrix.from_codes(codes, *ids, max_score=2)
    assert "values" not in compact.__dict__ and compact.cells is codes
    np.testing.assert_array_equal(compact.observed, twin.observed)
    assert compact.fingerprint() == twin.fingerprint()
    assert compact.describe() == pytest.approx(twin.describe())
    assert [str(m) for m in compact.warnings()] == [str(m) for m in twin.warnings()]
    assert compact.constant_items() == twin.constant_items()
    assert "values" not in compact.__dict__  # none of the above made the float matrix
    again = pickle.loads(pickle.dumps(compact))
    assert "values" not in again.__dict__ and again.fingerprint() == twin.fingerprint()
    np.testing.assert_array_equal(compact.values, values)  # made now, once
    assert compact.values is compact.values
    assert dataclasses.replace(compact, source="x").fingerprint() == twin.fingerprint()
    with pytest.raises(InputError, match=r"0\.\.1"):
        ResponseMatrix.from_codes(codes, *ids, max_score=1)
    with pytest.raises(ValueError, match="int8 or int16"):
        ResponseMatrix.from_codes(codes.astype(np.int32), *ids, max_score=2)
    with pytest.raises(AttributeError):
        compact.no_such_attribute  # noqa: B018


def test_a_cli_fit_of_a_plain_long_table_never_makes_the_float_matrix(tmp_path, monkeypatch):
    """`irtexam fit` on a plain parquet table: the matrix is read as int8 codes and the fit, its checks and its
    folder's writers work from them (a float32 copy is 4 bytes a cell: 106 MB at 12,032 x 2,211)."""
    responses, _ = simulate(40, 60, model="2pl", seed=1)
    values = responses.values.copy()
    values[0, :5] = np.nan
    path = write_long_parquet(ResponseMatrix(values, responses.items, responses.examinees), tmp_path / "r.parquet")
    made = []
    original = ResponseMatrix.__getattr__

    def spy(self, name):
        if name == "values":
            made.append(name)
        return original(self, name)

    monkeypatch.setattr(ResponseMatrix, "__getattr__", spy)
    assert isinstance(ResponseMatrix.read(path).cells.dtype, np.dtype) and ResponseMatrix.read(path).cells.dtype == np.int8
    assert main(["fit", str(path), "--model", "2pl", "--out", str(tmp_path / "fit")]) == 0
    assert made == []
    loaded = ResponseMatrix.read(path)
    np.testing.assert_array_equal(loaded.values, values)  # the codes hold the same scores
    assert made == ["values"]
