"""GLM-4.5 / 4.6 / 4.7's own MTP layer as a draft (spec glm-mtp: deepseek-mtp's names and fusion, the block's
attention GLM's: q/k/v biases by attention_bias and none on o_proj, per-head q/k norms where use_qk_norm, the first
partial_rotary_factor of each head rotated). Its block is the one transformers' own save wrote for a model one
layer deeper (MoE, as the MTP layer continues the stack past first_k_dense_replace); the whole MTP layer equals
transformers' MtpLayer around Glm4MoeDecoderLayer, and greedy speculative decoding equals target-only. deepseek-mtp
itself does not fit such a layer: its o_proj has no bias, and the names say so."""
import pytest
import torch
from transformers.models.glm4_moe.modeling_glm4_moe import (Glm4MoeDecoderLayer, Glm4MoeRMSNorm,
                                                              Glm4MoeRotaryEmbedding)

import draftsmith
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.components.moe import SparseMoE
from draftsmith.testing import edit_config, write_target
from draftsmith.testing.mtp import mtp_reference, write_mtp
from test_glm4_moe_target import GLM, randomize_router

L = 2   # the target's layers; the MTP layer is model.layers.2
CASES = {"glm-4.5-air": {}, "glm-4.6 (qk norm)": {"use_qk_norm": True}, "no bias, a quarter": {
    "attention_bias": False, "partial_rotary_factor": 0.25}}


def write_glm_target(folder, name):
    """A GLM target of L layers whose files hold layer L too (the MTP layer's block), case ``name`` of CASES."""
    write_target(folder, "glm4_moe", seed=1, **{**GLM, "num_hidden_layers": L + 1, **CASES[name]})
    return edit_config(randomize_router(folder), num_hidden_layers=L)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    made = {}

    def get(name):
        if name not in made:
            folder = tmp_path_factory.mktemp("glm-mtp")
            write_glm_target(folder, name)
            made[name] = write_mtp(folder, block_from=L)
        return made[name]
    return get


def reference(folder, dtype):
    """transformers' MtpLayer around Glm4MoeDecoderLayer (testing.mtp.mtp_reference)."""
    return mtp_reference(folder, dtype, Glm4MoeDecoderLayer, Glm4MoeRMSNorm)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_mtp_layer_equals_transformers(folders, name):
    folder, dtype = folders(name), torch.float64
    model = draftsmith.assemble("glm-mtp", target=folder, draft=folder, dtype="float64")
    assert type(model.draft.layers[0].mlp) is SparseMoE
    ref, tcfg = reference(folder, dtype)
    ids = torch.randint(0, 96, (2, 9), generator=torch.Generator().manual_seed(0))
    hidden = torch.randn(2, 9, 64, generator=torch.Generator().manual_seed(1), dtype=dtype)
    pos = torch.arange(9).expand(2, 9)
    embed = model.target.model.embed_tokens   # the target's: glm-mtp shares it
    emb = embed(ids)
    mask = torch.full((9, 9), float("-inf"), dtype=dtype).triu(1)[None, None]
    with torch.no_grad():   # transformers' layer has no position-0 zeroing: ours is switched off; its rotation is
        want = ref(emb, hidden, Glm4MoeRotaryEmbedding(tcfg)(emb, pos), mask, pos, None)   # float32's
        model.draft.fc.zero_first_embedding = False
        got = model.draft.norm(model.draft(ids, hidden, pos, embed=embed, from_target=True)[0])
    assert want.std() > 0.5
    torch.testing.assert_close(got, want, atol=5e-6, rtol=0)


@pytest.mark.parametrize("name", ["glm-4.5-air", "glm-4.6 (qk norm)"])
def test_greedy_speculative_decoding_equals_target_only(folders, name):
    model = draftsmith.assemble("glm-mtp", target=folders(name), draft=folders(name), dtype="float32")
    prompts = [[1, 2, 3, 4, 5, 6], [7, 8]]
    base = model.generate_baseline(prompts, max_new_tokens=12, stop=[])
    for shape in (dict(topk=1, steps=3), dict(topk=3, steps=3, draft_tokens=7)):
        out = model.generate(prompts, max_new_tokens=12, stop=[], **shape)
        assert [o.token_ids for o in out] == [b.token_ids for b in base], shape


def test_deepseek_mtp_does_not_fit_a_glm_mtp_layer(folders):
    with pytest.raises(CheckpointMismatch, match=r"missing: 'layers\.0\.self_attn\.o_proj\.bias'"):
        draftsmith.assemble("deepseek-mtp", target=folders("glm-4.5-air"), draft=folders("glm-4.5-air"))
