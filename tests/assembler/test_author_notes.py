"""What a load says to someone writing a new draft family in YAML: each default taken for what a draft's config does
not state is said once (the load notes), and an error whose cause is a spec field or a config key names it."""
import json
import logging
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.errors import DraftsmithError
from draftsmith.testing import SMALL, write_eagle1, write_eagle3, write_target

BUILTIN = Path(draftsmith.__file__).parent / "specs" / "builtin"


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    return write_target(tmp_path_factory.mktemp("author") / "t", **SMALL)


def edit(folder: Path, config=None, tensors=None) -> Path:
    """Change a written draft in place: ``config(dict)`` and ``tensors(dict)`` edit what is stored."""
    if config is not None:
        cfg = json.loads((folder / "config.json").read_text())
        config(cfg)
        (folder / "config.json").write_text(json.dumps(cfg))
    if tensors is not None:
        stored = load_file(str(folder / "model.safetensors"))
        tensors(stored)
        save_file(stored, str(folder / "model.safetensors"))
    return folder


def spec_file(folder: Path, builtin: str, *changes: tuple[str, str], extra: str = "") -> Path:
    """A built-in spec's YAML with text replacements (its name changed), written into ``folder``."""
    text = (BUILTIN / f"{builtin}.yaml").read_text().replace(f"name: {builtin}", "name: authored")
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    path = folder / "authored.yaml"
    path.write_text(text + extra)
    return path


def failure(spec, target, draft) -> tuple[str, list[str]]:
    with pytest.raises(DraftsmithError) as info:
        draftsmith.assemble(spec, target=target, draft=draft)
    return str(info.value), list(getattr(info.value, "__notes__", []))


def said(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "draftsmith"]


# ---- 1. qkv_bias: auto, where the config states no key, follows the checkpoint's tensors ---------------------------

def with_qkv_bias(stored: dict, parts: str = "qkv") -> None:
    g = torch.Generator().manual_seed(5)
    for p in parts:
        rows = stored[f"layers.0.self_attn.{p}_proj.weight"].shape[0]
        stored[f"layers.0.self_attn.{p}_proj.bias"] = torch.randn(rows, generator=g)


@pytest.mark.parametrize("model_type", ["qwen2", "llama"])
def test_a_draft_config_stating_no_bias_key_loads_the_qkv_biases_its_checkpoint_holds_and_says_so(
        target, tmp_path, caplog, model_type):
    """EAGLE's Qwen2 drafts hold q/k/v biases that their config states by no key; a draft config's model_type is no
    evidence (next test): the tensors are."""
    draft = edit(write_eagle1(tmp_path / "d", target, bias=False), lambda c: c.update(model_type=model_type),
                 with_qkv_bias)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        model = draftsmith.assemble("eagle1-llama", target=target, draft=draft)
    stored = load_file(str(draft / "model.safetensors"))
    for p in "qkv":
        assert torch.equal(getattr(model.draft.layers[0].self_attn, f"{p}_proj").bias,
                           stored[f"layers.0.self_attn.{p}_proj.bias"])
    lines = [line for line in said(caplog) if "qkv_bias" in line]
    assert len(lines) == 1, said(caplog)
    assert (f"draft {draft / 'config.json'}: qkv_bias not stated (nor attention_bias): true taken: the checkpoint "
            "holds q/k/v bias tensors; state draft.attention.qkv_bias to override it") in lines[0]


@pytest.mark.parametrize("write", [write_eagle1, write_eagle3])
def test_a_qwen2_draft_config_without_bias_tensors_loads_without_biases(target, tmp_path, caplog, write):
    """SpecForge's qwq-32B EAGLE-3 draft config says model_type qwen2 and no bias key, and its tensors hold none
    (SGLang and vLLM build its Llama layer by attention_bias, absent: false). It was refused: qwen2 implied biases
    (an oracle hunt of round 28)."""
    kw = {"bias": False} if write is write_eagle1 else {}
    draft = edit(write(tmp_path / "d", target, **kw), lambda c: c.update(model_type="qwen2"))
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        model = draftsmith.assemble("eagle1-llama" if write is write_eagle1 else "eagle3-llama", target=target,
                                    draft=draft)
    assert model.draft.layers[0].self_attn.q_proj.bias is None
    assert not [line for line in said(caplog) if "qkv_bias" in line]


def test_a_stated_key_and_the_spec_win_over_the_checkpoint(target, tmp_path):
    """A config's attention_bias: false and a spec's qkv_bias: false keep the biases out whatever the tensors hold:
    the bias tensors are then refused, and the note names why the attention has none."""
    stated = edit(write_eagle1(tmp_path / "s", target, bias=False), lambda c: c.update(attention_bias=False),
                  with_qkv_bias)
    message, notes = failure("eagle1-llama", target, stated)
    assert "unexpected: 'layers.0.self_attn.k_proj.bias'" in message
    assert notes[0].endswith("(qkv_bias auto read the draft config's attention_bias: False): state "
                             "draft.attention.qkv_bias: true"), notes
    spec = spec_file(tmp_path, "eagle1-llama", ("rope: neox}", "rope: neox, qkv_bias: false}"))
    unstated = edit(write_eagle1(tmp_path / "u", target, bias=False), tensors=with_qkv_bias)
    message, notes = failure(spec, target, unstated)
    assert "unexpected: 'layers.0.self_attn.k_proj.bias'" in message
    assert "(the spec's draft.attention.qkv_bias is false)" in notes[0], notes


def test_bias_tensors_that_do_not_fit_anyway_are_said(target, tmp_path):
    """A checkpoint holding q and k biases but no v bias: auto reads biases from the tensors and the missing one is
    said (no spec field fixes it: no note)."""
    partial = edit(write_eagle1(tmp_path / "p", target, bias=False), tensors=lambda t: with_qkv_bias(t, "qk"))
    message, notes = failure("eagle1-llama", target, partial)
    assert "missing: 'layers.0.self_attn.v_proj.bias'" in message
    assert not [n for n in notes if "qkv_bias" in n], notes


# ---- 5. the sizes a draft config leaves out are said -------------------------------------------------------------

def test_the_sizes_a_draft_config_leaves_out_are_said_once_with_the_value_taken(target, tmp_path, caplog):
    draft = edit(write_eagle1(tmp_path / "d", target, bias=True),
                 lambda c: [c.pop(k) for k in ("rms_norm_eps", "head_dim", "intermediate_size")])
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        failure("eagle1-llama", target, draft)   # LlamaConfig's intermediate_size 11008 is no draft's: the MLP misfits
    lines = [line for line in said(caplog) if line.startswith("draft ")]
    assert lines == [f"draft {draft / 'config.json'}: rms_norm_eps not stated: 1e-06 taken (LlamaConfig's default); "
                     "intermediate_size not stated: 11008 taken (LlamaConfig's default); head_dim not stated: 8 taken "
                     "(hidden_size 16 / num_attention_heads 2)"]


def test_a_draft_config_stating_every_size_says_nothing_and_eps_is_the_one_taken(target, tmp_path, caplog):
    stated = write_eagle1(tmp_path / "s", target, bias=True)
    unstated = edit(write_eagle1(tmp_path / "u", target, bias=True), lambda c: c.pop("rms_norm_eps"))
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        draftsmith.assemble("eagle1-llama", target=target, draft=stated)
        assert said(caplog) == []
        model = draftsmith.assemble("eagle1-llama", target=target, draft=unstated)
    assert model.draft.layers[0].post_attention_layernorm.eps == 1e-6
    assert said(caplog) == [f"draft {unstated / 'config.json'}: rms_norm_eps not stated: 1e-06 taken (LlamaConfig's "
                            "default)"]


def test_kv_heads_left_out_is_said_and_explains_the_misfit(target, tmp_path, caplog):
    draft = edit(write_eagle1(tmp_path / "d", target, bias=True), lambda c: c.pop("num_key_value_heads"))
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        message, _ = failure("eagle1-llama", target, draft)
    assert "wrong shape: 'layers.0.self_attn.v_proj.weight' is [8, 16]" in message
    assert said(caplog) == [f"draft {draft / 'config.json'}: num_key_value_heads not stated: 2 taken "
                            "(num_attention_heads: one KV head per head)"]


# ---- 4. a draft config's sliding window ----------------------------------------------------------------------------

@pytest.mark.parametrize("window, flag, noted", [(4, True, True), (4, None, True), (4, False, False),
                                                 (None, True, False)])
def test_a_draft_configs_sliding_window_is_said_to_be_unapplied(target, tmp_path, caplog, window, flag, noted):
    """Chosen over applying it: the target's rule reads layer_types as its type's config class derives them from
    num_hidden_layers, which drafts misstate, and a draft's config is read as Llama's (no window)."""
    keys = {"sliding_window": window} | ({} if flag is None else {"use_sliding_window": flag})
    draft = edit(write_eagle1(tmp_path / "d", target, bias=True), lambda c: c.update(keys))
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        model = draftsmith.assemble("eagle1-llama", target=target, draft=draft)
    on = " with use_sliding_window true" if flag else ""
    assert said(caplog) == ([f"draft {draft / 'config.json'}: sliding_window=4{on} is not applied: the draft attends "
                             "its whole context (a draft's config is read as Llama's, whose attention has no window)"]
                            if noted else [])
    assert not hasattr(model.draft.layers[0].self_attn.backend, "window")   # whole context, as said


# ---- 3. the EAGLE-1 fusion bias ------------------------------------------------------------------------------------

def test_a_missing_bias_key_is_said_to_read_as_true_and_a_draft_without_fc_bias_is_told_the_field(target, tmp_path,
                                                                                                  caplog):
    draft = edit(write_eagle1(tmp_path / "d", target, bias=None), tensors=lambda t: t.pop("fc.bias"))
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        message, notes = failure("eagle1-llama", target, draft)
    assert message.endswith("missing: 'fc.bias' [16] float32")
    assert notes == ['note: the fusion expects fc.bias, which the checkpoint does not hold (the draft config has no '
                     '"bias" key, which reads as true, the EAGLE reference\'s default): state fusion.bias: false']
    assert said(caplog) == []   # the load's note above says it, once


def test_a_spec_that_contradicts_the_configs_bias_is_said_and_named_when_fc_bias_misfits(target, tmp_path, caplog):
    draft = write_eagle1(tmp_path / "d", target, bias=True)
    spec = spec_file(tmp_path, "eagle1-llama", ("bias: auto", "bias: false"))
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        message, notes = failure(spec, target, draft)
    assert message.endswith("unexpected: 'fc.bias' (no rule matched; name kept)")
    assert notes == ['note: the checkpoint holds fc.bias and the fusion is built without a bias (the spec\'s '
                     'fusion.bias: false contradicts the draft config\'s "bias": true): state fusion.bias: true, or '
                     'auto to read the draft config']
    assert said(caplog) == ['EAGLE-1 draft: the spec\'s fusion.bias: false contradicts the draft config\'s "bias": '
                            'true; the spec wins']


@pytest.mark.parametrize("spec_bias, config_bias", [("auto", True), ("auto", False), ("true", None), ("false", False)])
def test_a_fusion_bias_read_as_stated_says_nothing(target, tmp_path, caplog, spec_bias, config_bias):
    draft = write_eagle1(tmp_path / "d", target, bias=config_bias)
    spec = spec_file(tmp_path, "eagle1-llama", ("bias: auto", f"bias: {spec_bias}"))
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        model = draftsmith.assemble(spec, target=target, draft=draft)
    assert said(caplog) == []
    assert (model.draft.fc.bias is not None) == (config_bias is not False)


# ---- 2. num_layers: auto that finds no layer shows what the rules were given and made -------------------------------

MIDLAYER_RULE = "- {match: '^midlayer\\.', replace: 'layers.0.'}"


@pytest.fixture
def eagle3(target, tmp_path) -> Path:
    return write_eagle3(tmp_path / "e3", target)   # 13 tensors: fc, lm_head, norm and 10 midlayer.*


@pytest.mark.parametrize("rule, ignore, after", [
    ("- {match: '^mid_layer\\.', replace: 'layers.0.'}", "",
     "After the rules: 'fc.weight', 'lm_head.weight', 'midlayer.hidden_norm.weight', 'midlayer.input_layernorm.weight' "
     "and 9 more. Check weights.rules"),
    ("- {match: '^.*$', replace: ''}", "", "After the rules: '' (13 names collided onto 1). Check weights.rules"),
    (MIDLAYER_RULE, "\n    - '^midlayer\\.'", "After the rules: 'fc.weight', 'lm_head.weight', 'norm.weight' (10 "
                                              "ignored by weights.ignore). Check weights.rules"),
])
def test_auto_layers_finding_none_names_the_folder_and_the_names_before_and_after_the_rules(target, eagle3, tmp_path,
                                                                                            rule, ignore, after):
    spec = spec_file(tmp_path, "eagle3-llama", (MIDLAYER_RULE, rule),
                     ("ignore: ['^(model\\.)?embed_tokens\\.weight$']", f"ignore:{ignore}\n    - '^embed_tokens'"))
    message, _ = failure(spec, target, eagle3)
    assert (f"draft.num_layers: auto found no 'layers.N.' tensors after the weight rules: draft folder {eagle3} holds "
            "13 tensors ('fc.weight', 'lm_head.weight', 'midlayer.hidden_norm.weight', "
            "'midlayer.input_layernorm.weight' "
            "and 9 more). ") in message
    assert after in message


def test_the_names_shown_are_bounded(target, tmp_path):
    from draftsmith.assembler.build import no_layers

    names = [f"block_{i}_{'x' * 200}.weight" for i in range(1000)]
    problem = no_layers(names[:-10], (tmp_path / ("f" * 500), names))
    text = problem.render()
    assert "holds 1000 tensors" in text and "and 996 more" in text and "10 ignored by weights.ignore" in text
    assert len(text) < 1000 and "..." in text


# ---- 6. validate says a swap as generate does --------------------------------------------------------------------

@pytest.mark.parametrize("verb", ["validate", "generate"])
def test_validate_says_the_folders_look_swapped_as_generate_does(target, eagle3, tmp_path, verb):
    """One code path: both run assemble's plan_assembly, which adds the note (detect.swap_note) to its error."""
    from typer.testing import CliRunner

    from draftsmith.cli import app

    import shutil

    shutil.copytree(target, tmp_path / "target")
    (tmp_path / "specs").mkdir()
    spec = spec_file(tmp_path / "specs", "eagle3-llama",
                     extra=f"checkpoints: {{target: ../{eagle3.name}, draft: ../target}}\n")   # swapped
    args = ["validate", str(spec)] if verb == "validate" else ["generate", "--spec", str(spec), "--token-ids", "1,2"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 1, res.output
    assert (f"note: {tmp_path / eagle3.name} looks like a draft (midlayer.* tensors with hidden_norm "
            "and fc (EAGLE-3, yuhuili/lmsys)), not a target: are the target and draft folders swapped?") in res.output


# ---- 7. a config.json problem does not hide the tensor problems --------------------------------------------------

def misfit(stored: dict) -> None:
    stored["layers.0.mlp.up_proj.weight"] = torch.zeros(3, 3)
    del stored["layers.0.mlp.down_proj.weight"]
    stored["layers.0.self_attn.o_proj.weight"] = stored["layers.0.self_attn.o_proj.weight"].to(torch.int32)


def test_a_config_problem_no_tensor_depends_on_is_reported_with_the_tensor_problems(target, tmp_path, caplog):
    draft = edit(write_eagle1(tmp_path / "d", target, bias=True), lambda c: c.update(rms_norm_eps="1e-6"), misfit)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        message, notes = failure("eagle1-llama", target, draft)
    assert message == f"{draft / 'config.json'}: rms_norm_eps is '1e-6'; a positive number is expected"
    assert notes == [f"note: the tensors were checked too (rms_norm_eps left at its default): {draft} does not fit "
                     "spec 'eagle1-llama': 3 problems\n"
                     "  missing: 'layers.0.mlp.down_proj.weight' [16, 32] float32\n"
                     "  wrong shape: 'layers.0.mlp.up_proj.weight' is [3, 3] in the checkpoint, the model expects "
                     "[32, 16] (no rule matched; name kept)\n"
                     "  wrong dtype: 'layers.0.self_attn.o_proj.weight' is int32 (int) in the checkpoint, the model "
                     "expects float32 (float) (no rule matched; name kept)"]
    assert said(caplog) == []   # 'rms_norm_eps not stated' would be false: it is stated, wrongly


def test_a_config_problem_alone_says_the_tensors_fit(target, tmp_path):
    draft = edit(write_eagle1(tmp_path / "d", target, bias=True), lambda c: c.update(rope_theta=-1, eos_token_id=1.5))
    message, notes = failure("eagle1-llama", target, draft)
    assert message.startswith(f"{draft / 'config.json'}: rope_theta is -1; a positive number is expected")
    assert notes == ["note: the tensors were checked too (rope_theta, eos_token_id left at their defaults): they fit"]


def test_a_bad_layer_count_does_not_hold_the_tensor_checks_back(target, tmp_path):
    """The draft's layers are counted from its tensor names: a bad num_hidden_layers said the tensor checks would
    follow once it was fixed, as if they depended on it."""
    draft = edit(write_eagle1(tmp_path / "d", target, bias=True), lambda c: c.update(num_hidden_layers=-3))
    message, notes = failure("eagle1-llama", target, draft)
    assert message.startswith(f"{draft / 'config.json'}: num_hidden_layers is -3")
    assert notes == ["note: the tensors were checked too (num_hidden_layers left at its default): they fit"]


def test_a_config_problem_the_shapes_depend_on_says_the_tensor_checks_follow(target, tmp_path):
    draft = edit(write_eagle1(tmp_path / "d", target, bias=True),
                 lambda c: c.update(rms_norm_eps="1e-6", hidden_size="16"), misfit)
    message, notes = failure("eagle1-llama", target, draft)
    assert message == (f"{draft / 'config.json'}: hidden_size is '16'; an integer is expected; rms_norm_eps is "
                       "'1e-6'; a positive number is expected")
    assert notes == ["note: the tensor checks follow once hidden_size is fixed: the draft's expected tensors depend "
                     "on it"]


def test_a_nested_key_is_left_out_of_a_copy(tmp_path):
    from draftsmith.assembler.config import read_config_aside

    raw = {"transformer_layer_config": {"hidden_size": 16, "num_attention_heads": 2, "rms_norm_eps": "x",
                                        "num_key_value_heads": 3}, "draft_vocab_size": 8}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    reading = read_config_aside(tmp_path)
    assert reading.aside == ["transformer_layer_config.rms_norm_eps"]
    assert reading.shaping == ["transformer_layer_config.num_key_value_heads"]
    assert reading.config == {"transformer_layer_config": {"hidden_size": 16, "num_attention_heads": 2,
                                                           "num_key_value_heads": 3}, "draft_vocab_size": 8}
    assert "transformer_layer_config.rms_norm_eps is 'x'" in str(reading.error)


def test_no_bias_advice_where_the_fusion_itself_is_under_another_name(target, tmp_path):
    """fc stored as fusion.linear.{weight,bias}: 'the fusion expects fc.bias ... state fusion.bias: false' was said
    though the bias is there (a rule-writing hunt, 2026-12-01): the names are what to mend, and fc.weight's hint
    says so."""
    draft = edit(write_eagle1(tmp_path / "d", target, bias=None),
                 tensors=lambda t: t.update({"fusion.linear.weight": t.pop("fc.weight"),
                                             "fusion.linear.bias": t.pop("fc.bias")}))
    message, notes = failure("eagle1-llama", target, draft)
    assert "missing: 'fc.weight'" in message and "closest in checkpoint: 'fusion.linear.weight'" in message
    assert not any("fc.bias" in n for n in notes), notes


@pytest.mark.parametrize("names, said", [
    (["lm_head.weight", "model.decoder.layers.0.hidden_norm.weight"],
     r"here e.g. match: '^model\.decoder\.layers\.', replace: 'layers.'"),
    (["transformer.h.1.attn.c_attn.weight"], r"here e.g. match: '^transformer\.h\.', replace: 'layers.'"),
    (["blocks.0.ffn.w1.weight"], r"here e.g. match: '^blocks\.', replace: 'layers.'"),
    (["midlayer.hidden_norm.weight", "fc.weight", "0.weight"], r"e.g. match: '^midlayer\.', replace: 'layers.0.'"),
    (["fc_norm.0.weight", "midlayer.hidden_norm.weight"], r"e.g. match: '^midlayer\.', replace: 'layers.0.'"),
])
def test_the_layer_rule_example_is_made_of_the_checkpoints_own_numbered_names(names, said):
    """auto found no 'layers.N.': the example rule was always midlayer's, whatever the names (a rule-writing hunt,
    2026-12-01: model.decoder.layers.N.* were offered '^midlayer\\.')."""
    from draftsmith.assembler.build import layer_rule_example

    assert layer_rule_example(("folder", names)) == said
    assert layer_rule_example(None) == r"e.g. match: '^midlayer\.', replace: 'layers.0.'"
