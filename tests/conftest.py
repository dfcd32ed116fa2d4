"""Shared test setup: offline model hubs, one torch thread, quiet warnings."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_configure(config):
    """Markers registered here (not in pyproject.toml, whose hash stamps scripts/setup.sh)."""
    config.addinivalue_line("markers", "served: starts a real llama.cpp server; needs llama-cpp-python[server] "
                                       "(scripts/setup_llama_server.sh)")
