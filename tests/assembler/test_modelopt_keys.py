"""Model-Optimizer's keys, planted as bugs by a review (h107) and passed by the tests then: a nested eagle_config key
wins over the top level's; a false use_last_layernorm beside a norm_output key that says none loads with its
norm.weight unapplied (the norm_output key decides: no held-norm refusal); a spec given to inspect that already says
norms.final false gets no note claiming the change."""
import pytest
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.components import eagle3_config, eagle3_keys
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.specs.loader import load_spec
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("t"), "llama", seed=1, num_hidden_layers=8)


def test_the_nested_key_wins_over_the_top_levels():
    cfg = {"norm_output": True, "use_last_layernorm": True, "eagle_config": {"norm_output": False,
                                                                          "use_last_layernorm": False}}
    assert eagle3_keys.config_value(cfg, "norm_output") is False
    assert eagle3_keys.where(cfg, "use_last_layernorm") == "eagle_config.use_last_layernorm"
    assert eagle3_config.config_norm_output(cfg) == "none"
    assert eagle3_keys.config_value({"norm_output": True, "eagle_config": {}}, "norm_output") is True


def test_a_norm_output_key_beside_a_false_use_last_layernorm_decides_without_the_held_norm_refusal(target, tmp_path):
    flags = {"norm_output": False, "eagle_config": {"use_last_layernorm": False}}   # both: no final norm
    assert eagle3_config.held_norm_problem(flags, True) is None
    draft = write_eagle3(tmp_path / "d", target, flags=flags)   # norm.weight held
    spec = load_spec("eagle3-llama").model_dump(mode="json")
    spec["draft"]["fusion"]["norm_output"] = "auto"   # the draft config's reading (the family states head)
    model = draftsmith.assemble(draftsmith.parse_spec(spec), target=target, draft=draft)
    assert model.draft.fc.norm_output == "none" and not model.draft.head_norm


def test_a_given_spec_already_without_the_final_norm_gets_no_note_of_it(target, tmp_path):
    draft = write_eagle3(tmp_path / "d", target, flags={"eagle_config": {"use_last_layernorm": False}})
    file = draft / "model.safetensors"
    save_file({k: v for k, v in load_file(file).items() if k not in ("norm.weight", "model.norm.weight")}, file)
    spec = load_spec("eagle3-llama").model_dump(mode="json")
    spec["name"], spec["draft"]["norms"]["final"] = "eagle3-llama-nofinal", False
    found = inspect_checkpoint(draft, spec=draftsmith.parse_spec(spec))
    assert found.spec["draft"]["norms"]["final"] is False
    assert not any(n.startswith("norms.final") for n in found.match.assumptions), found.match.assumptions


def test_a_spec_stating_norm_output_reads_and_converts_a_held_norm_beside_a_false_flag(target, tmp_path):
    """The refusal of a false use_last_layernorm beside a held norm.weight says to state norm_output in the spec:
    inspect --spec and convert --spec refused such a spec all the same (the config's flag won over it), and convert,
    past that, wrote the flag beside the norm_output it resolved (its result refused on reading back)."""
    from draftsmith.convert.run import convert

    draft = write_eagle3(tmp_path / "d", target, flags={"eagle_config": {"use_last_layernorm": False}})
    mine = tmp_path / "head.yaml"
    mine.write_text("name: mine-x\nextends: eagle3-llama\ndraft:\n  fusion:\n    norm_output: head\n")
    found = inspect_checkpoint(draft, spec=mine)
    assert found.spec["draft"]["fusion"]["norm_output"] == "head" and found.spec["draft"]["norms"]["final"] is True
    assert "norm_output: head (the spec's; the draft config's eagle_config.use_last_layernorm: false)" in \
        found.match.assumptions
    written = convert(draft, "midlayer", tmp_path / "out", spec=mine)
    assert written["eagle_config"]["use_last_layernorm"] is True
    back = inspect_checkpoint(tmp_path / "out")
    assert back.spec["draft"]["fusion"]["norm_output"] == "head"
    model = draftsmith.assemble(draftsmith.parse_spec(back.spec), target=target)
    assert model.draft.head_norm
