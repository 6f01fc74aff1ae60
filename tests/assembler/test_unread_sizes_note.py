"""A draft config that names its MLP width or KV heads under another model's keys (ffn_dim, n_kv_heads) loads with
transformers' defaults in their place, and the misfit shapes that follow did not point to those keys (a
walk-through, 2026-12-01): the error's note names them."""
import json

import pytest

import draftsmith
from draftsmith.errors import DraftsmithError
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("unread")
    target = write_target(root / "t")
    return target, write_eagle3(root / "d", target)


def renamed(draft, tmp_path, **names):
    out = tmp_path / "d"
    out.mkdir()
    for f in draft.iterdir():
        (out / f.name).write_bytes(f.read_bytes())
    config = json.loads((out / "config.json").read_text())
    for old, new in names.items():
        value = config.pop(old)
        if new:
            config[new] = value
    (out / "config.json").write_text(json.dumps(config))
    return out


def notes(target, draft):
    with pytest.raises(DraftsmithError) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    return [n for n in getattr(info.value, "__notes__", []) if "states no" in n]


def test_the_keys_nothing_reads_are_named_beside_the_defaults_taken(pair, tmp_path):
    target, draft = pair
    width = json.loads((draft / "config.json").read_text())["intermediate_size"]
    said = notes(target, renamed(draft, tmp_path, intermediate_size="ffn_dim"))
    assert said == [f"note: the draft's config states no intermediate_size (a default was taken); it has ffn_dim: "
                    f"{width}, which nothing reads: if these are its sizes under another model's names, rename them"]


def test_no_note_where_no_key_holds_a_size_nothing_reads(pair, tmp_path):
    target, draft = pair
    assert notes(target, renamed(draft, tmp_path, intermediate_size=None)) == []
