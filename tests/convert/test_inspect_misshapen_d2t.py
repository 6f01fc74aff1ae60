"""inspect on a draft that holds t2d and a d2t (or t2d) that is not 1-D (2-D, or a scalar) ended in 'internal error:
RuntimeError / IndexError' (exit 70; a bug a round-25 mutation survivor led to): d2t_convention left a misshapen d2t
to the load plan only where t2d was absent. Now either way the folder gets the proposal, a note that d2t / t2d form
no map, and the load plan's sentence ("tensor 'd2t' is [40, 3] in the checkpoint, ... expects [40]")."""
import pytest
import torch
from safetensors.torch import load_file, save_file

from draftsmith.convert.inspect import NO_MAP, inspect_checkpoint
from draftsmith.testing import write_eagle3, write_target


@pytest.mark.parametrize("name, shape", [("d2t", (40, 3)), ("d2t", ()), ("t2d", (2, 32))])
def test_a_misshapen_d2t_beside_t2d_is_no_internal_error(tmp_path, name, shape):
    target = write_target(tmp_path / "t", "llama", seed=1)
    draft = write_eagle3(tmp_path / "d", target, draft_vocab=40)
    (f,) = draft.glob("*.safetensors")
    tensors = load_file(f)
    assert "t2d" in tensors
    tensors[name] = torch.zeros(shape, dtype=tensors[name].dtype)
    save_file(tensors, f, metadata={"format": "pt"})
    found = inspect_checkpoint(draft)   # raised RuntimeError (broadcast) / IndexError (d2t.shape[0] of a scalar)
    assert found.match is not None and found.spec is not None
    assert NO_MAP in found.match.assumptions and found.spec["draft"]["vocab"]["d2t"] == "offset"
