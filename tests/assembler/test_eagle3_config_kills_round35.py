"""Mutation survivors (round 35) of draftsmith.components.eagle3_config: resolve_eagle3 refuses a draft config the
fusion cannot run (eagle_config.parallel_draft_step > 1) at once where no deferred list is given, and sets it aside
where one is, so that a load checks the tensors too and says what they lack beside it."""
import pytest
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.components.eagle3_config import resolve_eagle3
from draftsmith.components.fusion import Eagle3Params
from draftsmith.errors import SpecError
from draftsmith.testing import write_eagle3, write_target

UNBUILT = {"eagle_config": {"parallel_draft_step": 3}}


# catches eagle3_config.py resolve_eagle3: if deferred is None -> is not None
def test_an_unbuilt_config_is_refused_at_once_or_set_aside():
    with pytest.raises(SpecError, match=r"eagle_config\.parallel_draft_step"):
        resolve_eagle3(Eagle3Params(norm_before_residual=True), UNBUILT, 8)
    deferred = []
    facts = resolve_eagle3(Eagle3Params(norm_before_residual=True), UNBUILT, 8, deferred)
    assert facts.taps and [p.path for p in deferred] == ["draft config eagle_config.parallel_draft_step"]


def test_a_load_says_the_tensors_beside_an_unbuilt_config(tmp_path):
    target = write_target(tmp_path / "t", "llama", seed=1, num_hidden_layers=8)
    draft = write_eagle3(tmp_path / "d", target, flags=UNBUILT)
    for f in draft.glob("*.safetensors"):
        state = load_file(str(f))
        del state["midlayer.mlp.down_proj.weight"]
        save_file(state, str(f))
    with pytest.raises(SpecError, match=r"eagle_config\.parallel_draft_step") as e:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    notes = "\n".join(getattr(e.value, "__notes__", ()))
    assert "the tensors were checked too" in notes and "down_proj" in notes, notes
