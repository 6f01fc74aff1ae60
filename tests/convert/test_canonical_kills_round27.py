"""Kills for convert/canonical.py survivors (round 27): proposed_spec's fallback when inspect's proposal does not parse
(the spec convert was given, else the detected family's), and the folder named in the proposal's source cut past 300
characters as every other message names a folder."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from draftsmith.convert.canonical import proposed_spec
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.errors import short_text
from draftsmith.specs.loader import load_spec
from draftsmith.testing import write_eagle3, write_target


def test_a_proposal_that_does_not_parse_falls_back_to_the_given_spec_else_the_family_spec():
    """A proposal that does not parse: the spec convert was given (--spec) when there is one, else the detected
    family's spec; never None, and never the family's over the one the user gave."""
    match = SimpleNamespace(spec="eagle3-llama")
    unparsable = {"draft": "not a mapping"}
    family = proposed_spec(SimpleNamespace(spec=unparsable, folder="d", given=None, match=match))
    assert family is not None and family.name == load_spec("eagle3-llama").name
    given = load_spec("eagle3-speculators")
    assert proposed_spec(SimpleNamespace(spec=unparsable, folder="d", given=given, match=match)) is given


@pytest.mark.parametrize("length, cut", [(300, False), (301, True)])
def test_the_proposed_spec_names_the_draft_folder_cut_past_300_characters(length, cut, tmp_path: Path):
    """The proposal's source (what an error building its rules names) holds the folder whole up to 300 characters
    and cut in the middle past them, as short_text(folder, 300) says it."""
    target = write_target(tmp_path / "t")
    draft = tmp_path / ("a" * 150) / ("b" * (length - len(str(tmp_path)) - 152))
    assert len(str(draft)) == length
    spec = proposed_spec(inspect_checkpoint(write_eagle3(draft, target)))
    assert spec.source == f"the spec inspect proposes for {short_text(draft, 300)}"
    assert (str(draft) in spec.source) is not cut and ("..." in spec.source) is cut


@pytest.mark.parametrize("length, cut", [(300, False), (301, True)])
def test_an_ignored_tensor_carried_over_one_the_draft_holds_is_refused_naming_the_folder_cut_past_300(
        length, cut, tmp_path: Path):
    """eagle3-llama ignores (model.)embed_tokens.weight: the first is carried as embed_tokens.weight, so the second
    keeps its own name, which a NeMo-prefixed model.model.embed_tokens.weight of the draft already reads as. Convert
    refuses (writes neither over the other), naming the folder whole up to 300 characters, cut past them."""
    from safetensors.torch import load_file, save_file

    from draftsmith.convert.canonical import ConvertError, plan_canonical

    draft = tmp_path / ("a" * 150) / ("b" * (length - len(str(tmp_path)) - 152))
    assert len(str(draft)) == length
    write_eagle3(draft, write_target(tmp_path / "t"))
    tensors = load_file(draft / "model.safetensors")
    embed = tensors["fc.weight"][:, :4].contiguous()
    save_file(tensors | {"embed_tokens.weight": embed, "model.embed_tokens.weight": embed.clone(),
                         "model.model.embed_tokens.weight": embed.clone()},
              draft / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ConvertError) as e:
        plan_canonical(draft)
    assert str(e.value) == (
        f"{short_text(draft, 300)}: 'model.embed_tokens.weight', which the eagle3-llama rules ignore, would be "
        f"carried as 'model.embed_tokens.weight', the name of the draft's own 'model.model.embed_tokens.weight'; "
        f"convert writes neither over the other")
    assert (str(draft) in str(e.value)) is not cut
