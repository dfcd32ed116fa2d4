"""irtexam.retrieval"""
