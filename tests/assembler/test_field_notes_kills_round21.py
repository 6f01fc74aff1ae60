"""Kills for assembler/field_notes.py survivors (round 21): mla_note speaks only where the config has every MLA field
it needs, the k/v projections are missing and the checkpoint holds MLA's (each condition alone is no reason), and
share_note's "under another name" skip counts only a tensor no rule placed, its "weights.ignore drops" only an
ignored tensor of the same module."""
import json

import pytest
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.testing import write_eagle1, write_eagle3, write_target
from draftsmith.testing.mla import write_mla_eagle


from test_share_and_mla_notes import notes   # the notes a failed load has


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("t") / "t", "llama", seed=1)


def variant(name: str, weights: dict | None = None, **draft) -> draftsmith.Spec:
    data = draftsmith.load_spec(name).model_dump(mode="json")
    data["name"], data["draft"] = "variant", {**data["draft"], **draft}
    data["weights"] = {**data["weights"], **(weights or {})}
    return draftsmith.parse_spec(data)


def edit(folder, change):
    file = folder / "model.safetensors"
    held = load_file(str(file))
    change(held)
    save_file(held, str(file))


def edit_config(folder, change):
    config = json.loads((folder / "config.json").read_text())
    change(config)
    (folder / "config.json").write_text(json.dumps(config))


def mla_said(said):
    return [n for n in said if "MLA" in n]


def test_no_mla_note_where_the_config_lacks_kv_lora_rank(target, tmp_path):
    """An MLA checkpoint loaded as gqa whose config has no kv_lora_rank: the config does not say MLA, so the note
    (which would advise auto, reading the config) says nothing, though q_lora_rank and the projections are there."""
    draft = write_mla_eagle(tmp_path / "d", target)
    edit_config(draft, lambda c: c.pop("kv_lora_rank"))
    said = notes(variant("eagle-mla-deepseek", attention={"kind": "gqa"}), target, draft)
    assert not mla_said(said), said


def test_no_mla_note_where_the_checkpoint_holds_no_mla_projection(target, tmp_path):
    """A GQA draft missing k_proj whose config carries stray MLA keys: no kv_b_proj (or any MLA projection) in the
    checkpoint, so its missing k_proj is no sign of MLA."""
    draft = write_eagle1(tmp_path / "d", target)
    edit_config(draft, lambda c: c.update(qk_rope_head_dim=8, kv_lora_rank=16))
    edit(draft, lambda held: held.pop("layers.0.self_attn.k_proj.weight"))
    said = notes(variant("eagle1-llama", attention={"kind": "gqa"}), target, draft)
    assert not mla_said(said), said


def test_no_mla_note_where_the_k_v_projections_are_held(target, tmp_path):
    """A GQA draft holding its k/v projections and a stray kv_b_proj, missing a norm: what is missing is not
    attention's, so the note (which blames draft.attention.kind) says nothing."""
    draft = write_eagle1(tmp_path / "d", target)
    edit_config(draft, lambda c: c.update(qk_rope_head_dim=8, kv_lora_rank=16))

    def change(held):
        held["layers.0.self_attn.kv_b_proj.weight"] = held["layers.0.self_attn.k_proj.weight"].clone()
        del held["layers.0.post_attention_layernorm.weight"]
    edit(draft, change)
    said = notes(variant("eagle1-llama", attention={"kind": "gqa"}), target, draft)
    assert not mla_said(said), said


def test_an_own_head_missing_beside_a_placed_tensor_of_its_shape_is_still_named(target, tmp_path):
    """Own embedding and own head, the head missing: the embedding (of the head's shape) is placed as
    embed_tokens.weight, so it is no head under another name, and the note names draft.share.lm_head."""
    draft = write_eagle3(tmp_path / "d", target, embed=True)
    edit(draft, lambda held: held.pop("lm_head.weight"))
    spec = variant("eagle3-llama", weights={"ignore": []}, share={"embed": "own", "lm_head": "draft"})
    assert notes(spec, target, draft) == [
        "note: the spec's draft.share.lm_head is draft, so the draft reads its own lm_head.weight, which the "
        "checkpoint does not hold: share.lm_head: target takes the target's"]


def test_an_ignored_tensor_of_another_module_is_not_said_to_drop_the_head(target, tmp_path):
    """The head missing while weights.ignore drops the embedding: the note says the checkpoint does not hold the
    head, not that weights.ignore drops it (embed_tokens.weight is another module's)."""
    draft = write_eagle3(tmp_path / "d", target, embed=True)
    edit(draft, lambda held: held.pop("lm_head.weight"))
    assert notes("eagle3-llama", target, draft) == [
        "note: the spec's draft.share.lm_head is draft, so the draft reads its own lm_head.weight, which the "
        "checkpoint does not hold: share.lm_head: target takes the target's"]
