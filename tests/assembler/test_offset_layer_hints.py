"""A checkpoint that numbers its one layer otherwise than the spec (an MTP layer stored at the target's layer count,
``blocks.8.*``; layers counted from 1) keeps its 'closest in checkpoint' hints, which README's Weight rules has a new
layout written from: e6a69b1 dropped every hint whose leftover's numbers were not the missing name's, meant for a
layer the draft lacks beside the layers it places (layer 2 of a two-layer draft is no layer 0 renamed)."""
import pytest
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.assembler.names import Suggester
from draftsmith.errors import DraftsmithError
from draftsmith.testing import SMALL, write_eagle3, write_target


def test_a_layer_stored_under_another_number_is_hinted(tmp_path):
    target = write_target(tmp_path / "t", **SMALL)
    draft = write_eagle3(tmp_path / "d", target)
    weights = draft / "model.safetensors"
    save_file({k.replace("midlayer.", "blocks.8."): v for k, v in load_file(str(weights)).items()}, str(weights))
    spec = tmp_path / "mine.yaml"
    spec.write_text("name: mine\nextends: eagle3-llama\ndraft: {num_layers: 1}\n")
    with pytest.raises(DraftsmithError) as err:
        draftsmith.assemble(draftsmith.load_spec(spec), target=target, draft=draft)
    said = str(err.value)
    assert ("missing: 'layers.0.self_attn.q_proj.weight' [16, 32] float32; closest in checkpoint: "
            "'blocks.8.self_attn.q_proj.weight'") in said, said


def test_another_layers_leftover_is_no_hint_only_beside_that_layer_placed():
    leftovers = {"block.0.input_layernorm.weight": ("block.0.input_layernorm.weight", (64,))}
    hint = "block.0.input_layernorm.weight"
    assert Suggester(leftovers)("layers.2.input_layernorm.weight", (64,)) == hint   # nothing placed: a numbering
    assert Suggester(leftovers, ["layers.1.mlp.up_proj.weight"])("layers.2.input_layernorm.weight", (64,)) == hint
    assert Suggester(leftovers, ["layers.0.mlp.up_proj.weight"])("layers.2.input_layernorm.weight", (64,)) is None
