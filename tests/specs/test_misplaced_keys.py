"""A key written one level off is told where it belongs (a spec author's hunt, 2026-12-01): a fusion param written
beside the fusion got "Did you mean 'norm'?" (draft.norm is the norm component: following it gave a second error),
and feed_back written inside the fusion got no hint at all."""
import pytest

from draftsmith.errors import SpecError
from draftsmith.specs.loader import load_spec


def said(tmp_path, draft: str, extra: str = "") -> str:
    (tmp_path / "s.yaml").write_text(f"name: s\ndraft:\n  fusion: {{kind: eagle3, norm_before_residual: false}}\n"
                                     f"{draft}{extra}")
    with pytest.raises(SpecError) as e:
        load_spec(tmp_path / "s.yaml")
    return str(e.value)


@pytest.mark.parametrize("key", ["fc_norm: false", "norm_output: head", "aux_layers: {at: input}"])
def test_a_fusion_param_beside_the_fusion_is_told_to_go_under_it(tmp_path, key):
    name = key.split(":")[0]
    text = said(tmp_path, f"  {key}\n")
    assert (f"draft.{name}: unknown field '{name}'. '{name}' belongs under draft.fusion (a param of fusion 'eagle3'): "
            "indent it there (line 4)") in text, text
    assert "Did you mean" not in text


def test_a_param_of_attention_auto_is_a_param_of_the_attentions_it_picks_among(tmp_path):
    assert "'rope' belongs under draft.attention (a param of attention 'auto')" in said(tmp_path, "  rope: neox\n")


def test_a_draft_field_inside_a_component_is_told_to_come_one_level_out(tmp_path):
    (tmp_path / "s.yaml").write_text("name: s\ndraft:\n  fusion: {kind: eagle3, norm_before_residual: false, "
                                     "feed_back: post_norm}\n")
    with pytest.raises(SpecError) as e:
        load_spec(tmp_path / "s.yaml")
    assert ("draft.fusion.feed_back: unknown field 'feed_back'. 'feed_back' is a field of draft, one level out: write "
            "it beside 'fusion', not inside it") in str(e.value), str(e.value)


@pytest.mark.parametrize("key, home", [("input: not_first", "draft.norms"), ("reduced: true", "draft.vocab"),
                                       ("lm_head: draft", "draft.share")])
def test_a_field_of_a_nested_section_beside_it_is_told_its_section(tmp_path, key, home):
    name = key.split(":")[0]
    assert f"'{name}' belongs under {home}: indent it there" in said(tmp_path, f"  {key}\n")


def test_a_key_many_places_take_or_none_keeps_its_own_hint(tmp_path):
    text = said(tmp_path, "  kind: eagle3\n  num_layer: 2\n", "decoding: {topk: 2, kind: x}\n")
    assert "draft.kind: unknown field 'kind' (line 4)" in text, text   # every component takes a kind
    assert "draft.num_layer: unknown field 'num_layer'. Did you mean 'num_layers'?" in text, text
    assert "decoding.kind: unknown field 'kind' (line 6)" in text, text
