"""GLM-4.6 / GLM-4.7's files hold their MTP layer without the copies GLM-4.5's hold (no
model.layers.{L}.embed_tokens nor shared_head.head: vLLM PR 27597): spec glm-mtp takes the target's embedding and
head for both, so either layout loads, as vLLM and SGLang load them, and drafts the same tokens."""
import shutil

import torch
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.testing import edit_config, write_target
from draftsmith.testing.mtp import write_mtp
from test_glm4_moe_target import GLM, randomize_router

L = 2


def test_glm_4_6_s_mtp_layer_without_copies_loads_and_drafts_as_glm_4_5_s(tmp_path):
    with_copies = tmp_path / "glm-4.5"
    write_target(with_copies, "glm4_moe", seed=1, **{**GLM, "num_hidden_layers": L + 1, "use_qk_norm": True})
    edit_config(randomize_router(with_copies), num_hidden_layers=L)
    write_mtp(with_copies, block_from=L)
    without = tmp_path / "glm-4.6"
    shutil.copytree(with_copies, without)
    state = load_file(str(without / "model.safetensors"))
    for name in (f"model.layers.{L}.embed_tokens.weight", f"model.layers.{L}.shared_head.head.weight"):
        del state[name]
    save_file(state, str(without / "model.safetensors"), metadata={"format": "pt"})
    prompts = [[1, 2, 3, 4, 5, 6], [7, 8]]
    runs = []
    for folder in (with_copies, without):
        model = draftsmith.assemble("glm-mtp", target=folder, draft=folder, dtype="float32")
        base = model.generate_baseline(prompts, max_new_tokens=10, stop=[])
        out = model.generate(prompts, max_new_tokens=10, stop=[], topk=1, steps=3)
        assert [o.token_ids for o in out] == [b.token_ids for b in base]
        ids, pos = torch.tensor([prompts[0]]), torch.arange(6)[None]
        hidden = torch.randn(1, 6, 64, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            runs.append(model.draft(ids, hidden, pos, embed=model.target.model.embed_tokens, from_target=True)[0])
    torch.testing.assert_close(runs[0], runs[1], atol=0, rtol=0)
