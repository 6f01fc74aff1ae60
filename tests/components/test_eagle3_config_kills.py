"""Mutation survivors of components/eagle3_config.py: what ``inspect``'s fact lines say (the aux-layer line names
the ids and where they came from, each flag is said once) and that a refusal's stated bound is the bound enforced."""
import re

import pytest

import draftsmith
from draftsmith.components.eagle3_config import KEY, aux_count, config_ids, describe_facts
from draftsmith.errors import SpecError

REGISTRY = draftsmith.build_registry(entry_points=False)


def params(**fusion):
    return REGISTRY.get("fusion", "eagle3").params.model_validate({"norm_before_residual": False, **fusion})


def aux_line(lines):
    [line] = [x for x in lines if x.startswith("aux layers")]
    return line


def test_describe_facts_names_the_config_ids_or_the_default():
    """catches eagle3_config.py describe_facts: 'if ids is None' -> 'is not None' (inspect would print the default
    [2, L//2, L-3] for a draft whose config names its taps, and 'None from ' for one that names none)."""
    _, lines = describe_facts(params(), {KEY: [1, 5, 9]})
    assert aux_line(lines).startswith(f"aux layers: [1, 5, 9] from the draft config's {KEY}, read as layer inputs")
    _, lines = describe_facts(params(aux_layers={"ids": [3, 4, 7], "at": "output"}), {})
    assert aux_line(lines).startswith("aux layers: [3, 4, 7] from the spec, read as layer outputs")
    _, lines = describe_facts(params(), {})
    assert "the default [2, L//2, L-3] (layer inputs) of the target applies" in aux_line(lines)


def test_describe_facts_says_each_flag_once():
    """catches eagle3_config.py describe_facts: 'n.split(":")[0]' -> 'split(":")[1]' (a flag whose default was
    taken would be printed twice: once as if the draft config stated it, once as the default note)."""
    values, lines = describe_facts(params(), {"fc_norm": True})
    heads = [line.split(":")[0] for line in lines]
    for flag in ("fc_norm", "norm_before_fc", "norm_before_residual", "norm_output"):
        assert heads.count(flag) == 1, lines
    assert "fc_norm: true (the draft config)" in lines
    assert "norm_before_residual: false (the spec; the weights cannot show it)" in lines
    assert any(x.startswith("norm_before_fc: stated by neither") for x in lines)
    assert values["fc_norm"] is True and values["norm_before_fc"] is False


def stated_bound(error: SpecError, pattern: str) -> int:
    [problem] = error.problems
    return int(re.search(pattern, problem.allowed).group(1))


def test_the_tap_id_list_bound_a_refusal_states_is_the_one_enforced():
    """catches eagle3_config.py _layer_ids: 'at most {TARGET_LAYERS + 1}' -> + 0 / + 2 / - 1 in the refusal's
    allowed text (it would name a length the check does not use: a list of the stated length refused, or one
    past it promised)."""
    with pytest.raises(SpecError) as info:
        config_ids({KEY: ["a"]})
    most = stated_bound(info.value, r"a list of at most (\d+) integers")
    assert config_ids({KEY: [0] * most})[0] == [0] * most
    with pytest.raises(SpecError):
        config_ids({KEY: [0] * (most + 1)})


def test_the_aux_count_bound_a_refusal_states_is_the_one_enforced():
    """catches eagle3_config.py aux_count: 'an integer in 1..{TARGET_LAYERS + 1}' -> + 0 / + 2 / - 1 in the
    refusal's allowed text (it would name a top the check does not use)."""
    with pytest.raises(SpecError) as info:
        aux_count(params(), {"num_aux_hidden_states": "3"})
    top = stated_bound(info.value, r"an integer in 1\.\.(\d+)")
    assert aux_count(params(), {"num_aux_hidden_states": top}) == top
    assert aux_count(params(), {"num_aux_hidden_states": 1}) == 1
    with pytest.raises(SpecError):
        aux_count(params(), {"num_aux_hidden_states": top + 1})
