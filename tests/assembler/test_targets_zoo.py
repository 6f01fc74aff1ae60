"""Targets beyond plain Llama: sliding windows (Mistral on every layer, Qwen2 on the layers ``layer_types``
marks) and DeepSeek-V3 (latent attention, dense layers) give transformers' logits (float32, 1e-4), over a whole
sequence and through the paged pool; an MoE router option not computed and unknown types are refused with a clear
error; every registered target type is covered here, in test_parity.py, test_moe_targets.py or test_phi3_target.py."""
import json
import shutil

import pytest
import torch
from transformers import AutoModelForCausalLM

import draftsmith
from draftsmith.assembler.assemble import load_target
from draftsmith.components import backends
from draftsmith.components.sliding import window_mask
from draftsmith.components.targets import TARGETS, UnsupportedTarget
from draftsmith.decoding.batching import causal_batch, pad_tokens
from draftsmith.decoding.kvpool import PagedKVPool
from draftsmith.registry import default_registry
from draftsmith.testing import write_eagle3, write_target
from draftsmith.testing.mla import MLA_SIZES

ATOL = 1e-4
DEEPSEEK = dict(num_key_value_heads=4, first_k_dense_replace=2, **MLA_SIZES)
CASES = {  # name: (model_type, overrides)
    "mistral-window4": ("mistral", {"sliding_window": 4}),
    "ministral-window4-lower": ("ministral", {"sliding_window": 4, "head_dim": 16,
                                              "layer_types": ["sliding_attention", "full_attention"]}),
    "qwen2-window4-upper": ("qwen2", {"use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1}),
    "deepseek_v3-dense": ("deepseek_v3", DEEPSEEK),
    "deepseek_v3-no-q-lora": ("deepseek_v3", {**DEEPSEEK, "q_lora_rank": None, "rope_interleave": False}),
}


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    made = {}

    def get(name):
        if name not in made:
            model_type, over = CASES[name]
            made[name] = write_target(tmp_path_factory.mktemp(name), model_type, num_hidden_layers=2, **over)
        return made[name]
    return get


def reference(folder, ids):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        return model(ids).logits


def ours(folder):
    return load_target(folder, default_registry(), backends.sdpa, dtype=torch.float32, device="cpu")[0]


def refusal_before_tensors(folder, monkeypatch, refusal=UnsupportedTarget) -> str:
    """What loading ``folder`` as a target says (a ``refusal``), no tensor read first."""
    from draftsmith.assembler import load

    monkeypatch.setattr(load, "read_tensors", lambda *a, **k: pytest.fail("tensors read"))
    with pytest.raises(refusal) as err:
        ours(folder)
    return str(err.value)


def full_logits(model, ids):
    with torch.no_grad():
        return model.logits(model(ids, torch.arange(ids.shape[1]).expand_as(ids))[0])


IDS = torch.randint(0, 96, (2, 20), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("name", sorted(CASES))
def test_target_logits_match_transformers(targets, name):
    want = reference(targets(name), IDS)
    assert want.std() > 0.1
    torch.testing.assert_close(full_logits(ours(targets(name)), IDS), want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", ["mistral-window4", "qwen2-window4-upper"])
def test_the_window_matters_here(targets, name, tmp_path):
    """Without the window (the old behaviour) the same weights give other logits past position 4."""
    folder = targets(name)
    wide = tmp_path / "wide"
    wide.mkdir()
    cfg = json.loads((folder / "config.json").read_text())
    # no layer marked sliding either: a sliding layer without a window is refused (transformers' model fails there)
    full = {"layer_types": ["full_attention"] * len(cfg["layer_types"])} if cfg.get("layer_types") else {}
    (wide / "config.json").write_text(json.dumps({**cfg, "sliding_window": None, "use_sliding_window": False, **full}))
    shutil.copy(folder / "model.safetensors", wide / "model.safetensors")
    got, unwindowed = full_logits(ours(folder), IDS), full_logits(ours(wide), IDS)
    torch.testing.assert_close(got[:, :4], unwindowed[:, :4], atol=ATOL, rtol=0)
    assert (got[:, 5:] - unwindowed[:, 5:]).abs().max() > 1e-2


def paged_logits(model, ids, prefill: int = 7):
    """ids [T]'s logits [T, V] through the paged cache: a prefill of the first ``prefill`` ids, then one at a time."""
    pool = PagedKVPool([layer.self_attn.cache_layout() for layer in model.model.layers], page_size=3, num_pages=2)
    seq = pool.add_sequence()
    got = []
    with torch.no_grad():
        kv, pos = causal_batch(pool, [seq], [prefill], "cpu")
        got.extend(model.logits(model(pad_tokens([ids[:prefill].tolist()]), pos, kv)[0])[0])
        pool.commit(seq)
        for t in range(prefill, len(ids)):
            kv, pos = causal_batch(pool, [seq], [1], "cpu")
            got.append(model.logits(model(ids[None, t:t + 1], pos, kv)[0])[0, 0])
            pool.commit(seq)
    return torch.stack(got)


@pytest.mark.parametrize("name", ["mistral-window4", "deepseek_v3-dense"])
def test_paged_prefill_then_decode_matches_transformers(targets, name):
    folder = targets(name)
    want = reference(folder, IDS[:1])[0]
    model = ours(folder)
    torch.testing.assert_close(paged_logits(model, IDS[0]), want, atol=ATOL, rtol=0)


def test_windowed_tree_decoding_equals_baseline(tmp_path):
    """Verification trees through a windowed target (mask path, not the causal one): greedy output unchanged."""
    folder = write_target(tmp_path / "t", "mistral", num_hidden_layers=8, sliding_window=4)
    draft = write_eagle3(tmp_path / "d", folder)
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=draft)
    prompts = [[1, 2, 3, 4, 5, 6], [7, 8]]
    base = model.generate_baseline(prompts, max_new_tokens=16, stop=[])
    for shape in (dict(topk=1, steps=3), dict(topk=3, steps=3, draft_tokens=7)):
        spec = model.generate(prompts, max_new_tokens=16, stop=[], **shape)
        assert [s.token_ids for s in spec] == [b.token_ids for b in base]


def test_window_mask_keeps_the_last_w_positions_of_a_tree():
    # prefix of 3 committed keys, then a tree: node 0 (root) -> 1 -> 3, node 0 -> 2
    tree = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]], dtype=torch.bool)
    mask = torch.cat([torch.ones(4, 3, dtype=torch.bool), tree], 1)      # [T=4, S=7]
    got = window_mask(mask, 2)
    # node 3 is at position 3 + 2 = 5: it keeps itself and its parent (node 1, position 4) only
    assert got[3].tolist() == [False, False, False, False, True, False, True]
    assert got[2].tolist() == [False, False, False, True, False, True, False]


def test_moe_deepseek_target_with_a_router_not_computed_is_refused(targets, tmp_path):
    """MoE layers load (tests/assembler/test_moe_targets.py); a router option draftsmith does not compute is refused
    before any tensor is read (this checkpoint holds no expert)."""
    folder = tmp_path / "moe"
    folder.mkdir()
    cfg = json.loads((targets("deepseek_v3-dense") / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "first_k_dense_replace": 1, "scoring_func": "softmax"}))
    shutil.copy(targets("deepseek_v3-dense") / "model.safetensors", folder / "model.safetensors")
    with pytest.raises(UnsupportedTarget, match="scoring_func='softmax' in its mixture-of-experts layers"):
        ours(folder)


def test_every_registered_target_type_is_checked():
    parity = {"llama", "mistral", "qwen2", "qwen3"}  # the model types tests/assembler/test_parity.py covers
    moe = {"deepseek_v3", "qwen3_moe", "mixtral"}    # and tests/assembler/test_moe_targets.py, test_mixtral_target.py
    moe |= {"glm4_moe"}                              # tests/assembler/test_glm4_moe_target.py
    moe |= {"glm4_moe_lite"}                         # tests/assembler/test_glm4_moe_lite_target.py
    stacked = {"gpt_oss"}                            # tests/assembler/test_gpt_oss_target.py
    fused = {"phi3"}                                 # tests/assembler/test_phi3_target.py
    checked = parity | moe | stacked | fused | {m for m, _ in CASES.values()}
    checked |= {"qwen2_vl", "qwen2_5_vl", "qwen3_vl"}   # tests/assembler/test_vl_targets.py
    checked |= {"gemma3_text", "gemma3", "gemma2"}     # tests/assembler/test_gemma_targets.py
    checked |= {"kimi_k2", "kimi_k25"}                  # tests/assembler/test_kimi_targets.py
    checked |= {"gemma"}                               # tests/assembler/test_gemma1_target.py
    checked |= {"smollm3"}                             # tests/assembler/test_smollm3_target.py
    assert set(TARGETS) <= checked
