"""EAGLE-3 draft config keys the eagle3 fusion does not compute are not passed over in silence: a
``use_aux_hidden_state`` that is not true (NVIDIA Model-Optimizer's, under eagle_config, as vLLM reads it: no fc, the
target's last hidden state fed as is) is refused by name, by assemble and by inspect's proposal; a true ``bias`` (vLLM
reads an o_proj bias, SGLang an o_proj and an fc bias; EAGLE's and SpecForge's trainers build none) is said where the
draft is built and where it is inspected, and the draft loads as its tensors are."""
import json
import logging

import pytest

import draftsmith
from draftsmith.components import eagle3_config, eagle3_keys
from draftsmith.components.params import Eagle3Params
from draftsmith.errors import SpecError
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("t"), "llama", seed=1, num_hidden_layers=8)


@pytest.mark.parametrize("flags, where", [
    ({"eagle_config": {"use_aux_hidden_state": False}}, "eagle_config.use_aux_hidden_state"),
    ({"eagle_config": {"use_aux_hidden_state": 0}}, "eagle_config.use_aux_hidden_state")])
def test_a_draft_without_aux_hidden_states_is_refused_by_name(target, tmp_path, flags, where):
    draft = write_eagle3(tmp_path / "d", target, flags=flags)
    with pytest.raises(SpecError, match=rf"draft config {where}: asks for a draft fed the target's last hidden "
                                        r"state with no fc.*\n\s+allowed: true, or the key absent"):
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)


def test_a_top_level_use_aux_hidden_state_is_said_and_loads_as_vllm_runs_it(target, tmp_path, caplog):
    """vLLM reads the key under eagle_config only: at the top level it runs the draft with fc, as draftsmith does."""
    assert eagle3_keys.aux_problems({"use_aux_hidden_state": False}) == []
    draft = write_eagle3(tmp_path / "d", target, flags={"use_aux_hidden_state": False})
    with caplog.at_level("INFO", logger="draftsmith"):
        model = draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert model.generate([1, 2, 3], max_new_tokens=4).token_ids
    assert "use_aux_hidden_state: false at its top level, where no engine reads it" in caplog.text


@pytest.mark.parametrize("value", [True, None])
def test_aux_hidden_states_stated_true_or_absent_load(value):
    cfg = {"eagle_config": {"use_aux_hidden_state": value}} if value is not None else {}
    assert eagle3_keys.aux_problems(cfg) == [] and eagle3_keys.aux_problems({"use_aux_hidden_state": True}) == []


def test_inspect_does_not_list_use_aux_hidden_state_as_unread(target, tmp_path):
    from draftsmith.convert.inspect import inspect_checkpoint

    draft = write_eagle3(tmp_path / "d", target, flags={"eagle_config": {"use_aux_hidden_state": False}})
    found = inspect_checkpoint(draft)
    assert "eagle_config.use_aux_hidden_state" not in found.unread


def test_a_true_bias_is_said_and_the_draft_loads_as_its_tensors_are(target, tmp_path, caplog):
    draft = write_eagle3(tmp_path / "d", target, flags={"bias": True})
    assert json.loads((draft / "config.json").read_text())["bias"] is True
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        model = draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    said = " ".join(r.getMessage() for r in caplog.records)
    assert 'the draft config says "bias": true, which an EAGLE-3 draft here does not read' in said
    assert "draft.attention.o_bias: true" in said
    assert model.draft.fc.bias is None
    assert all(m.bias is None for n, m in model.draft.named_modules() if n.endswith(("o_proj", "q_proj")))
    lines = eagle3_config.describe_facts(Eagle3Params(norm_before_residual=False), {"bias": True})[1]
    assert any(line.startswith('the draft config says "bias": true') for line in lines)


@pytest.mark.parametrize("cfg", [{}, {"bias": False}, {"bias": None}])
def test_no_bias_or_a_false_one_says_nothing(cfg):
    assert eagle3_keys.config_notes(cfg) == []
