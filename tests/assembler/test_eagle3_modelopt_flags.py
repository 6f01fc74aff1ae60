"""NVIDIA Model-Optimizer's eagle_config flags are read, never passed over: ``use_last_layernorm`` is the config's
spelling of the fusion's norm_output (true: a final norm before the head, the pre-norm state fed back; false: no
final norm), checked against a small torch EAGLE-3 draft written here from the checkpoint's tensors; a
``use_input_layernorm_in_first_layer: false`` (no hidden_norm), ``use_mtp_layernorm: true`` (enorm / hnorm) or
``parallel_draft_step`` > 1 (parallel heads) asks for a draft the eagle3 fusion does not compute and is refused by
name; each at its default value, or absent, loads as before."""
import json
import logging

import pytest
import torch
from safetensors.torch import load_file

import draftsmith
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.components import eagle3_config, eagle3_keys
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.errors import SpecError
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("t"), "llama", seed=1, num_hidden_layers=8)


@pytest.mark.parametrize("key, value", [("use_input_layernorm_in_first_layer", False), ("use_mtp_layernorm", True),
                                        ("parallel_draft_step", 3), ("parallel_draft_step", True)])
@pytest.mark.parametrize("nested", [True, False])
def test_a_flag_asking_for_another_draft_is_refused_by_name(target, tmp_path, key, value, nested):
    flags = {"eagle_config": {key: value}} if nested else {key: value}
    draft = write_eagle3(tmp_path / "d", target, flags=flags)
    where = f"eagle_config.{key}" if nested else key
    with pytest.raises(SpecError, match=rf"draft config {where}: asks for .*which (the eagle3 fusion|draftsmith) "
                                        r"does not compute.*\n\s+allowed: "):
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)


MODELOPT_DEFAULTS = {"use_aux_hidden_state": True, "use_input_layernorm_in_first_layer": True,
                     "use_last_layernorm": True, "use_mtp_layernorm": False, "parallel_draft_step": 1,
                     "has_lm_head": False, "next_layer_regular": True, "parallel_draft_heads_num_layers": 1}


def test_model_optimizers_defaults_load_and_only_its_unread_keys_are_listed(target, tmp_path):
    draft = write_eagle3(tmp_path / "d", target, flags={"eagle_config": MODELOPT_DEFAULTS})
    assert eagle3_keys.unbuilt_problems({"eagle_config": MODELOPT_DEFAULTS}) == []
    model = draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert model.draft.head_norm and not model.draft.feed_post_norm
    found = inspect_checkpoint(draft)
    assert set(found.unread) == {"eagle_config.next_layer_regular", "eagle_config.parallel_draft_heads_num_layers"}
    assert found.spec["draft"]["fusion"]["norm_output"] == "head"


def rms(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rope(x, pos, theta):
    # x: [T, n, d], neox halves
    d = x.shape[-1]
    freq = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = pos[:, None].double() * freq[None]
    cos, sin = torch.cat([ang, ang], -1).cos()[:, None], torch.cat([ang, ang], -1).sin()[:, None]
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def reference(folder, emb, hidden, final_norm: bool):
    """One EAGLE-3 layer (midlayer.*) from the checkpoint's tensors: fc over the aux states, cat(input_layernorm(
    embedding), hidden_norm(h)) into causal GQA attention with the residual h, the MLP; the final norm before the
    head only where ``final_norm``. Returns (the layer's output, the logits)."""
    cfg = json.loads((folder / "config.json").read_text())
    w = {k: v.double() for k, v in load_file(folder / "model.safetensors").items()}
    eps, theta = cfg.get("rms_norm_eps", 1e-6), cfg.get("rope_theta", 10000.0)
    nH, nKV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    T, d = emb.shape[0], cfg.get("head_dim") or cfg["hidden_size"] // nH
    h = hidden @ w["fc.weight"].T
    x = torch.cat([rms(emb, w["midlayer.input_layernorm.weight"], eps), rms(h, w["midlayer.hidden_norm.weight"], eps)],
                  -1)
    pos = torch.arange(T)
    q = rope((x @ w["midlayer.self_attn.q_proj.weight"].T).view(T, nH, d), pos, theta)
    k = rope((x @ w["midlayer.self_attn.k_proj.weight"].T).view(T, nKV, d), pos, theta)
    v = (x @ w["midlayer.self_attn.v_proj.weight"].T).view(T, nKV, d)
    k, v = k.repeat_interleave(nH // nKV, 1), v.repeat_interleave(nH // nKV, 1)
    scores = torch.einsum("qhd,khd->hqk", q, k) / d ** 0.5
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    att = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(T, nH * d)
    r = h + att @ w["midlayer.self_attn.o_proj.weight"].T
    m = rms(r, w["midlayer.post_attention_layernorm.weight"], eps)
    mlp = torch.nn.functional.silu(m @ w["midlayer.mlp.gate_proj.weight"].T) * (m @ w["midlayer.mlp.up_proj.weight"].T)
    out = r + mlp @ w["midlayer.mlp.down_proj.weight"].T
    head_in = rms(out, w["norm.weight"], eps) if final_norm else out
    return out, head_in @ w["lm_head.weight"].T


@pytest.mark.parametrize("value, term", [(False, "none"), (True, "head"), (None, "head")])
def test_use_last_layernorm_decides_the_final_norm_as_a_torch_reference_computes_it(target, tmp_path, value, term):
    flags = {"eagle_config": {"use_last_layernorm": value}} if value is not None else {}
    draft = write_eagle3(tmp_path / "d", target, flags=flags)
    if term == "none":   # as Model-Optimizer exports it: no norm.weight (one held is refused, test below)
        without_final_norm(draft)
    found = inspect_checkpoint(draft)
    assert found.spec["draft"]["fusion"]["norm_output"] == term
    model = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=target, dtype="float64")
    assert model.draft.fc.norm_output == term and model.draft.head_norm == (term != "none")
    H = json.loads((draft / "config.json").read_text())["hidden_size"]
    ids, pos = torch.tensor([[3, 9, 4, 1, 7, 2]]), torch.arange(6)[None]
    hidden = torch.randn(1, 6, 3 * H, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out, feed = model.draft(ids, hidden, pos, embed=model.draft_embed, from_target=True)
        logits = model.draft.head_logits(out, model.draft_head)
        emb = model.draft_embed(ids)[0].double()
    want_out, want_logits = reference(draft, emb, hidden[0], final_norm=term != "none")
    torch.testing.assert_close(out[0], want_out, atol=1e-7, rtol=0)
    # the pre-norm state is fed back; 1e-7: the rotary frequencies are float32 as transformers computes them
    torch.testing.assert_close(feed[0], want_out, atol=1e-7, rtol=0)
    torch.testing.assert_close(logits[0], want_logits, atol=1e-7, rtol=0)
    if term != "none":
        other = reference(draft, emb, hidden[0], final_norm=False)[1]
        assert not torch.allclose(logits[0], other, atol=1e-3)   # the other reading is another draft


def test_a_spec_stating_norm_output_wins_and_the_key_is_named(target, tmp_path, caplog):
    draft = write_eagle3(tmp_path / "d", target, flags={"eagle_config": {"use_last_layernorm": False}})
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        model = draftsmith.assemble("eagle3-llama", target=target, draft=draft)   # the family states head
    assert model.draft.head_norm
    said = " ".join(r.getMessage() for r in caplog.records)
    assert ("norm_output: the spec says head, the draft config's eagle_config.use_last_layernorm=false means none"
            in said)


@pytest.mark.parametrize("flags", [{"norm_output": True, "eagle_config": {"use_last_layernorm": False}},
                                   {"norm_output": False, "use_last_layernorm": True}])
def test_norm_output_and_use_last_layernorm_disagreeing_is_refused_unless_the_spec_states_it(target, tmp_path, flags):
    draft = write_eagle3(tmp_path / "d", target, flags=flags)
    with pytest.raises(SpecError, match=r"use_last_layernorm: says (true|false), and the config's norm_output means"):
        inspect_checkpoint(draft)
    cfg = json.loads((draft / "config.json").read_text())
    params = draftsmith.components.params.Eagle3Params(norm_before_residual=False, norm_output="none")
    assert eagle3_config.read_flags(params, cfg)["norm_output"] == "none"


def test_a_use_last_layernorm_that_is_no_boolean_is_refused_naming_the_file(target, tmp_path):
    draft = write_eagle3(tmp_path / "d", target, flags={"eagle_config": {"use_last_layernorm": "false"}})
    with pytest.raises(draftsmith.errors.CheckpointError, match=r"eagle_config.use_last_layernorm is 'false'; true "
                                                                 "or false is expected"):
        inspect_checkpoint(draft)


def test_an_mlp_sized_by_intermediate_size_mlp_names_the_key(target, tmp_path):
    draft = write_eagle3(tmp_path / "d", target)
    cfg = json.loads((draft / "config.json").read_text())
    mlp = cfg["intermediate_size"]
    (draft / "config.json").write_text(json.dumps({**cfg, "intermediate_size": 2 * mlp, "intermediate_size_mlp": mlp}))
    with pytest.raises(CheckpointMismatch) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert "wrong shape: 'layers.0.mlp.gate_proj.weight'" in str(info.value)
    assert any(f"the checkpoint's MLP is {mlp} wide, the draft config's intermediate_size_mlp" in n and
               f"set intermediate_size to {mlp}" in n for n in getattr(info.value, "__notes__", []))


def without_final_norm(folder):
    """The draft as Megatron's Model-Optimizer export writes one with use_last_layernorm false: no norm.weight."""
    from safetensors.torch import save_file
    file = folder / "model.safetensors"
    save_file({k: v for k, v in load_file(file).items() if k not in ("norm.weight", "model.norm.weight")}, file)
    return folder


def draft_forward(model, H):
    ids, pos = torch.tensor([[3, 9, 4, 1, 7, 2]]), torch.arange(6)[None]
    hidden = torch.randn(1, 6, 3 * H, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out, feed = model.draft(ids, hidden, pos, embed=model.draft_embed, from_target=True)
        logits = model.draft.head_logits(out, model.draft_head)
        return model.draft_embed(ids)[0].double(), hidden[0], out[0], feed[0], logits[0]


@pytest.mark.parametrize("layout", ["midlayer", "nemo"])
def test_a_draft_exported_without_its_final_norm_loads_as_inspect_proposes(target, tmp_path, layout):
    draft = without_final_norm(write_eagle3(tmp_path / "d", target, layout=layout,
                                            flags={"eagle_config": {"use_last_layernorm": False}}))
    found = inspect_checkpoint(draft)
    assert found.spec["draft"]["norms"]["final"] is False and found.spec["draft"]["fusion"]["norm_output"] == "none"
    assert "norms.final: false (norm_output none, and the checkpoint holds no final norm, norm.weight)" in \
        found.match.assumptions
    model = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=target, dtype="float64")
    assert isinstance(model.draft.norm, torch.nn.Identity) and not model.draft.head_norm
    assert not model.draft.feed_post_norm
    if layout != "midlayer":   # the reference reads the midlayer names
        return
    H = json.loads((draft / "config.json").read_text())["hidden_size"]
    emb, hidden, out, feed, logits = draft_forward(model, H)
    want_out, want_logits = reference(draft, emb, hidden, final_norm=False)
    torch.testing.assert_close(out, want_out, atol=1e-7, rtol=0)
    torch.testing.assert_close(feed, want_out, atol=1e-7, rtol=0)
    torch.testing.assert_close(logits, want_logits, atol=1e-7, rtol=0)


def test_generate_with_the_detected_spec_runs_a_draft_without_its_final_norm(target, tmp_path):
    from typer.testing import CliRunner

    from draftsmith.cli import app

    flags = {"eagle_config": {"use_last_layernorm": False}}
    draft = without_final_norm(write_eagle3(tmp_path / "d", target, flags=flags))
    res = CliRunner().invoke(app, ["generate", "--target", str(target), "--draft", str(draft), "--token-ids", "1,2,3",
                                   "--max-new-tokens", "4", "--no-compare"], env={"COLUMNS": "1000"})
    assert res.exit_code == 0, res.output
    assert "spec eagle3-llama-d: " in res.stdout and "prompt [1, 2, 3]" in res.stdout


HELD = (r"draft config eagle_config.use_last_layernorm: says false \(no final norm: Model-Optimizer then builds none "
        r"and exports no norm.weight\), but the checkpoint holds the final norm's norm.weight")


def test_a_false_use_last_layernorm_beside_a_held_norm_weight_is_refused_unless_the_spec_states_norm_output(
        target, tmp_path):
    # Model-Optimizer writes norm.weight only for a draft with the final norm (its HF and Megatron exports), and
    # vLLM / SGLang apply the one held whatever the key says: which draft it is, only the spec can say
    draft = write_eagle3(tmp_path / "d", target, flags={"eagle_config": {"use_last_layernorm": False}})
    with pytest.raises(SpecError, match=HELD) as err:
        inspect_checkpoint(draft)
    assert err.value.source == str(draft / "config.json")   # the draft's file named, not 'draft fusion' (h108)
    spec = draftsmith.specs.loader.load_spec("eagle3-llama").model_dump(mode="json")
    spec["draft"]["fusion"]["norm_output"] = "auto"   # the draft config's reading
    with pytest.raises(SpecError, match=HELD + r".*\n\s+allowed: true for a draft trained with the final norm"):
        draftsmith.assemble(draftsmith.parse_spec(spec), target=target, draft=draft)
    for stated, applied in (("none", False), ("head", True)):
        spec["draft"]["fusion"]["norm_output"] = stated
        model = draftsmith.assemble(draftsmith.parse_spec(spec), target=target, draft=draft)
        assert model.draft.head_norm == applied
    ok = write_eagle3(tmp_path / "ok", target, flags={"eagle_config": {"use_last_layernorm": True}})
    assert inspect_checkpoint(ok).spec["draft"]["norms"]["final"] is True   # true with its norm: as before
