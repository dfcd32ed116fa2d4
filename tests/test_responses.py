"""ResponseMatrix: reading, validation errors naming file/row/column, round trips, subsetting."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irtexam.errors import InputError
from irtexam.responses import ResponseMatrix


def write(tmp_path, text, name="r.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD = """item,examinee,response,llm,retriever
q1,e1,1,small,bm25
q1,e2,0,big,bm25
q2,e1,,small,bm25
q2,e2,1,big,bm25
q10,e1,0,small,bm25
q10,e2,1,big,bm25
"""


def test_read_long_csv_with_missing_and_facets(tmp_path):
    rm = ResponseMatrix.read(write(tmp_path, GOOD))
    assert rm.items == ("q1", "q2", "q10")  # natural order, not q1, q10, q2
    assert rm.examinees == ("e1", "e2")
    np.testing.assert_array_equal(rm.observed, [[True, True], [False, True], [True, True]])
    assert rm.values[0, 0] == 1 and rm.values[0, 1] == 0 and rm.values[2, 1] == 1
    assert rm.facet_names == ["llm", "retriever"]
    assert rm.examinee_facets.loc["e2", "llm"] == "big"
    assert rm.facet_levels("llm") == ["big", "small"]
    assert rm.describe()["observed"] == 5


def test_missing_required_column_names_the_column(tmp_path):
    path = write(tmp_path, "item,examinee,score\nq1,e1,1\n")
    with pytest.raises(InputError, match=r"r\.csv.*column 'response'"):
        ResponseMatrix.read(path)


def test_non_binary_response_names_row_and_column(tmp_path):
    path = write(tmp_path, "item,examinee,response\nq1,e1,1\nq1,e2,2\n")
    with pytest.raises(InputError, match=r"r\.csv, row 2, column 'response'.*'2'"):
        ResponseMatrix.read(path)
    path = write(tmp_path, "item,examinee,response\nq1,e1,yes!\n", name="s.csv")
    with pytest.raises(InputError, match=r"s\.csv, row 1, column 'response'"):
        ResponseMatrix.read(path)


def test_graded_responses_are_accepted_in_graded_mode(tmp_path):
    path = write(tmp_path, "item,examinee,response\nq1,e1,0\nq1,e2,2\nq2,e1,5\nq2,e2,3\n")
    rm = ResponseMatrix.read(path, graded=True)
    assert rm.max_score == 5 and not rm.is_binary
    with pytest.raises(InputError, match="row 1"):
        ResponseMatrix.read(write(tmp_path, "item,examinee,response\nq1,e1,1.5\n", "g.csv"), graded=True)


def test_conflicting_duplicates_name_both_rows(tmp_path):
    path = write(tmp_path, "item,examinee,response\nq1,e1,1\nq2,e1,0\nq1,e1,0\n")
    with pytest.raises(InputError) as info:
        ResponseMatrix.read(path)
    message = str(info.value)
    assert "row 1" in message and "row 3" in message and "conflicting" in message


def test_identical_duplicates_are_an_error_too(tmp_path):
    path = write(tmp_path, "item,examinee,response\nq1,e1,1\nq1,e1,1\n")
    with pytest.raises(InputError, match="identical duplicate rows"):
        ResponseMatrix.read(path)


def test_facet_changing_within_examinee(tmp_path):
    path = write(tmp_path, "item,examinee,response,llm\nq1,e1,1,small\nq2,e1,0,big\n")
    with pytest.raises(InputError, match=r"row 2, column 'llm'.*changes within examinee 'e1'"):
        ResponseMatrix.read(path)


def test_empty_file_and_header_only(tmp_path):
    with pytest.raises(InputError, match="empty"):
        ResponseMatrix.read(write(tmp_path, ""))
    with pytest.raises(InputError, match="no rows"):
        ResponseMatrix.read(write(tmp_path, "item,examinee,response\n", "h.csv"))


def test_blank_ids_are_rejected(tmp_path):
    with pytest.raises(InputError, match=r"row 2, column 'examinee'"):
        ResponseMatrix.read(write(tmp_path, "item,examinee,response\nq1,e1,1\nq2,,1\n"))


def test_unknown_extension(tmp_path):
    with pytest.raises(InputError, match="unknown response file type"):
        ResponseMatrix.read(write(tmp_path, "x", "r.xlsx"))


def test_constant_items_and_examinees_are_reported(tmp_path):
    text = "item,examinee,response\n" + "\n".join(
        f"{item},{ex},{value}" for item, ex, value in [
            ("easy", "e1", 1), ("easy", "e2", 1), ("easy", "e3", 1),
            ("hard", "e1", 0), ("hard", "e2", 0), ("hard", "e3", 0),
            ("mid", "e1", 1), ("mid", "e2", 0), ("mid", "e3", 1)]) + "\n"
    rm = ResponseMatrix.read(write(tmp_path, text))
    assert rm.constant_items()["all_correct"] == ["easy"]
    assert rm.constant_items()["all_wrong"] == ["hard"]
    assert rm.constant_examinees()["all_wrong"] == []
    assert rm.constant_examinees()["all_correct"] == []
    warnings = " ".join(rm.warnings())
    assert "easy" in warnings and "hard" in warnings and "carry no information" in warnings


@pytest.mark.parametrize("name", ["r.csv", "r.csv.gz", "r.parquet", "r.jsonl", "r.tsv"])
def test_round_trip(tmp_path, name):
    rm = ResponseMatrix.read(write(tmp_path, GOOD, "in.csv"))
    rm = rm.with_item_meta(pd.DataFrame({"question": ["a?", "b?", "c?"]}, index=["q1", "q2", "q10"]))
    path = rm.save(tmp_path / name)
    back = ResponseMatrix.read(path)
    np.testing.assert_array_equal(back.values, rm.values)
    assert back.items == rm.items and back.examinees == rm.examinees
    pd.testing.assert_frame_equal(back.examinee_facets, rm.examinee_facets)
    assert back.item_meta.loc["q10", "question"] == "c?"


def test_from_wide_and_to_wide():
    wide = pd.DataFrame([[1, 0, np.nan], [0, 1, 1]], index=["m1", "m2"], columns=["i1", "i2", "i3"])
    rm = ResponseMatrix.from_wide(wide, facets={"llm": ["a", "b"]})
    assert rm.values.shape == (3, 2)
    assert rm.values[1, 1] == 1 and np.isnan(rm.values[2, 0])
    assert rm.examinee_facets.loc["m2", "llm"] == "b"
    pd.testing.assert_frame_equal(rm.to_wide(), wide.rename_axis(index="examinee", columns="item"), check_dtype=False)
    with pytest.raises(InputError, match="not 0 or 1"):
        ResponseMatrix.from_wide(np.array([[0, 2]]))


def test_subset_follows_ids_not_positions():
    values = np.arange(12, dtype=float).reshape(4, 3) % 2
    rm = ResponseMatrix(values=values, items=("a", "b", "c", "d"), examinees=("x", "y", "z"))
    sub = rm.subset(items=["d", "b"], examinees=["z", "x"])
    assert sub.items == ("d", "b")
    np.testing.assert_array_equal(sub.values, values[[3, 1]][:, [2, 0]])
    with pytest.raises(InputError, match="unknown item"):
        rm.subset(items=["nope"])


WIDE = """model,q1,q2,q10
m1,1,0,
m2,true,no,1
m3,0,1,0
"""


def test_wide_file_reads_like_the_wide_dataframe(tmp_path):
    """A leaderboard kept wide (one row per model, one column per item) reads as the same matrix as its DataFrame:
    ids from the first column, each cell parsed as a long table's response (true/no too), blank = missing."""
    from_file = ResponseMatrix.read(write(tmp_path, WIDE))
    frame = pd.DataFrame({"q1": [1, 1, 0], "q2": [0, 0, 1], "q10": [np.nan, 1, 0]}, index=["m1", "m2", "m3"])
    expected = ResponseMatrix.coerce(frame)
    assert from_file.examinees == expected.examinees == ("m1", "m2", "m3")
    assert from_file.items == expected.items
    np.testing.assert_array_equal(from_file.values, expected.values)
    assert from_file.source.endswith("r.csv")
    # a column named examinee holds the ids wherever it stands (pandas writes a named index first, others not)
    moved = write(tmp_path, "q1,examinee,q2,q10\n1,m1,0,\ntrue,m2,no,1\n0,m3,1,0\n", "moved.csv")
    np.testing.assert_array_equal(ResponseMatrix.read(moved).values, expected.values)


def test_wide_file_errors_name_the_file_column_and_examinee(tmp_path):
    with pytest.raises(InputError, match=r"bad\.csv, row 2, column 'q2': response 'maybe'.*examinee 'm2'.*wide table"):
        ResponseMatrix.read(write(tmp_path, "model,q1,q2\nm1,1,0\nm2,0,maybe\n", "bad.csv"))
    with pytest.raises(InputError, match=r"twice\.csv.*examinee id 'm1' appears more than once in the table's"):
        ResponseMatrix.read(write(tmp_path, "model,q1,q2\nm1,1,0\nm1,0,1\n", "twice.csv"))
    with pytest.raises(InputError, match=r"blank\.csv, row 2, column 'model': no examinee id"):
        ResponseMatrix.read(write(tmp_path, "model,q1,q2\nm1,1,0\n,0,1\n", "blank.csv"))
    # a long table that misses a column is not taken for a wide one, and a long error lists few columns
    many = ",".join(["item", "examinee"] + [f"x{k}" for k in range(40)])
    path = write(tmp_path, many + "\n" + ",".join(["q1", "e1"] + ["0"] * 40) + "\n", "many.csv")
    with pytest.raises(InputError, match=r"missing required column\(s\) \['response'\].*\.\.\. \(42 columns\)$"):
        ResponseMatrix.read(path)


def test_wide_parquet_keeps_the_index_pandas_stored(tmp_path):
    """DataFrame.to_parquet stores a labelled index; read back, it holds the ids (not the first item column)."""
    frame = pd.DataFrame({"q1": [1, 0, 1], "q2": [0, 0, 1]}, index=pd.Index(["m1", "m2", "m3"], name="model"))
    frame.to_parquet(tmp_path / "w.parquet")
    frame.rename_axis(None).to_parquet(tmp_path / "unnamed.parquet")
    frame.reset_index().to_parquet(tmp_path / "column.parquet", index=False)
    for name in ("w.parquet", "unnamed.parquet", "column.parquet"):
        rm = ResponseMatrix.read(tmp_path / name)
        assert rm.examinees == ("m1", "m2", "m3") and rm.items == ("q1", "q2"), name
        np.testing.assert_array_equal(rm.values, frame.to_numpy(dtype=float).T)


def test_long_tables_with_llm_eval_column_names_are_read_as_long(tmp_path):
    """(model, question_id, correct) as LLM evaluation logs name them: read as a long table, with a DataWarning that
    names the guess, from a file and from a DataFrame alike; wide tables and ambiguous names are left alone."""
    from irtexam.warning_types import DataWarning

    log = pd.DataFrame({"model": ["m1", "m1", "m2", "m2", "m3"], "question_id": ["q1", "q2", "q1", "q2", "q2"],
                        "correct": [1, 0, 1, 1, 0]})
    log.to_csv(tmp_path / "log.csv", index=False)
    with pytest.warns(DataWarning, match="item = 'question_id', examinee = 'model', response = 'correct'"):
        from_file = ResponseMatrix.read(tmp_path / "log.csv")
    with pytest.warns(DataWarning, match="the DataFrame: read as a long table"):
        from_frame = ResponseMatrix.coerce(log)
    standard = ResponseMatrix.coerce(log.rename(columns={"model": "examinee", "question_id": "item",
                                                         "correct": "response"}))
    for rm in (from_file, from_frame):
        assert rm.items == standard.items and rm.examinees == standard.examinees
        assert np.array_equal(rm.values, standard.values, equal_nan=True)
    assert np.isnan(from_file.values[0, 2])                      # m3 did not answer q1
    wide = pd.DataFrame({"model": ["m1", "m2"], "q1": [1, 0], "q2": [0, 1]}).set_index("model")
    assert ResponseMatrix.coerce(wide).n_items == 2              # a wide table with a 'model' index stays wide
    two = log.assign(system=log["model"])                        # two candidates for the examinee: no guess
    with pytest.raises(InputError):
        ResponseMatrix.coerce(two)
