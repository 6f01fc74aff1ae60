"""A GLM target whose files hold its MTP layer (model.layers.{L}: eh_proj, enorm, hnorm and a block) while its
config declares none (num_nextn_predict_layers 0, null or absent): the layer's tensors misfit the target, and the
error names the key that leaves them out and the count the files hold (it listed 25 tensors, no key)."""
import pytest

from draftsmith.assembler.assemble import plan_target
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.components import backends
from draftsmith.registry import default_registry
from draftsmith.testing import edit_config
from draftsmith.testing.mtp import write_mtp
from test_glm_mtp import L, write_glm_target


@pytest.fixture(scope="module")
def glm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("glm")
    write_glm_target(folder, "glm-4.5-air")
    return write_mtp(folder, block_from=L)


@pytest.mark.parametrize("stated, said", [(0, "is 0"), (None, "is null"), ("absent", "is not stated")])
def test_an_undeclared_mtp_layer_names_the_key(glm, tmp_path, stated, said):
    folder = edit_config(glm, tmp_path / "t", **({} if stated == "absent" else {"num_nextn_predict_layers": stated}),
                         drop=["num_nextn_predict_layers"] if stated == "absent" else [])
    with pytest.raises(CheckpointMismatch, match=rf"unexpected: 'model\.layers\.{L}\.eh_proj\.weight'") as e:
        plan_target(folder, default_registry(), backends.sdpa)
    notes = "\n".join(getattr(e.value, "__notes__", ()))
    assert f"model.layers.{L}.eh_proj.weight is an MTP layer's" in notes
    assert f"num_nextn_predict_layers {said} (0 MTP layers declared)" in notes and "files hold (1)" in notes


def test_a_declared_mtp_layer_still_loads_and_another_misfit_gets_no_mtp_note(glm, tmp_path):
    plan_target(glm, default_registry(), backends.sdpa)
    folder = edit_config(glm, tmp_path / "t", attention_bias=False)   # q/k/v biases unexpected: no MTP note
    with pytest.raises(CheckpointMismatch) as e:
        plan_target(folder, default_registry(), backends.sdpa)
    assert "MTP layer" not in "\n".join(getattr(e.value, "__notes__", ()))
