"""A draft's starting point and its export (draftsmith/train/draft_io.py), checked against what the docstrings
promise: linear layers from N(0, init_std), norms at 1, an own head and final norm copied from the target's rows of
the kept ids; export in the spec's layout (floats in the dtype asked, the vocabulary map as it is), a config that
states the draft vocabulary, the taps and the dtype, and files readable by everyone."""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.train.draft_io import export_draft, init_draft, start_from_target

V = 258                                   # the tiny target's vocabulary (tests/train/conftest.py)
KEPT = torch.arange(0, V, 3)              # 86 kept ids


@pytest.fixture(scope="module")
def start(tiny, tmp_path_factory):
    folder = tmp_path_factory.mktemp("draft-io") / "d"
    return init_draft("eagle3-llama", tiny / "target", folder, KEPT, seed=1, init_std=0.05), folder


def test_a_fresh_draft_starts_as_the_docstring_says(start):
    model, _ = start
    draft, target = model.draft, model.target
    for name, p in draft.named_parameters():
        if name == "lm_head.weight":      # the target's head rows of the kept ids
            assert torch.equal(p, target.lm_head.weight[KEPT])
        elif name == "norm.weight":       # the target's final norm
            assert torch.equal(p, target.model.norm.weight)
        elif "norm" in name:
            assert torch.equal(p, torch.ones_like(p)), name
        elif p.dim() == 2:                # N(0, 0.05): thousands of draws, so within a few percent
            assert abs(p.std().item() - 0.05) < 0.005 and abs(p.mean().item()) < 0.005, name
        else:
            assert torch.equal(p, torch.zeros_like(p)), name
    assert draft.d2t.shape[0] == len(KEPT) and draft.lm_head.weight.shape[0] == len(KEPT)


def test_the_start_is_seeded(start, tiny, tmp_path):
    model, _ = start
    again = init_draft("eagle3-llama", tiny / "target", tmp_path / "a", KEPT, seed=1, init_std=0.05)
    other = init_draft("eagle3-llama", tiny / "target", tmp_path / "b", KEPT, seed=2, init_std=0.05)
    ours, same, differs = (m.draft.state_dict() for m in (model, again, other))
    assert all(torch.equal(ours[k], same[k]) for k in ours)
    assert not torch.equal(ours["fc.weight"], differs["fc.weight"])


def test_the_full_vocabulary_keeps_every_target_row(tiny, tmp_path):
    model = init_draft("eagle3-llama", tiny / "target", tmp_path / "d", None)
    assert torch.equal(model.draft.lm_head.weight, model.target.lm_head.weight)
    assert not hasattr(model.draft, "d2t")     # no reduced vocabulary, no map
    with_all = init_draft("eagle3-llama", tiny / "target", tmp_path / "e", torch.arange(V))   # kept = every id
    assert torch.equal(with_all.draft.lm_head.weight, model.target.lm_head.weight)
    assert not hasattr(with_all.draft, "d2t")  # the whole vocabulary is the full one: no identity map is written


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_export_writes_the_spec_layout_and_loads_back(start, tiny, tmp_path, dtype):
    model, source = start
    out = export_draft(model, tmp_path / "new" / "out", dtype=dtype, source=source)   # parents made too
    tensors = load_file(str(out / "model.safetensors"))
    assert any(n.startswith("midlayer.") for n in tensors) and not any(n.startswith("layers.") for n in tensors)
    assert {t.dtype for n, t in tensors.items() if n not in ("d2t", "t2d")} == {dtype}
    assert tensors["d2t"].dtype == model.draft.d2t.dtype and torch.equal(tensors["d2t"], model.draft.d2t)
    config = json.loads((out / "config.json").read_text())
    assert config["draft_vocab_size"] == len(KEPT) and config["torch_dtype"] == str(dtype).removeprefix("torch.")
    assert model.draft.taps == (2, 4, 5) and "eagle_config" not in config   # the default taps: unsaid (with_ids)
    assert all(f.stat().st_mode & 0o777 == 0o644 for f in out.iterdir())
    back = draftsmith.assemble("eagle3-llama", target=tiny / "target", draft=out)
    mine, theirs = model.draft.state_dict(), back.draft.state_dict()
    assert mine.keys() == theirs.keys()
    for k in mine:
        assert torch.equal(theirs[k].to(mine[k].dtype), mine[k].to(dtype).to(mine[k].dtype)), k


def test_export_carries_the_sources_embedding_copy(start, tmp_path):
    """The upstream layout carries a frozen copy of the target's embedding: where the source had one, export writes
    the target's, in the dtype asked; where it had none, none."""
    model, source = start
    assert "embed_tokens.weight" not in load_file(str(export_draft(model, tmp_path / "plain", source=source)
                                                      / "model.safetensors"))
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    (upstream / "config.json").write_text((source / "config.json").read_text())
    save_file({"embed_tokens.weight": torch.zeros(2, 2)}, str(upstream / "model.safetensors"))
    out = export_draft(model, tmp_path / "o", dtype=torch.float32, source=upstream)
    got = load_file(str(out / "model.safetensors"))["embed_tokens.weight"]
    assert torch.equal(got, model.target.model.embed_tokens.weight.detach().float())


def test_an_eagle1_start_has_no_fc_bias_and_follows_the_same_rules(tiny, tmp_path):
    model = init_draft("eagle1-llama", tiny / "target", tmp_path / "d", None, init_std=0.05)
    params = dict(model.draft.named_parameters())
    assert "fc.bias" not in params and "fc.weight" in params
    for name, p in params.items():
        if "norm" in name:
            assert torch.equal(p, torch.ones_like(p)), name
        elif p.dim() == 2:
            assert abs(p.std().item() - 0.05) < 0.005, name


@pytest.mark.parametrize("spec", ["eagle3-llama", "eagle1-llama"])
def test_a_start_from_the_target_copies_its_last_layer_over_the_hidden_inputs(tiny, tmp_path, spec):
    # the same seed with and without: what start_from_target sets is exactly the difference
    plain = init_draft(spec, tiny / "target", tmp_path / "p", None, seed=3).draft.state_dict()
    model = init_draft(spec, tiny / "target", tmp_path / "t", None, seed=3)
    assert "fc.weight" in start_from_target(model)[0]
    got, last = model.draft.state_dict(), dict(model.target.model.layers[-1].named_parameters())
    H = last["self_attn.o_proj.weight"].shape[0]
    two_halves = spec == "eagle3-llama"          # EAGLE-3's first layer reads [embedding; hidden], 2H wide
    for name in ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"):
        w = got[f"layers.0.{name}"]
        assert w.shape[1] == (2 * H if two_halves else H)
        assert torch.equal(w[:, -H:], last[name])                          # the hidden columns: the target's
        assert torch.equal(w[:, :-H], plain[f"layers.0.{name}"][:, :-H])   # the embedding's keep their start
    for name in ("self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                 "post_attention_layernorm.weight"):
        assert torch.equal(got[f"layers.0.{name}"], last[name]), name
    if two_halves:   # the norm on the hidden stream is the target's input norm; the embedding's stays at 1
        assert torch.equal(got["layers.0.hidden_norm.weight"], last["input_layernorm.weight"])
        assert torch.equal(got["layers.0.input_layernorm.weight"], plain["layers.0.input_layernorm.weight"])
    moved = got["fc.weight"] - plain["fc.weight"]                           # the deepest input block, as is
    want = torch.zeros_like(moved)
    want[:, -H:] = torch.eye(H)
    torch.testing.assert_close(moved, want, atol=1e-6, rtol=0)   # (w + 1) - w rounds


def test_train_refuses_an_unknown_init_before_reading_anything(tmp_path):
    from typer.testing import CliRunner

    from draftsmith.cli import app

    r = CliRunner().invoke(app, ["train", "--out", str(tmp_path / "o"), "--target", str(tmp_path / "missing"),
                                 "--data", str(tmp_path / "missing.txt"), "--init", "zeros"])
    assert r.exit_code == 2 and "--init 'zeros'" in r.output and "'target' or 'random'" in r.output
    assert not (tmp_path / "o").exists()
