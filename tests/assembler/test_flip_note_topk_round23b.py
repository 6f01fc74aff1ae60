"""Round 23b (field_notes.flip_note x build.topk_problems, both today's): a spec with vocab.reduced: false on a reduced
draft is told 'draft.vocab.reduced: true' fits the names, whatever its decoding.topk. FAILS on current code where
topk is past the d2t's length: assemble()'s rebuild() builds with defer=False, so the set-aside topk problem (no
tensor name depends on it) raises and flip_note skips the reading as one that does not build."""
import pytest
import yaml

import draftsmith
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("fliptopk")
    target = write_target(root / "t")
    return target, write_eagle3(root / "d", target, draft_vocab=40)


@pytest.mark.parametrize("topk", [8, 60])
def test_the_reduced_flip_is_said_whatever_the_topk(tmp_path, pair, topk):
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    data["draft"].setdefault("vocab", {})["reduced"] = False
    data.setdefault("decoding", {}).update(topk=topk, draft_tokens=60)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble(tmp_path / "s.yaml", *pair)
    notes = [n for n in getattr(info.value, "__notes__", ()) if "tensors fit the draft" in n]
    assert notes == ["note: the checkpoint's tensors fit the draft with draft.vocab.reduced: true "
                     "(the spec: false)"], notes
