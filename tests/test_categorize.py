"""Bloom (lemma keyword) and question-word categorisation."""

import json

import pandas as pd
import pytest

from irtexam.analysis import categories as cz
from irtexam.errors import InputError


def test_bloom_matches_on_lemmas_and_is_multilabel():
    q = "While troubleshooting the cluster, which setting should you configure and why?"
    levels = cz.bloom_levels(q)
    assert "analyze" in levels  # troubleshooting -> troubleshoot
    assert "apply" in levels  # configure, set(ting is not 'set' but configure matches)
    assert levels.index("apply") < levels.index("analyze")  # table order


def test_inflected_forms_match():
    assert "remember" in cz.bloom_levels("Which service was named in the agreement?")
    assert "evaluate" in cz.bloom_levels("The team chose a database. Was it justified?")
    assert "analyze" in cz.bloom_levels("Analysing the logs, what do you find?")


def test_uncategorised_when_no_keyword():
    assert cz.bloom_levels("What colour is the sky?") == ["uncategorised"]


@pytest.mark.parametrize("text,word", [
    ("What is the default port?", "what"),
    ("You are an engineer. When you deploy, errors occur. Which of the following is the cause?", "which"),
    ("Whose library is it?", "who"),
    ("How do I reset it?", "how"),
    ("Select the correct statement.", "other"),
    ("Why does the build fail", "why"),
])
def test_question_word(text, word):
    assert cz.question_word(text) == word


def test_categorize_frame_counts_and_user_table(tmp_path):
    qs = pd.Series({"q1": "What should you monitor?", "q2": "Where is the file stored?", "q3": "Name the tool."})
    df = cz.categorize(qs)
    assert df.loc["q1", "bloom"] == "evaluate"
    assert df.loc["q2", "bloom"] == "uncategorised"
    assert df.attrs["counts"]["bloom"]["uncategorised"] == 1
    assert df.attrs["counts"]["question_word"] == {"what": 1, "where": 1, "other": 1}
    path = tmp_path / "kw.yaml"
    path.write_text("storage: [store, disk]\nnaming: [name]\n")
    df2 = cz.categorize(qs, keywords=path)
    assert df2.loc["q2", "bloom"] == "storage"  # stored -> store
    assert df2.loc["q3", "bloom"] == "naming"
    jpath = tmp_path / "kw.json"
    jpath.write_text(json.dumps({"x": "monitor, watch"}))
    assert cz.categorize(qs, keywords=jpath).loc["q1", "bloom"] == "x"


def test_bad_keyword_table(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(InputError, match="bad.yaml"):
        cz.load_keyword_table(bad)
    with pytest.raises(InputError, match="keywords must be a list"):
        cz.load_keyword_table({"a": [1, 2]})


def test_add_categories_requires_question_column():
    meta = pd.DataFrame({"question": ["Which command lists files?"]}, index=["q1"])
    out = cz.add_categories(meta)
    assert out.loc["q1", "question_word"] == "which" and "remember" in out.loc["q1", "bloom"]
    with pytest.raises(InputError, match="question"):
        cz.add_categories(pd.DataFrame({"x": [1]}))


def test_categorize_exam_and_response_matrix():
    import numpy as np

    from irtexam.exam.schema import ExamItem
    from irtexam.responses import ResponseMatrix

    exam = [ExamItem(id="q1", question="Which tool should you use to monitor disks?", choices=["a", "b"],
                     answer=0, categories={"topic": "ops"})]
    got = cz.categorize_exam(exam)[0]
    assert got.categories == {"topic": "ops", "bloom": ["apply", "evaluate"], "question_word": "which"}
    assert exam[0].categories == {"topic": "ops"}
    rm = ResponseMatrix(values=np.array([[1.0, 0.0], [0.0, 1.0]]), items=["q1", "q2"], examinees=["m1", "m2"])
    out = cz.categorize_responses(rm, questions={"q1": "Why define it?"})
    assert out.item_meta.loc["q1", "bloom"] == "remember" and out.item_meta.loc["q1", "question_word"] == "why"
    assert out.item_meta.loc["q2", "bloom"] == "unknown"
    again = cz.categorize_responses(out, questions={"q1": "Why define it?"})
    assert list(again.item_meta.columns) == ["bloom", "question_word"]
