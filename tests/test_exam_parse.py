"""The MCQ parser on realistic raw LLM outputs, failure modes, and fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irtexam.exam.parse import REASONS, ParseFailure, parse_mcq, try_parse

PAPER_FORMAT = """Question: Which parameter sets the maximum number of concurrent connections?
A) shared_buffers
B) max_connections
C) work_mem
D) listen_addresses
Correct Answer: B
Explanation: max_connections determines the maximum number of concurrent connections."""

GOOD = [
    (PAPER_FORMAT, 1, "max_connections"),
    # (A) style + "The answer is"
    ("Here is a difficult question:\n\nQuestion: What does VACUUM FULL do?\n(A) Rewrites the table\n(B) Drops the table\n"
     "(C) Creates an index\n(D) Starts a transaction\n\nThe answer is (A).", 0, "Rewrites the table"),
    # A. style with bold markdown
    ("**Question:** Which tool backs up a single database?\n\nA. pg_dump\nB. initdb\nC. pg_ctl\nD. createuser\n\n"
     "**Correct Answer:** A. pg_dump", 0, "pg_dump"),
    # numbered choices, numeric answer
    ("Question: Which lock mode is taken by a plain SELECT?\n1) ACCESS SHARE\n2) ROW EXCLUSIVE\n3) EXCLUSIVE\n"
     "4) ACCESS EXCLUSIVE\nCorrect Answer: 1", 0, "ACCESS SHARE"),
    # answer given as text only
    ("Question: Which file controls client authentication?\nA) postgresql.conf\nB) pg_hba.conf\nC) pg_ident.conf\n"
     "D) recovery.conf\nCorrect Answer: pg_hba.conf", 1, "pg_hba.conf"),
    # the answer line glued to choice D (the paper parser's failure)
    ("Question: What is the default port?\nA) 5432\nB) 3306\nC) 1521\nD) 8080 Correct Answer: A", 0, "8080"),
    # explanation right after D without a blank line
    ("Question: Which command reclaims storage?\nA) ANALYZE\nB) VACUUM\nC) CLUSTER ON\nD) REINDEX\n"
     "Explanation: VACUUM reclaims storage occupied by dead tuples.\nCorrect Answer: B", 1, "REINDEX"),
    # multi-line choice and lower-case letters
    ("Question: What happens when synchronous_commit is off?\na) Transactions may report success before WAL\n"
     "   is flushed to disk\nb) The server refuses writes\nc) Replication stops\nd) Checkpoints are disabled\n"
     "Answer: a", 0, "Checkpoints are disabled"),
    # all choices on one line
    ("Question: Which is a PostgreSQL data type? A) jsonb B) varchar2 C) number D) nvarchar(max)\n"
     "Correct Answer: A", 0, "nvarchar(max)"),
    # "The correct answer is B) text"
    ("Which statement creates a role that can log in?\nA) CREATE ROLE r NOLOGIN\nB) CREATE USER r\n"
     "C) DROP ROLE r\nD) ALTER ROLE r NOLOGIN\nThe correct answer is B) CREATE USER r, because CREATE USER implies LOGIN.",
     1, "ALTER ROLE r NOLOGIN"),
    # Correct Answer: on its own line, value on next line
    ("Question: Which setting enables WAL archiving?\nA) archive_mode\nB) wal_buffers\nC) fsync\nD) autovacuum\n"
     "Correct Answer:\nA) archive_mode", 0, "autovacuum"),
    # Option X: style
    ("Question: Which index type supports range queries?\nOption A: B-tree\nOption B: Hash\nOption C: Bloom\n"
     "Option D: none\nCorrect option: Option A", 0, "none"),
]


@pytest.mark.parametrize("raw, answer, choice_d_or_correct", GOOD)
def test_parses_realistic_outputs(raw, answer, choice_d_or_correct):
    q = parse_mcq(raw)
    assert q.answer == answer
    assert len(q.choices) == 4 and len(set(q.choices)) == 4
    assert choice_d_or_correct in q.choices
    assert q.question.endswith("?")
    for c in q.choices:  # nothing leaks
        low = c.lower()
        assert "correct answer" not in low and "explanation" not in low and "answer:" not in low


def test_choice_d_does_not_swallow_answer_or_explanation():
    q = parse_mcq(GOOD[5][0])
    assert q.choices[3] == "8080"
    q = parse_mcq(GOOD[6][0])
    assert q.choices[3] == "REINDEX"
    assert q.explanation and q.explanation.startswith("VACUUM reclaims")


def test_multiline_choice_joined():
    q = parse_mcq(GOOD[7][0])
    assert q.choices[0] == "Transactions may report success before WAL is flushed to disk"


BAD = [
    ("", "empty_output"),
    ("I cannot generate a question from this documentation.", "no_choices"),
    ("Question: What?\nA) one\nB) two\nC) three\nCorrect Answer: A", "wrong_number_of_choices"),
    ("Question: Which?\nA) pg_dump\nB) pg_dump\nC) initdb\nD) psql\nCorrect Answer: A", "duplicate_choices"),
    ("Question: Which?\nA) `pg_dump`.\nB) pg_dump\nC) initdb\nD) psql\nCorrect Answer: C", "duplicate_choices"),
    ("Question: Is it?\nA) True\nB) true.\nC) Maybe\nD) Never\nCorrect Answer: C", "duplicate_choices"),
    ("Question: Which tool?\nA) pg_dump\nB) initdb\nC) psql\nD) pg_ctl", "no_answer"),
    ("Question: Which tool?\nA) pg_dump\nB) initdb\nC) psql\nD) pg_ctl\nCorrect Answer: A and C", "multiple_answers"),
    ("Question: Which tool?\nA) pg_dump\nB) initdb\nC) psql\nD) pg_ctl\nCorrect Answer: mysqldump",
     "answer_not_in_choices"),
    ("Question: Which tool?\nA) pg_dump\nB) initdb\nC) psql\nD) pg_ctl\nCorrect Answer: B) psql",
     "answer_letter_text_mismatch"),
    ("A) pg_dump\nB) initdb\nC) psql\nD) pg_ctl\nCorrect Answer: A", "no_question"),
    ("Question: Which?\nA) \nB) initdb\nC) psql\nD) pg_ctl\nCorrect Answer: B", "empty_choice"),
]


@pytest.mark.parametrize("raw, reason", BAD)
def test_rejects_with_reason(raw, reason):
    with pytest.raises(ParseFailure) as exc:
        parse_mcq(raw)
    assert exc.value.reason == reason
    assert try_parse(raw) == (None, reason)


LINE = st.sampled_from(["Question: Which option?", "A) alpha", "B) beta", "C) gamma", "D) delta",
                        "Correct Answer: B", "The answer is C", "Explanation: because", "", "(A) x", "1) one",
                        "Answer:", "D) delta Correct Answer: A", "**Question**", "A. a", "random text"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(LINE, st.text(max_size=40)), max_size=14))
def test_fuzz_never_crashes_never_leaks(lines):
    raw = "\n".join(lines)
    parsed, reason = try_parse(raw)
    assert (parsed is None) != (reason is None)
    if parsed is None:
        assert reason in REASONS
    else:
        assert len(parsed.choices) == 4 and 0 <= parsed.answer < 4
        assert len({c.lower() for c in parsed.choices}) == 4
        for c in parsed.choices:
            assert "correct answer" not in c.lower() and "explanation:" not in c.lower()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_fuzz_arbitrary_text(raw):
    parsed, reason = try_parse(raw)
    assert (parsed is None) != (reason is None)


def test_code_choices_differing_in_case_or_punctuation_are_distinct():
    # `pg_dump -n` and `pg_dump -N` are different options; `t;` and `t *;` different statements
    raw = ("Question: Which option dumps only matching schemas?\nA) pg_dump -n\nB) pg_dump -N\n"
           "C) pg_dump -t\nD) pg_dump -T\nCorrect Answer: A")
    parsed = parse_mcq(raw)
    assert list(parsed.choices) == ["pg_dump -n", "pg_dump -N", "pg_dump -t", "pg_dump -T"] and parsed.answer == 0
    raw = ("Question: Which statement also scans child tables?\nA) SELECT * FROM t;\nB) SELECT * FROM t *;\n"
           "C) SELECT * FROM ONLY t;\nD) SELECT t;\nCorrect Answer: B")
    assert parse_mcq(raw).answer == 1


# issue 16: flaws that need no verifier are refused at parse time (real raw outputs of data/real_run)
def test_a_fifth_lettered_choice_is_never_glued_to_choice_d():
    # monitoring-stats#39: the real-run exam had "WALInitSync E) WALInitWrite" as one candidate
    raw = ("Question: Which event ensures the new WAL segment reaches durable storage?\n\nA) WALCopyRead\n"
           "B) WALCopySync\nC) WALCopyWrite\nD) WALInitSync\nE) WALInitWrite\n\nCorrect Answer: B) WALCopySync\n")
    assert try_parse(raw) == (None, "wrong_number_of_choices")
    # choices E and F after a blank line are still extra choices (sql-explain#7)
    raw = ("Question: How do you enable an option?\n\nA) `SET x TO TRUE`\nB) `SET x TO ON`\nC) `SET x TO 1`\n"
           "D) `SET x TO FALSE`\nE) `SET x TO OFF`\nF) `SET x TO 0`\n\nCorrect Answer: C\n")
    assert try_parse(raw) == (None, "wrong_number_of_choices")
    # a D that continues on the next line is still one choice
    raw = ("Question: What does it do?\nA) one\nB) two\nC) three\nD) four that goes on\n   and on\nCorrect Answer: D")
    assert parse_mcq(raw).choices[3] == "four that goes on and on"


def test_template_placeholders_are_refused():
    # runtime-config-compatible#1: choice D was the literal "{candidate D}"
    raw = ("Question: What is the default value of backslash_quote?\n\nA) on\nB) off\nC) safe_encoding\n"
           "D) {candidate D}\n\nCorrect Answer: C\n")
    assert try_parse(raw) == (None, "template_placeholder")
    raw = "Question: {question}\nA) a1\nB) b2\nC) c3\nD) d4\nCorrect Answer: A"
    assert try_parse(raw) == (None, "template_placeholder")
    # braces that are not the template's placeholders stay (e.g. array literals)
    raw = "Question: Which literal is an array?\nA) '{1,2,3}'\nB) '(1,2,3)'\nC) '[1,2,3]'\nD) '<1,2,3>'\nCorrect Answer: A"
    assert parse_mcq(raw).choices[0] == "'{1,2,3}'"
