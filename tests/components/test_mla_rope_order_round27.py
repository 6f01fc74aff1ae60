"""An MLA draft whose spec fixes the rotary pair order against its config's rope_interleave is warned, as a GQA draft
is: eagle-mla-mistral (rope: interleaved) on a config saying rope_interleave: false rotated adjacent pairs without a
word, 7.8e-3 from transformers' DeepseekV3Attention (an oracle hunt of round 27)."""
import logging

import pytest

import draftsmith
from draftsmith.testing import write_target
from draftsmith.testing.mla import write_mla_eagle


@pytest.mark.parametrize("interleave, warned", [(False, True), (True, False)])
def test_a_spec_order_the_config_contradicts_is_warned(tmp_path, caplog, interleave, warned):
    write_target(tmp_path / "t", "llama", num_hidden_layers=2, seed=3)
    write_mla_eagle(tmp_path / "d", tmp_path / "t", layout="mistral", rope_interleave=interleave)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        model = draftsmith.assemble("eagle-mla-mistral", target=tmp_path / "t", draft=tmp_path / "d")
    assert model.draft.layers[0].self_attn.rope.style == "interleaved"       # the spec's order is obeyed
    said = [r.getMessage() for r in caplog.records if "rope_interleave" in r.getMessage()]
    assert said == ([] if not warned else [
        "MLA draft: draft.attention.rope is interleaved, but the draft config's rope_interleave is false (its q/k "
        "rows are stored in neox pair order): the draft rotates them wrong and accepts little; state rope: neox "
        "(the spec `draftsmith inspect` proposes does)"])
