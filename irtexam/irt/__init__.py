"""irtexam.irt"""
