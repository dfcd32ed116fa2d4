"""What the response readers check before a fit (issue 41), beyond the one-line errors of the bad-input
table: the warnings a table earns (an examinee with no answers, a graded item's unused category), the
category count, the density bound, and negative numbers in scientific notation as option values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irtexam.errors import InputError, IrtexamError
from irtexam.responses import ResponseMatrix
from irtexam.table_checks import category_gaps, first_short_row


def _long(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["item", "examinee", "response"])


def test_an_examinee_without_answers_is_warned_like_an_item():
    rm = ResponseMatrix.from_long(_long([("q1", "e1", 1), ("q2", "e1", 0), ("q1", "e2", None), ("q2", "e2", None),
                                         ("q1", "e3", 0), ("q2", "e3", 1)]))
    messages = [str(m) for m in rm.warnings()]
    assert any("1 examinee(s) have no responses at all (e2)" in m for m in messages), messages


def test_a_graded_items_unused_category_is_named():
    rows = [(f"q{i}", f"e{j}", (i + j) % 3) for i in range(3) for j in range(6)]
    rows += [("q9", f"e{j}", [0, 1, 3][j % 3]) for j in range(6)]  # q9 never scores 2
    rm = ResponseMatrix.from_long(_long(rows), graded=True)
    messages = [str(m) for m in rm.warnings()]
    assert any("1 graded item(s)" in m and "q9: 2" in m for m in messages), messages
    gapless = ResponseMatrix.from_long(_long(rows[:18]), graded=True)
    assert not any("graded item(s)" in str(m) for m in gapless.warnings())


def test_category_gaps_by_blocks():
    values = np.full((5, 4), np.nan, dtype=np.float32)
    values[0] = [0, 1, 2, 3]
    values[1] = [0, 3, np.nan, 0]      # 1 and 2 unused
    values[2, :2] = [1, 3]             # 2 unused (no 0 needed below its lowest)
    values[3] = [2, 2, 2, 2]           # a single category: no gap
    assert category_gaps(values, 3) == {1: [1, 2], 2: [2]}


@pytest.mark.parametrize("text, short", [("item,examinee,response\nq1,e1,1\nq2,e1\n", (2, 2, 3)),
                                         ("item,examinee,response\nq1,e1,1\n\nq2,e1,\n", None)])
def test_first_short_row(tmp_path, text, short):
    path = tmp_path / "t.csv"
    path.write_text(text)
    assert first_short_row(path, ",") == short


def test_a_score_past_the_category_limit_is_refused_before_any_array(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("item,examinee,response\nq1,e1,0\nq1,e2,2\nq2,e1,16777217\nq2,e2,1\n")
    with pytest.raises(InputError, match=r"g.csv, row 3, column 'response': response '16777217' is above 100"):
        ResponseMatrix.read(path, graded=True)


def test_the_density_bound_names_the_size():
    from irtexam.paths import check_density

    values = np.full((2000, 600), np.nan, dtype=np.float32)
    values[np.arange(2000), np.arange(2000) % 600] = 1  # one response an item
    with pytest.raises(IrtexamError, match=r"t: 2000 x 600 = 1,200,000 cells hold 2,000 responses"):
        check_density(values, "t: 2000 x 600")
    values[:, :20] = 0  # 3.4% observed: fitted
    check_density(values, "t")


def test_negative_numbers_in_scientific_notation_are_values(capsys):
    from irtexam.cli import main

    assert main(["info", "fit", "--theta-min", "-1e3", "--out", "o"]) == 2
    err = capsys.readouterr().err
    assert "must be a finite number in [-50, 50], got '-1e3'" in err and "expected one argument" not in err
    assert main(["info", "fit", "--theta-min", "-1e0", "--out", "o"]) == 2  # a value: the missing fit is the error
    assert "fit: " in capsys.readouterr().err


def test_over_blocks_concatenates_rows_of_zero_width():
    """10^4 sparse items ended in ZeroDivisionError (issue 41): per-examinee rows with a zero-size axis were
    reshaped with -1, which cannot be inferred from a zero-size array."""
    import jax.numpy as jnp

    from irtexam.irt.examinee_blocks import over_blocks

    responses, groups = jnp.zeros((3, 4, 5), dtype=jnp.int8), jnp.zeros((3, 4), dtype=jnp.int32)
    total, rows = over_blocks(lambda y, g: (y.sum(), jnp.zeros((y.shape[0], 0))), responses, groups)
    assert rows.shape == (12, 0) and float(total) == 0.0


def test_a_resumed_prune_counts_the_warnings_of_the_rounds_it_loads(tmp_path):
    """Issue 41: rounds loaded from the checkpoint raised no warnings, so a resumed prune counted fewer."""
    import irtexam

    responses, _ = irtexam.simulate(12, 120, model="2pl", seed=4)
    values = responses.values.copy()
    values[:, 0] = 1  # an examinee who answered everything right: every fit warns about it
    rm = ResponseMatrix(values=values, items=responses.items, examinees=responses.examinees)
    options = dict(model="2pl", method="em", steps=2, drop=0.2, min_items=4, progress=False,
                   checkpoint=tmp_path / "rounds")
    first = irtexam.prune(rm, **options)
    assert first.warnings and any("answered every item correctly" in w for w in first.warnings)
    again = irtexam.prune(rm, **options)  # every round loaded from the checkpoint
    assert again.warnings == first.warnings
