"""convert's last line never names a spec that builds another draft than the one its source was read as.

A plugin family's draft (detected by its plugin, read with a spec whose norm is the plugin's, `scale: 2.0`) converted
to `layers` is detected there as eagle3-llama, whose rules read those names; the line named eagle3-llama (and said
to omit --spec) although that spec builds an RMS norm: a different draft, decoding otherwise. The line now compares
what the two specs build (components, their params, norms, fusion, vocab, share, quant; not the tensor names) and
names a spec that builds the source's draft from the written names. The built-in families' lines are unchanged
(tests/convert/test_convert.py and test_convert_review.py pin them).
"""
from pathlib import Path

import pytest
import torch
import yaml
from pydantic import BaseModel, ConfigDict
from torch import nn
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.convert.run import convert, loading_line
from draftsmith.convert.same_draft import build_differences
from draftsmith.hooks import Component, LayoutMatch, SpecSource, hookimpl
from draftsmith.registry import registry as registry_module
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.specs.loader import parse_spec
from draftsmith.testing import write_eagle3, write_target
from test_convert_review import rewrite


class ScaleParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    scale: float = 1.0


class ScaledRMS(nn.Module):
    """RMSNorm times a constant: with scale 2.0 a different draft than `norm: rms` from the same weights."""

    def __init__(self, dim, eps, scale):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps, self.scale = eps, scale

    def forward(self, x):
        y = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float() * self.scale).to(x.dtype)


class Plugin:
    """The scaled norm, a spec using it, and a detector answering it for drafts that hold `fuse.proj.weight`."""

    def __init__(self, spec_path):
        self.spec_path = spec_path

    @hookimpl
    def draftsmith_components(self):
        return [Component("norm", "scalenorm", lambda params, *, dim, eps: ScaledRMS(dim, eps, params.scale),
                          ScaleParams, doc="RMSNorm times a constant")]

    @hookimpl
    def draftsmith_specs(self):
        return [SpecSource("scale-draft", self.spec_path)]

    @hookimpl
    def draftsmith_detect_layout(self, config, tensor_names):
        if "fuse.proj.weight" in tensor_names:
            return LayoutMatch(spec="scale-draft", reason="fuse.proj + midlayer")
        return None


def installed(tmp_path, monkeypatch, request, ignore=()):
    """A registry with the plugin (its spec: eagle3-llama's, its norm the plugin's at scale 2.0, fuse.proj read as
    fc, ``ignore`` added to its ignore rules) made what default_registry() returns until the test ends."""
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    data["name"], data["draft"]["norm"] = "scale-draft", {"kind": "scalenorm", "scale": 2.0}
    data["weights"]["rules"] = [{"match": r"^fuse\.proj\.", "replace": "fc."}, *data["weights"]["rules"]]
    data["weights"]["ignore"] = [*data["weights"]["ignore"], *ignore]
    path = tmp_path / "scale-draft.yaml"
    path.write_text(yaml.safe_dump(data))
    reg = draftsmith.build_registry(plugins=[("scalenorm", Plugin(path))], entry_points=False)
    monkeypatch.setattr(registry_module, "build_registry", lambda **_: reg)
    registry_module.default_registry.cache_clear()
    request.addfinalizer(registry_module.default_registry.cache_clear)
    return reg


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("t") / "t", num_hidden_layers=7)


def plugin_draft(folder, target):
    """An EAGLE-3 draft in the plugin's names: the midlayer layout with fc stored as fuse.proj."""
    src = write_eagle3(folder, target)
    rewrite(src, lambda t: {("fuse.proj.weight" if k == "fc.weight" else k): v for k, v in t.items()})
    return src


def same_draft(spec, source_spec, target, out, src):
    """Whether ``spec`` builds from ``out`` the draft ``source_spec`` builds from ``src``: the same modules (their
    norms' scales included) holding the same tensors."""
    def built(spec, folder):
        draft = draftsmith.assemble(spec, target=target, draft=folder, dtype="float64").draft
        return [(n, type(m).__name__, getattr(m, "scale", None)) for n, m in draft.named_modules()], draft.state_dict()

    (mods, state), (want_mods, want_state) = built(spec, out), built(source_spec, src)
    return mods == want_mods and state.keys() == want_state.keys() and all(
        torch.equal(state[k], want_state[k]) for k in state)


def last_line(result):
    return next(line for line in result.output.splitlines() if line.startswith("# "))


def test_a_plugin_drafts_line_names_its_own_spec_not_the_one_that_builds_an_rms_norm(target, tmp_path, monkeypatch,
                                                                                      request):
    installed(tmp_path, monkeypatch, request)
    src, out = plugin_draft(tmp_path / "src", target), tmp_path / "out"
    res = CliRunner().invoke(app, ["convert", str(src), "--to", "layers", str(out)])
    assert res.exit_code == 0, res.output
    line = last_line(res)
    assert "load it with spec eagle3-llama" not in line and "omit --spec" not in line, line
    assert "load it with spec scale-draft, the spec its source was read with; detection proposes spec eagle3-llama " \
           "for it" in line, line
    assert line.endswith("which builds another draft (draft.norm: 'rms', "
                         "not 'scalenorm' (scale: 2.0))"), line
    assert inspect_checkpoint(out).match.spec == "eagle3-llama"   # what generate --draft alone would take
    assert same_draft("scale-draft", "scale-draft", target, out, src)
    assert not same_draft("eagle3-llama", "scale-draft", target, out, src)


def test_where_the_source_spec_does_not_read_the_new_names_its_weights_are_the_new_layouts(target, tmp_path,
                                                                                            monkeypatch, request):
    """The plugin spec drops a stray fc.weight (its drafts store fuse.proj): it cannot read the layers layout's fc,
    so the line names the source's spec with the written folder's weights section, and that spec builds the
    source's draft."""
    installed(tmp_path, monkeypatch, request, ignore=[r"^fc\.weight$"])
    src, out = plugin_draft(tmp_path / "src", target), tmp_path / "out"
    res = CliRunner().invoke(app, ["convert", str(src), "--to", "layers", str(out)])
    assert res.exit_code == 0, res.output
    line = last_line(res)
    assert line.endswith(f"load it with the spec `draftsmith inspect {src}` prints (scale-draft's, as its source was "
                         f"read), its weights section replaced by the one `draftsmith inspect {out}` prints; detection "
                         "proposes spec eagle3-llama for it (generate --draft takes it without --spec), which builds "
                         "another draft (draft.norm: 'rms', "
                         "not 'scalenorm' (scale: 2.0))"), line
    data = inspect_checkpoint(src).spec | {"weights": inspect_checkpoint(out).spec["weights"]}
    spec = parse_spec(data | {"checkpoints": {**data["checkpoints"], "draft": str(out)}})
    assert same_draft(spec, "scale-draft", target, out, src)


def test_the_source_can_be_given_and_a_built_in_source_keeps_todays_line(target, tmp_path):
    src = write_eagle3(tmp_path / "src", target)
    convert(src, "layers", tmp_path / "out")
    line = loading_line(tmp_path / "out", source=inspect_checkpoint(src))
    assert line == "load it with spec eagle3-llama (or omit --spec: generate --draft detects it)"


def test_a_param_stated_at_its_default_or_the_rope_order_is_no_difference():
    """EAGLE-1's fusion `embed_norm: false` against a spec that leaves it out builds the same fc; the rope order is
    the rows convert moves; a ConfigFirst flag left out is not filled with its default (the config decides)."""
    e1 = {"draft": {"fusion": {"kind": "eagle1", "bias": "auto"}, "attention": {"kind": "gqa", "rope": "neox"}}}
    stated = {"draft": {"fusion": {"kind": "eagle1", "bias": "auto", "embed_norm": False},
                        "attention": {"kind": "gqa", "rope": "interleaved"}}}
    assert build_differences(e1, stated) == [] == build_differences(stated, e1)
    assert build_differences(e1, {"draft": {**stated["draft"], "fusion": {"kind": "eagle1", "embed_norm": True}}}) \
        == [("draft.fusion.embed_norm", False, True)]
    e3 = {"draft": {"fusion": {"kind": "eagle3", "norm_before_residual": False}}}
    assert build_differences(e3, {"draft": {"fusion": {"kind": "eagle3", "norm_before_residual": True}}}) == [
        ("draft.fusion.norm_before_residual", False, True)]
    # another component (here one no plugin registers) is one difference, said with the params its spec states
    # (no default added: rms's offset / float32_weight unstated stay unsaid)
    plugin = {"draft": {"norm": {"kind": "scalenorm", "scale": 2.0}}}
    assert build_differences({"draft": {"norm": {"kind": "rms"}}}, plugin) == [
        ("draft.norm", {"kind": "rms"}, {"kind": "scalenorm", "scale": 2.0})]
    other = {"draft": {"norm": {"kind": "scalenorm"}}}
    assert build_differences({"draft": {"norm": {"kind": "rms", "offset": 1.0}}}, other) == [
        ("draft.norm", {"kind": "rms", "offset": 1.0}, {"kind": "scalenorm"})]


def test_a_difference_line_says_values_as_a_reader_reads_them_and_cuts_after_four(monkeypatch):
    from types import SimpleNamespace

    from draftsmith.convert import same_draft

    monkeypatch.setattr(same_draft, "source_reading", lambda found, source: "load it with spec src")
    differ = [(f"draft.x{i}", None, {"kind": "scalenorm", "scale": 2.0}) for i in range(5)]
    line = same_draft.other_draft_line(SimpleNamespace(match=SimpleNamespace(spec="eagle3-llama")), None, differ)
    assert line.startswith("load it with spec src; detection proposes spec eagle3-llama for it")
    assert "draft.x0: 'scalenorm' (scale: 2.0), not unstated" in line and "draft.x3" in line
    assert "draft.x4" not in line and line.endswith("; ...)")
    line = same_draft.other_draft_line(SimpleNamespace(match=SimpleNamespace(spec="e")), None, differ[:4])
    assert not line.endswith("; ...)") and "x3: 'scalenorm' (scale: 2.0), not unstated)" in line


def test_a_draft_read_with_absolute_d2t_converts_to_offsets_and_names_the_family_spec(tmp_path):
    """convert writes d2t as offsets (the published convention): the spec detected for the result (d2t: offset)
    reads it, so the line names it, not the source's d2t: absolute reading, which refuses the written offsets."""
    from safetensors.torch import load_file, save_file

    demo = Path(draftsmith.__file__).parent / "demo_data"
    src = tmp_path / "abs"
    src.mkdir()
    tensors = load_file(str(demo / "draft" / "model.safetensors"))
    offsets = tensors["d2t"].clone()
    tensors["d2t"] = offsets + torch.arange(offsets.numel())   # target ids
    save_file(tensors, str(src / "model.safetensors"))
    (src / "config.json").write_text((demo / "draft" / "config.json").read_text())
    assert inspect_checkpoint(src).spec["draft"]["vocab"]["d2t"] == "absolute"
    res = CliRunner().invoke(app, ["convert", str(src), "--to", "layers", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert last_line(res).endswith("load it with spec eagle3-llama (or omit --spec: generate --draft detects it)")
    assert torch.equal(load_file(str(tmp_path / "out" / "model.safetensors"))["d2t"], offsets)
