"""Mutation round 36 (targets.py, the VL records): each Qwen2-VL-family type's own default mrope_section (where the
config states none: transformers' model takes its type's) is the one said and the one checked, and a section that
gives a stream no frequency (zeros) still covers the head: text rotates as 1-D rope, which transformers agrees."""
from __future__ import annotations

import json
import re

import pytest
import torch
from transformers import AutoConfig, AutoModelForImageTextToText

from draftsmith.assembler.assemble import load_target
from draftsmith.assembler.config import text_model_config
from draftsmith.components import backends
from draftsmith.components.targets import UnsupportedTarget, mrope_covers, target_record
from draftsmith.registry import default_registry
from draftsmith.testing.vl import write_vl_target

UNSTATED = {"qwen2_vl": ({"rope_scaling": {"type": "mrope"}}, [16, 24, 24]),
            "qwen2_5_vl": ({"rope_scaling": {"type": "mrope"}}, [16, 24, 24]),
            "qwen3_vl": ({"rope_parameters": {"rope_type": "default", "rope_theta": 5e5}}, [24, 20, 20])}


def checked(model_type: str, head: int, rope: dict) -> None:
    text = {"hidden_size": 2 * head, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": head, **rope}
    cfg = text_model_config(AutoConfig.for_model(model_type, text_config=text))
    target_record(default_registry(), cfg.model_type).check(cfg)


@pytest.mark.parametrize("model_type", sorted(UNSTATED))
def test_no_mrope_section_reads_the_types_own_default(model_type):
    rope, default = UNSTATED[model_type]
    checked(model_type, 128, rope)   # the type's default covers a head of 128 (64 frequencies): loads
    with pytest.raises(UnsupportedTarget, match=re.escape(f"mrope_section={default!r} (")):
        checked(model_type, 16, rope)


def test_a_stream_given_no_frequency_still_covers_the_head():
    assert mrope_covers([8, 0, 0], 8) and mrope_covers((0, 4, 4), 8) and not mrope_covers([9, -1, 0], 8)
    checked("qwen2_5_vl", 16, {"rope_scaling": {"type": "mrope", "mrope_section": [8, 0, 0]}})


@pytest.mark.parametrize("model_type, section", [("qwen2_5_vl", [8, 0, 0]), ("qwen3_vl", [0, 4, 4])])
def test_zero_sections_give_transformers_logits(tmp_path, model_type, section):
    # transformers reads Qwen3-VL in its own layout only
    layout = "language_model" if model_type == "qwen3_vl" else "hub"
    folder = write_vl_target(tmp_path / "t", model_type, layout=layout)
    cfg = json.loads((folder / "config.json").read_text())
    rope = cfg["text_config"].get("rope_parameters") or cfg["text_config"]["rope_scaling"]
    rope["mrope_section"] = section
    (folder / "config.json").write_text(json.dumps(cfg))
    ids = torch.randint(0, 96, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()(input_ids=ids).logits
        model = load_target(folder, default_registry(), backends.sdpa, dtype=torch.float32, device="cpu")[0]
        got = model.logits(model(ids, torch.arange(ids.shape[1]).expand_as(ids))[0])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
