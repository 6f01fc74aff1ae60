"""A spec with split rules (a fused qkv_proj / gate_up_proj layout) is refused by train's preflight, with its
other problems and before any work: the export cannot fuse the trained parts back, and used to fail only then."""
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.specs.loader import load_spec
from draftsmith.train.draft_io import export_refusals

SPLIT = ("weights:\n  rules:\n"
         "    - {kind: split, match: '^(layers\\.\\d+)\\.mlp\\.gate_up_proj\\.', "
         "into: ['\\1.mlp.gate_proj.', '\\1.mlp.up_proj.']}\n")


def split_spec(tmp_path):
    text = open(load_spec("eagle3-llama").source).read().replace("name: eagle3-llama", "name: fused")
    assert "\nweights:" in text
    head, _, tail = text.partition("\nweights:")
    # the spec's own weights section, with a split rule put first in its rules
    text = head + "\nweights:" + tail.replace("rules:\n", "rules:\n" + SPLIT.split("rules:\n")[1], 1)
    (tmp_path / "fused.yaml").write_text(text)
    assert "kind: split" in text
    return tmp_path / "fused.yaml"


def test_export_refusals_names_the_split_rules(tmp_path):
    assert export_refusals(load_spec("eagle3-llama")) == []
    (why,) = export_refusals(load_spec(split_spec(tmp_path)))
    assert why.startswith("1 split rule(s) in weights.rules: ") and "without its split rules" in why


def test_train_refuses_a_split_spec_in_preflight(tiny, tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["train", "--out", str(out), "--target", str(tiny / "target"), "--data",
                                   str(tmp_path / "missing"), "--spec", str(split_spec(tmp_path)), "--seq", "48",
                                   "--steps", "1"])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "train cannot export a draft with 1 split rule(s) in weights.rules" in text, text
    assert "train with the same spec without its split rules" in text
    assert "no such file or folder" in text          # with train's other preflight problems
    assert "internal error" not in text and not out.exists()


def test_a_plugin_rule_that_splits_is_refused_as_the_builtin_kind_is(tmp_path, monkeypatch):
    # the refusal matched the kind's name ('split'): a plugin kind building a SplitRule reached the export after the
    # data was read and the draft trained (a dogfooding helper)
    from pydantic import BaseModel, ConfigDict

    import draftsmith
    from draftsmith.components.split_rule import SplitRule
    from draftsmith.hooks import Component, hookimpl

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

    class Plugin:
        @hookimpl
        def draftsmith_components(self):
            return [Component("weight_rule", "phi3_gate_up", lambda params: SplitRule(
                match=r"^(layers\.\d+)\.mlp\.gate_up_proj\.", into=(r"\1.mlp.gate_proj.", r"\1.mlp.up_proj.")),
                Params)]

    reg = draftsmith.build_registry(plugins=[("fusedrules", Plugin())], entry_points=False)
    text = open(split_spec(tmp_path)).read().replace(
        "{kind: split, match: '^(layers\\.\\d+)\\.mlp\\.gate_up_proj\\.', into: ['\\1.mlp.gate_proj.', "
        "'\\1.mlp.up_proj.']}", "{kind: phi3_gate_up}")
    assert "kind: phi3_gate_up" in text
    (tmp_path / "plugin.yaml").write_text(text)
    monkeypatch.setattr("draftsmith.train.draft_io.default_registry", lambda: reg)   # the rules export builds
    (why,) = export_refusals(load_spec(tmp_path / "plugin.yaml", reg))
    assert why.startswith("1 split rule(s) in weights.rules: ")
