"""``draftsmith doctor`` on the shipped demo pair (SmolLM2-135M-Instruct and the draft draftsmith trained): with one
ambiguous setting flipped in a copy of the builtin ``smollm2`` spec, doctor names the right value. Slow (each
reading assembles the 135M target and decodes; ~4 minutes on one thread): run with ``--runslow`` once the target
is cached.

The shipped draft reads tau ~1.55 on the probe (a chain of the spec's 4 steps over one short text; held-out
stdlib text decodes at 2.83 with eagle3-llama's 8-node tree), under doctor's "low" line, so the search runs, and most
readings are told apart by the draft's teacher-forced loss as well as by tau. One flip cannot be told apart by either,
because this draft barely depends on it: with the rope read interleaved the probe gives tau 1.48 and loss 3.068
against 1.55 and 2.964 for the trained (neox) reading, inside doctor's margins (5% and 0.15 tokens; 10% and 0.1
nats). A flip that costs so little leaves nothing to restore, so doctor rightly names no fix there; that case is
expected to fail (strict: a draft that depends on it turns it into a pass, which pytest then reports, as the aux
taps' flip did when the 3000-step draft replaced the 1200-step one)."""
from pathlib import Path

import pytest
import torch
import yaml

from draftsmith import hub
from draftsmith.doctor import PROBES, diagnose
from draftsmith.specs.edits import with_change
from draftsmith.specs.catalog import BUILTIN_DIR

DRAFT = Path(__file__).parents[1] / "draftsmith" / "demo_data" / "smollm2-draft"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (hub.target_dir() / hub.MANIFEST).is_file(), reason="SmolLM2 not in the cache")]

INSENSITIVE = pytest.mark.xfail(strict=True, reason="the shipped draft's acceptance and loss do not depend on it")
FLIPS = [
    ("draft.fusion.aux_layers.at", "output", "input"),
    pytest.param("draft.attention.rope", "interleaved", "neox", marks=INSENSITIVE),
    ("draft.feed_back", "post_norm", "pre_norm"),
    ("draft.fusion.norm_before_residual", True, False),
    ("draft.fusion.norm_output", "feed_back", "head"),
    ("draft.fusion.fc_norm", True, False),
    ("draft.fusion.norm_before_fc", True, False),
    ("draft.vocab.d2t", "absolute", "offset"),
]


def spec_file(tmp_path, path=None, value=None) -> Path:
    data = yaml.safe_load((BUILTIN_DIR / "smollm2.yaml").read_text())
    data["checkpoints"] = {"target": str(hub.target_dir()), "draft": str(DRAFT)}
    out = tmp_path / "smollm2-doctor.yaml"
    out.write_text(yaml.safe_dump(with_change(data, path, value) if path else data, sort_keys=False))
    return out


def test_no_other_reading_beats_the_shipped_spec(tmp_path):
    # the shipped draft's tau (~1.55 on the probe) is under doctor's "low" line, so the search runs: nothing it tries
    # may clearly beat the spec as shipped
    torch.set_num_threads(1)
    dx = diagnose(spec_file(tmp_path), search=True, probes=[PROBES[1]])
    assert dx.fix is None, [(c.describe(), c.tau) for c in dx.candidates[:3]]


def _id(flip) -> str:
    path, value, _ = getattr(flip, "values", flip)
    return f"{path.rsplit('.', 1)[1]}={value}"


@pytest.mark.parametrize("path,value,right", FLIPS, ids=[_id(f) for f in FLIPS])
def test_doctor_names_the_flipped_setting(tmp_path, path, value, right):
    torch.set_num_threads(1)
    dx = diagnose(spec_file(tmp_path, path, value), search=True, probes=[PROBES[1]])
    assert dx.fix is not None, [(c.describe(), c.tau, c.error) for c in dx.candidates]
    assert dx.fix.changes == ((path, right),)
