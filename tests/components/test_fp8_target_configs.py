"""How draftsmith reads an FP8 target's quantization_config (compressed-tensors, AutoFP8, FineGrainedFP8): the
configs as published map onto its FP8 params; what it cannot compute (int or 4-bit weights, KV-cache schemes,
sparsity, groups that differ, a regex it refuses...) is refused by key, found and allowed; targets and skip lists
match module names as compressed-tensors' and transformers' loaders match them, a backtracking skip regex within a
time bound; and a config that quantizes lm_head: untied, dequantized by its own matmul only; tied, refused."""
import re

import pytest
import torch
from safetensors.torch import load_file

from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.components import quant
from draftsmith.components.quant import FP8Weight, dequantize, quantize
from draftsmith.components.quant_models import matching_linears, target_params
from draftsmith.components.targets import UnsupportedTarget
from draftsmith.testing import edit_config, write_eagle1, write_target

from fp8_cases import (BLOCK_INPUTS, BLOCK_WEIGHTS, STATIC, TOKEN, assemble, ct_args, ct_config,
                       per_token_fake_quant)


REFUSED = {
    "int8 W8A8 (int-quantized)": (
        ct_config(ct_args("channel", False) | {"type": "int"}, ct_args("token", True) | {"type": "int"},
                  format="int-quantized") | {"config_groups": {"group_0": {
                      "format": "int-quantized", "targets": ["Linear"], "output_activations": None,
                      "weights": ct_args("channel", False) | {"type": "int"},
                      "input_activations": ct_args("token", True) | {"type": "int"}}}},
        "config_groups.group_0.format='int-quantized' is not supported"),
    "int4 W4A16 (pack-quantized)": (
        ct_config(ct_args("group", False) | {"type": "int", "num_bits": 4, "group_size": 128}, None,
                  format="pack-quantized") | {"config_groups": {"group_0": {
                      "targets": ["Linear"], "weights": ct_args("group", False) | {"type": "int", "num_bits": 4},
                      "input_activations": None}}},
        ("format='pack-quantized' is not supported", "allowed: float-quantized or naive-quantized")),
    "naive-quantized int": (
        {"quant_method": "compressed-tensors", "format": "naive-quantized", "config_groups": {"group_0": {
            "targets": ["Linear"], "weights": ct_args("tensor", False) | {"type": "int"}}}},
        ("config_groups.group_0.weights.type='int' is not supported", "allowed: 'float'")),
    "block inputs grouped otherwise": (
        ct_config(BLOCK_WEIGHTS, ct_args("group", True, group_size=64)),
        ("config_groups.group_0.input_activations.group_size=64 is not supported with block weights",
         "allowed: 128 (block_structure[1])")),
    "static inputs with block weights": (
        ct_config(BLOCK_WEIGHTS, STATIC),
        ("config_groups.group_0.input_activations={'dynamic': False, 'group_size': None, 'strategy': 'tensor'} is "
         "not supported", "allowed: null or {strategy: group, group_size: 128, dynamic: true} with block weights")),
    "per-token inputs with block weights": (
        ct_config(BLOCK_WEIGHTS, TOKEN),
        "config_groups.group_0.input_activations={'dynamic': True, 'group_size': None, 'strategy': 'token'} is not"),
    "block weights without block_structure": (
        ct_config(ct_args("block", False), BLOCK_INPUTS),
        ("config_groups.group_0.weights.block_structure=None is not supported", "allowed: [rows, columns]")),
    "group weights": (ct_config(ct_args("group", False) | {"group_size": 128}, TOKEN),
                      "config_groups.group_0.weights.strategy='group' is not supported"),
    "asymmetric": (ct_config(ct_args("tensor", False) | {"symmetric": False}, TOKEN),
                   "config_groups.group_0.weights.symmetric=False is not supported"),
    "asymmetric inputs": (ct_config(ct_args("tensor", False), STATIC | {"symmetric": False}),
                          "config_groups.group_0.input_activations.symmetric=False is not supported"),
    "4-bit float": (ct_config(ct_args("tensor", False) | {"num_bits": 4}, None),
                    ("config_groups.group_0.weights.num_bits=4 is not supported", "allowed: 8")),
    "per-tensor dynamic inputs": (
        ct_config(ct_args("tensor", False), ct_args("tensor", True)),
        ("config_groups.group_0.input_activations={'dynamic': True, 'strategy': 'tensor'} is not supported",
         "not lossless")),
    "output activations": (ct_config(ct_args("tensor", False), TOKEN) | {"config_groups": {"group_0": {
        "targets": ["Linear"], "weights": ct_args("tensor", False), "output_activations": STATIC}}},
        "config_groups.group_0.output_activations="),
    "groups that differ": (
        ct_config(ct_args("tensor", False), TOKEN) | {"config_groups": {
            "group_0": {"targets": [r"re:.*self_attn\..*"], "weights": ct_args("tensor", False),
                        "input_activations": TOKEN},
            "group_1": {"targets": [r"re:.*mlp\..*"], "weights": ct_args("channel", False),
                        "input_activations": TOKEN}}},
        "config_groups={'group_0': 'tensor/dynamic', 'group_1': 'channel/dynamic'} is not supported"),
    "KV-cache scheme": (ct_config(ct_args("tensor", False), STATIC, kv_cache_scheme=ct_args("tensor", False)),
                        "kv_cache_scheme={"),
    "sparse 2:4": (ct_config(ct_args("tensor", False), TOKEN, sparsity_config={"format": "sparse-24-bitmask"}),
                   "sparsity_config={'format': 'sparse-24-bitmask'} is not supported"),
    "a regex draftsmith refuses": (ct_config(ct_args("tensor", False), TOKEN, ignore=["lm_head", "re:(a+)+"]),
                                   "ignore.1='re:(a+)+' is not supported"),
    "AutoFP8 KV-cache scales": ({"quant_method": "fp8", "activation_scheme": "static", "kv_cache_scheme": "static"},
                                "kv_cache_scheme='static' is not supported"),
    "static with block scales": ({"quant_method": "fp8", "activation_scheme": "static",
                                  "weight_block_size": [128, 128]}, "activation_scheme='static' is not supported"),
    "another method": ({"quant_method": "awq", "bits": 4}, "quant_method='awq' is not supported; allowed: fp8"),
    "power-of-two input scales": ({"quant_method": "fp8", "weight_block_size": [128, 128], "scale_fmt": "ue8m0"},
                                  "scale_fmt='ue8m0' is not supported"),
    "FP8 embedding tables": ({"quant_method": "fp8", "weight_block_size": [128, 128],
                              "modules_to_convert": ["embed_tokens"]},
                             ("modules_to_convert=['embed_tokens'] is not supported", "no FP8 embeddings",
                              "allowed: null or empty (every Linear is converted regardless)")),
    "a class-name target": (ct_config(ct_args("channel", False), TOKEN, targets=["Linear", "Embedding"]),
                            ("config_groups.group_0.targets.1='Embedding' is not supported", "Linear layers only")),
    "a skip regex draftsmith refuses": ({"quant_method": "fp8", "weight_block_size": [128, 128],
                                         "ignored_layers": ["lm_head", "(a+)+"]},
                                        "ignored_layers.1='(a+)+' is not supported"),
    "a skip list that is no list": ({"quant_method": "fp8", "weight_block_size": [128, 128],
                                     "modules_to_not_convert": "lm_head"},
                                    "modules_to_not_convert='lm_head' is not supported"),
}


@pytest.mark.parametrize("label", list(REFUSED))
def test_what_draftsmith_cannot_compute_is_refused_by_key_found_and_allowed(label):
    config, said = REFUSED[label]
    with pytest.raises(UnsupportedTarget) as err:
        target_params(config)
    assert all(s in str(err.value) for s in (said if isinstance(said, tuple) else (said,)))
    assert "allowed: " in str(err.value), str(err.value)


def test_the_configs_as_published_map_onto_fp8_params():
    """FP8-dynamic: channel + dynamic on every Linear but lm_head; FP8: tensor + static; naive-quantized float
    (older llm-compressor) reads as float-quantized; groups of one setting join their targets; FineGrainedFP8
    quantizes every decoder layer's linear (an empty modules_to_convert names no embedding table to add)."""
    p = target_params(ct_config(ct_args("channel", False), TOKEN))
    assert (p.scheme, p.activation, p.modules, p.exclude) == ("channel", "dynamic", ("^",), (r"^lm_head$",))
    p = target_params(ct_config(ct_args("tensor", False), STATIC, format="naive-quantized") | {"config_groups": {
        "group_0": {"targets": [r"re:.*self_attn\..*"], "weights": ct_args("tensor", False), "input_activations":
                    STATIC},
        "group_1": {"targets": ["model.layers.0.mlp.down_proj"], "weights": ct_args("tensor", False),
                    "input_activations": STATIC}}})
    assert (p.scheme, p.activation) == ("tensor", "static")
    assert p.modules == (r"^(?:.*self_attn\..*)", r"^model\.layers\.0\.mlp\.down_proj$")
    p = target_params(ct_config(ct_args("tensor", False), None))
    assert p.activation == "none"   # weight-only FP8 (W8A16)
    p = target_params({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]})
    assert (p.scheme, p.block, p.activation) == ("block", (128, 128), "dynamic")   # per token and group of 128
    for config in ({"quant_method": "fp8", "activation_scheme": "dynamic"}, {"quant_method": "fp8"}):   # AutoFP8
        p = target_params(config)
        assert (p.scheme, p.activation) == ("tensor", "dynamic")   # per token, as vLLM runs it on FP8 GPUs
    p = target_params({"quant_method": "fp8", "weight_block_size": [64, 128]})   # FineGrainedFP8Config's default
    assert (p.scheme, p.block, p.activation) == ("block", (64, 128), "dynamic")
    p = target_params({"quant_method": "fp8", "weight_block_size": [128, 128], "scale_fmt": "float",
                       "modules_to_convert": []})
    assert p.modules == (r"^model\.layers\.\d+\.",)


# a Llama-like module tree 12 layers deep, with an MoE router (mlp.gate) beside gate_proj: the names the skip lists
# below are matched in
NAMED = ["lm_head", *(f"model.layers.{i}.{lin}" for i in (0, 1, 11)
                      for lin in ("self_attn.q_proj", "mlp.gate", "mlp.gate_proj", "mlp.down_proj"))]
LAYER = {i: [n for n in NAMED if n.startswith(f"model.layers.{i}.")] for i in (0, 1, 11)}
DOWN = [n for n in NAMED if n.endswith("down_proj")]
FINE = {"quant_method": "fp8", "weight_block_size": [128, 128]}
# config -> the names it leaves unquantized, as compressed-tensors 0.20's is_match and transformers 5.24's
# should_convert_module (FineGrainedFP8's modules_to_not_convert, ignored_layers its alias) say
SKIPPED = {
    "ct: a plain ignore entry is an exact name": (ct_config(ct_args("channel", False), TOKEN,
                                                            ignore=["lm_head", "mlp.down_proj"]), ["lm_head"]),
    "ct: lm_head quantized when not ignored": (ct_config(ct_args("channel", False), TOKEN, ignore=[]), []),
    "ct: an ignore regex matched at the start": (ct_config(ct_args("channel", False), TOKEN,
                                                           ignore=["lm_head", r"re:.*down_proj$"]), ["lm_head", *DOWN]),
    "ct: layer 1's mlp, not layer 11's": (ct_config(ct_args("channel", False), TOKEN,
                                                    ignore=["lm_head", r"re:model\.layers\.1\.mlp"]),
                                          ["lm_head", *LAYER[1][1:]]),
    "ct: an ignored class name excludes no Linear": (ct_config(ct_args("channel", False), TOKEN,
                                                               ignore=["Embedding", "lm_head"]), ["lm_head"]),
    "ct: exact targets": (ct_config(ct_args("channel", False), TOKEN, targets=["model.layers.0.mlp.gate", "lm_head"],
                                    ignore=[]), [n for n in NAMED if n not in ("lm_head", "model.layers.0.mlp.gate")]),
    "fp8: a layer prefix": (FINE | {"modules_to_not_convert": ["lm_head", "model.layers.0"]}, ["lm_head", *LAYER[0]]),
    "fp8: a prefix ends at a module boundary": (FINE | {"modules_to_not_convert": ["model.layers.1"]},
                                                ["lm_head", *LAYER[1]]),
    "fp8: a regex": (FINE | {"modules_to_not_convert": [r"model.layers.*.mlp.down_proj"]}, ["lm_head", *DOWN]),
    "fp8: a suffix": (FINE | {"ignored_layers": ["down_proj"]}, ["lm_head", *DOWN]),
    "fp8: a router, not gate_proj": (FINE | {"modules_to_not_convert": ["mlp.gate"]},
                                     ["lm_head", *(f"model.layers.{i}.mlp.gate" for i in (0, 1, 11))]),
    "fp8: no prefix but at the start": (FINE | {"modules_to_not_convert": ["layers.1"]}, ["lm_head"]),
}


def linear_tree(names):
    root = torch.nn.Module()
    for name in names:
        *path, leaf = name.split(".")
        node = root
        for part in path:
            if not hasattr(node, part):
                node.add_module(part, torch.nn.Module())
            node = getattr(node, part)
        node.add_module(leaf, torch.nn.Linear(1, 1, device="meta"))
    return root


@pytest.mark.parametrize("label", list(SKIPPED))
def test_targets_and_skip_lists_match_module_names_as_their_own_loaders_do(label):
    config, skipped = SKIPPED[label]
    quantized = matching_linears(linear_tree(NAMED), target_params(config))
    assert sorted(n for n in NAMED if n not in quantized) == sorted(skipped)


def write_quantized_head(folder, *, tie, head=True):
    """A Llama whose decoder linears are FP8 per channel with per-token inputs (compressed-tensors FP8-dynamic) and,
    with ``head``, its lm_head too (targets Linear, nothing ignored; a tied one's files then hold the quantized copy
    of the embedding as lm_head); without, lm_head ignored."""
    write_target(folder, "llama", num_hidden_layers=2, seed=1, tie_word_embeddings=tie)
    t = load_file(str(folder / "model.safetensors"))
    if head and "lm_head.weight" not in t:
        t["lm_head.weight"] = t["model.embed_tokens.weight"].clone()
    for name in [k for k, v in t.items() if k.endswith(".weight") and v.dim() == 2 and "embed" not in k]:
        t[name], t[name.removesuffix("weight") + "weight_scale"] = quantize(t[name], "channel")
    save_safetensors(t, folder)
    qc = ct_config(ct_args("channel", False), TOKEN, ignore=[] if head else ["lm_head"])
    edit_config(folder, quantization_config=qc)
    return folder


def test_a_quantized_shared_head_is_dequantized_only_by_its_own_matmul(tmp_path, monkeypatch):
    """An untied FP8 lm_head (ignore: []) loads and computes on per-token inputs; the draft reading it as the shared
    head takes its compute dtype, not its weight: one call dequantizes it once, in its own forward (was twice)."""
    folder = write_quantized_head(tmp_path / "t", tie=False)
    model = assemble(folder, write_eagle1(tmp_path / "d", folder, bias=False))
    head, ckpt = model.target.lm_head, load_file(str(folder / "model.safetensors"))
    assert isinstance(head, FP8Weight) and head._parameters["weight"] is not model.target.model.embed_tokens.weight
    h = torch.randn(1, 3, model.target.dims.hidden, generator=torch.Generator().manual_seed(0))
    w = ckpt["lm_head.weight"].to(torch.float32) * ckpt["lm_head.weight_scale"]
    with torch.no_grad():
        torch.testing.assert_close(model.target.logits(h), per_token_fake_quant(h) @ w.T, atol=1e-5, rtol=0)
        seen = []
        monkeypatch.setattr(quant, "dequantize", lambda v, *a: seen.append(tuple(v.shape)) or dequantize(v, *a))
        model.draft.head_of(h, head)
    assert seen == [tuple(w.shape)]


def test_a_tied_target_whose_config_quantizes_lm_head_is_refused_by_key_before_any_tensor_is_read(tmp_path,
                                                                                                 no_tensor_reads):
    """tie_word_embeddings with targets Linear and nothing ignored: lm_head would be FP8 and the embedding float,
    one tensor (and the tied-head ignore rule hid the file's lm_head: a misleading 'missing lm_head.weight'); a
    tied target whose ignore names lm_head loads, its head the embedding."""
    plain = write_quantized_head(tmp_path / "plain", tie=True, head=False)
    model = assemble(plain, write_eagle1(tmp_path / "d", plain, bias=False))
    assert model.target.lm_head.weight is model.target.model.embed_tokens.weight
    folder = write_quantized_head(tmp_path / "t", tie=True)

    no_tensor_reads()
    with pytest.raises(UnsupportedTarget) as err:
        assemble(folder, tmp_path / "d")
    text = str(err.value)
    assert "quantization_config ignore=[] is not supported with tie_word_embeddings true: lm_head is quantized" \
        in text and "allowed: tie_word_embeddings false in config.json where the files hold a quantized lm_head" \
        in text, text


def test_a_skip_list_regex_that_backtracks_is_refused_by_the_time_bound():
    """modules_to_not_convert entries are regexes (transformers' reading): one that backtracks on every module name
    ('(.|.)*z': 2^31 paths on model.layers.0.self_attn.q_proj) is refused within the weight rules' time bound,
    naming it, instead of hanging assemble."""
    import signal
    from types import SimpleNamespace

    from draftsmith.components.quant_models import quantize_target

    attn = torch.nn.ModuleDict({"q_proj": torch.nn.Linear(128, 128, device="meta")})
    model = torch.nn.ModuleDict({"model": torch.nn.ModuleDict({"layers": torch.nn.ModuleList(
        [torch.nn.ModuleDict({"self_attn": attn})])})})
    cfg = SimpleNamespace(quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128],
                                               "modules_to_not_convert": ["(.|.)*z"]})
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("still matching after 10 s"))
    signal.alarm(10)
    try:
        with pytest.raises(UnsupportedTarget, match=r"the module pattern .+ took more than 0.1 s on "
                                                    r"'model\.layers\.0\.self_attn\.q_proj'"):
            quantize_target(model, cfg)
    finally:
        signal.alarm(0)


def test_modules_to_not_convert_wins_over_ignored_layers_as_transformers_reads_them():
    """transformers reads ignored_layers only where modules_to_not_convert is null: given both, layer 0 is
    converted."""
    p = target_params({"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head"],
                       "ignored_layers": ["model.layers.0"]})
    assert not any(re.search(x, "model.layers.0.mlp.down_proj") for x in p.exclude)
    p = target_params({"quant_method": "fp8", "weight_block_size": [128, 128], "ignored_layers": ["model.layers.0"]})
    assert any(re.search(x, "model.layers.0.mlp.down_proj") for x in p.exclude)
