"""irtexam.grading"""
