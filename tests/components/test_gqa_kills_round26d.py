"""Mutation survivors of draftsmith.components.gqa (round 26d, the gqa factory's rope_theta): a spec's rope_theta
number is the base the draft rotates with, whatever number it is, not 10000 for every stated value."""
import json

import torch

import draftsmith
from draftsmith.testing import write_eagle3, write_target


# catches gqa.py:68 with_theta(cfg, params.rope_theta) -> with_theta(cfg, 10000) (the round-26 test states 10000)
def test_a_spec_s_rope_theta_number_is_the_base_the_draft_rotates_with(tmp_path):
    """rope_theta: 250000.0 over a draft config that says 10000: the draft's rotation equals the one of the same draft
    whose config says 250000, and differs from the config's (10000) one."""
    target = write_target(tmp_path / "t", num_hidden_layers=4)
    plain, wide = (write_eagle3(tmp_path / name, target, aux_ids=[0, 1, 2]) for name in ("plain", "wide"))
    cfg = json.loads((plain / "config.json").read_text())
    (plain / "config.json").write_text(json.dumps({**cfg, "rope_theta": 1e4}))
    (wide / "config.json").write_text(json.dumps({**cfg, "rope_theta": 2.5e5}))
    spec = tmp_path / "wide.yaml"
    spec.write_text("name: wide\nextends: eagle3-llama\ndraft:\n  attention: {kind: gqa, rope_theta: 250000.0}\n")
    rotary = lambda model: model.draft.layers[0].self_attn.rope
    config, stated, said = (draftsmith.assemble(s, target=target, draft=d) for s, d in
                            (("eagle3-llama", plain), (str(spec), plain), ("eagle3-llama", wide)))
    torch.testing.assert_close(rotary(stated).inv_freq, rotary(said).inv_freq, rtol=0, atol=0)
    assert not torch.equal(rotary(stated).inv_freq, rotary(config).inv_freq)
