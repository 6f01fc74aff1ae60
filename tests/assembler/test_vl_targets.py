"""Qwen2-VL / Qwen2.5-VL / Qwen3-VL targets (their text model; draftsmith decodes text): checkpoints transformers
itself writes, in both name layouts (the Hub's Qwen2-VL / Qwen2.5-VL ``model.layers.*`` + ``visual.*``, transformers
5's ``model.language_model.layers.*`` + ``model.visual.*``) and both config layouts (text keys under
``text_config``, or at the top as the Hub's Qwen2.5-VL config.json), give transformers' logits for input_ids alone
(float32); the vision tower is not loaded. Their multimodal rope turns each rotary frequency by one of three
position streams (temporal / height / width), equal for text: then it is 1-D rope with the same theta, which
draftsmith computes; an mrope_section that does not give the streams every frequency once is refused by name."""
import json
import re

import pytest
import torch
from transformers import AutoModelForImageTextToText

import draftsmith
from draftsmith.assembler.assemble import load_target, plan_target
from draftsmith.components import backends
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.registry import default_registry
from draftsmith.testing import write_eagle3
from draftsmith.testing.decoding import decodes_as_target_only
from draftsmith.testing.vl import write_vl_target

ATOL = 1e-5
CASES = {  # name: (model_type, write_vl_target's options)
    "qwen2_vl-hub": ("qwen2_vl", {"layout": "hub"}),
    "qwen2_vl-language_model-flat-tied": ("qwen2_vl", {"layout": "language_model", "flat": True, "tie": True}),
    "qwen2_5_vl-hub-flat": ("qwen2_5_vl", {"layout": "hub", "flat": True}),
    "qwen2_5_vl-language_model": ("qwen2_5_vl", {"layout": "language_model"}),
    "qwen2_5_vl-hub-window4": ("qwen2_5_vl", {"layout": "hub", "use_sliding_window": True, "sliding_window": 4,
                                              "max_window_layers": 1}),
    # transformers reads Qwen3-VL's files in its own layout only (model.language_model.*)
    "qwen3_vl-language_model": ("qwen3_vl", {"layout": "language_model"}),
    "qwen3_vl-language_model-tied": ("qwen3_vl", {"layout": "language_model", "tie": True}),
}
IDS = torch.randint(0, 96, (2, 20), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    made = {}

    def get(name):
        if name not in made:
            model_type, options = CASES[name]
            made[name] = write_vl_target(tmp_path_factory.mktemp(name), model_type, **options)
        return made[name]
    return get


def reference(folder, ids, **kwargs):
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        return model(input_ids=ids, **kwargs).logits


def ours(folder):
    return load_target(folder, default_registry(), backends.sdpa, dtype=torch.float32, device="cpu")[0]


def full_logits(model, ids):
    with torch.no_grad():
        return model.logits(model(ids, torch.arange(ids.shape[1]).expand_as(ids))[0])


@pytest.mark.parametrize("name", sorted(CASES))
def test_text_logits_match_transformers(targets, name):
    want = reference(targets(name), IDS)
    assert want.std() > 0.1
    torch.testing.assert_close(full_logits(ours(targets(name)), IDS), want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", ["qwen2_5_vl-hub-flat", "qwen3_vl-language_model"])
def test_equal_position_streams_are_the_condition(targets, name):
    """1-D rope is what the multimodal rope computes when the three position streams are equal (text): stated
    explicitly they give our logits; a height / width stream moved (as an image's tokens move them) gives others."""
    folder, pos = targets(name), torch.arange(IDS.shape[1]).expand_as(IDS)
    got = full_logits(ours(folder), IDS)
    torch.testing.assert_close(reference(folder, IDS, position_ids=pos.expand(3, -1, -1)), got, atol=ATOL, rtol=0)
    moved = torch.stack([pos, pos + 500, pos * 7])   # its low frequencies turn slowly: moved far
    assert (reference(folder, IDS, position_ids=moved) - got).abs().max() > 1e-2


@pytest.mark.parametrize("name", ["qwen2_vl-hub", "qwen3_vl-language_model"])
def test_the_vision_tower_is_not_loaded(targets, name):
    planned, _ = plan_target(targets(name), default_registry(), backends.sdpa)
    visual = [n for n in planned.infos if "visual." in n]
    assert visual and set(visual) <= set(planned.plan.ignored)
    assert not [n for n in planned.module.state_dict() if "visual" in n]


@pytest.mark.parametrize("model_type, section", [("qwen2_5_vl", [2, 3, 2]), ("qwen2_vl", [2, 3, 3, 1]),
                                                 ("qwen3_vl", [4, 2, 1]), ("qwen2_5_vl", [2, 3, "3"]),
                                                 ("qwen2_5_vl", None)])
def test_an_mrope_section_not_covering_the_head_is_refused(targets, tmp_path, model_type, section):
    """None: no mrope_section, so transformers' model takes its type's (16, 24, 24: a head of 128), not this head's."""
    name = next(n for n, (m, options) in CASES.items() if m == model_type and not options.get("flat"))
    folder = tmp_path / "t"
    folder.mkdir()
    cfg = json.loads((targets(name) / "config.json").read_text())
    rope = cfg["text_config"]["rope_parameters"]
    rope.pop("mrope_section") if section is None else rope.update(mrope_section=section)
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "model.safetensors").symlink_to(targets(name) / "model.safetensors")
    said = re.escape(f"{model_type} target: mrope_section={section if section is not None else [16, 24, 24]!r} ")
    with pytest.raises(UnsupportedTarget, match=said + "(?s:.*)allowed: three non-negative ints summing to head_dim "
                                                       "/ 2 = 8"):
        ours(folder)


@pytest.mark.parametrize("model_type, layout", [("qwen2_5_vl", "hub"), ("qwen3_vl", "language_model")])
def test_speculative_decoding_equals_target_only(tmp_path, model_type, layout):
    """An EAGLE-3 draft over the VL target's text model: greedy speculative decoding (chains and trees) gives
    draftsmith's target-only output, which is transformers' greedy continuation of the ids."""
    folder = write_vl_target(tmp_path / "t", model_type, layout=layout, num_hidden_layers=8)
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=write_eagle3(tmp_path / "d", folder))
    prompts = [[5, 2, 3, 4, 5, 6], [7, 8]]
    base, _ = decodes_as_target_only(model, prompts, max_new_tokens=16)
    hf = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
    hf.generation_config.eos_token_id = None   # as stop=[]
    for prompt, b in zip(prompts, base):
        out = hf.generate(torch.tensor([prompt]), max_new_tokens=16, do_sample=False)
        assert out[0, len(prompt):].tolist() == list(b.token_ids)
