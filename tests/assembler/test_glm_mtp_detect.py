"""Detection of GLM-4.5 / 4.6 / 4.7's own MTP layer: `inspect` (and `generate --draft` without --spec) proposes
glm-mtp for it, by the config keys its attention reads (use_qk_norm, partial_rotary_factor: data in the detection
rows, no model type), and reads them (none is called unread). deepseek-mtp proposed for it failed on the o_proj bias
GLM's layer lacks, or, where attention_bias is false and no q/k norms, loaded and rotated whole heads silently. A
DeepSeek-V3 (latent attention) and a Llama MTP folder still detect as deepseek-mtp."""
import json

import pytest
import torch

import draftsmith
from draftsmith.assembler.checkpoint import list_tensors
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.registry import default_registry
from draftsmith.testing import edit_config, write_target
from draftsmith.testing.mla import MLA_SIZES
from draftsmith.testing.mtp import write_mtp
from test_glm_mtp import CASES, L, write_glm_target



@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    made = {}

    def get(name):
        if name not in made:
            folder = tmp_path_factory.mktemp("glm-mtp-detect")
            if name == "deepseek-v3":
                write_target(folder, "deepseek_v3", num_hidden_layers=2, seed=5, num_key_value_heads=4,
                             first_k_dense_replace=3, **MLA_SIZES)
            elif name == "llama":
                write_target(folder, "llama", num_hidden_layers=2, seed=4)
            else:
                write_glm_target(folder, name)
            made[name] = write_mtp(folder, block_from=L if name in CASES else None)
        return made[name]
    return get


def detected(folder):
    config = json.loads((folder / "config.json").read_text())
    return default_registry().detect_layout(config, list(list_tensors(folder)))


def drafted(model):
    ids = torch.randint(0, 96, (1, 7), generator=torch.Generator().manual_seed(0))
    hidden = torch.randn(1, 7, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        embed = model.target.model.embed_tokens   # glm-mtp shares the target's (equal to a copy the files hold)
        return model.draft(ids, hidden, torch.arange(7)[None], embed=embed, from_target=True)[0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_glm_mtp_folder_is_proposed_glm_mtp_and_its_keys_are_read(folders, name):
    found = inspect_checkpoint(folders(name))
    assert found.match.spec == "glm-mtp" and detected(folders(name)).spec == "glm-mtp"
    assert "use_qk_norm" in found.config and "use_qk_norm" not in found.unread, found.unread
    assert found.spec["draft"]["attention"] == {"kind": "gqa", "partial_rotary": True, "o_bias": False,
                                                "qk_norm": "config"}


@pytest.mark.parametrize("name", ["deepseek-v3", "llama"])
def test_deepseek_v3_and_llama_mtp_folders_are_still_deepseek_mtp(folders, name):
    assert inspect_checkpoint(folders(name)).match.spec == "deepseek-mtp"


def test_latent_attention_stays_deepseek_mtp_whatever_the_config_states(folders, tmp_path):
    folder = edit_config(folders("deepseek-v3"), tmp_path / "ds", use_qk_norm=False, partial_rotary_factor=1.0)
    assert detected(folder).spec == "deepseek-mtp"


def test_a_glm_config_stating_neither_key_reads_alike_and_stays_deepseek_mtp(folders, tmp_path):
    # without use_qk_norm and partial_rotary_factor both specs build the same block: the keys are what tells them
    src = folders("glm-4.5-air")
    rope = {k: v for k, v in json.loads((src / "config.json").read_text())["rope_parameters"].items()
            if k != "partial_rotary_factor"}
    folder = edit_config(src, tmp_path / "stripped", rope_parameters=rope, drop=["use_qk_norm"])
    assert detected(folder).spec == "deepseek-mtp"


def test_the_proposal_for_a_glm_layer_without_biases_drafts_as_glm_mtp(folders):
    # deepseek-mtp loads this one without a complaint (no bias, no q/k norms to refuse) and rotates whole heads
    folder = folders("no bias, a quarter")
    proposed = draftsmith.parse_spec(inspect_checkpoint(folder).spec)
    got = drafted(draftsmith.assemble(proposed, target=folder, draft=folder))
    want = drafted(draftsmith.assemble("glm-mtp", target=folder, draft=folder))
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    assert not torch.allclose(drafted(draftsmith.assemble("deepseek-mtp", target=folder, draft=folder)), want)


def test_a_hub_style_config_s_top_level_keys_are_read(folders, tmp_path):
    # the Hub's GLM-4.5 config.json states partial_rotary_factor at the top level (transformers 5 writes it into
    # rope_parameters): detected the same, read the same, neither key unread
    nested = folders("no bias, a quarter")
    rope = json.loads((nested / "config.json").read_text())["rope_parameters"]
    factor = rope.pop("partial_rotary_factor")
    assert factor == 0.25
    folder = edit_config(nested, tmp_path / "hub", rope_parameters=rope, partial_rotary_factor=factor)
    found = inspect_checkpoint(folder)
    assert found.match.spec == "glm-mtp"
    assert not {"use_qk_norm", "partial_rotary_factor"} & set(found.unread), found.unread
    got = drafted(draftsmith.assemble(draftsmith.parse_spec(found.spec), target=folder, draft=folder))
    torch.testing.assert_close(got, drafted(draftsmith.assemble("glm-mtp", target=nested, draft=nested)),
                               atol=0, rtol=0)
