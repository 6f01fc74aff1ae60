"""A spec's decoding section changed by Spec.with_decoding is checked when it is assembled, as a spec file's is (a
review of the Python API, 2026-11-28): nothing checked it, so mode 'v9' ran as v2, graphs 'bogus' assembled, topk 0
and steps 1000 failed inside generate() as internal errors, and draft_dtype 'bogus' as an AttributeError."""
import pytest

import draftsmith
from draftsmith.errors import SpecError


@pytest.mark.parametrize("changes, path, says", [
    (dict(mode="v9"), "decoding.mode", "'v9' is not allowed"),
    (dict(graphs="bogus"), "decoding.graphs", "'bogus' is not allowed"),
    (dict(page_size=0), "decoding.page_size", "0 is not allowed"),
    (dict(nonsense=3), "decoding.nonsense", "unknown field"),
    (dict(topk=0), "decoding.topk", "0 is not allowed"),
    (dict(steps=1000), "decoding.steps", "1000 is not allowed"),
    (dict(draft_dtype="bogus"), "decoding.draft_dtype", "'bogus' is not allowed"),
    (dict(topk="abc"), "decoding.topk", "'abc' is not allowed"),
    (dict(topk=1, mode="v2"), "decoding.mode", "v2 (tree drafting with compaction) is unsupported here"),
])
def test_a_decoding_value_a_spec_file_refuses_is_refused_when_assembled(changes, path, says, monkeypatch):
    from draftsmith.assembler import assemble as assembler

    monkeypatch.setattr(assembler, "plan_assembly", lambda *a, **k: pytest.fail("a checkpoint was read"))
    spec = draftsmith.load_spec("demo")
    with pytest.raises(SpecError) as info:
        draftsmith.assemble(spec.with_decoding(**changes))
    [problem] = info.value.problems
    assert problem.path == path and says in problem.message and problem.line is None, problem
    assert str(info.value).startswith(f"{spec.source} (its decoding section as with_decoding() left it) has 1 "
                                      "problem")


def test_valid_changes_keep_the_rest_and_the_source_and_assemble():
    spec = draftsmith.load_spec("demo")
    changed = spec.with_decoding(attention="flex", topk=2, draft_dtype="bfloat16")
    assert draftsmith.assemble(changed).spec.decoding.topk == 2
    assert (changed.decoding.attention, changed.decoding.topk, changed.decoding.draft_dtype) == ("flex", 2, "bfloat16")
    assert changed.decoding.steps == spec.decoding.steps and changed.source == spec.source
    assert spec.decoding.topk == 4   # the spec itself is unchanged


@pytest.mark.parametrize("call, says", [
    (lambda: draftsmith.load_spec(3), "spec: a spec name, a YAML file's path or a Spec, got the int 3"),
    (lambda: draftsmith.load_spec(None), "got the NoneType None"),
    (lambda: draftsmith.load_spec({"name": "x"}), "got the dict {'name': 'x'}; a mapping of spec fields is a Spec by "
                                                  "draftsmith.parse_spec(data)"),
    (lambda: draftsmith.assemble("demo", registry="x"), "registry: a draftsmith Registry"),
    (lambda: draftsmith.assemble("demo", warn_fallback="no"), "warn_fallback: True or False, got the str 'no'"),
])
def test_an_argument_of_the_wrong_sort_is_an_option_error_naming_it(call, says):
    from draftsmith.errors import OptionError

    with pytest.raises(OptionError, match=says.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_a_spec_object_edited_past_validation_is_refused_as_a_file_would_be():
    """pydantic's model_copy(update=...) validates nothing: a dict where the decoding section belongs failed in the
    load as an AttributeError, num_layers 'x' as a TypeError, and 0 as ten checkpoint misfits (a researcher's
    walk-through, round 28). Each is now the spec's problem, said at once, not placed in the spec's file."""
    from draftsmith.errors import SpecError

    spec = draftsmith.load_spec("demo")
    edited = spec.model_copy(update={"decoding": {"topk": 1}, "draft": spec.draft.model_copy(update={"num_layers": 0})})
    with pytest.raises(SpecError) as info:
        draftsmith.assemble(edited)
    said = str(info.value)
    assert said.startswith(f"spec 'demo' as edited (from {spec.source}) has 2 problems"), said
    assert "draft.num_layers: 0 is not allowed" in said and "allowed: an integer >= 1 or 'auto'" in said
    assert "decoding: holds the dict {'topk': 1}, not its section" in said and "spec.with_decoding(...)" in said
    assert "(line " not in said
    assert draftsmith.load_spec(spec) is spec   # a spec as loaded passes as it is
    share = spec.model_copy(update={"draft": spec.draft.model_copy(update={"share": {"embed": "target"}})})
    with pytest.raises(SpecError, match=r"draft\.share: holds the dict \{'embed': 'target'\}, not its section"):
        draftsmith.load_spec(share)   # at any depth (review of round 28: only the top level was looked at)
