"""irtexam.analysis"""
