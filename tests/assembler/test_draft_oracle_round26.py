"""What the draft oracle hunt of round 26 found: a draft config's `mlp_bias: true` (Llama's key, which transformers'
LlamaMLP and vLLM's llama_eagle3 read for a draft's layer too) was not read: eagle3-llama refused the biases as
unexpected, with no hint, and inspect's proposal failed alike. The swiglu MLP's `bias` is `auto` now: the config's
mlp_bias, else false; a spec's true / false still wins."""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.assembler.plan import CheckpointMismatch
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture()
def biased(tmp_path):
    target = write_target(tmp_path / "t", num_hidden_layers=4)
    draft = write_eagle3(tmp_path / "d", target, aux_ids=[0, 1, 2])
    cfg = json.loads((draft / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**cfg, "mlp_bias": True}))
    tensors = load_file(draft / "model.safetensors")
    g = torch.Generator().manual_seed(5)
    for part in ("gate_proj", "up_proj", "down_proj"):
        rows = tensors[f"midlayer.mlp.{part}.weight"].shape[0]
        tensors[f"midlayer.mlp.{part}.bias"] = torch.randn(rows, generator=g)
    save_file(tensors, str(draft / "model.safetensors"))
    return target, draft, tensors


def test_a_draft_config_s_mlp_bias_is_read(biased):
    target, draft, tensors = biased
    model = draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    mlp = model.draft.layers[0].mlp
    for part in ("gate_proj", "up_proj", "down_proj"):
        torch.testing.assert_close(getattr(mlp, part).bias, tensors[f"midlayer.mlp.{part}.bias"])
    assert model.generate([1, 2, 3], max_new_tokens=4).token_ids == \
        model.generate_baseline([1, 2, 3], max_new_tokens=4).token_ids


def test_a_spec_s_bias_false_still_wins_over_the_config(biased, tmp_path):
    target, draft, _ = biased
    spec = tmp_path / "nobias.yaml"
    spec.write_text("name: nobias\nextends: eagle3-llama\ndraft:\n  mlp: {kind: swiglu, bias: false}\n")
    with pytest.raises(CheckpointMismatch, match=r"3 problems\n  unexpected: 'midlayer\.mlp\.down_proj\.bias'"):
        draftsmith.assemble(str(spec), target=target, draft=draft)


# the second case catches gqa.py with_theta(cfg, params.rope_theta) -> with_theta(cfg, 10000) (mutation round 26d)
@pytest.mark.parametrize("stated_theta, config_theta", [("10000", 5e5), ("250000.0", 1e4)])
def test_a_spec_s_rope_theta_overrides_the_draft_config_s(tmp_path, stated_theta, config_theta):
    """The hunt's note: EAGLE's and SpecForge's trainers rotate with 10000 whatever the draft config's rope_theta says
    (SpecForge issue 265), and nothing but editing config.json said so. `attention: {rope_theta: N}` does, whatever
    the number: the model equals the one whose config says N and differs from the config's; doctor tries 10000."""
    from draftsmith.doctor import AMBIGUITIES

    target = write_target(tmp_path / "t", num_hidden_layers=4)
    given, plain = (write_eagle3(tmp_path / name, target, aux_ids=[0, 1, 2]) for name in ("given", "plain"))
    cfg = json.loads((given / "config.json").read_text())
    (given / "config.json").write_text(json.dumps({**cfg, "rope_theta": config_theta}))
    (plain / "config.json").write_text(json.dumps({**cfg, "rope_theta": float(stated_theta)}))
    spec = tmp_path / "trained.yaml"
    spec.write_text("name: trained\nextends: eagle3-llama\ndraft:\n"
                    f"  attention: {{kind: gqa, rope_theta: {stated_theta}}}\n")
    rotary = lambda model: model.draft.layers[0].self_attn.rope   # noqa: E731
    said, config, stated = (draftsmith.assemble(s, target=target, draft=d) for s, d in
                            (("eagle3-llama", plain), ("eagle3-llama", given), (str(spec), given)))
    torch.testing.assert_close(rotary(stated).inv_freq, rotary(said).inv_freq, rtol=0, atol=0)
    assert not torch.equal(rotary(config).inv_freq, rotary(said).inv_freq)
    assert not torch.equal(rotary(stated).inv_freq, rotary(config).inv_freq)
    assert "draft.attention.rope_theta" in {a.path for a in AMBIGUITIES}


@pytest.mark.parametrize("config, default", [({"rope_theta": 5e5}, 5e5), ({"rope_theta": 1e4}, 1e4),
                                             ({"rope_parameters": {"rope_type": "default", "rope_theta": 7.0},
                                               "rope_theta": 9.0}, 7.0), ({}, None)])
def test_doctor_reads_the_draft_config_s_theta_to_know_when_10000_is_another_reading(config, default):
    """gqa's Component.reads: doctor tries 10000 only where the config reads otherwise (the demo's says 10000)."""
    from draftsmith.doctor import spec_data
    from draftsmith.specs.edits import field_info

    data = spec_data(draftsmith.load_spec("eagle3-llama"))
    info = field_info(data, "draft.attention.rope_theta", draftsmith.default_registry(), "gqa", config)
    assert (info.values, info.default) == ((10000,), default)


def test_convert_refuses_a_spec_rope_theta_its_written_config_would_not_say(tmp_path):
    """A review (round 26): `convert --spec` with `rope_theta: 10000` over a config saying 5e5 wrote 5e5 (the layout
    states the base only in the config it copies) and said "load it with spec eagle3-llama": now refused, saying how;
    where the config agrees it converts."""
    from draftsmith.convert.canonical import ConvertError
    from draftsmith.convert.run import convert

    target = write_target(tmp_path / "t", num_hidden_layers=4)
    draft = write_eagle3(tmp_path / "d", target, aux_ids=[0, 1, 2])
    cfg = json.loads((draft / "config.json").read_text())
    spec = tmp_path / "trained.yaml"
    spec.write_text("name: trained\nextends: eagle3-llama\ndraft:\n  attention: {kind: gqa, rope_theta: 10000}\n")
    (draft / "config.json").write_text(json.dumps({**cfg, "rope_theta": 5e5}))
    with pytest.raises(ConvertError, match=r"the spec's draft.attention.rope_theta is 10000, the draft config's "
                                           r"rope_theta 500000.0: the written config would carry the config's; set "
                                           r"rope_theta: 10000 in the draft's config.json first"):
        convert(draft, "layers", tmp_path / "out", spec=str(spec))
    assert not (tmp_path / "out").exists()
    (draft / "config.json").write_text(json.dumps({**cfg, "rope_theta": 10000.0}))
    convert(draft, "layers", tmp_path / "out2", spec=str(spec))
    assert json.loads((tmp_path / "out2" / "config.json").read_text())["rope_theta"] == 10000.0
