"""A component's name key misspelt (``knid``, ``Kind``, quant's ``mehtod``) is said as that key, with the right one;
an unknown name is quoted in YAML's words (a spec-perturbation hunt, 2026-12-01): ``layer: {knid: llama}`` was
"kind: required field is missing" with no word of knid, ``quant: {mehtod: fp8, scheme: tensor}`` was two unknown
fields of a quant that "takes no params (sizes and eps come from the checkpoint's config.json)", and ``kind: ~``
was "unknown fusion None"."""
import pytest

from draftsmith.errors import SpecError
from draftsmith.specs.loader import load_spec

BASE = "extends: eagle3-llama\nname: mine\n"


def problems(tmp_path, text: str, base: str = BASE) -> dict[str, tuple[str, str, str]]:
    spec = tmp_path / "s.yaml"
    spec.write_text(base + text)
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    return {p.path: (p.message, p.hint, p.allowed) for p in info.value.problems}


def test_a_misspelt_kind_is_said_at_kind_with_the_key_found(tmp_path):
    said = problems(tmp_path, "draft:\n  layer: {knid: llama}\n", base="name: mine\n")   # no base gives a kind
    assert "draft.layer.knid" not in said
    assert said["draft.layer.kind"][:2] == ("required field is missing", "Found 'knid': did you mean 'kind'?")


def test_a_misspelt_kind_beside_the_base_specs_kind_is_said_as_that_key(tmp_path):
    said = problems(tmp_path, "draft:\n  attention: {KIND: mla}\n")
    assert list(said) == ["draft.attention.KIND"], said
    assert said["draft.attention.KIND"][:2] == ("unknown field 'KIND'", "Did you mean 'kind'?")


def test_a_key_a_little_like_kind_is_not_taken_for_it(tmp_path):
    said = problems(tmp_path, "draft:\n  attention: {kind: gqa, window: 4}\n")   # 0.6 alike: gqa's unknown field
    assert said["draft.attention.window"][0] == "unknown field 'window'"
    assert "kind" not in said["draft.attention.window"][1]


def test_a_misspelt_method_of_a_quant_is_said_as_that_key_alone(tmp_path):
    said = problems(tmp_path, "quant: {mehtod: fp8, scheme: tensor}\n")
    assert list(said) == ["quant.mehtod"], said
    message, hint, allowed = said["quant.mehtod"]
    assert (message, hint) == ("unknown field 'mehtod'", "Did you mean 'method'?")
    assert allowed.startswith("{method: NAME, ...params}; NAME is one of: ") and "config.json" not in allowed


def test_a_key_unlike_the_name_key_is_still_a_missing_kind_or_unknown_param(tmp_path):
    assert problems(tmp_path, "draft:\n  mlp: {bias: true}\n")["draft.mlp.kind"][:2] == (
        "required field is missing", "")


@pytest.mark.parametrize("text, path, message", [
    ("draft:\n  fusion: {kind: ~}\n", "draft.fusion.kind", "unknown fusion null"),
    ("weights:\n  rules: [{kind: true, match: a, replace: b}]\n", "weights.rules.0.kind", "unknown weight_rule true"),
])
def test_an_unknown_name_is_quoted_as_yaml_writes_it(tmp_path, text, path, message):
    assert problems(tmp_path, text)[path][0] == message


def test_the_components_other_params_are_judged_beside_a_misspelt_key(tmp_path):
    """A review: the misspelt key's problem hid the rest ({kind: gqa, KIND: gqa, rope: sideways} said one)."""
    said = problems(tmp_path, "draft:\n  attention: {kind: gqa, KIND: gqa, rope: sideways}\n")
    assert set(said) == {"draft.attention.KIND", "draft.attention.rope"}, said
