"""A draft holding d2t but no t2d: inspect reads the convention from d2t against the config's vocab_size (the
target's) where only one reading maps into it (an absolute d2t was proposed as offsets, which no load takes: a doctor
hunt, 2026-12-01); where both do, or the config states no vocab_size, the family's convention is assumed and said."""
from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file, save_file

from draftsmith import assemble
from draftsmith import testing as T
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.specs.loader import parse_spec

ONLY = "the one reading that maps into the config's 96 target tokens; the checkpoint holds no t2d to check it against)"
ASSUMED = "(assumed: the checkpoint holds no t2d to confirm whether d2t holds offsets or target ids"


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return T.write_target(tmp_path_factory.mktemp("d2t") / "t")


def without_t2d(folder, config_edit=None):
    shard = next(folder.glob("*.safetensors"))
    tensors = load_file(shard)
    del tensors["t2d"]
    save_file(tensors, shard)
    if config_edit:
        config = json.loads((folder / "config.json").read_text())
        config_edit(config)
        (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("convention", ["offset", "absolute"])
def test_the_one_sound_reading_is_proposed_and_loads(target, tmp_path, convention):
    draft = without_t2d(T.write_eagle3(tmp_path / convention, target, draft_vocab=40, d2t=convention))
    found = inspect_checkpoint(draft)
    assert found.spec["draft"]["vocab"]["d2t"] == convention
    notes = found.match.assumptions
    assert any(note.startswith(f"vocab.d2t: {convention} (") and note.endswith(ONLY) for note in notes), notes
    spec = dict(found.spec, checkpoints={"target": str(target), "draft": str(draft)})
    assemble(parse_spec(spec, source="inspect"))   # the proposal loads


def test_without_vocab_size_or_with_two_sound_readings_the_family_is_assumed(target, tmp_path):
    first = without_t2d(T.write_eagle3(tmp_path / "first", target, draft_vocab=40, d2t="absolute"),
                        lambda c: c.pop("vocab_size"))
    found = inspect_checkpoint(first)
    assert found.spec["draft"]["vocab"]["d2t"] == "offset" and any(ASSUMED in n for n in found.match.assumptions)
    # d2t = 0..39: as target ids the first 40, as offsets the ids 0, 2, ..., 78 (inside 96): both sound, nothing
    # decides
    both = T.write_eagle3(tmp_path / "both", target, draft_vocab=40, d2t="absolute")
    shard = next(both.glob("*.safetensors"))
    tensors = load_file(shard)
    tensors["d2t"] = tensors["d2t"].new_tensor(range(40))
    del tensors["t2d"]
    save_file(tensors, shard)
    found = inspect_checkpoint(both)
    assert found.spec["draft"]["vocab"]["d2t"] == "offset" and any(ASSUMED in n for n in found.match.assumptions)
