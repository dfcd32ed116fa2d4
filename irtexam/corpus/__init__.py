"""irtexam.corpus"""
