"""convert writes a draft stored fused (qkv_proj: q | k | v, gate_up_proj: gate | up, read through split rules) in
each layout, every part its own tensor with the rows the load plan cuts for it (convert/unfuse.py). It refused every
fused draft ("convert cannot unfuse"), which left a vendor draft no route to a vLLM export (--to speculators).

The written parts are the fused tensor's slices, bit for bit (and the unfused draft's own tensors), and the converted
draft assembles to the same draft as the fused original, decoding the same tokens with the same acceptance; FP8
scales split with their weights (per channel by rows, a per-tensor scale copied to every part, block scales between
whole blocks), the quantization_config's fused module names become their parts'; a block scale that straddles two
parts is still refused, as the load refuses it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_inspect_split import SIZES, assert_same_draft, fuse, proposed, run

import draftsmith
from draftsmith.convert.canonical import read_canonical, same_bits
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.testing import write_eagle3, write_self_draft, write_target
from draftsmith.testing.quant import quantize_folder, target_config

PROMPT = [5, 6, 7, 8, 9]


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return write_target(tmp_path_factory.mktemp("target"))


def converted(src: Path, to: str, out: Path) -> Path:
    res = run("convert", src, "--to", to, out)
    assert res.exit_code == 0, res.output
    return out


def rows_of(folder: Path) -> dict[str, int]:
    cfg = json.loads((folder / "config.json").read_text())
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    return {"q": cfg["num_attention_heads"] * hd, "k": cfg["num_key_value_heads"] * hd,
            "v": cfg["num_key_value_heads"] * hd, "gate": cfg["intermediate_size"], "up": cfg["intermediate_size"]}


def slices(fused: torch.Tensor, sizes: list[int]) -> list[torch.Tensor]:
    return list(torch.split(fused, sizes))


def same_decoding(a, b) -> None:
    """Greedy generate of two assemblies: the same tokens, the same acceptance per draft position."""
    x = a.generate(PROMPT, max_new_tokens=12, stop=[])
    y = b.generate(PROMPT, max_new_tokens=12, stop=[])
    assert x.token_ids == y.token_ids
    assert (x.stats.steps, x.stats.accepted_per_position) == (y.stats.steps, y.stats.accepted_per_position)
    assert x.token_ids == b.generate_baseline(PROMPT, max_new_tokens=12, stop=[]).token_ids


@pytest.mark.parametrize("to", ["speculators", "midlayer", "layers"])
def test_a_fused_eagle3_draft_converts_as_its_parts_and_decodes_as_the_fused_one(target, tmp_path, to, caplog):
    plain = write_eagle3(tmp_path / "plain", target)
    fused = fuse(plain, tmp_path / "fused")
    out = converted(fused, to, tmp_path / "out")
    assert f"note: {fused}: fused 'midlayer.mlp.gate_up_proj.weight', 'midlayer.self_attn.qkv_proj.weight' written " \
           "as their parts, each its rows as assemble() cuts them" in caplog.messages
    got, _, _, _ = read_canonical(out)
    # (a) each part is its rows of the fused tensor, bit for bit, and the unfused draft's own tensor
    n, stored = rows_of(fused), load_file(str(fused / "model.safetensors"))
    for fused_name, parts in (("self_attn.qkv_proj", "qkv"), ("mlp.gate_up_proj", ("gate", "up"))):
        want = slices(stored[f"midlayer.{fused_name}.weight"], [n[p] for p in parts])
        module = fused_name.split(".")[0]
        for p, w in zip(parts, want):
            assert torch.equal(got[f"layers.0.{module}.{p}_proj.weight"], w), p
    unfused, _, _, _ = read_canonical(plain)
    assert sorted(got) == sorted(unfused)
    assert all(same_bits(got[k], unfused[k]) for k in got)
    # (b) the converted draft, loaded as detected, is the fused one loaded with the spec inspect proposes for it
    _, spec = proposed(fused, tmp_path / "fused.yaml")
    original = draftsmith.assemble(spec, target=target, draft=fused)
    result = draftsmith.assemble(inspect_checkpoint(out).match.spec, target=target, draft=out)
    assert_same_draft(original, result)
    same_decoding(original, result)


@pytest.mark.parametrize("scheme, block, suffix", [("channel", None, "weight_scale"), ("tensor", None, "weight_scale"),
                                                   ("block", (16, 16), "weight_scale_inv"),
                                                   ("block", (16, 16), "weight_scale")])
def test_fp8_scales_of_a_fused_draft_split_with_its_weights(target, tmp_path, scheme, block, suffix):
    """Quantized as stored fused (one per-tensor scale, or blocks over the fused rows), as a vendor's file is; the
    config's quantization_config names the fused modules (compressed-tensors' targets: FineGrainedFP8's, for
    weight_scale_inv blocks, names none), and the result's names their parts instead."""
    fused = fuse(write_eagle3(tmp_path / "plain", target), tmp_path / "fused")
    done = quantize_folder(fused, r"^midlayer\.(self_attn|mlp)\.", scheme=scheme, block=block or (128, 128),
                           block_scale=suffix)
    cfg = json.loads((fused / "config.json").read_text())
    cfg["quantization_config"] = target_config(scheme, block or (128, 128), [d.removesuffix(".weight") for d in done],
                                               suffix)
    (fused / "config.json").write_text(json.dumps(cfg))
    out = converted(fused, "speculators", tmp_path / "out")
    got, stored, n = read_canonical(out)[0], load_file(str(fused / "model.safetensors")), rows_of(fused)
    qkv = "midlayer.self_attn.qkv_proj."
    scale, per = stored[qkv + suffix], (block or (1,))[0]   # rows a scale row stands for
    scales = [scale] * 3 if scheme == "tensor" else slices(scale, [n[p] // per for p in "qkv"])
    for p, w, s in zip("qkv", slices(stored[qkv + "weight"], [n[p] for p in "qkv"]), scales):
        assert same_bits(got[f"layers.0.self_attn.{p}_proj.weight"], w), p
        assert same_bits(got[f"layers.0.self_attn.{p}_proj.{suffix}"], s), p
    config = json.loads((out / "config.json").read_text())["transformer_layer_config"]   # where speculators says it
    groups = config["quantization_config"].get("config_groups", {"group_0": {"targets": []}})
    assert suffix == "weight_scale_inv" or sorted(groups["group_0"]["targets"]) == sorted(
        f"layers.0.{m}" for m in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                  "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"))
    _, fused_spec = proposed(fused, tmp_path / "fused.yaml")
    _, out_spec = proposed(out, tmp_path / "out.yaml")
    original = draftsmith.assemble(fused_spec, target=target, draft=fused)
    result = draftsmith.assemble(out_spec, target=target, draft=out)
    assert_same_draft(original, result)
    same_decoding(original, result)


def test_a_fused_draft_whose_block_scale_straddles_two_parts_is_refused_and_nothing_is_written(target, tmp_path):
    """q is 64 rows, k and v 32: 64-row blocks put k's and v's rows under one scale, which neither part's scale can
    state (assemble() refuses to load it as well)."""
    fused = fuse(write_eagle3(tmp_path / "plain", target), tmp_path / "fused")
    quantize_folder(fused, r"^midlayer\.self_attn\.qkv_proj\.", scheme="block", block=(64, 16))
    res = run("convert", fused, "--to", "speculators", tmp_path / "out")
    assert res.exit_code == 1, res.output
    assert res.output.startswith(f"error: {fused} cannot be written as speculators:\n  cannot split: fused "
                                 "'midlayer.self_attn.qkv_proj.weight_scale_inv' [2, 8] into "), res.output
    assert "part 2 scales 32 rows, so a block would straddle two parts" in res.output, res.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_fused_draft_in_interleaved_rope_order_converts_its_rotated_parts(tmp_path):
    """A Mistral-style draft that is its own target (interleaved q/k rows), fused: --to layers (neox) reorders the q
    and k parts' rows after cutting them, and the result is still accepted all the way, as the fused one is."""
    own = write_target(tmp_path / "own", "llama", seed=5, **SIZES)
    fused = fuse(write_self_draft(tmp_path / "self", own), tmp_path / "fused")
    assert inspect_checkpoint(fused).match.spec == "eagle-mistral"
    out = converted(fused, "layers", tmp_path / "out")
    _, spec = proposed(fused, tmp_path / "fused.yaml")
    _, out_spec = proposed(out, tmp_path / "out.yaml")
    original = draftsmith.assemble(spec, target=own, draft=fused)
    result = draftsmith.assemble(out_spec, target=own, draft=out)
    same_decoding(original, result)
    assert result.generate(PROMPT, max_new_tokens=12, stop=[]).stats.acceptance_length >= 4.0


def test_a_fused_tensor_split_into_a_part_the_model_lacks_is_refused_naming_it(target, tmp_path):
    """No model tensor sizes w_proj (a spec's typo for v_proj): the load plan cannot cut the fused rows, so convert
    refuses it rather than writing the whole fused tensor under each part's name."""
    fused = fuse(write_eagle3(tmp_path / "plain", target), tmp_path / "fused")
    _, spec = proposed(fused, tmp_path / "fused.yaml")
    spec.write_text(spec.read_text().replace("layers.0.self_attn.v_proj.", "layers.0.self_attn.w_proj."))
    res = run("convert", fused, "--spec", spec, "--to", "speculators", tmp_path / "out")
    assert res.exit_code == 1, res.output
    assert res.output.startswith(
        f"error: {fused} cannot be written as speculators:\n  cannot split: fused 'midlayer.self_attn.qkv_proj.weight' "
        "[128, 128]: the model the spec builds has no 'layers.0.self_attn.w_proj.weight' to size its parts by"), \
        res.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
