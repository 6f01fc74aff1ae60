"""assemble() resolves a spec's ``cache:NAME`` target once: the early folder check (8b8150b) resolved it, then
plan_assembly again, and each resolve checks the cached files' sha256 (SmolLM2's float32 weights, ~540 MB: ~0.4 s
more on every default `draftsmith generate`)."""
from pathlib import Path

import draftsmith
from draftsmith import hub

DEMO_TARGET = Path(draftsmith.__file__).parent / "demo_data" / "target"


def test_a_cached_target_is_resolved_once(monkeypatch):
    calls = []
    monkeypatch.setattr(hub, "ensure_target", lambda *a, **k: calls.append(1) or DEMO_TARGET)
    spec = draftsmith.load_spec("demo")
    spec = spec.model_copy(update={"checkpoints": spec.checkpoints.model_copy(update={"target": "cache:smollm2"})})
    model = draftsmith.assemble(spec)
    assert len(calls) == 1 and model.folders["target"] == DEMO_TARGET
