"""Kills for assembler/vocab.py survivors (round 21): check_vocab_tensors reads a stored t2d (it is checked against
d2t, not derived from it) and leaves a d2t / t2d the plan refuses for its shape or its dtype alone (a misshapen map
is the plan's misfit, not a second "invalid map" note, and a float d2t must not reach the map check)."""
import logging

import pytest
import torch
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.assembler.vocab import VocabMapError
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.testing import write_eagle3, write_target

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1,
             num_hidden_layers=8, vocab_size=64, max_position_embeddings=64)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("vocab-r21")
    target = write_target(root / "t", **SMALL)
    return root, target, write_eagle3(root / "d", target, draft_vocab=40)


def changed(root, draft, name, **change):
    out = root / name
    out.mkdir(exist_ok=True)
    (out / "config.json").write_text((draft / "config.json").read_text())
    tensors = load_file(str(draft / "model.safetensors")) | change
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def test_a_stored_t2d_that_disagrees_with_d2t_is_refused_and_not_derived(pair, caplog):
    """A checkpoint's own t2d is read and checked against d2t: one marking other tokens (as many) is refused; it is
    not ignored and derived from d2t (which the "holds no t2d" warning would say)."""
    root, target, draft = pair
    t2d = load_file(str(draft / "model.safetensors"))["t2d"]
    other = t2d.roll(1).contiguous()
    assert int(other.sum()) == int(t2d.sum()) and not torch.equal(other, t2d)
    with caplog.at_level(logging.WARNING, logger="draftsmith"), \
            pytest.raises(VocabMapError, match="t2d does not hold at d \\+ d2t\\[d\\] for every draft token"):
        draftsmith.assemble("eagle3-llama", target=target, draft=changed(root, draft, "rolled-t2d", t2d=other))
    assert "holds no t2d" not in caplog.text


def test_a_misshapen_d2t_is_the_plans_misfit_alone(pair):
    """A d2t one entry longer than the draft vocabulary (its dtype sound) is a shape misfit: its map is not also
    checked (it would say "t2d marks 40 target tokens but the draft vocabulary has 41" beside it)."""
    root, target, draft = pair
    d2t = load_file(str(draft / "model.safetensors"))["d2t"]
    long = torch.cat([d2t, d2t[-1:]]).contiguous()
    with pytest.raises(CheckpointMismatch) as e:
        draftsmith.assemble("eagle3-llama", target=target, draft=changed(root, draft, "long-d2t", d2t=long))
    text = str(e.value) + "".join(getattr(e.value, "__notes__", []))
    assert "d2t" in text and "vocabulary map" not in text and "t2d marks" not in text, text


def test_a_float_d2t_of_the_right_shape_is_the_plans_dtype_misfit(pair):
    """A d2t stored as floats (its shape right) is refused by the plan for its dtype, not handed to the map check
    (indexing t2d with float ids would raise an IndexError in place of the misfit)."""
    root, target, draft = pair
    d2t = load_file(str(draft / "model.safetensors"))["d2t"]
    with pytest.raises(CheckpointMismatch) as e:
        draftsmith.assemble("eagle3-llama", target=target,
                            draft=changed(root, draft, "float-d2t", d2t=d2t.float().contiguous()))
    text = str(e.value) + "".join(getattr(e.value, "__notes__", []))
    assert "d2t" in text and "vocabulary map" not in text, text
