"""A load that fails for a field of the spec says which field (a spec author's hunt, 2026-12-01): a draft built with
its own head or embedding (draft.share) that the checkpoint lacks said a bare "missing: 'lm_head.weight'", and a GQA
attention stated on a draft whose config has MLA fields said only missing q/k/v projections."""
import pytest
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.errors import DraftsmithError
from draftsmith.testing import write_eagle1, write_eagle3, write_target
from draftsmith.testing.mla import write_mla_eagle


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("t") / "t", "llama", seed=1)


def notes(spec, target, draft) -> list[str]:
    with pytest.raises(DraftsmithError) as e:
        draftsmith.assemble(spec, target=target, draft=draft)
    return getattr(e.value, "__notes__", [])


def variant(name: str, **draft) -> draftsmith.Spec:
    data = draftsmith.load_spec(name).model_dump(mode="json")
    data["name"], data["draft"] = "variant", {**data["draft"], **draft}
    return draftsmith.parse_spec(data)


def drop(folder, name):
    file = folder / "model.safetensors"
    held = load_file(str(file))
    del held[name]
    save_file(held, str(file))


def test_an_own_head_the_checkpoint_lacks_names_share_lm_head(target, tmp_path):
    draft = write_eagle3(tmp_path / "d", target)
    drop(draft, "lm_head.weight")
    assert notes("eagle3-llama", target, draft) == [
        "note: the spec's draft.share.lm_head is draft, so the draft reads its own lm_head.weight, which the "
        "checkpoint does not hold: share.lm_head: target takes the target's"]


def test_an_own_head_of_a_reduced_vocabulary_is_not_sent_to_the_targets(target, tmp_path):
    draft = write_eagle3(tmp_path / "d", target, draft_vocab=32)
    drop(draft, "lm_head.weight")
    [note] = notes("eagle3-llama", target, draft)
    assert note.endswith("a reduced vocabulary (d2t) needs the draft's own head: the checkpoint is incomplete"), note


def test_an_own_embedding_the_spec_ignores_names_share_embed_and_the_ignore(target, tmp_path):
    draft = write_eagle1(tmp_path / "d", target)
    assert notes(variant("eagle1-llama", share={"embed": "own", "lm_head": "target"}), target, draft) == [
        "note: the spec's draft.share.embed is own, so the draft reads its own embed_tokens.weight, which "
        "weights.ignore drops (embed_tokens.weight): share.embed: target takes the target's"]


def test_gqa_stated_on_an_mla_draft_names_attention_kind(target, tmp_path):
    draft = write_mla_eagle(tmp_path / "d", target)
    said = notes(variant("eagle-mla-deepseek", attention={"kind": "gqa"}), target, draft)
    assert len(said) == 1 and said[0].startswith("note: the draft's config has MLA fields (q_lora_rank, ") and \
        said[0].endswith("and the spec's draft.attention.kind is 'gqa': state mla, or auto (mla where the config has "
                         "MLA fields)"), said


def test_an_fc_of_another_tap_count_names_the_fields_that_set_it(target, tmp_path):
    """Two tap ids stated against a draft trained on three: the load said only fc.weight's wrong shape."""
    draft = write_eagle3(tmp_path / "d", target, aux_ids=[1, 3, 5])
    spec = variant("eagle3-llama", fusion={**draftsmith.load_spec("eagle3-llama").draft.fusion.model_dump(),
                                           "aux_layers": {"ids": [2, 4], "at": "input"}})
    assert notes(spec, target, draft) == [
        "note: the checkpoint's fc.weight reads 3 hidden states of the target (192 = 3 x 64) and the draft's fusion 2 "
        "(taps [2, 4]): draft.fusion.aux_layers.ids (or num_aux, or the draft config's tap ids) must name 3 layers"]


def test_an_fc_shape_that_is_no_count_of_hidden_states_gets_no_note():
    from draftsmith.components.fusion import Eagle3Fusion

    fc = Eagle3Fusion(32, 64, (1, 2), norm_before_residual=False)
    assert fc.shape_note((32, 128)) is None and fc.shape_note((32, 100)) is None and fc.shape_note((32,)) is None
    assert fc.shape_note((32, 0)) is None
    assert "reads 1 hidden state of the target (64 = 1 x 64)" in fc.shape_note((32, 64))


def test_no_mla_note_for_a_gqa_draft_whose_load_fails_elsewhere(target, tmp_path):
    """A GQA draft whose config carries a stray MLA key, missing a norm: the note sent a right spec to mla (a review
    of the day's change)."""
    import json

    draft = write_eagle1(tmp_path / "d", target)
    config = json.loads((draft / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**config, "qk_rope_head_dim": 8, "kv_lora_rank": 16}))
    drop(draft, "layers.0.post_attention_layernorm.weight")
    assert not [n for n in notes(variant("eagle1-llama", attention={"kind": "gqa"}), target, draft) if "MLA" in n]


def test_no_share_note_for_a_head_under_another_name(target, tmp_path):
    """The load's hint names model.head.weight; the note said the checkpoint holds no head and advised the target's
    (a review of the day's change): following it would drop the trained head."""
    draft = write_eagle3(tmp_path / "d", target)
    file = draft / "model.safetensors"
    held = load_file(str(file))
    held["model.head.weight"] = held.pop("lm_head.weight")
    save_file(held, str(file))
    assert not [n for n in notes("eagle3-llama", target, draft) if "share" in n]
