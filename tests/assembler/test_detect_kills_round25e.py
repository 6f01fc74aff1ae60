"""Kills for assembler/detect.py survivors (round 25e): eagle3_values on a tiny EAGLE-3 folder's names and config,
edited here so the config and the tensor names disagree."""
import json

import pytest

from draftsmith.assembler.checkpoint import list_tensors
from draftsmith.assembler.detect import eagle3_values
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def draft(tmp_path_factory):
    """(config, tensor names) of an EAGLE-3 draft with per-aux norms (fc_norm.N)."""
    folder = tmp_path_factory.mktemp("e3")
    path = write_eagle3(folder / "d", write_target(folder / "t"), fc_norm=True)
    return json.loads((path / "config.json").read_text()), list(list_tensors(path))


def test_norms_the_names_show_set_the_flag_the_config_is_silent_on(draft):
    """catches detect.py eagle3_values: 'if present != values[flag]' -> '==' (per-aux norms in the names left the
    spec's fc_norm: false) and the stale note's filter 'not n.startswith(...)' dropped (the spec's 'fc_norm: false'
    note kept beside the names' one, every other fact's note lost)."""
    config, names = draft
    config = {k: v for k, v in config.items() if k != "fc_norm"}
    values, notes = eagle3_values("eagle3-llama", config, names)
    assert values["fc_norm"] is True
    assert [n for n in notes if n.startswith("fc_norm:")] == ["fc_norm: true (from the tensor names)"]
    assert any(n.startswith("norm_before_fc: false") for n in notes)   # the other facts keep theirs
    assert any(n.startswith("norm_before_residual:") for n in notes)


def test_a_fact_the_config_states_wins_over_the_spec_default(draft):
    """catches detect.py eagle3_values: 'config_value(cfg, k) is not None' -> 'is None' (the config's
    norm_before_residual: true lost to the spec's false: 'the spec says false, the draft config true; using the
    spec's', a proposal that does not load what the checkpoint says)."""
    config, names = draft
    values, notes = eagle3_values("eagle3-llama", {**config, "norm_before_residual": True}, names)
    assert values["norm_before_residual"] is True
    assert "norm_before_residual: true (the draft config; the weights cannot show it)" in notes


def test_without_a_registry_the_names_are_mapped_by_the_default_one(draft):
    """catches detect.py canonical_names: 'registry or default_registry()' -> 'and' (eagle3_values' default
    registry None reached rule_set as None: an AttributeError where a config claims norms the names lack)."""
    config, names = draft
    bare = [n for n in names if not n.startswith("fc_norm.")]
    values, notes = eagle3_values("eagle3-llama", {**config, "fc_norm": True}, bare)
    assert values["fc_norm"] is False
    assert "fc_norm: false (from the tensor names)" in notes
