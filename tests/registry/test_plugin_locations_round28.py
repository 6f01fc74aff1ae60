"""Where a plugin's code raised is said with its error, "(in module.function, line N)", for a factory, a hook and
an import, as it was for a forward that raises while decoding: a plugin author's walk-through (round 28) got the
exception's type and text alone and no way to its line but --debug, which `validate` and `list` ignored."""
import sys

import pytest
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.hooks import Component, hookimpl
from draftsmith.registry import ComponentFailed, PluginError

from test_entry_points import fake_distribution
from test_plugins import Plugin, fresh

HERE = __name__


def explode(params, **_):
    return {}["hidden"]


def test_a_factory_that_raises_is_said_with_its_line():
    reg = fresh(("loc", Plugin([Component("mlp", "boom", explode)])))
    with pytest.raises(ComponentFailed) as info:
        reg.build("mlp", "boom", None, dims=None)
    line = explode.__code__.co_firstlineno + 1
    assert f"failed to build: KeyError: 'hidden' (in {HERE}.explode, line {line}); the assembler calls" in \
        str(info.value)


class Raising:
    @hookimpl
    def draftsmith_components(self):
        raise ValueError("no components today")


def test_a_hook_that_raises_is_said_with_its_line():
    with pytest.raises(PluginError) as info:
        fresh(("raising", Raising())).components   # noqa: B018 (collected on first use)
    line = Raising.draftsmith_components.__code__.co_firstlineno + 2
    assert f"raised ValueError: no components today (in {HERE}.Raising.draftsmith_components, line {line})" in \
        str(info.value)


def test_a_draftsmith_frame_is_no_plugins_line():
    """A plugin whose error comes from a draftsmith call it made names no draftsmith line as its own."""
    from draftsmith.registry.checks import raised

    try:
        explode(None)
    except KeyError as e:
        assert raised(e, "draftsmith.components") == "KeyError: 'hidden'"
        assert raised(e, None) == "KeyError: 'hidden'"
        assert raised(e, explode).endswith(f"(in {HERE}.explode, line {explode.__code__.co_firstlineno + 1})")


def test_an_import_that_raises_is_said_with_its_line_and_debug_shows_its_traceback(tmp_path, monkeypatch, request):
    module = fake_distribution(tmp_path, request, norm="broken-import")
    source = tmp_path / f"{module}.py"
    source.write_text("import os\nSETTINGS = {}\nWIDTH = SETTINGS['hidden']\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    import draftsmith.registry.registry as registry_module

    registry_module.default_registry.cache_clear()
    request.addfinalizer(registry_module.default_registry.cache_clear)
    res = CliRunner().invoke(app, ["list"])
    assert f"cannot be imported: KeyError: 'hidden' (in {module}.<module>, line 3)" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    res = CliRunner().invoke(app, ["--debug", "list"])
    assert "Traceback (most recent call last)" in res.stderr and f"{module}.py\", line 3" in res.stderr, res.stderr


def test_debug_validate_shows_the_traceback_of_draftsmiths_error_and_goes_on(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ndraft: {norm: {kind: nosuch}}\n")
    plain = CliRunner().invoke(app, ["validate", str(bad), "demo"])
    shown = CliRunner().invoke(app, ["--debug", "validate", str(bad), "demo"])
    assert plain.exit_code == shown.exit_code == 1
    assert "Traceback" not in plain.stderr and "Traceback (most recent call last)" in shown.stderr
    assert "demo: ok" in shown.stdout and "nosuch" in shown.stderr


def test_an_attribute_a_factory_misnames_gets_the_closest_one():
    """Python's 'Did you mean' is in its traceback, not in str(): a factory reading dims.intermediate_size was told
    only that Dims has no such attribute."""
    from transformers import LlamaConfig

    from draftsmith.components.dims import Dims

    def gelu_mlp(params, *, dims):
        return dims.intermediate_size

    reg = fresh(("loc", Plugin([Component("mlp", "gelu", gelu_mlp)])))
    with pytest.raises(ComponentFailed) as info:
        reg.build("mlp", "gelu", None, dims=Dims.from_config(LlamaConfig(hidden_size=16, intermediate_size=32,
                                                                         num_attention_heads=2)))
    assert ("failed to build: AttributeError: 'Dims' object has no attribute 'intermediate_size'. Did you mean "
            f"'intermediate'? (in {HERE}.{gelu_mlp.__qualname__}, line") in str(info.value), str(info.value)


def test_a_key_a_plugins_params_refuse_names_whose_params_they_are(tmp_path):
    """A typo'd key of a plugin's component listed the allowed keys without saying whose model they are (the author
    of a spec and of the plugin may differ: the plugin's docs are where to look)."""
    import draftsmith
    from draftsmith.components.norms import rms
    from draftsmith.errors import SpecError

    from test_plugin_mistakes import OffsetParams, spec_file

    reg = fresh(("offsetnorm", Plugin([Component("norm", "offset_rms", rms, OffsetParams)])))
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(spec_file(tmp_path, {"kind": "offset_rms", "ofset": 0.5}), reg)
    assert "draft.norm.ofset: unknown field 'ofset'. Did you mean 'offset'?" in str(info.value)
    assert "allowed: offset (the params of norm 'offset_rms', from plugin 'offsetnorm')" in str(info.value), \
        str(info.value)


def no_such_key(params):
    return params["nosuch"]


def test_a_raising_holds_is_located_in_its_own_code_and_pluggys_frames_are_no_plugins():
    """Review of round 28: a holds() that raised was located by the factory's package (none for a plugin that
    registers draftsmith's own gqa factory), and a hook caller's code (pluggy's, through a plugin's hook wrapper)
    was named as the plugin's line; a SyntaxError's text already says where."""
    from draftsmith.components.gqa import gqa
    from draftsmith.components.params import GQAParams
    from draftsmith.registry.checks import raised

    reg = fresh(("p", Plugin([Component("attention", "mygqa", gqa, GQAParams, holds=no_such_key)])))
    with pytest.raises(ComponentFailed) as info:
        reg.holds("attention", "mygqa", {}, ())
    assert str(info.value).endswith(f"holds(params) failed: KeyError: 'nosuch' (in {HERE}.no_such_key, line "
                                    f"{no_such_key.__code__.co_firstlineno + 1})"), str(info.value)
    try:
        no_such_key({})
    except KeyError as e:
        assert raised(e, "pluggy._hooks") == "KeyError: 'nosuch'"
    try:
        compile("def (", "hooks.py", "exec")
    except SyntaxError as e:
        assert raised(e, HERE) == f"SyntaxError: {e}"


def test_an_mla_draft_holding_q_biases_gets_no_note_naming_a_field_it_lacks(tmp_path):
    """MLA's params have no qkv_bias: the note told the user to set draft.attention.qkv_bias: true, itself a spec
    error (review of round 28)."""
    import warnings

    import torch
    from safetensors.torch import load_file, save_file

    import draftsmith
    from draftsmith.errors import DraftsmithError
    from draftsmith.testing import write_target
    from draftsmith.testing.mla import write_mla_eagle

    target = write_target(tmp_path / "t")
    draft = write_mla_eagle(tmp_path / "d", target, q_lora_rank=None)
    f = next(draft.glob("*.safetensors"))
    tensors = load_file(str(f))
    for n in [n for n in tensors if n.endswith("self_attn.q_proj.weight")]:
        tensors[n[:-6] + "bias"] = torch.zeros(tensors[n].shape[0])
    save_file(tensors, str(f), metadata={"format": "pt"})
    with warnings.catch_warnings(), pytest.raises(DraftsmithError) as info:
        warnings.simplefilter("ignore")
        draftsmith.assemble("eagle-mla-deepseek", target=target, draft=draft)
    assert "q_proj.bias" in str(info.value)
    assert not [n for n in getattr(info.value, "__notes__", []) if "qkv_bias" in n], info.value.__notes__
