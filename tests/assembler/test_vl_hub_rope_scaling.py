"""The Hub's Qwen2-VL / Qwen2.5-VL config.json states its multimodal rope as ``rope_scaling: {type: mrope,
mrope_section: [16, 24, 24]}`` (transformers' Qwen2-VL config reads the type as default rope), and SpecForge's
EAGLE-3 drafts for them copy it (configs/qwen2-5-vl-eagle3.json). Both load (they were refused: "rope_type is
'mrope'; known: default, linear, ..."): the target gives transformers' logits, the draft decodes as the same draft
without the key (text's three position streams are equal: 1-D rope of the same theta); a draft whose mrope_section
does not cover its head is refused naming the file."""
import json

import pytest
import torch
from transformers import AutoModelForImageTextToText

import draftsmith
from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends
from draftsmith.errors import CheckpointError
from draftsmith.registry import default_registry
from draftsmith.testing import write_eagle3
from draftsmith.testing.vl import write_vl_target

MROPE = {"type": "mrope", "mrope_section": [2, 3, 3]}   # the Hub's [16, 24, 24] for a head of 16


def hub_config(folder):
    """``folder``'s flat config.json rewritten as the Hub's: rope_scaling type mrope, rope_theta at the top."""
    cfg = json.loads((folder / "config.json").read_text())
    rope = cfg.pop("rope_parameters")
    cfg |= {"rope_scaling": MROPE, "rope_theta": rope["rope_theta"]}
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return hub_config(write_vl_target(tmp_path_factory.mktemp("t"), "qwen2_5_vl", flat=True, num_hidden_layers=8))


def test_the_hubs_mrope_target_gives_transformers_logits(target):
    ids = torch.randint(0, 96, (2, 12), generator=torch.Generator().manual_seed(0))
    hf = AutoModelForImageTextToText.from_pretrained(target, dtype=torch.float32).eval()
    model = load_target(target, default_registry(), backends.sdpa, dtype=torch.float32, device="cpu")[0]
    with torch.no_grad():
        want = hf(input_ids=ids).logits
        got = model.logits(model(ids, torch.arange(ids.shape[1]).expand_as(ids))[0])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def draft(folder, target, rope_scaling=None):
    out = write_eagle3(folder, target)
    cfg = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps(cfg | ({"rope_scaling": rope_scaling} if rope_scaling else {})))
    return out


def test_specforges_mrope_draft_decodes_as_default_rope(target, tmp_path):
    plain = draftsmith.assemble("eagle3-llama", target=target, draft=draft(tmp_path / "plain", target))
    mrope = draftsmith.assemble("eagle3-llama", target=target, draft=draft(tmp_path / "mrope", target, MROPE))
    prompts = [[5, 2, 3, 4, 5, 6], [7, 8]]
    for got, want in zip(mrope.generate(prompts, max_new_tokens=12, stop=[], topk=3, steps=3, draft_tokens=7),
                         plain.generate(prompts, max_new_tokens=12, stop=[], topk=3, steps=3, draft_tokens=7)):
        assert got.token_ids == want.token_ids
    buffers = dict(plain.draft.named_buffers())   # the rotary frequencies among them
    assert buffers and all(torch.equal(b, buffers[n]) for n, b in mrope.draft.named_buffers())


def test_a_draft_mrope_section_not_covering_its_head_is_refused(target, tmp_path):
    folder = draft(tmp_path / "d", target, {"type": "mrope", "mrope_section": [2, 3, 2]})
    with pytest.raises(CheckpointError, match=r"config\.json.*mrope_section is \[2, 3, 2\].*allowed: three "
                                              r"non-negative ints summing to head_dim / 2 = 8"):
        draftsmith.assemble("eagle3-llama", target=target, draft=folder)
