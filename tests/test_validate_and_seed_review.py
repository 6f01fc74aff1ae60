"""The CLI's new refusals and warnings at their edges, each planted as a bug by a review (h107) and passed by the
tests then: --seed 0 with greedy decoding is refused as any seed is; validate asks this machine about graphs:
compile (a CUDA-only setting, as on) and warns where it has no CUDA."""
import pytest
import torch
from typer.testing import CliRunner

from draftsmith.cli import app


def test_seed_zero_without_sampling_is_refused(monkeypatch):
    import draftsmith

    monkeypatch.setattr(draftsmith, "load_spec", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("loaded")))
    res = CliRunner().invoke(app, ["generate", "--spec", "demo", "--seed", "0", "--max-new-tokens", "3"])
    assert res.exit_code == 2 and "--seed 0: greedy decoding (--temperature 0) draws nothing" in res.output, res.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="the warning is this machine's: one without CUDA")
def test_validate_warns_of_graphs_compile_without_cuda(tmp_path):
    (tmp_path / "s.yaml").write_text("name: s-x\nextends: eagle3-llama\ndecoding: {graphs: compile}\n")
    res = CliRunner().invoke(app, ["validate", str(tmp_path / "s.yaml")])
    assert res.exit_code == 0, res.output
    assert "warning: a load on this machine (cpu) refuses it as written" in res.output, res.output
    assert "decoding.graphs" in res.output
