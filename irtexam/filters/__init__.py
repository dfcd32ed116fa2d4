"""irtexam.filters"""
