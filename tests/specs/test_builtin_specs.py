"""Meta-tests: every YAML file shipped under draftsmith/specs/builtin is a valid, listed, loadable spec."""
import pytest

import draftsmith
from draftsmith.specs.catalog import BUILTIN_DIR

FILES = sorted(BUILTIN_DIR.glob("*.y*ml"))


def test_there_are_builtin_specs():
    assert {"demo", "eagle1-llama", "eagle3-llama", "eagle3-speculators", "eagle3.1-llama", "eagle3-norm-before-fc",
            "eagle-mistral"} <= {f.stem for f in FILES}


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_builtin_spec_loads_by_name_and_by_path(path, registry):
    by_name = draftsmith.load_spec(path.stem, registry=registry)
    by_path = draftsmith.load_spec(path, registry=registry)
    assert by_name.name == path.stem == by_path.name
    assert by_name == by_path and by_name.source == str(path)
    assert by_name.description  # `draftsmith list` shows it
    assert path.stem in draftsmith.list_specs(registry)
    assert registry.specs[path.stem].plugin == "builtin"


def test_list_specs_is_exactly_the_builtin_files(registry):
    assert draftsmith.list_specs(registry) == sorted(f.stem for f in FILES)


def test_default_registry_lists_and_loads_the_builtins():
    assert {f.stem for f in FILES} <= set(draftsmith.list_specs())
    assert draftsmith.load_spec("eagle1-llama").name == "eagle1-llama"


def test_load_spec_passes_a_spec_object_through(registry):
    spec = draftsmith.load_spec("eagle3-llama", registry=registry)
    assert draftsmith.load_spec(spec, registry=registry) is spec


def test_unknown_spec_name_suggests_a_close_one(registry):
    with pytest.raises(LookupError, match=r"no spec named 'eagle3-lama'.*Did you mean 'eagle3-llama'\?"):
        draftsmith.load_spec("eagle3-lama", registry=registry)


def test_missing_yaml_file(tmp_path, registry):
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        draftsmith.load_spec(tmp_path / "nope.yaml", registry=registry)


@pytest.mark.parametrize("part, field", [(lambda s: s.draft.norms, "input"), (lambda s: s.draft.fusion, "kind"),
                                         (lambda s: s.weights.rules[0], "kind"), (lambda s: s.quant, "method")],
                         ids=["norms", "component", "weight-rule", "quant"])
def test_specs_are_frozen_down_to_component_references_and_rules(registry, part, field):
    spec = draftsmith.load_spec("eagle3-llama", registry=registry)
    with pytest.raises(Exception, match="frozen"):
        setattr(part(spec), field, "x")


def test_a_folder_named_like_a_spec_does_not_hide_it(tmp_path, monkeypatch, registry):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo").mkdir()
    (tmp_path / "eagle1-llama").write_text("not a spec")
    assert draftsmith.load_spec("demo", registry=registry).name == "demo"
    assert draftsmith.load_spec("eagle1-llama", registry=registry).name == "eagle1-llama"


def test_an_existing_file_without_a_yaml_suffix_loads(tmp_path, registry):
    path = tmp_path / "my-spec"
    path.write_text((BUILTIN_DIR / "eagle1-llama.yaml").read_text())
    assert draftsmith.load_spec(path, registry=registry).source == str(path)


def test_with_decoding_replaces_fields_and_keeps_the_source(registry):
    spec = draftsmith.load_spec("demo", registry=registry)
    flex = spec.with_decoding(attention="flex", topk=2)
    assert (flex.decoding.attention, flex.decoding.topk, flex.decoding.steps) == ("flex", 2, spec.decoding.steps)
    assert flex.source == spec.source and spec.decoding.attention == "auto"
    assert draftsmith.assemble(flex).generate([5, 6, 7], max_new_tokens=8).token_ids == \
        draftsmith.assemble(spec).generate_baseline([5, 6, 7], max_new_tokens=8).token_ids


def test_a_spec_that_leaves_fields_out_gets_the_schema_defaults(registry):
    least = {"name": "least", "draft": {"fusion": {"kind": "eagle3", "norm_before_residual": False}}}
    spec = draftsmith.parse_spec(least, registry=registry)
    assert spec.model_dump(mode="json") == {
        "name": "least", "description": "", "checkpoints": {"target": None, "draft": None},
        "draft": {"num_layers": "auto", "layer": {"kind": "llama"}, "attention": {"kind": "auto"},
                  "mlp": {"kind": "swiglu"}, "moe": "none", "norm": {"kind": "rms"},
                  "norms": {"input": "all", "hidden": "auto", "final": True},
                  "fusion": {"kind": "eagle3", "norm_before_residual": False}, "feed_back": "pre_norm",
                  "vocab": {"reduced": "auto", "d2t": "offset"}, "share": {"embed": "target", "lm_head": "target"}},
        "weights": {"rules": [], "ignore": []}, "quant": {"method": "none"},
        "decoding": {"topk": 4, "steps": 5, "draft_tokens": 8, "page_size": 1, "mode": "auto", "attention": "auto",
                     "graphs": "auto", "linear": "auto", "draft_dtype": "same"}}
