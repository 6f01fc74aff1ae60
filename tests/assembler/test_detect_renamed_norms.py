"""A YAML-only family that stores EAGLE-3's per-aux norms (or the norm over the concatenation) under names of its own,
renamed by its weight rules to the canonical ``fc.aux_norm.N`` / ``fc.input_norm``: inspect read with that spec
proposed ``fc_norm: false`` "from the tensor names", then refused its own proposal ('fc.aux_norm.0.weight'
unexpected), and convert --spec said the folder did not load with its spec (an extension dogfood hunt, 2026-12-01).
The flags the tensors show are read from the names as stored and as the spec's rules name them."""
import pytest
from safetensors.torch import load_file, save_file

from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.testing import write_eagle3, write_target

SPEC = """name: acme-eagle3
extends: eagle3-llama
draft:
  fusion: {{{flag}: true, norm_output: feed_back}}
weights:
  rules:
    - {{match: '^midlayer\\.', replace: 'layers.0.'}}
    - {{match: '^{own}', replace: '{canonical}'}}
"""
CASES = {"fc_norm": ("fc_norm.", "aux_norm.", "fc.aux_norm."),
         "norm_before_fc": ("input_norm.", "concat_norm.", "fc.input_norm.")}


@pytest.mark.parametrize("flag", CASES)
def test_a_family_of_its_own_norm_names_keeps_the_flag_they_show(tmp_path, flag):
    published, own, canonical = CASES[flag]
    target = write_target(tmp_path / "t")
    draft = write_eagle3(tmp_path / "d", target, **{flag: True})
    path = next(draft.glob("*.safetensors"))
    tensors = load_file(path)
    assert any(k.startswith(published) for k in tensors)
    save_file({own + k[len(published):] if k.startswith(published) else k: v for k, v in tensors.items()}, path)
    spec = tmp_path / "acme.yaml"
    spec.write_text(SPEC.format(flag=flag, own=own.replace(".", "\\."), canonical=canonical))
    found = inspect_checkpoint(draft, spec=str(spec))
    fusion = found.spec["draft"]["fusion"]
    assert fusion[flag] is True
    assert not any(a.startswith(f"{flag}: false") for a in found.match.assumptions)


def test_norms_a_split_rule_places_show_their_flag(tmp_path):
    """A family stacking the first layer's hidden_norm and the per-aux norms in one tensor, split by a rule: the
    norms are the rule's later parts (the names were read through its first part alone: fc_norm: false, a
    proposal that refused its folder; a review of the change)."""
    import torch

    target = write_target(tmp_path / "t")
    draft = write_eagle3(tmp_path / "d", target, fc_norm=True)
    path = next(draft.glob("*.safetensors"))
    tensors = load_file(path)
    parts = ["midlayer.hidden_norm.weight"] + [f"fc_norm.{i}.weight" for i in range(3)]
    tensors["norms.weight"] = torch.cat([tensors.pop(p) for p in parts])
    save_file(tensors, path)
    spec = tmp_path / "stacked.yaml"
    spec.write_text("name: stacked\nextends: eagle3-llama\ndraft:\n  fusion: {fc_norm: true}\nweights:\n  rules:\n"
                    "    - {kind: split, match: '^norms\\.', into: ['layers.0.hidden_norm.', 'fc.aux_norm.0.', "
                    "'fc.aux_norm.1.', 'fc.aux_norm.2.']}\n    - {match: '^midlayer\\.', replace: 'layers.0.'}\n")
    found = inspect_checkpoint(draft, spec=str(spec))
    assert found.spec["draft"]["fusion"]["fc_norm"] is True
