"""`draftsmith convert` between the midlayer, layers, speculators and Mistral layouts: a round trip is the identity
bit for bit (Hypothesis, over random drafts and layout paths), the speculators export is what vLLM reads, and what a
layout cannot express is refused."""
import json
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.convert.canonical import ConvertError, read_canonical
from draftsmith.convert.rotary import rope_permutation
from draftsmith.convert.run import convert
from draftsmith.testing import edit_config, write_eagle3, write_target
from draftsmith.testing.mistral import write_mistral_eagle

TARGET_CFG = {"model_type": "llama", "hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 4,
              "num_key_value_heads": 2, "num_hidden_layers": 10, "vocab_size": 64, "rms_norm_eps": 1e-6,
              "max_position_embeddings": 256, "rope_theta": 10000.0}


def fake_target(folder: Path) -> Path:
    """The writers read only the target's config.json; conversion never needs the target."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(TARGET_CFG))
    return folder


def files_of(folder: Path) -> dict[str, torch.Tensor]:
    (f,) = sorted(folder.glob("*.safetensors"))
    with safe_open(str(f), "pt") as h:
        return {k: h.get_tensor(k) for k in h.keys()}


def same_bits(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)


@st.composite
def eagle3_drafts(draw):
    layers = draw(st.integers(1, 3))
    config = draw(st.sampled_from(["hf", "speculators"]))
    layout = draw(st.sampled_from(["midlayer", "layers"])) if layers == 1 and config == "hf" else "layers"
    norms = draw(st.sampled_from(["none", "fc_norm", "norm_before_fc"]))
    n_aux = draw(st.sampled_from([3, 5]))
    ids = draw(st.none() | st.lists(st.integers(0, 9), min_size=n_aux, max_size=n_aux, unique=True))
    return dict(layers=layers, layout=layout, config=config, fc_norm=norms == "fc_norm",
                norm_before_fc=norms == "norm_before_fc", aux_ids=sorted(ids) if ids else None,
                draft_vocab=draw(st.sampled_from([None, 40])), seed=draw(st.integers(0, 99)),
                flags={"norm_before_residual": draw(st.booleans())})


@settings(max_examples=8)
@given(draft=eagle3_drafts(), path=st.lists(st.sampled_from(["midlayer", "layers", "speculators"]), min_size=1,
                                           max_size=3))
def test_a_round_trip_through_any_layouts_is_bit_for_bit(draft, path):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src = write_eagle3(root / "src", fake_target(root / "t"), **draft)
        before, facts, _, family = read_canonical(src)
        here = src
        home = "speculators" if draft["config"] == "speculators" else draft["layout"]
        for i, layout in enumerate([*path, home]):
            try:
                convert(here, layout, root / f"step{i}")
            except ConvertError as e:  # refused for a stated reason, never written wrong
                assert "at most 1" in str(e) and draft["layers"] > 1
                assert not (root / f"step{i}").exists()
                return
            here = root / f"step{i}"
        after, facts_after, _, family_after = read_canonical(here)
        assert same_bits(before, after)
        assert facts_after == facts and family_after == family
        assert same_bits(files_of(src), files_of(here))  # home again: the very same file names and tensors


def test_mistral_round_trip_through_layers_and_speculators_refusal(tmp_path):
    src = write_mistral_eagle(tmp_path / "m", fake_target(tmp_path / "t"))
    convert(src, "layers", tmp_path / "hf")
    convert(tmp_path / "hf", "mistral", tmp_path / "back")
    assert same_bits(files_of(src), files_of(tmp_path / "back"))
    assert json.loads((tmp_path / "back" / "params.json").read_text()) == \
        json.loads((src / "params.json").read_text())
    q_native, q_hf = files_of(src)["layers.0.attention.wq.weight"], files_of(tmp_path / "hf")[
        "layers.0.self_attn.q_proj.weight"]
    assert not torch.equal(q_native, q_hf) and torch.equal(q_native.sort(0).values, q_hf.sort(0).values)
    with pytest.raises(ConvertError, match="hidden_norm"):  # an EAGLE-1-style draft is not an EAGLE-3 export
        convert(src, "speculators", tmp_path / "s")


def test_an_eagle3_draft_cannot_become_a_mistral_one(tmp_path):
    src = write_eagle3(tmp_path / "e", fake_target(tmp_path / "t"))
    with pytest.raises(ConvertError, match="cannot express.*hidden_norm"):
        convert(src, "mistral", tmp_path / "m")


@given(half=st.integers(1, 12))
def test_rope_permutations_are_inverse(half):
    d = 2 * half
    there, back = rope_permutation(d, "interleaved", "neox"), rope_permutation(d, "neox", "interleaved")
    assert torch.equal(there[back], torch.arange(d)) and torch.equal(back[there], torch.arange(d))


def test_speculators_export_is_what_vllm_reads(tmp_path):
    target = write_target(tmp_path / "t", "llama", num_hidden_layers=8, seed=3)
    src = write_eagle3(tmp_path / "src", target, layout="layers", layers=2, draft_vocab=40, aux_ids=[1, 4, 6])
    res = CliRunner().invoke(app, ["convert", str(src), "--to", "speculators", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert "model_type" not in cfg and cfg["architectures"] == ["Eagle3Speculator"]
    assert cfg["speculators_model_type"] == "eagle3" and cfg["speculators_config"]["algorithm"] == "eagle3"
    assert cfg["transformer_layer_config"]["num_hidden_layers"] == 2
    assert cfg["transformer_layer_config"]["model_type"] == "llama"
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [1, 4, 6] and cfg["draft_vocab_size"] == 40
    # every norm flag stated (vLLM and speculators default norm_before_residual differently)
    assert {k: cfg[k] for k in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")} == \
        {"norm_before_residual": False, "norm_before_fc": False, "fc_norm": False, "norm_output": False}
    names = set(files_of(tmp_path / "out"))
    assert {"fc.weight", "layers.0.hidden_norm.weight", "layers.1.self_attn.q_proj.weight", "d2t", "t2d",
            "lm_head.weight", "norm.weight"} <= names and not any(n.startswith("midlayer.") for n in names)
    assert json.loads(res.stdout[res.stdout.index("{"):]) == cfg
    a = draftsmith.assemble("eagle3-llama", target=target, draft=src, dtype="float64")
    b = draftsmith.assemble("eagle3-speculators", target=target, draft=tmp_path / "out", dtype="float64")
    assert a.draft.taps == b.draft.taps
    assert all(torch.equal(x, y) for x, y in zip(a.draft.state_dict().values(), b.draft.state_dict().values()))
    assert a.generate([4, 5, 6], max_new_tokens=8, stop=[]).token_ids == \
        b.generate([4, 5, 6], max_new_tokens=8, stop=[]).token_ids


def test_convert_cli_refuses_an_unknown_layout_naming_the_known_ones(tmp_path):
    src = write_eagle3(tmp_path / "e", fake_target(tmp_path / "t"))
    res = CliRunner().invoke(app, ["convert", str(src), "--to", "gguf", str(tmp_path / "o")])
    assert res.exit_code == 2 and "unknown layout 'gguf'" in res.stderr and "speculators" in res.stderr


@pytest.mark.parametrize("to", ["midlayer", "layers"])
def test_an_eagle31_draft_whose_norm_is_before_the_head_only_keeps_saying_it(tmp_path, to):
    """A speculators EAGLE 3.1 draft (per-aux fc_norm) with norm_output false (the head only): the flat config
    states norm_output: true (SpecForge's head), as the 3.1 family reads an absent key as feed_back; a plain
    EAGLE-3 draft's head stays unsaid (vLLM reads true as feed_back)."""
    target = fake_target(tmp_path / "t")
    src = write_eagle3(tmp_path / "s", target, config="speculators", layout="layers", fc_norm=True,
                       flags={"norm_output": False})
    config = convert(src, to, tmp_path / "o")
    assert config["norm_output"] is True and read_canonical(tmp_path / "o")[1]["norm_output"] == "head"
    plain = write_eagle3(tmp_path / "p", target, config="speculators", layout="layers", flags={"norm_output": False})
    assert "norm_output" not in convert(plain, to, tmp_path / "q")


def test_a_fact_the_layout_cannot_say_is_refused_and_nothing_is_left(tmp_path):
    """EAGLE 3.1's norm_output stated in a speculators config; a flat Llama config of the plain family would read it
    back differently, so verify() refuses and removes the output (every tensor would have read back fine)."""
    src = write_eagle3(tmp_path / "s", fake_target(tmp_path / "t"), config="speculators", layout="layers",
                       flags={"norm_output": True})
    with pytest.raises(ConvertError) as info:
        convert(src, "layers", tmp_path / "o")
    assert str(info.value).startswith(f"{src} cannot be written as layers: the layers layout cannot express this "
                                      "draft (nothing written):\n  norm_output: ")
    assert str(info.value).endswith("or load it as it is: generate --draft detects it")
    assert "tensor" not in str(info.value) and not (tmp_path / "o").exists()


def test_the_layer_count_written_is_the_tensors_not_a_stale_config(tmp_path):
    src = write_eagle3(tmp_path / "s", fake_target(tmp_path / "t"))
    edit_config(src, num_hidden_layers=3)   # one layer of tensors
    assert convert(src, "layers", tmp_path / "o")["num_hidden_layers"] == 1


@given(half=st.integers(1, 12), heads=st.integers(1, 3))
def test_interleaved_to_neox_takes_new_row_j_from_old_row_2j(half, heads):
    """The docstring's rule, row by row: new row j < d/2 is old row 2j, new row j + d/2 is old row 2j + 1."""
    from draftsmith.convert.rotary import permute_rows

    d = 2 * half
    want = [2 * j for j in range(half)] + [2 * j + 1 for j in range(half)]
    assert rope_permutation(d, "interleaved", "neox").tolist() == want
    assert rope_permutation(d, "neox", "neox").tolist() == rope_permutation(d, "interleaved", "interleaved").tolist() \
        == list(range(d))
    rows = torch.arange(heads * d).view(-1, 1).expand(-1, 2)      # each row holds its own index
    moved = permute_rows(rows, d, rope_permutation(d, "interleaved", "neox"))
    assert moved[:, 0].tolist() == [h * d + w for h in range(heads) for w in want]


def test_head_dim_is_the_configs_or_the_width_over_the_heads():
    from draftsmith.convert.canonical import head_dim

    assert head_dim({"head_dim": 8, "hidden_size": 32, "num_attention_heads": 2}) == 8    # stated: wins
    assert head_dim({"hidden_size": 32, "num_attention_heads": 4}) == 8
    assert head_dim({"head_dim": None, "hidden_size": 48, "num_attention_heads": 4}) == 12


def test_convert_makes_the_output_folder_or_writes_into_an_empty_one(tmp_path):
    src = write_eagle3(tmp_path / "s", fake_target(tmp_path / "t"))
    convert(src, "layers", tmp_path / "new" / "nested" / "out")
    (tmp_path / "empty").mkdir()
    convert(src, "layers", tmp_path / "empty")
    assert same_bits(files_of(tmp_path / "empty"), files_of(tmp_path / "new" / "nested" / "out"))


def test_convert_refuses_a_file_or_a_folder_in_use_before_reading_a_tensor(tmp_path, monkeypatch):
    """Nothing is overwritten or mixed: an output path that is a file, or a folder holding anything, is refused
    (as draftsmith's errors print on the command line: 'error: ...', exit 1) before the source is read."""
    import draftsmith.convert.run as run_mod

    src = write_eagle3(tmp_path / "s", fake_target(tmp_path / "t"))
    (tmp_path / "afile").write_text("keep me")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "model.safetensors").write_text("keep me too")
    monkeypatch.setattr(run_mod, "read_canonical", lambda *a: pytest.fail("read the source first"))
    for out, what in (("afile", "not a folder"), ("used", "a folder that is not empty")):
        res = CliRunner().invoke(app, ["convert", str(src), "--to", "layers", str(tmp_path / out)])
        assert res.exit_code == 1 and f"error: {tmp_path / out} is {what}" in res.stderr, res.output
    assert (tmp_path / "afile").read_text() == "keep me"
    assert (tmp_path / "used" / "model.safetensors").read_text() == "keep me too"


def test_convert_refuses_an_output_folder_whose_name_is_not_utf8_before_reading_a_tensor(tmp_path, monkeypatch):
    """safetensors writes and reads UTF-8 paths only: refused for its name, not once written, as unreadable."""
    import os

    import draftsmith.convert.run as run_mod

    src = write_eagle3(tmp_path / "s", fake_target(tmp_path / "t"))
    out = Path(os.fsdecode(os.fsencode(tmp_path) + b"/\xfdout"))
    monkeypatch.setattr(run_mod, "read_canonical", lambda *a: pytest.fail("read the source first"))
    with pytest.raises(ConvertError) as info:
        convert(src, "layers", out)
    assert str(info.value) == (f"output folder {out} has a name that is not valid UTF-8 (b'\\xfdout'); "
                               "safetensors and torch open only UTF-8 paths: rename it")
    assert not os.path.lexists(out)


def test_a_dtype_assemble_refuses_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    """convert copies dtypes as they are: an int32 fc.weight, which the load plan refuses (a float is expected), is
    refused with the load plan's own words before a file is written, not written for generate to refuse."""
    from safetensors.torch import load_file, save_file

    import draftsmith.convert.run as run_mod

    src = write_eagle3(tmp_path / "s", fake_target(tmp_path / "t"))
    tensors = load_file(src / "model.safetensors")
    tensors["fc.weight"] = tensors["fc.weight"].mul(100).to(torch.int32)
    save_file(tensors, src / "model.safetensors", metadata={"format": "pt"})
    monkeypatch.setattr(run_mod, "save_safetensors", lambda *a, **k: pytest.fail("wrote the draft"))
    res = CliRunner().invoke(app, ["convert", str(src), "--to", "layers", str(tmp_path / "out")])
    assert res.exit_code == 1, res.output
    assert (f"error: {src} cannot be written as layers:\n  tensor 'fc.weight' is int32 (int) in the checkpoint, the "
            "model expects float32 (float): assemble() would refuse it in any layout") in res.stderr, res.output
    assert not (tmp_path / "out").exists()


def test_a_layer_shape_the_drafts_config_decides_is_judged_and_one_the_target_decides_is_not(tmp_path):
    """convert wrote a q_proj one column short and said 'load it with spec eagle3-llama', which assemble() then
    refused: a layer's shapes follow from the draft's config alone (a second stand-in target builds them alike),
    so one that misfits is refused like a dtype. The fc's columns are the target's width: a guess where the draft's
    embedding is its own (not judged), but the draft's width where it shares the target's (judged: no wider target
    loads it)."""
    from safetensors.torch import load_file, save_file

    from draftsmith.convert.fits import fit
    from draftsmith.convert.inspect import inspect_checkpoint

    src = write_eagle3(tmp_path / "s", fake_target(tmp_path / "t"))
    tensors = load_file(src / "model.safetensors")
    q, fc = tensors["midlayer.self_attn.q_proj.weight"], tensors["fc.weight"]
    tensors["fc.weight"] = torch.cat([fc, fc], dim=1)   # as if the target were twice as wide
    save_file(tensors, src / "model.safetensors", metadata={"format": "pt"})
    spec = inspect_checkpoint(src).spec
    assert fit(src, spec).refused == [f"tensor 'fc.weight' is {list(tensors['fc.weight'].shape)} in the checkpoint, "
                                      f"the model its config describes expects {list(fc.shape)}"]
    own = spec | {"draft": spec["draft"] | {"share": {"embed": "own", "lm_head": "draft"}}}
    assert fit(src, own).refused == []
    tensors["fc.weight"] = torch.cat([fc, fc], dim=1)[1:].contiguous()   # a row short: the draft's width, judged
    save_file(tensors, src / "model.safetensors", metadata={"format": "pt"})
    assert fit(src, own).refused == [f"tensor 'fc.weight' is {[fc.shape[0] - 1, 2 * fc.shape[1]]} in the "
                                     f"checkpoint, the model its config describes expects [{fc.shape[0]}, *] (*: "
                                     "the target's to decide)"]
    tensors["fc.weight"] = torch.cat([fc, fc], dim=1)
    tensors["midlayer.self_attn.q_proj.weight"] = q[:, 1:].contiguous()
    save_file(tensors, src / "model.safetensors", metadata={"format": "pt"})
    res = CliRunner().invoke(app, ["convert", str(src), "--to", "layers", str(tmp_path / "out")])
    assert res.exit_code == 1 and not (tmp_path / "out").exists(), res.output
    assert (f"tensor 'midlayer.self_attn.q_proj.weight' is {[q.shape[0], q.shape[1] - 1]} in the checkpoint, the "
            f"model its config describes expects {list(q.shape)}: assemble() would refuse it in any layout") \
        in res.stderr, res.output


def test_verify_refuses_a_tensor_that_would_not_read_back(tmp_path):
    from draftsmith.convert.verify import verify

    src = write_eagle3(tmp_path / "s", fake_target(tmp_path / "t"))
    convert(src, "layers", tmp_path / "o")
    tensors, facts, _, _ = read_canonical(tmp_path / "o")
    verify(tmp_path / "o", facts, tensors, "layers")                      # what was written reads back
    changed = {**tensors, "fc.weight": tensors["fc.weight"] + 1}
    with pytest.raises(ConvertError) as info:
        verify(tmp_path / "o", facts, changed, "layers")
    assert str(info.value) == ("the layers layout cannot express this draft (nothing written):\n"
                               "  tensor fc.weight would not read back")
    # verify only says so: convert() removes what it wrote (tests/convert/test_convert_hunt.py)
    with pytest.raises(ConvertError, match="tensor extra.weight would not read back"):
        verify(tmp_path / "o", facts, {**tensors, "extra.weight": torch.zeros(1)}, "layers")
    less = dict(tensors)
    del less["fc.weight"]
    with pytest.raises(ConvertError, match="tensor fc.weight would not read back"):
        verify(tmp_path / "o", facts, less, "layers")


def test_a_nan_weight_is_refused_before_anything_is_written(tmp_path):
    """A NaN weight was once copied through (read-back compares bytes, as torch.equal says a NaN differs from
    itself), into a draft every load refuses; convert now refuses it as the load does, naming file and tensor."""
    from safetensors.torch import load_file, save_file

    from draftsmith.errors import CheckpointError

    src = write_eagle3(tmp_path / "s", fake_target(tmp_path / "t"))
    weights = load_file(src / "model.safetensors")
    weights["midlayer.mlp.up_proj.weight"][0, 0] = float("nan")
    save_file(weights, src / "model.safetensors")
    with pytest.raises(CheckpointError, match="NaN or inf values in 'midlayer.mlp.up_proj.weight' \\(1 of"):
        convert(src, "layers", tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_a_mistral_draft_converted_to_hf_computes_the_same_function(tmp_path):
    """Bits round-tripping only shows the two directions undo each other; here the converted draft (neox rows, Hugging
    Face names, loaded by the spec inspect finds for it) must compute what the native one (interleaved rows,
    Mistral's names) computes, hidden state for hidden state, in the same decode."""
    from draftsmith.convert.inspect import inspect_checkpoint

    target = write_target(tmp_path / "t", "llama", num_hidden_layers=4, seed=3)
    native = write_mistral_eagle(tmp_path / "m", target)
    convert(native, "layers", tmp_path / "hf")
    found = draftsmith.parse_spec(inspect_checkpoint(tmp_path / "hf").spec, source="inspect output")
    assert found.draft.attention.params.get("rope", "neox") == "neox"
    outs = []
    for spec, folder in (("eagle-mistral", native), (found, tmp_path / "hf")):
        model = draftsmith.assemble(spec, target=target, draft=folder, dtype="float64")
        seen = []
        # the layer itself runs through split_forward (no forward hook); its MLP's output follows attention's
        model.draft.layers[-1].mlp.register_forward_hook(lambda m, args, out: seen.append(out))
        model.generate([[5, 6, 7, 8, 9, 10]], max_new_tokens=8, stop=[], topk=1, steps=3)
        outs.append(seen)
    assert len(outs[0]) == len(outs[1]) > 1
    for a, b in zip(*outs):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("family", ["eagle1", "eagle3", "mistral", "mla"])
def test_convert_names_the_spec_that_loads_what_it_wrote(tmp_path, family):
    """Converted to the layers layout, each family's draft is detected as itself (an MLA draft in HF names was
    taken for the Mistral-native GQA family); the spec detection proposes for the result, and the family spec
    `convert` names where it names one, load it and decode as the source. A family spec that alone would read the
    result otherwise is not named (eagle-mistral on the neox rows of a converted Mistral draft was)."""
    from draftsmith.testing import write_eagle1
    from draftsmith.testing.mla import write_mla_eagle

    write_target(tmp_path / "t", "llama", num_hidden_layers=7, seed=1)
    write = {"eagle1": write_eagle1, "eagle3": write_eagle3, "mistral": write_mistral_eagle,
             "mla": write_mla_eagle}[family]
    src = write(tmp_path / "src", tmp_path / "t")
    result = CliRunner().invoke(app, ["convert", str(src), "--to", "layers", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    named = result.output.split("load it with spec ")[1].split()[0] if "load it with spec " in result.output else None
    want = {"eagle1": "eagle1-llama", "eagle3": "eagle3-llama", "mla": "eagle-mla-deepseek"}.get(family)
    assert named == want or (want is None and "omit --spec: generate --draft detects it" in result.output), \
        result.output
    from draftsmith.convert.inspect import inspect_checkpoint
    from draftsmith.specs.loader import parse_spec

    before = draftsmith.assemble(inspect_checkpoint(src).match.spec, target=tmp_path / "t", draft=src,
                                 dtype="float64")
    kw = dict(max_new_tokens=8, stop=[])
    want_accepted = before.generate([3, 1, 4], **kw).stats.accepted_per_position
    detected = parse_spec(inspect_checkpoint(tmp_path / "out").spec)   # what generate --draft runs
    for spec in [detected, *([named] if named else [])]:
        after = draftsmith.assemble(spec, target=tmp_path / "t", draft=tmp_path / "out", dtype="float64")
        assert after.generate([3, 1, 4], **kw).stats.accepted_per_position == want_accepted
