import os

import pytest
import torch
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# a long search, run by hand now and then (HYPOTHESIS_PROFILE=deep): what the CI's 40 examples may not reach
settings.register_profile("deep", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

torch.set_num_threads(1)  # tiny models: thread hand-offs cost more than they save


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true",
                     help="also run the tests marked slow (the cached SmolLM2 pair: minutes on a CPU)")


def pytest_collection_modifyitems(config, items):
    skips = {}
    if not torch.cuda.is_available():
        skips["gpu"] = pytest.mark.skip(reason="needs CUDA")
    if not config.getoption("--runslow"):
        skips["slow"] = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        for mark, skip in skips.items():
            if mark in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _one_thread_after():
    """Back to one thread after a test that changed it (the CLI's --threads auto sets the count it measured)."""
    yield
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@pytest.fixture
def no_tensor_reads(monkeypatch):
    """Call it to make any read of tensor data fail the test: for what must be refused before a tensor is read
    (``before``: what the message says should have come first)."""
    def forbid(before: str = "the config was checked"):
        def no_read(*_, **__):
            raise AssertionError(f"tensor data was read before {before}")

        for where in ("checkpoint", "load", "assemble"):
            monkeypatch.setattr(f"draftsmith.assembler.{where}.read_tensors", no_read)
    return forbid


@pytest.fixture
def scale_calls(monkeypatch):
    """bench --scale's run replaced by a recorder of its (shapes, keywords): nothing measured or written."""
    calls = []
    monkeypatch.setattr("draftsmith.scale.run.run_scale", lambda shapes, out, **kw: calls.append((shapes, kw)) or [])
    monkeypatch.setattr("draftsmith.scale.report.markdown", lambda results: "table")
    return calls
