"""Exam schema, generation prompts, parsing of LLM output, seeded choice shuffling."""

from .schema import LETTERS, ExamItem, read_exam, write_exam

__all__ = ["LETTERS", "ExamItem", "read_exam", "write_exam"]
