"""Mutation round 15: draftsmith/scale/checkpoints.py, the scale benchmark's random-weight checkpoints.

SHAPES are the published Llama-3.2-1B / Llama-3.1-8B shapes (and a tiny one for the CPU); write_llama writes a
bf16 Llama in the Hugging Face layout (the names of transformers' LlamaForCausalLM, shards of at most about
``shard_bytes`` each listed in model.safetensors.index.json, a config.json that says the shape); write_pair puts a
target and an EAGLE-3 draft with the shape's reduced vocabulary side by side and keeps what is already there."""
import inspect
import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from draftsmith.scale import checkpoints
from draftsmith.scale.checkpoints import SHAPES, write_llama, write_pair

# a shape small enough to write in milliseconds: H 64, 4 heads of 16, 2 KV heads, I 96, 2 layers, V 128
TOY = dict(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
           vocab_size=128, draft_vocab=32, tie=False)
LAYER = {"self_attn.q_proj.weight": (64, 64), "self_attn.k_proj.weight": (32, 64), "self_attn.v_proj.weight": (32, 64),
         "self_attn.o_proj.weight": (64, 64), "mlp.gate_proj.weight": (96, 64), "mlp.up_proj.weight": (96, 64),
         "mlp.down_proj.weight": (64, 96), "input_layernorm.weight": (64,), "post_attention_layernorm.weight": (64,)}


def tensors(folder):
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    out = {}
    for file in sorted(set(index.values())):
        out |= load_file(str(folder / file))
    return index, out


# catches checkpoints.py:11-16 every +1 / -1 on a SHAPES number and every `not` on a tie flag (45 mutants)
def test_the_shapes_are_llama_3_2_1b_llama_3_1_8b_and_a_tiny_one():
    assert SHAPES == {
        "tiny": dict(hidden_size=256, intermediate_size=768, num_attention_heads=8, num_key_value_heads=2,
                     num_hidden_layers=8, vocab_size=8192, draft_vocab=2048, tie=False),
        "1b": dict(hidden_size=2048, intermediate_size=8192, num_attention_heads=32, num_key_value_heads=8,
                   num_hidden_layers=16, vocab_size=128256, draft_vocab=32000, tie=True),
        "8b": dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                   num_hidden_layers=32, vocab_size=128256, draft_vocab=32000, tie=False)}
    for s in SHAPES.values():   # each is a valid GQA Llama with a reduced draft vocabulary
        assert s["hidden_size"] % s["num_attention_heads"] == 0
        assert s["num_attention_heads"] % s["num_key_value_heads"] == 0 and s["draft_vocab"] < s["vocab_size"]


# catches checkpoints.py:31 d = H // nH -> H * nH
# catches checkpoints.py:43-46 nH * d -> nH // d, nKV * d -> nKV // d (the projections' shapes)
def test_the_target_has_transformers_llama_names_and_shapes_in_bf16(tmp_path):
    folder = write_llama(tmp_path / "t", TOY, "cpu")
    assert folder == tmp_path / "t"
    index, t = tensors(folder)
    want = {"model.embed_tokens.weight": (128, 64), "model.norm.weight": (64,), "lm_head.weight": (128, 64)}
    want |= {f"model.layers.{i}.{n}": s for i in range(2) for n, s in LAYER.items()}
    assert {k: tuple(v.shape) for k, v in t.items()} == want
    assert set(index) == set(want) and {v.dtype for v in t.values()} == {torch.bfloat16}
    with safe_open(str(folder / "model-00001.safetensors"), "pt") as f:
        assert f.metadata() == {"format": "pt"}


def test_a_tied_shape_writes_no_lm_head(tmp_path):
    index, t = tensors(write_llama(tmp_path / "t", TOY | {"tie": True}, "cpu"))
    assert "lm_head.weight" not in t and "model.embed_tokens.weight" in t and len(t) == 2 + 2 * len(LAYER)
    assert json.loads((tmp_path / "t" / "config.json").read_text())["tie_word_embeddings"] is True


# catches checkpoints.py:35 torch.randn(...) * std -> // std (weights of std 0.02, not whole numbers)
# catches checkpoints.py:38 1 + torch.randn(H) * 0.01 -> 2 + / 0 + / // 0.01 (norms near 1)
def test_weights_are_small_and_norms_are_near_one(tmp_path):
    _, t = tensors(write_llama(tmp_path / "t", TOY, "cpu"))
    for name, v in t.items():
        v = v.float()
        if name.endswith("norm.weight"):
            assert 0.95 < float(v.min()) and float(v.max()) < 1.05 and float(v.std()) > 1e-3, name
        else:
            assert abs(float(v.mean())) < 0.005 and 0.015 < float(v.std()) < 0.025, name


# catches checkpoints.py:20 seed: int = 0 -> 1
def test_the_weights_follow_the_seed_and_the_default_seed_is_0(tmp_path):
    _, a = tensors(write_llama(tmp_path / "a", TOY, "cpu"))
    _, b = tensors(write_llama(tmp_path / "b", TOY, "cpu", seed=0))
    _, c = tensors(write_llama(tmp_path / "c", TOY, "cpu", seed=1))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["model.embed_tokens.weight"], c["model.embed_tokens.weight"])


# catches checkpoints.py:65 size >= shard_bytes -> size > shard_bytes (a tensor that fills the shard closes it)
# catches checkpoints.py:64 size += t.numel() * t.element_size() -> // (bytes, not elements over bytes)
# catches checkpoints.py:51 n = 0 -> 1 (the shards are numbered from model-00001)
def test_shards_close_once_they_hold_shard_bytes_and_the_index_lists_them(tmp_path):
    embed = 128 * 64 * 2   # bytes of the bf16 embedding, written first
    folder = write_llama(tmp_path / "t", TOY, "cpu", shard_bytes=embed)
    index, _ = tensors(folder)
    q, k, o, gate, norm = 64 * 64 * 2, 32 * 64 * 2, 64 * 64 * 2, 96 * 64 * 2, 64 * 2
    assert q + 2 * k == embed and o + gate > embed > o and 2 * gate > embed > gate and 2 * norm + q + 2 * k > embed
    want = {"model.embed_tokens.weight": 1}
    for i, first in ((0, 2), (1, 5)):   # q k v | o gate | up down | the norms (and layer 1's q k v with them)
        p = f"model.layers.{i}."
        want |= {p + "self_attn.q_proj.weight": first, p + "self_attn.k_proj.weight": first,
                 p + "self_attn.v_proj.weight": first, p + "self_attn.o_proj.weight": first + 1,
                 p + "mlp.gate_proj.weight": first + 1, p + "mlp.up_proj.weight": first + 2,
                 p + "mlp.down_proj.weight": first + 2, p + "input_layernorm.weight": first + 3,
                 p + "post_attention_layernorm.weight": first + 3}
    want |= {"model.norm.weight": 8, "lm_head.weight": 8}
    assert index == {k: f"model-{n:05d}.safetensors" for k, n in want.items()}
    files = sorted(p.name for p in folder.glob("*.safetensors"))
    assert files == [f"model-{n:05d}.safetensors" for n in range(1, 9)]
    for file in files:   # each shard holds exactly what the index says it does
        assert set(load_file(str(folder / file))) == {k for k, v in index.items() if v == file}
    meta = json.loads((folder / "model.safetensors.index.json").read_text())
    assert meta["metadata"] == {}


# catches checkpoints.py:20 shard_bytes: int = 2 << 30 -> 3 << 30, 2 << 31, 2 << 29
def test_shards_are_2_gib_by_default_so_a_small_target_is_one_file(tmp_path):
    assert inspect.signature(write_llama).parameters["shard_bytes"].default == 2 * 1024 ** 3
    index, _ = tensors(write_llama(tmp_path / "t", TOY, "cpu"))
    assert set(index.values()) == {"model-00001.safetensors"}


# catches checkpoints.py:70-72 max_position_embeddings=8192, bos_token_id=0, eos_token_id=1 (each +1 / -1)
def test_the_config_says_the_shape_and_llama_3s_rope_and_norm(tmp_path):
    cfg = json.loads((write_llama(tmp_path / "t", TOY, "cpu") / "config.json").read_text())
    assert {k: cfg[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                                "num_hidden_layers", "vocab_size", "head_dim", "tie_word_embeddings")} == \
        dict(hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
             vocab_size=128, head_dim=16, tie_word_embeddings=False)
    assert (cfg["max_position_embeddings"], cfg["rms_norm_eps"], cfg["bos_token_id"], cfg["eos_token_id"]) == \
        (8192, 1e-5, 0, 1)
    theta = cfg.get("rope_theta") or cfg["rope_parameters"]["rope_theta"]
    assert theta == 500000.0 and cfg["model_type"] == "llama" and cfg["dtype"] == "bfloat16"


def test_a_target_already_written_is_kept(tmp_path):
    folder = write_llama(tmp_path / "t", TOY, "cpu")
    before = (folder / "model-00001.safetensors").stat().st_mtime_ns
    assert write_llama(folder, TOY, "cpu", seed=5) == folder   # another seed: the weights are not written again
    assert (folder / "model-00001.safetensors").stat().st_mtime_ns == before
    assert json.loads((folder / "config.json").read_text())["hidden_size"] == 64


# catches checkpoints.py:82 if not (draft / "config.json").exists() -> if (draft / "config.json").exists()
def test_write_pair_writes_the_target_and_a_reduced_vocabulary_eagle3_draft_once(tmp_path, monkeypatch):
    monkeypatch.setitem(checkpoints.SHAPES, "toy", TOY)
    target, draft = write_pair(tmp_path, "toy", "cpu")
    assert (target, draft) == (tmp_path / "toy-target", tmp_path / "toy-draft")
    cfg = json.loads((draft / "config.json").read_text())
    assert (cfg["draft_vocab_size"], cfg["vocab_size"], cfg["hidden_size"]) == (32, 128, 64)
    t = load_file(str(draft / "model.safetensors"))
    assert t["lm_head.weight"].shape == (32, 64) and t["d2t"].shape == (32,) and t["t2d"].shape == (128,)
    assert t["fc.weight"].shape == (64, 3 * 64) and "midlayer.hidden_norm.weight" in t
    assert 0.015 < float(t["fc.weight"].std()) < 0.025   # std 0.02, as the target's
    stamp = (draft / "model.safetensors").stat().st_mtime_ns
    assert write_pair(tmp_path, "toy", "cpu") == (target, draft)
    assert (draft / "model.safetensors").stat().st_mtime_ns == stamp


def test_write_pair_knows_only_the_shapes():
    with pytest.raises(KeyError):
        write_pair(None, "9b", "cpu")


# catches checkpoints.py:51 weight_map, shard, size, n = {}, {}, 0, 0 -> size 1 (a shard counts from 0 bytes)
# catches checkpoints.py:59 shard, size = {}, 0 -> 1 (and so does the next one)
def test_a_shard_one_byte_short_of_full_stays_open(tmp_path):
    embed = 128 * 64 * 2
    index, _ = tensors(write_llama(tmp_path / "t", TOY, "cpu", shard_bytes=embed + 1))
    assert index["model.embed_tokens.weight"] == index["model.layers.0.self_attn.q_proj.weight"] == \
        "model-00001.safetensors"
    assert index["model.layers.0.self_attn.k_proj.weight"] == index["model.layers.0.mlp.gate_proj.weight"] == \
        "model-00002.safetensors"   # k v o are one byte short too: the gate closes the second shard


# catches checkpoints.py:27 folder.mkdir(parents=True, exist_ok=True) -> parents=False / exist_ok=False
def test_the_target_folder_is_made_with_its_parents_or_written_into(tmp_path):
    nested = write_llama(tmp_path / "a" / "b" / "t", TOY, "cpu")
    assert (nested / "config.json").exists()
    (tmp_path / "cut").mkdir()   # a run stopped before config.json was written: the folder is written into
    assert (write_llama(tmp_path / "cut", TOY, "cpu") / "model.safetensors.index.json").exists()


# --- survivors left, and why they are equivalent -------------------------------------------------------------------
# checkpoints.py:38 "1 + torch.randn(H) * 0.01" -> "1 - ...": a norm weight is 1 plus a symmetric random
#   perturbation either way.
