"""Aux-layer count, ids, convention and the EAGLE-3 norm flags, resolved from random draft config dicts
(Hypothesis): explicit spec value > eagle_config > top-level ids > target_layer_ids > the default, the
convention always the spec's, and every default taken said once."""
from hypothesis import given
from hypothesis import strategies as st

import draftsmith
from draftsmith.components.eagle3_config import (KEY, aux_count, config_norm_output, default_taps, describe_facts,
                                                 resolve_eagle3)

REGISTRY = draftsmith.build_registry(entry_points=False)
L = 40
ids_lists = st.lists(st.integers(0, L - 2), min_size=1, max_size=6, unique=True)
maybe_ids = st.none() | ids_lists
flag = st.none() | st.booleans()


def params(**fusion):
    return REGISTRY.get("fusion", "eagle3").params.model_validate({"norm_before_residual": False, **fusion})


@st.composite
def configs(draw):
    """A draft config with ids in any of the places drafts put them, flags present or absent, nested or not."""
    cfg, inner = {}, {}
    nested, top, qwen = draw(maybe_ids), draw(maybe_ids), draw(maybe_ids)
    if nested is not None:
        inner[KEY] = nested
    if top is not None:
        cfg[KEY] = top
    if qwen is not None:
        cfg["target_layer_ids"] = qwen
    for name in ("fc_norm", "norm_before_fc", "norm_output", "norm_before_residual"):
        value = draw(flag)
        if value is not None:
            (inner if draw(st.booleans()) else cfg)[name] = value
    if draw(st.booleans()):
        cfg["speculators_config"] = {"algorithm": "eagle3"}
    if inner:
        cfg["eagle_config"] = inner
    return cfg, nested, top, qwen


@given(case=configs(), spec_ids=maybe_ids, at=st.sampled_from(["input", "output"]))
def test_ids_resolve_spec_then_eagle_config_then_top_level_then_target_layer_ids_then_default(case, spec_ids, at):
    cfg, nested, top, qwen = case
    cfg = {k: v for k, v in cfg.items() if k not in ("fc_norm", "norm_before_fc")}  # keep the flags compatible
    cfg.get("eagle_config", {}).pop("fc_norm", None)
    aux = {"at": at} | ({"ids": spec_ids} if spec_ids else {})
    p = params(aux_layers=aux, norm_before_residual=True, fc_norm=False, norm_before_fc=False, norm_output="head")
    want = spec_ids or nested or top or qwen
    facts = resolve_eagle3(p, cfg, L)
    if want is None:  # the default is always layer inputs, and it is said
        assert facts.taps == tuple(sorted(default_taps(L)))
        assert sum("aux layers" in n for n in facts.notes) == 1
        assert any("at: output has no ids" in n for n in facts.notes) == (at == "output")   # not dropped unsaid
    else:
        shift = 1 if at == "output" else 0          # the convention is the spec's, for config ids too
        assert facts.taps == tuple(sorted(i + shift for i in want))   # ascending, as the engines concatenate
        assert not any("aux layers" in n for n in facts.notes)
    assert aux_count(p, cfg) == len(facts.taps)
    assert described_ids(p, cfg) == want


def described_ids(p, cfg):
    values, lines = describe_facts(p, cfg)
    assert values["aux_layers"]["at"] == p.aux_layers.at
    assert sum(line.startswith("aux layers") for line in lines) == 1
    return values["aux_layers"]["ids"]


@given(case=configs(), count=st.none() | st.integers(1, 6), where=st.sampled_from(["top", "eagle_config"]))
def test_count_explicit_then_num_aux_hidden_states_then_len_ids_then_3(case, count, where):
    cfg, nested, top, qwen = case
    if count is not None:
        (cfg.setdefault("eagle_config", {}) if where == "eagle_config" else cfg)["num_aux_hidden_states"] = count
    ids = nested or top or qwen
    assert aux_count(params(), cfg) == (count or (len(ids) if ids else 3))
    assert aux_count(params(num_aux=2), cfg) == 2


@given(case=configs(), stated=st.fixed_dictionaries({}, optional={
    "fc_norm": st.booleans() | st.just("auto"), "norm_output": st.sampled_from(["none", "head", "feed_back", "auto"]),
    "norm_before_residual": st.booleans() | st.just("auto")}))
def test_flags_resolve_spec_then_config_then_default_and_defaults_are_said(case, stated):
    cfg = case[0]
    cfg.pop("norm_before_fc", None), cfg.get("eagle_config", {}).pop("norm_before_fc", None)
    p = params(norm_before_fc=False, **{"norm_before_residual": False, **stated})
    inner = cfg.get("eagle_config", {})

    def config(name):
        return inner[name] if inner.get(name) is not None else cfg.get(name)

    facts = resolve_eagle3(p, cfg, L)
    # fc_norm left out of the spec reads the config; norm_before_residual is required, so always stated here
    for name, spec in (("fc_norm", stated.get("fc_norm", "auto")),
                       ("norm_before_residual", stated.get("norm_before_residual", False))):
        from_config = spec == "auto"
        want = spec if not from_config else (config(name) if config(name) is not None else False)
        assert getattr(facts, name) == bool(want)
        defaulted = from_config and config(name) is None
        assert sum(n.startswith(f"{name}:") and "using the default" in n for n in facts.notes) == defaulted
        disagree = not from_config and config(name) is not None and bool(config(name)) != spec
        assert sum(n.startswith(f"{name}:") and "using the spec's" in n for n in facts.notes) == disagree
    out = stated.get("norm_output", "auto")
    found = config_norm_output(cfg)
    assert facts.norm_output == (out if out != "auto" else found or "head")
    if config("norm_output") is not None:  # the two meanings: speculators feed back, SpecForge norms the head
        speculators = "speculators_config" in cfg
        assert found == ({True: "feed_back", False: "head"} if speculators else
                         {True: "head", False: "none"})[config("norm_output")]


# --- what a config may hold there -------------------------------------------------------------------------------

import pytest  # noqa: E402

from draftsmith import limits  # noqa: E402
from draftsmith.components.eagle3_config import repeated  # noqa: E402
from draftsmith.errors import SpecError  # noqa: E402


@pytest.mark.parametrize("where", [KEY, "target_layer_ids", "eagle_config"])
@pytest.mark.parametrize("ids", [[2.7, 4.2, 5.9], ["a"], [None], [[1]], [True, 2], {"x": 1}, 3,
                                 [0] * (limits.TARGET_LAYERS + 2)],
                         ids=["floats", "str", "null", "nested", "bool", "mapping", "scalar", "too many"])
def test_config_tap_ids_that_are_not_a_list_of_integers_are_refused_by_name(where, ids):
    cfg = {"eagle_config": {KEY: ids}} if where == "eagle_config" else {where: ids}
    with pytest.raises(SpecError) as info:
        resolve_eagle3(params(), cfg, L)
    [p] = info.value.problems
    assert p.path.startswith("draft config ") and p.path.endswith(where if where != "eagle_config" else KEY)
    assert "not a list of layer indices" in p.message and len(str(info.value)) < 1000


@pytest.mark.parametrize("count", ["3", 3.0, float("inf"), [3], True, limits.TARGET_LAYERS + 2])
def test_a_config_aux_count_that_is_not_a_count_is_refused(count):
    with pytest.raises(SpecError) as info:
        aux_count(params(), {"num_aux_hidden_states": count, KEY: [1, 2, 3]})
    assert info.value.problems[0].path == "draft config num_aux_hidden_states"
    assert aux_count(params(), {"num_aux_hidden_states": 3, KEY: [1, 2, 3]}) == 3


def test_repeated_ids_in_one_pass_and_a_bounded_message():
    assert repeated([3, 1, 3, 2, 1, 3]) == [1, 3] and repeated([1, 2]) == []
    cfg = {KEY: [i % 8 for i in range(limits.TARGET_LAYERS + 1)]}
    with pytest.raises(SpecError) as info:
        resolve_eagle3(params(num_aux=limits.TARGET_LAYERS + 1), cfg, L)
    assert "more than once" in str(info.value) and len(str(info.value)) < 2000
