"""Mutation round 36 (assembler/config.py): draft_error names the draft's config.json only where every problem is
one of what that config states (one spec problem beside them keeps the spec's file), and target_hf_config reads a
target's config.json with transformers' own class for its model_type, never code the folder ships (auto_map)."""
from __future__ import annotations

import json

from draftsmith.assembler.config import ConfigFacts, draft_error, target_hf_config
from draftsmith.errors import Problem
from draftsmith.specs.loader import load_spec
from draftsmith.testing import write_target

OF_CONFIG = Problem("draft config eagle_config.use_last_layernorm", "says false")


def test_a_spec_problem_beside_the_configs_keeps_the_spec_file(tmp_path):
    spec, raw = load_spec("eagle3-llama"), ConfigFacts({}, tmp_path / "config.json")
    assert draft_error(spec, raw, [OF_CONFIG]).source == str(tmp_path / "config.json")
    mixed = draft_error(spec, raw, [OF_CONFIG, Problem("draft.fusion.norm_output", "auto")])
    assert mixed.source == spec.source and len(mixed.problems) == 2
    assert draft_error(spec, dict(raw), [OF_CONFIG]).source == spec.source   # no file known: the spec's
    assert draft_error(spec, raw, []).source == spec.source


def test_a_targets_config_code_is_never_run(tmp_path):
    folder = write_target(tmp_path / "t", num_hidden_layers=2)
    ran = tmp_path / "ran"
    (folder / "evil.py").write_text(f"open({str(ran)!r}, 'w').close()\nfrom transformers import LlamaConfig\n\n\n"
                                    "class EvilConfig(LlamaConfig):\n    pass\n")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "auto_map": {"AutoConfig": "evil.EvilConfig"}}))
    read = target_hf_config(folder)
    assert type(read).__name__ == "LlamaConfig" and not ran.exists()
