"""A spec reading d2t in the other convention than the checkpoint stores is told which one reads it as a sound map
(draft.vocab.d2t named), both ways; a map no convention makes sound keeps the plain refusal."""
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.assembler.vocab import VocabMapError, as_offsets

DEMO = Path(draftsmith.__file__).parent / "demo_data"
BUILTIN = Path(draftsmith.__file__).parent / "specs" / "builtin"


def spec_file(tmp_path: Path, draft: Path, d2t: str) -> Path:
    data = yaml.safe_load((BUILTIN / "demo.yaml").read_text())
    data["checkpoints"] = {"target": str(DEMO / "target"), "draft": str(draft)}
    data["draft"].setdefault("vocab", {})["d2t"] = d2t
    path = tmp_path / f"{d2t}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def draft_with_d2t(tmp_path: Path, change) -> Path:
    out = tmp_path / "draft"
    shutil.copytree(DEMO / "draft", out)
    tensors = load_file(str(out / "model.safetensors"))
    tensors["d2t"] = change(tensors["d2t"])
    save_file(tensors, str(out / "model.safetensors"))
    return out


def test_as_offsets_reads_either_convention():
    d2t = torch.tensor([0, 2, 2, 5])
    assert torch.equal(as_offsets(d2t, "offset"), d2t)
    assert torch.equal(as_offsets(d2t + torch.arange(4), "absolute"), d2t)


@pytest.mark.parametrize("stored, said, right", [("offset", "absolute", "offset"), ("absolute", "offset", "absolute")])
def test_the_other_convention_is_named_where_it_reads_a_sound_map(tmp_path, stored, said, right):
    draft = DEMO / "draft" if stored == "offset" else draft_with_d2t(tmp_path, lambda d: d + torch.arange(len(d)))
    with pytest.raises(VocabMapError) as e:
        draftsmith.assemble(spec_file(tmp_path, draft, said))
    assert f"read as {'offsets' if right == 'offset' else 'target ids'} it is a sound map: set draft.vocab.d2t: " \
           f"{right}" in str(e.value), str(e.value)
    draftsmith.assemble(spec_file(tmp_path, draft, right))   # and it loads


def test_a_map_no_convention_reads_is_refused_without_a_note(tmp_path):
    draft = draft_with_d2t(tmp_path, lambda d: d.flip(0))   # offsets decreasing: neither reading increases
    with pytest.raises(VocabMapError) as e:
        draftsmith.assemble(spec_file(tmp_path, draft, "offset"))
    assert "note:" not in str(e.value) and "not strictly increasing" in str(e.value)


@pytest.mark.parametrize("said", ["offset", "absolute"])
def test_the_problems_name_the_map_as_the_spec_reads_it(tmp_path, said):
    """A spec that says absolute was told "d + d2t[d] is not strictly increasing (d2t must hold offsets, not
    absolute ids)" (found by a dogfooding helper): the problem names d2t[d] as target ids, and nothing says that
    absolute ids are not allowed."""
    def back(d):   # draft token 4's target id before token 3's: no convention reads a sound map
        d = d + torch.arange(len(d)) if said == "absolute" else d.clone()
        d[4] = d[3] - (1 if said == "absolute" else 2)
        return d

    with pytest.raises(VocabMapError) as e:
        draftsmith.assemble(spec_file(tmp_path, draft_with_d2t(tmp_path, back), said))
    ids = "d2t[d] (absolute target ids)" if said == "absolute" else "d + d2t[d]"
    assert f"\n  {ids} is not strictly increasing" in str(e.value) and "must hold" not in str(e.value), str(e.value)
