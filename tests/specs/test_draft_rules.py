"""Draft settings that contradict each other whatever the checkpoints hold are refused by load_spec, all at once and
with the file's other problems (they were found one per run, by the draft's build, after the checkpoints loaded);
the build still refuses those a checkpoint decides, saying what decided them."""
from dataclasses import replace

import pytest

import draftsmith
from draftsmith.errors import SpecError

CONTRADICTIONS = """\
name: h1
draft:
  num_layers: 1
  norms: {input: none, hidden: true, final: false}
  fusion: {kind: eagle1, bias: true}
  feed_back: post_norm
  vocab: {reduced: true}
  share: {embed: target, lm_head: target}
  bogus: 1
"""


def problems(tmp_path, text: str) -> dict:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(path, registry=draftsmith.build_registry(entry_points=False))
    return {p.path: p for p in info.value.problems}


def test_three_contradictions_and_an_unknown_key_are_one_error(tmp_path):
    found = problems(tmp_path, CONTRADICTIONS)
    assert set(found) == {"draft.norms.hidden", "draft.norms.final", "draft.share.lm_head", "draft.bogus"}
    assert found["draft.norms.hidden"].message.startswith("true: fusion 'eagle1' has no hidden-norm slot")
    assert found["draft.norms.hidden"].line == 4
    assert "draft.feed_back: post_norm feeds the final norm's output back" in found["draft.norms.final"].message
    assert (found["draft.norms.hidden"].found, found["draft.norms.final"].found) == (True, False)
    assert found["draft.share.lm_head"].message.startswith(
        "target: the draft's vocabulary is reduced (draft.vocab.reduced: true)")


@pytest.mark.parametrize("edit, path", [
    ({"hidden: true": "hidden: auto"}, "draft.norms.hidden"),
    ({"fusion: {kind: eagle1, bias: true}": "fusion: {kind: eagle3}"}, "draft.norms.hidden"),   # it has the slot
    ({"final: false": "final: true"}, "draft.norms.final"),
    ({"  feed_back: post_norm\n": ""}, "draft.norms.final"),
    ({"reduced: true": "reduced: auto"}, "draft.share.lm_head"),   # the checkpoint decides (the build)
    ({"lm_head: target": "lm_head: draft"}, "draft.share.lm_head")])
def test_each_rule_needs_both_of_its_settings(tmp_path, edit, path):
    text = CONTRADICTIONS
    for old, new in edit.items():
        text = text.replace(old, new)
    assert path not in problems(tmp_path, text)


def test_a_spec_stated_norm_output_feeding_back_is_named(tmp_path):
    text = CONTRADICTIONS.replace("fusion: {kind: eagle1, bias: true}",
                                  "fusion: {kind: eagle3, norm_output: feed_back}")
    text = text.replace("  feed_back: post_norm\n", "")
    message = problems(tmp_path, text)["draft.norms.final"].message
    assert message.startswith("false, but the spec's norm_output, read as feed_back feeds the final norm's output")


def test_a_fusion_that_does_not_say_what_it_holds_is_left_to_the_build(tmp_path):
    registry = draftsmith.build_registry(entry_points=False)
    entry = registry.components[("fusion", "eagle1")]
    registry.components[("fusion", "eagle1")] = replace(entry, record=replace(entry.record, holds=None))   # as a
    # plugin fusion that does not say what it holds
    path = tmp_path / "spec.yaml"
    path.write_text(CONTRADICTIONS)
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(path, registry=registry)
    assert "draft.norms.hidden" not in {p.path for p in info.value.problems}


def test_a_fusion_is_asked_what_it_holds_with_its_params(tmp_path):
    registry = draftsmith.build_registry(entry_points=False)
    asked = []
    entry = registry.components[("fusion", "eagle1")]
    registry.components[("fusion", "eagle1")] = replace(entry, record=replace(
        entry.record, holds=lambda params: asked.append(params) or ()))
    path = tmp_path / "spec.yaml"
    path.write_text(CONTRADICTIONS)
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(path, registry=registry)
    assert "draft.norms.hidden" in {p.path for p in info.value.problems}
    assert {"bias": True} in asked and all("kind" not in params for params in asked)
