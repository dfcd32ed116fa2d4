"""Integration with the real SmolLM2-135M backend: IDK judge and EXAM++ grading produce valid grades."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.llm, pytest.mark.slow]  # ~30-60 s on 1 shared CPU thread


@pytest.fixture(scope="module")
def smollm(tmp_path_factory):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from irtexam.llm import CachedLLM, load_llm

    try:
        llm = load_llm("smollm2-135m")
    except Exception as exc:  # package not installed on this machine
        pytest.skip(f"SmolLM2 not available: {exc}")
    return CachedLLM(llm, tmp_path_factory.mktemp("llmcache"))


def test_idk_judge_and_exam_grader_with_smollm(smollm):
    from irtexam.grading.exampp import BankQuestion, ExamGrader, Passage
    from irtexam.grading.idk import LLMIdkJudge

    judge = LLMIdkJudge(smollm, method="score")
    values = judge.judge(["What is the default port?", "What is the default port?"],
                         ["I don't know, the documents do not say.", "The default port is 5432."])
    assert all(v in (0.0, 0.5, 1.0) for v in values) and judge.name.startswith("llm-judge:")

    grader = ExamGrader(smollm, rating_method="generate", max_new_tokens=16)
    rec = grader.grade_passage(Passage("q1", "s", "p1", "PostgreSQL listens on port 5432 by default.", 1),
                               [BankQuestion("q1/a", "Which port does PostgreSQL use by default?", ["5432"])])
    g = rec["exam_grades"][0]
    assert 0 <= g["self_rating"] <= 5 and isinstance(g["answer"], str) and isinstance(g["correct"], bool)
    assert rec["llm"] == smollm.name
    # the cache makes the second run free: same grades, no new model calls
    misses = smollm.misses
    assert grader.grade_passage(Passage("q1", "s", "p1", "PostgreSQL listens on port 5432 by default.", 1),
                                [BankQuestion("q1/a", "Which port does PostgreSQL use by default?", ["5432"])]) == rec
    assert smollm.misses == misses
