"""A rule typo that sends a second checkpoint name onto a canonical one (a vendor's final norm renamed to
'lm_head.' beside its head) is a collision, which no spec field mends: the load said 'the checkpoint's tensors fit
the draft with draft.norms.final: false', counting the two colliding names as one held lm_head.weight, and a spec
set as told still failed on the collision (field_notes.flip_note)."""
import pytest
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.testing import write_eagle3, write_target

SPEC = """name: vendor
extends: eagle3-llama
weights:
  rules:
    - {{match: '^decoder\\.', replace: 'layers.0.'}}
    - {{match: '^final_norm\\.', replace: '{final}'}}
"""


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("collide")
    target = write_target(root / "t")
    draft = write_eagle3(root / "d", target, draft_vocab=40)
    tensors = load_file(draft / "model.safetensors")
    renamed = {"final_norm.weight" if n == "norm.weight" else n.replace("midlayer.", "decoder."): t
               for n, t in tensors.items()}
    save_file(renamed, draft / "model.safetensors")
    return target, draft


def notes(tmp_path, pair, final: str) -> tuple[str, list[str]]:
    (tmp_path / "s.yaml").write_text(SPEC.format(final=final))
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble(tmp_path / "s.yaml", *pair)
    return str(info.value), list(getattr(info.value, "__notes__", ()))


def test_a_collision_gets_no_field_note(tmp_path, pair):
    error, said = notes(tmp_path, pair, "lm_head.")
    assert "collision" in error
    assert not [n for n in said if n.startswith("note: the checkpoint's tensors fit")], said


def test_the_rule_written_right_loads(tmp_path, pair):
    (tmp_path / "s.yaml").write_text(SPEC.format(final="norm."))
    draftsmith.assemble(tmp_path / "s.yaml", *pair)
