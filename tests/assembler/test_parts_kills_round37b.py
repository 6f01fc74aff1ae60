"""Round 37b: target_scales of a record that states no embed_scale nor logit_cap (a plugin's record may state only
some parts) leaves the embedding unscaled and the logits uncapped."""
from types import SimpleNamespace

from draftsmith.assembler.parts import target_scales


def test_a_record_without_scales_says_none():
    cfg = SimpleNamespace(hidden_size=16, final_logit_softcapping=30.0)
    assert target_scales(SimpleNamespace(), cfg) == {"embed_scale": None, "logit_cap": None}
    assert target_scales(SimpleNamespace(embed_scale=True, logit_cap="final_logit_softcapping"), cfg) == {
        "embed_scale": 4.0, "logit_cap": 30.0}
