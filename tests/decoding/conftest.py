"""Tiny target + draft pairs in the real layouts, written once per session."""
from pathlib import Path

import pytest
import yaml

import draftsmith
from draftsmith.testing import write_eagle1, write_eagle3, write_self_draft, write_target

BUILTIN = Path(draftsmith.__file__).parent / "specs" / "builtin"


@pytest.fixture(autouse=True)
def loop_as_on_cuda(monkeypatch):
    """The decode loop as CUDA runs it, one step ahead of the host (engine._loop; the CPU runs in lockstep, where
    a step launched ahead gains nothing): these tests hold that order to the CPU's results."""
    from draftsmith.decoding import engine

    monkeypatch.setattr(engine, "runs_ahead", lambda device: True)


@pytest.fixture(scope="session")
def pairs(tmp_path_factory):
    """name -> assembled SpeculativeModel (float64, so equality never hinges on a rounding tie)."""
    root = tmp_path_factory.mktemp("pairs")
    write_target(root / "llama", "llama", num_hidden_layers=8, seed=3)
    write_target(root / "qwen3", "qwen3", num_hidden_layers=7, seed=4, head_dim=24)
    write_eagle1(root / "e1", root / "llama", bias=None)
    write_eagle3(root / "e3", root / "qwen3", draft_vocab=48)
    write_eagle3(root / "e3big", root / "llama", std=1.5, seed=9)        # wild logits: an adversarial draft
    write_target(root / "self-t", "llama", num_hidden_layers=2, seed=5)
    write_self_draft(root / "self-d", root / "self-t")
    spec = yaml.safe_load((BUILTIN / "eagle1-llama.yaml").read_text())
    spec |= {"name": "self-draft"}
    spec["draft"]["norms"] = {"input": "all", "final": True}
    (root / "self.yaml").write_text(yaml.safe_dump(spec))
    load = lambda s, t, d: draftsmith.assemble(s, target=root / t, draft=root / d, dtype="float64")  # noqa: E731
    return {
        "eagle1": load("eagle1-llama", "llama", "e1"),
        "eagle3": load("eagle3-llama", "qwen3", "e3"),
        "adversarial": load("eagle3-llama", "llama", "e3big"),
        "self": load(str(root / "self.yaml"), "self-t", "self-d"),
    }
