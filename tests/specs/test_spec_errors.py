"""Every kind of mistake in a spec's fields gives ONE SpecError naming the file, the dotted path, what was found,
what is allowed (with providers) and a close match where one exists: unknown and missing fields, literal values,
components and their params (a plugin's too), weight rules and patterns, backends, decoding sizes and modes, fusion
taps and checkpoints. A spec's document as a whole (YAML, lines, files, links, several problems at once):
test_spec_document_errors.py."""
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

import draftsmith
from draftsmith import limits
from draftsmith.specs.loader import parse_spec
from draftsmith.specs.schema import validate_strict
from draftsmith.specs.translate import problems_from


def only(err):
    assert len(err.problems) == 1, str(err)
    return err.problems[0]


def test_unknown_field_suggests_the_close_one(base, spec_error):
    base["draft"]["norms"]["inptu"] = "all"
    err = spec_error(base)
    p = only(err)
    assert p.path == "draft.norms.inptu"
    assert "unknown field 'inptu'" in p.message
    assert p.allowed == "final, hidden, input"
    assert p.hint.strip() == "Did you mean 'input'?"
    assert "draft.norms.inptu: unknown field 'inptu'. Did you mean 'input'?" in str(err)
    assert "my-draft.yaml has 1 problem" in str(err)


def test_a_missing_required_field_says_why_it_has_no_default(base, spec_error):
    base["draft"]["fusion"] = {"kind": "eagle3"}   # the field's description is the hint
    p = only(spec_error(base))
    assert (p.path, p.message) == ("draft.fusion.norm_before_residual", "required field is missing")
    assert p.allowed == "true or false, or 'auto'" and "Engines disagree on its default" in p.hint


def test_a_size_or_eps_given_to_a_component_says_the_config_gives_it(base, spec_error):
    base["draft"]["norm"] = {"kind": "rms", "eps": 1e-5}
    p = only(spec_error(base))
    assert (p.path, p.message) == ("draft.norm.eps", "unknown field 'eps'")
    assert p.allowed == "kind, float32_weight, offset"
    assert p.hint == "Sizes and eps come from the checkpoint's config.json, not the spec"

def test_literal_value_not_allowed(base, spec_error):
    base["draft"]["norms"]["input"] = "every"
    p = only(spec_error(base))
    assert (p.path, p.message) == ("draft.norms.input", "'every' is not allowed")
    assert p.allowed == "'all', 'not_first' or 'none'"
    assert p.hint == ""  # nothing is close to 'every'


def test_literal_value_with_a_close_match(base, spec_error):
    base["draft"]["share"]["embed"] = "targte"
    p = only(spec_error(base))
    assert p.path == "draft.share.embed" and "'targte'" in p.message
    assert "'own_if_different'" in p.allowed and "Did you mean 'target'?" in p.hint


def test_required_field_missing_lists_what_may_fill_it(base, spec_error):
    del base["draft"]["fusion"]
    err = spec_error(base)
    p = only(err)
    assert (p.path, p.message) == ("draft.fusion", "required field is missing")
    assert "eagle1 (builtin)" in p.allowed and "eagle3 (builtin)" in p.allowed and "{kind: NAME" in p.allowed
    assert "allowed: {kind: NAME" in str(err)


def test_component_written_as_a_bare_name(base, spec_error):
    base["draft"]["fusion"] = "eagle3"
    p = only(spec_error(base))
    assert p.path == "draft.fusion" and p.found == "eagle3"
    assert "Write {kind: eagle3}" in p.hint and "eagle1 (builtin)" in p.allowed


def test_unknown_component_name(base, spec_error):
    base["draft"]["attention"] = {"kind": "gqq"}
    err = spec_error(base)
    p = only(err)
    assert (p.path, p.message) == ("draft.attention.kind", "unknown attention 'gqq'")
    assert "Did you mean 'gqa'?" in p.hint
    assert "gqa (builtin)" in p.allowed and "auto" in p.allowed
    assert "allowed: gqa (builtin)" in str(err)


def test_component_params_required_field(base, spec_error):
    del base["draft"]["fusion"]["norm_before_residual"]
    p = only(spec_error(base))
    assert (p.path, p.message) == ("draft.fusion.norm_before_residual", "required field is missing")
    assert p.allowed == "true or false, or 'auto'"   # auto: the draft config's value, else the default


def test_component_params_unknown_param(base, spec_error):
    base["draft"]["attention"]["ropee"] = "neox"
    p = only(spec_error(base))
    assert (p.path, p.message) == ("draft.attention.ropee", "unknown field 'ropee'")
    assert "Did you mean 'rope'?" in p.hint and "qk_norm" in p.allowed and "rope" in p.allowed


def test_explicit_taps_that_collide_are_refused_without_a_target(base, spec_error):
    """Invariant 25 at validate time: explicit ids are checked before any checkpoint is seen."""
    base["draft"]["fusion"]["aux_layers"] = {"ids": [2, 2, 5]}
    p = only(spec_error(base))
    assert p.path == "draft.fusion.aux_layers.ids" and "[2]" in p.message and "distinct" in p.message


def test_component_params_literal(base, spec_error):
    base["draft"]["attention"]["rope"] = "neoxx"
    p = only(spec_error(base))
    assert p.path == "draft.attention.rope" and "'neoxx'" in p.message
    assert p.allowed == "'neox' or 'interleaved'" and "Did you mean 'neox'?" in p.hint


def test_union_param_reports_the_member_that_fits(base, spec_error):
    # aux_layers is 'auto' or {ids, at}: a mapping with a bad `at` is about `at`, not about 'auto'
    base["draft"]["fusion"]["aux_layers"] = {"ids": [1, 2, 3], "at": "outptu"}
    p = only(spec_error(base))
    assert p.path == "draft.fusion.aux_layers.at"
    assert p.allowed == "'input' or 'output'" and "Did you mean 'output'?" in p.hint


def test_union_value_that_fits_no_member_lists_every_form(base, spec_error):
    base["draft"]["num_layers"] = 0
    p = only(spec_error(base))
    assert p.path == "draft.num_layers" and p.message == "0 is not allowed"
    assert p.allowed == "an integer >= 1 or 'auto'"


@pytest.mark.parametrize("keys, value, path, allowed", [
    (("decoding", "topk"), "four", "decoding.topk", "an integer"),
    (("decoding", "topk"), 0, "decoding.topk", "an integer >= 1"),
    (("decoding", "topk"), 10**6, "decoding.topk", f"an integer <= {limits.TOPK}"),
    (("draft", "num_layers"), 10**6, "draft.num_layers", f"an integer <= {limits.DRAFT_LAYERS} or 'auto'"),
    (("name",), "Bad Name", "name", "a string matching ^[a-z0-9][a-z0-9._-]*$"),
    (("name",), "a" * 101, "name", f"String should have at most {limits.NAME_CHARS} characters"),
    (("weights", "rules"), 5, "weights.rules", "a list, each item a mapping with keys kind, match, replace, inverse, "
                                               "into: {match, replace, inverse} (kind: regex, the default); {kind: "
                                               "split, match, into}"),
    (("weights", "ignore"), ["ok", 5], "weights.ignore.1", "a string"),
    (("draft", "fusion", "aux_layers"), {"ids": [1, "x", 3]}, "draft.fusion.aux_layers.ids.1", "an integer"),
])
def test_allowed_names_the_type_or_bound_in_spec_words(base, registry, keys, value, path, allowed):
    node = base
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    with pytest.raises(draftsmith.SpecError) as info:
        parse_spec(base, source="d.yaml", registry=registry)
    assert [(p.path, p.allowed) for p in info.value.problems] == [(path, allowed)]


class Size(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int = 1


class PluginParams(BaseModel):
    """A third-party component's params: an optional sub-mapping, a mapping of them, a validator's own message."""
    model_config = ConfigDict(extra="forbid")
    inner: Size | None = None
    table: dict[str, Size] = {}
    note: str = ""

    @field_validator("note")
    @classmethod
    def _refuse(cls, note: str) -> str:
        if note:
            raise ValueError(note)
        return note


@pytest.mark.parametrize("params, path, message, allowed", [
    ({"inner": {"size": "big"}}, "draft.x.inner.size", "'big' is not allowed", "an integer"),
    ({"inner": {"sizes": 1}}, "draft.x.inner.sizes", "unknown field 'sizes'", "size"),
    ({"table": {"a": {"size": "big"}}}, "draft.x.table.a.size", "'big' is not allowed", "an integer"),
    ({"note": "n" * 400}, "draft.x.note", "n" * 400, ""),                     # a validator's message, whole
    ({"note": "n" * 401}, "draft.x.note", "n" * 198 + "..." + "n" * 198, ""),  # ... cut in the middle past 400
])
def test_plugin_params_errors_keep_their_dotted_path(params, path, message, allowed):
    with pytest.raises(ValidationError) as info:
        validate_strict(PluginParams, params)
    problems = problems_from(info.value, "draft.x", PluginParams)
    assert [(p.path, p.message, p.allowed) for p in problems] == [(path, message, allowed)]


@pytest.mark.parametrize("rule, field", [({"match": "(", "replace": "x"}, ".match"),   # the pattern alone: its own
                                         ({"match": "a", "replace": "\\9"}, "")])           # the rename: the rule's
def test_bad_regex_in_weight_rules(base, spec_error, rule, field):
    base["weights"]["rules"].append(rule)
    p = only(spec_error(base))
    assert p.path == f"weights.rules.{len(base['weights']['rules']) - 1}{field}"   # the appended one
    assert "not a valid regex" in p.message and repr(rule["match"]) in p.message
    # the pattern alone is found; a rename refused as a whole quotes both and is no 'found {...}' (2026-12-01)
    assert p.found == rule["match"] if field else "(found" not in p.render()


def test_bad_regex_in_weight_ignore(base, spec_error):
    base["weights"]["ignore"] = ["^ok$", "[unclosed"]
    p = only(spec_error(base))
    assert p.path == "weights.ignore.1" and p.found == "[unclosed"
    assert "not a valid regular expression" in p.message and "regular expression" in p.allowed


def test_unknown_weight_rule_kind(base, spec_error):
    base["weights"]["rules"][0]["kind"] = "regx"
    p = only(spec_error(base))
    assert p.path == "weights.rules.0.kind" and "Did you mean 'regex'?" in p.hint
    assert "regex (builtin)" in p.allowed


def test_unknown_attention_backend(base, spec_error):
    base["decoding"]["attention"] = "sdpaa"
    p = only(spec_error(base))
    assert (p.path, p.message) == ("decoding.attention", "unknown attention backend 'sdpaa'")
    assert "sdpa (builtin)" in p.allowed and "eager (builtin)" in p.allowed and "Did you mean 'sdpa'?" in p.hint


def test_draft_tokens_too_many_for_topk_and_steps(base, spec_error):
    base["decoding"].update(topk=2, steps=2, draft_tokens=8)  # at most 2 + 1*4 = 6 candidates + root
    p = only(spec_error(base))
    assert p.path == "decoding.draft_tokens" and "topk=2, steps=2" in p.message and "8" in p.message
    assert p.allowed.startswith("2..7")


@given(topk=st.integers(1, 6), steps=st.integers(1, 6), n=st.integers(2, 200),
       mode=st.sampled_from(["auto", "v1", "v2"]), page=st.sampled_from([1, 2]))
def test_draft_tokens_bound_is_the_candidate_count_of_a_tree(topk, steps, n, mode, page):
    from draftsmith.specs.resolve import decoding_problems

    problems = decoding_problems({"topk": topk, "steps": steps, "draft_tokens": n, "mode": mode, "page_size": page})
    too_many = n - 1 > topk + (steps - 1) * topk * topk  # EAGLE-2: topk at depth 1, topk^2 at each deeper one
    chain = topk == 1 or mode == "v1" or (mode == "auto" and page != 1)   # steps + 1 nodes, whatever it says
    assert ("decoding.draft_tokens" in [p.path for p in problems]) == (too_many and not chain)


@pytest.mark.parametrize("change, why", [({"topk": 1, "draft_tokens": 6}, "topk is 1"),
                                         ({"page_size": 2}, "page_size is 2")])
def test_explicit_v2_in_an_unsupported_combination(base, spec_error, change, why):
    base["decoding"].update(mode="v2", **change)
    p = only(spec_error(base))
    assert p.path == "decoding.mode" and why in p.message and "v2" in p.message
    assert p.allowed == "auto, v1" and "mode: auto" in p.hint


@pytest.mark.parametrize("decoding, message", [
    ({"topk": 2, "draft_tokens": 40}, "40 tokens cannot be drafted with topk=2, steps=5"),   # steps: the default
    ({"steps": 1, "draft_tokens": 6}, "6 tokens cannot be drafted with topk=4, steps=1"),   # topk: the default
])
def test_draft_tokens_are_checked_against_the_schema_defaults_of_what_the_spec_leaves_out(base, decoding, message):
    # the largest tree of topk=2, steps=5 holds 2 + 4 * 4 = 18 candidates; of topk=4, steps=1: 4
    with pytest.raises(draftsmith.SpecError) as info:
        parse_spec({**base, "decoding": decoding}, source="d.yaml")
    most = {2: 19, 4: 5}[decoding.get("topk", 4)]
    assert f"decoding.draft_tokens: {message}" in str(info.value) and f"allowed: 2..{most} " in str(info.value)
    parse_spec({**base, "decoding": {**decoding, "draft_tokens": most}}, source="d.yaml")   # the largest fits


def test_unknown_attention_names_suggest_auto_and_backends_are_called_so(base, spec_error):
    base["draft"]["attention"]["kind"] = "atuo"          # `auto` is a choice of the attention slot, not a component
    p = only(spec_error(base))
    assert p.message == "unknown attention 'atuo'" and p.hint.strip() == "Did you mean 'auto'?"
    base["draft"]["attention"]["kind"] = "gqa"
    base["decoding"] = {**base["decoding"], "attention": "flexx"}
    p = only(spec_error(base))
    assert p.path == "decoding.attention" and p.message == "unknown attention backend 'flexx'"


def test_an_unknown_cached_target_lists_the_known_ones(base, spec_error):
    base["checkpoints"] = {"target": "cache:smolm2"}
    p = only(spec_error(base))
    assert (p.path, p.message, p.allowed) == ("checkpoints.target", "unknown cached target", "cache:smollm2")
    assert p.hint == "Did you mean 'smollm2'?"


@pytest.mark.parametrize("page, fits", [(1, True), (2, False)])
def test_v2_needs_a_page_of_one(base, page, fits):
    data = {**base, "decoding": {**base["decoding"], "mode": "v2", "page_size": page}}
    if fits:
        assert parse_spec(data, source="d.yaml").decoding.mode == "v2"
    else:
        with pytest.raises(draftsmith.SpecError, match="v2 .* is unsupported here: page_size is 2"):
            parse_spec(data, source="d.yaml")


def test_fp8_block_sides_and_module_patterns_are_checked_in_the_spec(base, spec_error):
    """A zero block side divided by zero and a bad pattern failed at load as internal errors; now each is a
    spec problem, all at once."""
    base["quant"] = {"method": "fp8", "scheme": "block", "block": [0, -1], "modules": ["^ok", "((", "["],
                     "exclude": ["(a+)+"]}
    err = spec_error(base)
    by_path = {p.path: p for p in err.problems}
    assert set(by_path) == {"quant.block.0", "quant.block.1", "quant.modules.1", "quant.modules.2",
                            "quant.exclude.0"}, str(err)   # each bad pattern by its index (the first alone was said)
    assert by_path["quant.block.0"].allowed.startswith("an integer >= 1")
    assert "not a valid regular expression" in by_path["quant.modules.1"].message
    assert by_path["quant.modules.2"].message.startswith("'[': not a valid regular expression")
    assert "a repeat of a repeat" in by_path["quant.exclude.0"].message


@pytest.mark.parametrize("rule, said", [
    ({"match": "(a+)+", "replace": "$1"}, {"weights.rules.0.match": "a repeat of a repeat",
                                           "weights.rules.0.replace": "holds '$1'"}),
    ({"kind": "split", "match": "(", "into": ["a.$1", "b.\\1"]}, {"weights.rules.0.match": "not a valid regex: missing",
                                                                  "weights.rules.0.into": "holds '$1'"})])
def test_a_rules_match_is_said_beside_its_replacements_problems(base, spec_error, rule, said):
    """A bad match was said only once the replacement's $1 was fixed (a hunting helper): both at once."""
    base["weights"]["rules"] = [rule]
    by_path = {p.path: p.message for p in spec_error(base).problems}
    assert set(by_path) == set(said), by_path
    assert all(part in by_path[path] for path, part in said.items()), by_path


def test_a_misspelt_boolean_gets_a_suggestion(base, spec_error):
    """Misspelt words of a Literal were suggested, a misspelt true / false (a string, for a bool field) was not."""
    base["draft"]["fusion"] = {"kind": "eagle3", "norm_before_residual": "flase"}
    base["draft"]["mlp"] = {"kind": "swiglu", "bias": "ture"}
    hints = {p.path: p.hint.strip() for p in spec_error(base).problems}
    assert hints == {"draft.fusion.norm_before_residual": "Did you mean 'false'?",
                     "draft.mlp.bias": "Did you mean 'true'?"}, hints


@pytest.mark.parametrize("fusion, path, says", [
    ({"aux_layers": {"ids": []}}, "draft.fusion.aux_layers.ids", "[] names no layer"),
    ({"num_aux": 5, "aux_layers": {"ids": [1, 2, 3]}}, "draft.fusion.num_aux",
     "num_aux 5 and aux_layers.ids [1, 2, 3]"),
    ({"fc_norm": True, "norm_before_fc": True}, "draft.fusion.norm_before_fc",   # passed validate, failed at load
     "fc_norm and norm_before_fc are exclusive"),
])
def test_aux_ids_the_spec_alone_shows_unusable_are_spec_problems(base, spec_error, fusion, path, says):
    """An empty id list was read as "not given" (the default taps); a count that disagrees with the ids was
    refused only once the checkpoint was read."""
    base["draft"]["fusion"] = {"kind": "eagle3", "norm_before_residual": False, **fusion}
    p = only(spec_error(base))
    assert p.path == path and says in p.message, p


@pytest.mark.parametrize("fc_norm, norm_before_fc", [(True, False), (False, True), ("auto", True), (True, "auto")])
def test_one_of_the_fc_norms_or_auto_beside_the_other_is_no_spec_problem(base, fc_norm, norm_before_fc):
    base["draft"]["fusion"] = {"kind": "eagle3", "norm_before_residual": False, "fc_norm": fc_norm,
                               "norm_before_fc": norm_before_fc}
    parse_spec(base)


def test_a_count_that_disagrees_with_the_ids_is_said_beside_the_fusions_other_problems(base, spec_error):
    """Checked by the model after its fields, it was said only once every other field of the fusion validated."""
    base["draft"]["fusion"] = {"kind": "eagle3", "num_aux": 3, "aux_layers": {"ids": [1, 2]}}   # no norm_before_...
    paths = [p.path for p in spec_error(base).problems]
    assert paths == ["draft.fusion.norm_before_residual", "draft.fusion.num_aux"], paths


def test_an_empty_checkpoint_folder_is_refused_not_read_as_the_specs_own_folder(base, spec_error):
    base["checkpoints"] = {"target": "", "draft": ""}
    err = spec_error(base)
    assert [(p.path, p.allowed) for p in err.problems] == [("checkpoints.target", "a non-empty string"),
                                                           ("checkpoints.draft", "a non-empty string")]
