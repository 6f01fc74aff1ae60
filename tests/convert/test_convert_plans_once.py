"""convert plans the source's canonical names once: the checks and the read share the plan (read_canonical took
the folder and planned it again, and a fused draft's plan builds the model the spec describes to size its parts)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from test_inspect_split import fuse, run

from draftsmith.convert import canonical, run as convert_run
from draftsmith.testing import write_eagle3, write_target


def test_a_conversion_plans_its_source_once(tmp_path, monkeypatch):
    target = write_target(tmp_path / "t")
    src = fuse(write_eagle3(tmp_path / "d", target), tmp_path / "fused")
    planned = Counter()
    real = canonical.plan_canonical

    def counted(folder, found=None):
        planned[Path(folder).name] += 1
        return real(folder, found)

    monkeypatch.setattr(canonical, "plan_canonical", counted)
    monkeypatch.setattr(convert_run, "plan_canonical", counted)
    res = run("convert", src, "--to", "speculators", tmp_path / "out")
    assert res.exit_code == 0, res.output
    assert planned["fused"] == 1, planned   # the result is planned by verify's read-back, once
    assert planned["out"] == 1, planned
