"""``extends:``: a spec written as its changes to a built-in, a plugin's spec or another YAML file: mappings merged
key by key, a component of another kind replacing the base's whole, name and description never inherited, a base's
relative checkpoints relative to the base's file, and a problem in an inherited value said at the spec's extends line
naming the base's file and line."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.errors import SpecError
from draftsmith.specs.extends import changes, merged, origin
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.specs.edits import spec_data


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_spec_extending_a_built_in_is_the_built_in_with_its_changes(tmp_path):
    mine = draftsmith.load_spec(write(tmp_path, "mine.yaml", "name: mine\nextends: eagle3-llama\n"
                                      "draft: {fusion: {norm_before_residual: true}}\ndecoding: {topk: 2}\n"))
    base = draftsmith.load_spec("eagle3-llama")
    assert (mine.name, mine.description, mine.decoding.topk) == ("mine", "", 2)
    assert mine.draft.fusion.norm_before_residual is True
    # everything it does not write is the base's, the fusion's other params included
    assert mine.draft.model_copy(update={"fusion": base.draft.fusion}) == base.draft
    assert mine.draft.fusion.model_copy(update={"norm_before_residual": False}) == base.draft.fusion
    assert (mine.weights, mine.quant) == (base.weights, base.quant)
    assert "extends" not in spec_data(mine)   # the merged spec is what is kept (doctor's edits re-read it)


def test_a_spec_that_extends_one_extending_another_takes_the_whole_chain(tmp_path):
    write(tmp_path, "a.yaml", "name: a\nextends: eagle3-llama\ndecoding: {topk: 2, steps: 3}\n")
    write(tmp_path, "sub/b.yaml", "name: b\nextends: ../a.yaml\ndecoding: {steps: 4}\n")
    c = draftsmith.load_spec(write(tmp_path, "c.yaml", "name: c\nextends: sub/b.yaml\n"))
    assert (c.name, c.decoding.topk, c.decoding.steps) == ("c", 2, 4)
    assert c.draft == draftsmith.load_spec("eagle3-llama").draft


@pytest.mark.parametrize("base, spec, want", [
    ({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}}, {"a": {"b": 1, "c": 3}}),
    ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),                                     # a list replaces
    ({"n": {"kind": "rms", "eps": 1}}, {"n": {"kind": "layer"}}, {"n": {"kind": "layer"}}),   # another kind
    ({"n": {"kind": "rms", "eps": 1}}, {"n": {"kind": "rms", "x": 2}}, {"n": {"kind": "rms", "eps": 1, "x": 2}}),
    ({"n": {"kind": "rms", "eps": 1}}, {"n": {"eps": 2}}, {"n": {"kind": "rms", "eps": 2}}),
    ({"q": {"method": "fp8"}}, {"q": None}, {"q": None}),                        # null replaces
])
def test_merging_is_by_key_for_mappings_of_one_kind(base, spec, want):
    assert merged(base, spec) == want


def test_a_component_of_another_kind_takes_none_of_the_bases_params(tmp_path):
    """eagle3-llama's attention is {kind: gqa, rope: neox}: a spec naming another kind gets only its own params; one
    naming the same kind (or none) keeps the base's."""
    other = draftsmith.load_spec(write(tmp_path, "m.yaml", "name: m\nextends: eagle3-llama\n"
                                       "draft: {attention: {kind: auto}}\n"))
    same = draftsmith.load_spec(write(tmp_path, "s.yaml", "name: s\nextends: eagle3-llama\n"
                                      "draft: {attention: {kind: gqa}}\n"))
    assert (other.draft.attention.kind, other.draft.attention.params) == ("auto", {})
    assert (same.draft.attention.kind, same.draft.attention.params) == ("gqa", {"rope": "neox"})


def test_name_and_description_are_never_inherited(tmp_path):
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(write(tmp_path, "m.yaml", "extends: eagle3-llama\n"))
    assert [p.path for p in info.value.problems] == ["name"]


def test_a_bases_relative_checkpoints_stay_relative_to_the_base(tmp_path):
    write(tmp_path, "pair/base.yaml", (BUILTIN_DIR / "eagle3-llama.yaml").read_text().replace(
        "name: eagle3-llama", "name: base") + "checkpoints: {draft: ./draft, target: 'cache:smollm2'}\n")
    mine = draftsmith.load_spec(write(tmp_path, "mine.yaml", "name: mine\nextends: pair/base.yaml\n"))
    assert Path(mine.checkpoints.draft) == tmp_path / "pair" / "draft"
    assert mine.checkpoints.target == "cache:smollm2"


def test_a_problem_in_an_inherited_value_is_said_at_extends_naming_the_base(tmp_path):
    write(tmp_path, "base.yaml", "name: base\ndraft:\n  fusion: {kind: eagle3, norm_before_residual: false,\n"
                                 "           aux_layers: {ids: [1, 2], at: sideways}}\ndecoding: {topk: 2}\n")
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(write(tmp_path, "bad.yaml", "name: bad\n\nextends: base.yaml\ndecoding: {topk: 0}\n"))
    by_path = {p.path: p for p in info.value.problems}
    at = by_path["draft.fusion.aux_layers.at"]
    assert (at.line, f"from the base {tmp_path / 'base.yaml'}, line 4" in at.message) == (3, True), at
    # written by both (the spec's value is the one checked): the spec's own line
    assert by_path["decoding.topk"].line == 4 and "from the base" not in by_path["decoding.topk"].message


@pytest.mark.parametrize("extends, said", [
    ("eagle3-lama", "no spec of that name"), ("nothere.yaml", "does not exist"), ("loop.yaml", "bases cannot loop"),
    ("m.yaml", "a spec cannot extend itself")])
def test_a_base_that_cannot_be_taken_is_a_problem_at_extends(tmp_path, extends, said):
    write(tmp_path, "loop.yaml", "name: loop\nextends: m.yaml\n")
    with pytest.raises(SpecError) as info:
        draftsmith.load_spec(write(tmp_path, "m.yaml", f"name: m\nextends: {extends}\n"))
    [p] = info.value.problems
    assert p.path == "extends" and said in p.message and p.line == 2, p


def test_a_chain_of_bases_is_bounded(tmp_path):
    """limits.EXTENDS_DEPTH bases load; one more is refused."""
    from draftsmith import limits

    n = limits.EXTENDS_DEPTH
    write(tmp_path, f"s{n}.yaml", (BUILTIN_DIR / "eagle3-llama.yaml").read_text())   # the last base extends nothing
    for i in range(n):
        write(tmp_path, f"s{i}.yaml", f"name: s{i}\nextends: s{i + 1}.yaml\n")
    assert draftsmith.load_spec(tmp_path / "s0.yaml").draft == draftsmith.load_spec("eagle3-llama").draft
    with pytest.raises(SpecError, match=f"more than {n} bases in one chain"):
        draftsmith.load_spec(write(tmp_path, "t.yaml", "name: t\nextends: s0.yaml\n"))


def test_validate_says_a_misspelt_base_with_the_files_other_problems(tmp_path):
    path = write(tmp_path, "m.yaml", "name: m\nextends: eagle3-lama\n")
    res = CliRunner().invoke(app, ["validate", str(path)])
    assert res.exit_code == 1 and "Did you mean 'eagle3-llama'?" in res.output, res.output


_leaf = st.one_of(st.integers(0, 3), st.sampled_from(["gqa", "mla", "rms"]), st.none(), st.lists(st.integers(0, 2),
                                                                                               max_size=2))
_key = st.sampled_from(["a", "b", "kind", "c"])
_doc = st.recursive(_leaf, lambda inner: st.dictionaries(_key, inner, max_size=4), max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_key, _doc, max_size=4), st.dictionaries(_key, _doc, max_size=4))
def test_changes_written_over_the_base_give_the_document_back(base, data):
    """The inverse of the merge: for a document holding every top-level key of the base (a whole spec's dump does),
    writing changes(base, data) over the base gives data, whatever kinds, nesting, lists and nulls it holds, unless
    the document drops a key of a mapping the merge would merge into (no spec text can: inspect writes it whole)."""
    def drops(base, data) -> bool:
        return any(isinstance(v, dict) and isinstance(base.get(k), dict) and base[k].get("kind", v.get("kind"))
                   == v.get("kind", base[k].get("kind")) and (set(base[k]) - set(v) or drops(base[k], v))
                   for k, v in data.items())

    data = {**base, **data}
    assert merged(base, changes(base, data)) == data or drops(base, data)


def test_changes_of_a_document_equal_to_its_base_are_nothing_and_a_change_is_only_itself():
    base = {"draft": {"attention": {"kind": "gqa", "rope": "neox"}, "fusion": {"kind": "eagle3", "fc_norm": False}}}
    assert changes(base, base) == {}
    data = {"draft": {"attention": {"kind": "gqa", "rope": "neox"}, "fusion": {"kind": "eagle3", "fc_norm": True}}}
    assert changes(base, data) == {"draft": {"fusion": {"fc_norm": True}}}
    other = {"draft": {"attention": {"kind": "mla"}, "fusion": base["draft"]["fusion"]}}
    assert changes(base, other) == {"draft": {"attention": {"kind": "mla"}}}


@pytest.mark.parametrize("make", ["eagle3", "eagle3-fc-norm", "eagle1", "mistral"])
def test_inspect_extends_prints_a_short_spec_that_loads_as_the_whole_one(tmp_path, make):
    from draftsmith.testing import write_eagle1, write_eagle3, write_target
    from draftsmith.testing.mistral import write_mistral_eagle

    target = write_target(tmp_path / "t")
    draft = {"eagle3": lambda p: write_eagle3(p, target, draft_vocab=50),
             "eagle3-fc-norm": lambda p: write_eagle3(p, target, fc_norm=True, aux_ids=[1, 3, 5]),
             "eagle1": lambda p: write_eagle1(p, target),
             "mistral": lambda p: write_mistral_eagle(p, target)}[make](tmp_path / "d")
    short, whole = (CliRunner().invoke(app, ["inspect", str(draft), *flag]) for flag in (["--extends"], []))
    assert short.exit_code == whole.exit_code == 0, short.output + whole.output
    assert "\nextends: " in short.stdout and len(short.stdout) < len(whole.stdout)
    specs = [draftsmith.load_spec(write(tmp_path, f"{i}.yaml", res.stdout)) for i, res in enumerate((short, whole))]
    assert specs[0].model_dump() == specs[1].model_dump()


def test_a_proposal_no_changes_can_give_is_printed_whole_and_said(capsys):
    """A proposal whose attention leaves out the family's rope (extends would keep it) cannot be written as changes:
    inspect --extends prints it whole, with a comment saying why."""
    from types import SimpleNamespace

    from draftsmith.cli.specs import _as_changes

    data = draftsmith.load_spec("eagle3-llama").model_dump(mode="json")
    data["draft"]["attention"] = {"kind": "gqa"}
    assert _as_changes(SimpleNamespace(spec=data, match=SimpleNamespace(spec="eagle3-llama"))) is data
    assert "# --extends: no changes to eagle3-llama give this spec" in capsys.readouterr().out
    data["draft"]["attention"] = {"kind": "gqa", "rope": "interleaved"}
    short = _as_changes(SimpleNamespace(spec=data, match=SimpleNamespace(spec="eagle3-llama")))
    assert short["draft"] == {"attention": {"rope": "interleaved"}} and short["extends"] == "eagle3-llama"


@pytest.mark.parametrize("path, want", [
    ("decoding.topk", 0),            # the spec's own value
    ("decoding.steps", 1),           # merged into the spec's decoding from the first base
    ("decoding.mode", 2),            # from the farthest
    ("draft.attention.rope", 0),     # another kind in the spec: the base's attention is gone, its rope too
    ("draft.norm.eps", 2),           # a mapping of one kind merged down the chain
    ("weights.rules.0.match", 1),    # a list: the nearest one's whole
    ("draft.fusion.kind", 2),        # a missing key: the nearest document that wrote its parent (draft.fusion)
    ("name", 0),                     # nowhere: the spec's own
])
def test_origin_is_the_document_whose_value_the_merge_keeps(path, want):
    spec = {"decoding": {"topk": 0}, "draft": {"attention": {"kind": "mla"}}}
    base = {"decoding": {"steps": 3}, "draft": {"norm": {"kind": "rms"}}, "weights": {"rules": [{"match": "a"}]}}
    farther = {"decoding": {"steps": 4, "mode": "auto"}, "draft": {"attention": {"kind": "gqa", "rope": "neox"},
                                                                   "norm": {"eps": 1}, "fusion": {"aux": 1}},
               "weights": {"rules": [{"match": "b"}, {"match": "c"}]}}
    assert origin([spec, base, farther], path) == want


def test_generate_runs_a_spec_extending_the_demo_and_names_its_base(tmp_path):
    path = write(tmp_path, "mine.yaml", "name: mine\nextends: demo\ndecoding: {topk: 2, steps: 2, draft_tokens: 3}\n")
    res = CliRunner().invoke(app, ["generate", "--spec", str(path), "--max-new-tokens", "4", "--no-compare",
                                   "--token-ids", "1,2,3"])
    assert res.exit_code == 0 and "(extends demo)" in res.output and "topk 2" in res.output, res.output
