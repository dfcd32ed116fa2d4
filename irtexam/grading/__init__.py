"""Graders: turn answers and RAG outputs into scores and response matrices.

* ``multiple_choice``: log-likelihood multiple-choice scoring;
* ``avert``: A-VERT free-form answer verification by embedding ranking;
* ``exampp``: EXAM++ / RUBRIC answerability grading, EXAM-Cover, EXAM-Qrels, leaderboards;
* ``mtrag``: MT-RAG algorithmic metrics; ``idk``: IDK detection and conditioning;
* ``embeddings``: the packaged MiniLM encoder and BERTScore; ``text``, ``records``: helpers.

Modules import torch / sentence-transformers only when an encoder or model is loaded.
"""
