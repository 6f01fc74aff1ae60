"""A plugin's norm or mlp that its kind cannot use is refused when it is built, naming the plugin (kinds.probe):
a norm without `weight` [dim] failed as a checkpoint that did not fit ('missing layers.0.input_layernorm.gamma'),
and a block whose output has another width failed in draftsmith's attention as an internal error (exit 70)."""
import pytest
import torch
from torch import nn

from draftsmith.components.norms import rms
from draftsmith.hooks import Component
from draftsmith.hooks.kinds import keeps_width
from draftsmith.registry import ComponentFailed

from test_plugin_mistakes import OffsetParams, assemble_with, pair  # noqa: F401  (pair: the module's fixture)
from test_plugins import Plugin, fresh


class Narrow(nn.Module):
    """An RMSNorm whose output drops the last channel."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return (x * self.weight)[..., :-1]


class Gamma(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * self.gamma


class Item(nn.Module):
    """Data-dependent code, which the meta device cannot run: not judged by the probe."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * self.weight * float(x.abs().max().item() >= 0)


@pytest.mark.parametrize("module, says", [
    (Narrow, r"its forward maps a \[1, 2, 16\] float32 input to \[1, 2, 15\]; a norm keeps its input's shape"),
    (Gamma, r"its weight parameter is none; a norm holds `weight` \[16\], where the checkpoint's norm tensor loads"),
    (lambda dim: rms(OffsetParams(), dim=dim * 2, eps=1e-6),
     r"its weight parameter is \[32\]; a norm holds `weight` \[16\], where the checkpoint's norm tensor loads"),
])
def test_a_plugin_norm_its_kind_cannot_use_is_named_when_built(tmp_path, pair, module, says):  # noqa: F811
    with pytest.raises(ComponentFailed, match=r"^norm 'offset_rms' \(plugin 'offsetnorm'\): its factory returned "
                                              rf".*\({says}\); the assembler calls it as"):
        assemble_with(tmp_path, pair, lambda params, *, dim, eps: module(dim))


def test_a_plugin_norm_the_meta_device_cannot_run_is_left_to_the_run(tmp_path, pair):  # noqa: F811
    model = assemble_with(tmp_path, pair, lambda params, *, dim, eps: Item(dim))
    assert model.generate([1, 2, 3], max_new_tokens=3, stop=[]).token_ids == \
        model.generate_baseline([1, 2, 3], max_new_tokens=3, stop=[]).token_ids


class Shrink(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.inner = nn.Linear(dims.hidden, dims.hidden // 2)

    def forward(self, x):
        return self.inner(x)


def test_a_plugin_mlp_that_changes_the_width_is_named_when_built(tmp_path, pair):  # noqa: F811
    import yaml

    import draftsmith
    from test_plugin_mistakes import spec_file

    reg = fresh(("shrink", Plugin([Component("mlp", "shrink", lambda params, *, dims: Shrink(dims))])))
    path = spec_file(tmp_path, {"kind": "rms"})
    data = yaml.safe_load(path.read_text())
    data["draft"]["mlp"] = {"kind": "shrink"}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ComponentFailed, match=r"^mlp 'shrink' \(plugin 'shrink'\): its factory returned a Shrink "
                                              r"\(its forward maps a \[1, 2, 16\] float32 input to \[1, 2, 8\]; an "
                                              r"mlp keeps its "
                                              r"input's shape\)"):
        draftsmith.assemble(draftsmith.load_spec(path, reg), target=pair[0], draft=pair[1], registry=reg)


def test_keeps_width_runs_where_the_parameters_are():
    assert keeps_width(nn.Linear(4, 4), 4, "a block") is None
    assert keeps_width(nn.Linear(4, 3, device="meta"), 4, "a block").startswith(
        "its forward maps a [1, 2, 4] float32 input to [1, 2, 3]")
    assert keeps_width(nn.Linear(5, 4), 4, "a block") is None   # its forward raises: not judged


class Boom(nn.Module):
    """A norm whose forward raises once it decodes (the build's probe on the meta device passes)."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        if x.is_meta:
            return x * self.weight
        raise RuntimeError("the plugin's own bug")


class Local(Plugin):
    """A plugin object of this module, as an installed plugin's module holds its components."""


def test_a_plugins_code_raising_while_decoding_is_said_as_the_plugins_not_an_internal_error(
        tmp_path, pair, monkeypatch, request):  # noqa: F811
    from typer.testing import CliRunner

    from draftsmith.cli import USER_ERROR, app
    from test_plugin_mistakes import installed, spec_file

    reg = fresh(("boomnorm", Local([Component("norm", "boom", lambda params, *, dim, eps: Boom(dim))])))
    installed(reg, monkeypatch, request)
    res = CliRunner().invoke(app, ["generate", "--spec", str(spec_file(tmp_path, {"kind": "boom"})), "--target",
                                   str(pair[0]), "--draft", str(pair[1]), "--token-ids", "1,2", "--no-compare"])
    assert res.exit_code == USER_ERROR, res.output
    assert "error: plugin 'boomnorm' (in test_plugin_probes.Boom.forward, line " in res.stderr
    assert "raised RuntimeError: the plugin's own bug" in res.output and "internal error" not in res.output


def test_draftsmiths_own_code_is_never_blamed_on_a_plugin(monkeypatch, request):
    """A plugin registered from a module inside the draftsmith package (as a test may) does not make draftsmith's
    own frames a plugin's: such an exception stays an internal error; a plugin's error is said on stderr."""
    import types

    from typer.testing import CliRunner

    import draftsmith.specs.loader as loader
    from draftsmith.cli import app
    from draftsmith.hooks import hookimpl
    from test_plugin_mistakes import installed

    inside = types.ModuleType("draftsmith.inside_plugin")
    inside.draftsmith_components = hookimpl(lambda: [])
    installed(fresh(("inside", inside)), monkeypatch, request)
    import draftsmith.registry as registry_module
    registry_module.default_registry()   # built, as before a command's own code runs

    def bug(*_a, **_k):
        raise RuntimeError("draftsmith's own bug")

    monkeypatch.setattr(loader, "parse_spec", bug)
    res = CliRunner().invoke(app, ["generate", "--spec", "demo", "--token-ids", "1,2"])
    assert res.exit_code == 70 and "internal error: RuntimeError: draftsmith's own bug" in res.stderr, res.output
    assert "plugin" not in res.output


class ThreeD(nn.Module):
    """An MLP written for [B, T, H] input (it unpacks three sizes) that forgot its down projection."""

    def __init__(self, dims):
        super().__init__()
        self.up_proj = nn.Linear(dims.hidden, dims.hidden * 2, bias=False)

    def forward(self, x):
        b, t, h = x.shape
        return self.up_proj(x)


class Upcast(nn.Module):
    """A norm that computes in float32 and does not cast back: every float32 run passes."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x.float() * self.weight.float()


def test_the_probe_passes_what_the_draft_passes_and_checks_the_dtype():
    """The probe was a [2, H] float32 input (round 28, a plugin author's walk-through): a module written for
    [B, T, H] raised on it and was not judged, and one that returns float32 for bfloat16 passed; both failed mid-
    decode (the second only under --dtype bfloat16)."""
    from types import SimpleNamespace

    with torch.device("meta"):
        three_d, upcast = ThreeD(SimpleNamespace(hidden=16)), Upcast(16)
    assert keeps_width(three_d, 16, "an mlp") == ("its forward maps a [1, 2, 16] float32 input to [1, 2, 32]; an mlp "
                                                  "keeps its input's shape")
    assert keeps_width(upcast, 16, "a norm") == ("its forward maps a [1, 2, 16] bfloat16 input to float32; a norm "
                                                 "returns its input's dtype (cast the result back)")
    assert upcast.weight.dtype == torch.float32 and isinstance(upcast.weight, nn.Parameter)   # put back as it was
    assert keeps_width(Upcast(16), 16, "a norm") is None   # off meta: its own dtype alone is judged (no data moved)


def test_a_plugin_norm_that_does_not_cast_back_is_named_when_built(tmp_path, pair):  # noqa: F811
    with pytest.raises(ComponentFailed, match=r"^norm 'offset_rms' \(plugin 'offsetnorm'\): its factory returned "
                                              r".*bfloat16 input to float32; a norm returns its input's dtype"):
        assemble_with(tmp_path, pair, lambda params, *, dim, eps: Upcast(dim))
