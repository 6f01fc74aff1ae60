"""What a YAML author met (a review, written as a user adding a family by spec): a ``${key}`` no config key fills,
a reduced draft sharing the target's head, ``attention: {kind: auto}`` params checked against gqa only, FP8
``quant.modules`` that quantize nothing, and a count conflict blamed on a field the spec never wrote. Each is now a
SpecError naming the spec file and the dotted path, raised before any tensor is read."""

import pytest
import yaml
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import edit_config, write_eagle3, write_target
from draftsmith.testing.mla import write_mla_eagle

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=8,
             vocab_size=96)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("review-yaml")
    write_target(root / "target", **SMALL)
    write_eagle3(root / "draft", root / "target", aux_ids=[1, 3, 5])
    write_eagle3(root / "reduced", root / "target", aux_ids=[1, 3, 5], draft_vocab=48)
    return root


def spec_file(path, base="eagle3-llama.yaml", **edits):
    data = yaml.safe_load((BUILTIN_DIR / base).read_text())
    data["name"] = "probe"
    for dotted, value in edits.items():
        *head, last = dotted.split(".")
        node = data
        for key in head:
            node = node.setdefault(key, {})
        node[last] = value
    path.write_text(yaml.safe_dump(data))
    return path


def same_as_target_only(model):
    a = model.generate([[1, 2, 3]], max_new_tokens=8)
    return a[0].token_ids == model.generate_baseline([[1, 2, 3]], max_new_tokens=8)[0].token_ids


def test_an_unbound_placeholder_is_a_spec_error_at_the_cli_too(root, tmp_path):
    # validate printed "ok" then "internal error: ValueError"; generate exited 70
    spec = spec_file(tmp_path / "ph.yaml", **{"weights.rules": [{"match": r"^midlayer${num_layer}\.",
                                                                 "replace": "layers.0."}]})
    res = CliRunner().invoke(app, ["generate", "--spec", str(spec), "--target", str(root / "target"), "--draft",
                                   str(root / "draft"), "--token-ids", "1,2,3", "--max-new-tokens", "4",
                                   "--no-compare"], env={"COLUMNS": "1000"})
    assert res.exit_code == 1, res.output
    assert "weights.rules.0: ${num_layer} cannot be bound: the draft's config has no 'num_layer'" in res.output
    assert str(spec) in res.output and "internal error" not in res.output


def test_a_reduced_draft_sharing_the_targets_head_is_refused_by_name(root, tmp_path):
    # it assembled and validated, then generate raised IndexError (the 96-wide head indexed into 48 d2t entries)
    edits = {"draft.share": {"embed": "target", "lm_head": "target"},
             "weights.ignore": [r"^(model\.)?embed_tokens\.weight$", r"^lm_head\.weight$"]}
    said = (r"draft.share.lm_head: target: the draft's vocabulary is reduced "
            r"\(its config's draft_vocab_size 48 is below the target's 96 ids\)")
    with pytest.raises(draftsmith.SpecError, match=said):
        draftsmith.assemble(spec_file(tmp_path / "s.yaml", **edits), target=root / "target", draft=root / "reduced")
    unsized = edit_config(root / "reduced", tmp_path / "unsized", drop=["draft_vocab_size"])   # d2t alone says so
    with pytest.raises(draftsmith.SpecError, match=r"reduced \(the draft holds d2t\)"):
        draftsmith.assemble(spec_file(tmp_path / "s.yaml", **edits), target=root / "target", draft=unsized)
    full = draftsmith.assemble(spec_file(tmp_path / "f.yaml", **edits), target=root / "target", draft=root / "draft")
    assert same_as_target_only(full)   # the full vocabulary shares the target's head as before


def test_attention_auto_params_suit_either_kind_and_are_checked_against_the_one_chosen(root, tmp_path):
    mla = write_mla_eagle(tmp_path / "mla", root / "target")
    base = "eagle-mla-deepseek.yaml"
    ok = spec_file(tmp_path / "ok.yaml", base, **{"draft.attention": {"kind": "auto", "rope": "auto"}})
    assert same_as_target_only(draftsmith.assemble(ok, target=root / "target", draft=mla))   # mla's own value
    gqa_only = spec_file(tmp_path / "g.yaml", base, **{"draft.attention": {"kind": "auto", "qkv_bias": False}})
    draftsmith.load_spec(gqa_only)   # suits gqa: which kind auto is depends on the checkpoint
    with pytest.raises(draftsmith.SpecError, match=r"draft.attention.qkv_bias: unknown field 'qkv_bias' \(kind auto "
                                                   r"is mla for this draft: its config has MLA fields\)"):
        draftsmith.assemble(gqa_only, target=root / "target", draft=mla)
    with pytest.raises(draftsmith.SpecError, match="draft.attention"):   # suits neither
        draftsmith.load_spec(spec_file(tmp_path / "n.yaml", base, **{"draft.attention": {"kind": "auto", "x": 1}}))


def test_fp8_modules_that_quantize_nothing_are_refused_with_the_names_they_search(root, tmp_path):
    spec = spec_file(tmp_path / "q.yaml", quant={"method": "fp8", "scheme": "tensor", "modules": [r"^midlayer\."]})
    with pytest.raises(draftsmith.SpecError) as err:   # was a silent no-op: the draft loaded unquantized
        draftsmith.assemble(spec, target=root / "target", draft=root / "draft")
    text = str(err.value)
    assert str(spec) in text and "quant.modules: quantize no Linear of the draft" in text
    assert "'layers.0.self_attn.q_proj'" in text


def test_an_aux_count_conflict_names_the_config_key_that_asked(root, tmp_path):
    draft = edit_config(root / "draft", tmp_path / "naux", num_aux_hidden_states=2)
    spec = spec_file(tmp_path / "a.yaml", **{"draft.fusion.aux_layers": {"ids": [1, 3, 5]}})
    with pytest.raises(draftsmith.SpecError, match=r"2 aux states asked for by the draft config's "
                                                   r"num_aux_hidden_states but the spec gives \[1, 3, 5\]"):
        draftsmith.assemble(spec, target=root / "target", draft=draft)
