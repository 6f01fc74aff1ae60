"""Mutation survivors of draftsmith/convert/verify.py (round 28, scripts/mutate.py --fork, the whole module): the
refusal's head names the source folder and its hint the spec given to convert --spec, each cut in the middle past
300 characters as convert's other messages cut a path (a text of exactly 300 characters is shown whole, one of 301
is cut to 148 + '...' + 148). Killed 66/70 -> 70/70; no survivor was equivalent.
"""
import json
from pathlib import Path

import pytest

from draftsmith.convert.canonical import ConvertError, read_canonical
from draftsmith.convert.run import convert
from draftsmith.convert.verify import verify
from draftsmith.testing import write_eagle3

TARGET_CFG = {"model_type": "llama", "hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 4,
              "num_key_value_heads": 2, "num_hidden_layers": 10, "vocab_size": 64, "rms_norm_eps": 1e-6,
              "max_position_embeddings": 256, "rope_theta": 10000.0}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """An EAGLE-3 draft converted to the layers layout: (the output, its canonical tensors, its facts)."""
    tmp = tmp_path_factory.mktemp("written")
    (tmp / "target").mkdir()
    (tmp / "target" / "config.json").write_text(json.dumps(TARGET_CFG))
    src = write_eagle3(tmp / "s", tmp / "target")
    convert(src, "layers", tmp / "o")
    tensors, facts, _, _ = read_canonical(tmp / "o")
    return tmp / "o", tensors, facts


def _shown(text: str) -> str:
    """``text`` as a refusal shows a path: whole up to 300 characters, else its first and last 148 around '...'."""
    return text if len(text) <= 300 else f"{text[:148]}...{text[-148:]}"


@pytest.mark.parametrize("length", [300, 301])
def test_a_refusal_names_the_source_folder_whole_up_to_300_characters_and_cuts_a_longer_one(written, length):
    """Pins the head `SRC cannot be written as LAYOUT: ` with SRC cut by short_text(src, 300).

    catches verify.py:53 `short_text(src, 300)` -> 299 (a 300-character folder cut) / 301 (a 301-character one
    shown whole). The folder is only named, never read, so it need not exist."""
    out, tensors, facts = written
    src = Path("d" * length)
    with pytest.raises(ConvertError) as info:
        verify(out, {**facts, "fact": 1}, tensors, "layers", src=src)
    head = str(info.value).splitlines()[0]
    assert head == f"{_shown(str(src))} cannot be written as layers: the layers layout cannot express this draft " \
                   "(nothing written):"


@pytest.mark.parametrize("length", [300, 301])
def test_a_refusal_for_facts_names_the_spec_given_whole_up_to_300_characters_and_cuts_a_longer_one(written, length):
    """Pins the hint after a fact the layout cannot say, with convert --spec given: `--spec SPEC`, SPEC cut by
    short_text(read_with, 300).

    catches verify.py:55 `short_text(read_with, 300)` -> 299 / 301."""
    out, tensors, facts = written
    spec = "s" * length
    with pytest.raises(ConvertError) as info:
        verify(out, {**facts, "fact": 1}, tensors, "layers", read_with=spec)
    assert str(info.value).splitlines()[1:] == [
        "  fact: 1 would read back as None",
        f"  keep it in a layout that says it, or load it as it is: --spec {_shown(spec)}"]
