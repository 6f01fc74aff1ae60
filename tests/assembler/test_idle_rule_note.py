"""A load that fails because a weight rule's match has a typo (it matched no name, so the names it would make are
missing and the checkpoint's stay unmatched) says which rule matched nothing; a spec's rules for other layouts,
which match nothing on every load, are not said."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.errors import DraftsmithError
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import SMALL, write_eagle3, write_target

MIDLAYER_RULE = r"- {match: '^midlayer\.', replace: 'layers.0.'}"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("idle")
    target = write_target(root / "t", **SMALL)
    draft = write_eagle3(root / "d", target)
    blocks = write_eagle3(root / "blocks", target)
    file = blocks / "model.safetensors"
    save_file({k.replace("midlayer.", "blocks.0."): v for k, v in load_file(str(file)).items()}, str(file))
    return root, target, draft, blocks


def spec_with(root, rule: str):
    text = (BUILTIN_DIR / "eagle3-llama.yaml").read_text()
    assert MIDLAYER_RULE in text
    path = root / f"spec-{abs(hash(rule))}.yaml"
    path.write_text(text.replace(MIDLAYER_RULE, rule).replace("num_layers: auto", "num_layers: 1"))
    return draftsmith.load_spec(path)


def renamed(folder, into, old: str, new: str) -> None:
    """A copy of the checkpoint ``folder`` in ``into`` with its tensor ``old`` named ``new``."""
    held = load_file(str(folder / "model.safetensors"))
    held[new] = held.pop(old)
    for f in folder.iterdir():
        if f.name != "model.safetensors":
            (into / f.name).write_bytes(f.read_bytes())
    save_file(held, str(into / "model.safetensors"))


def notes(spec, target, draft):
    with pytest.raises(DraftsmithError) as info:
        draftsmith.assemble(spec, target=target, draft=draft)
    return getattr(info.value, "__notes__", [])


@pytest.mark.parametrize("rule, said", [
    (r"- {match: '^block\.0\.', replace: 'layers.0.'}", r"rule 0 (line 24): '^block\.0\.' -> 'layers.0.'"),
    (r"- {match: '^block\.(\d+)\.', replace: 'layers.\1.'}", r"rule 0 (line 24): '^block\.(\d+)\.' -> 'layers.\1.'")])
def test_a_rule_that_matched_nothing_is_said(folders, rule, said):
    root, target, _, blocks = folders
    assert notes(spec_with(root, rule), target, blocks) == [
        f"note: {said} matched no checkpoint name, and names it would make are missing "
        "('layers.0.hidden_norm.weight', 'layers.0.input_layernorm.weight' and 8 more), while "
        "'blocks.0.hidden_norm.weight', 'blocks.0.input_layernorm.weight' and 8 more matched no rule: check the "
        "rule's match against the checkpoint's names"]


def test_the_right_rule_loads(folders):
    root, target, _, blocks = folders
    draftsmith.assemble(spec_with(root, r"- {match: '^blocks\.0\.', replace: 'layers.0.'}"), target=target,
                        draft=blocks)


def test_an_unused_rule_for_another_layout_is_not_said(folders, tmp_path):
    """The built-in spec's midlayer rule matches nothing on a layers.0.* draft: a load that fails there for a
    missing tensor is told nothing about that rule."""
    root, target, draft, _ = folders
    file = tmp_path / "model.safetensors"
    held = {k.replace("midlayer.", "layers.0."): v for k, v in load_file(str(draft / "model.safetensors")).items()}
    del held["layers.0.hidden_norm.weight"]
    for f in draft.iterdir():
        if f.name != "model.safetensors":
            (tmp_path / f.name).write_bytes(f.read_bytes())
    save_file(held, str(file))
    with pytest.raises(DraftsmithError) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=tmp_path)
    assert "missing: 'layers.0.hidden_norm.weight'" in str(info.value)
    assert not [n for n in getattr(info.value, "__notes__", []) if "matched no checkpoint name" in n]


def test_a_rule_that_matched_names_is_not_said(folders, tmp_path):
    """One tensor under another prefix: the rule matched the others, so it is not said to match nothing."""
    root, target, _, blocks = folders
    renamed(blocks, tmp_path, "blocks.0.hidden_norm.weight", "blk.0.hidden_norm.weight")
    said = notes(spec_with(root, r"- {match: '^blocks\.0\.', replace: 'layers.0.'}"), target, tmp_path)
    assert not [n for n in said if "matched no checkpoint name" in n]


def test_a_name_that_loaded_as_it_is_is_no_sign_of_a_typo(tmp_path):
    """The built-in spec on a 2-layer layers.N.* draft missing one layer-0 tensor: the midlayer rule (for another
    layout) matched nothing and layers.1's tensor of that module matched no rule, but it loaded as it is (found by
    a review: the note blamed the midlayer rule)."""
    target = write_target(tmp_path / "t", **SMALL)
    draft = write_eagle3(tmp_path / "d", target, layout="layers", layers=2)
    file = draft / "model.safetensors"
    held = load_file(str(file))
    del held["layers.0.mlp.up_proj.weight"]
    save_file(held, str(file))
    with pytest.raises(DraftsmithError) as info:
        draftsmith.assemble("eagle3-llama", target=target, draft=draft)
    assert "missing: 'layers.0.mlp.up_proj.weight'" in str(info.value)
    assert not [n for n in getattr(info.value, "__notes__", []) if "matched no checkpoint name" in n]


def test_a_typo_in_a_rename_that_changes_the_modules_name_is_said(folders, tmp_path):
    """'^draft_modle\\.fusion\\.' -> 'fc.' beside the checkpoint's draft_model.fusion.weight: the names share no
    module name (fusion, fc), so the note was not said (a spec author's hunt, 2026-12-01); the match's literal head
    is the checkpoint name's with a typo."""
    root, target, draft, _ = folders
    renamed(draft, tmp_path, "fc.weight", "draft_model.fusion.weight")
    rule = r"- {match: '^draft_modle\.fusion\.', replace: 'fc.'}"
    text = (BUILTIN_DIR / "eagle3-llama.yaml").read_text().replace(MIDLAYER_RULE, MIDLAYER_RULE + "\n    " + rule)
    (tmp_path / "typo.yaml").write_text(text.replace("num_layers: auto", "num_layers: 1"))
    said = notes(draftsmith.load_spec(tmp_path / "typo.yaml"), target, tmp_path)
    assert [n for n in said if "matched no checkpoint name" in n] == [
        r"note: rule 1 (line 25): '^draft_modle\.fusion\.' -> 'fc.' matched no checkpoint name, and names it "
        "would make are "
        "missing ('fc.weight'), while 'draft_model.fusion.weight' matched no rule: check the rule's match against the "
        "checkpoint's names"], said


@pytest.mark.parametrize("head, name, typo", [("draft_modle.fusion.", "draft_model.fusion.weight", True),
                                              ("draft_model.fusion.", "draft_model.fusion.weight", False),
                                              ("fc.", "fx.weight", False),   # too short to judge
                                              ("blocks.", "layers.0.weight", False)])
def test_misspelt_is_a_near_copy_of_the_head_only(head, name, typo):
    from draftsmith.assembler.names import misspelt

    assert misspelt(head, name) is typo


@pytest.mark.parametrize("pattern, head", [(r"^draft_modle\.fusion\.", "draft_modle.fusion."), (r"^layers?\.", "layer"),
                                           (r"^model\.layers\.(\d+)\.", "model.layers."), (r"^a\d", "a"),
                                           (r"fc\.", ""), (r"^ab*c", "a")])
def test_literal_head_is_what_every_name_an_anchored_match_takes_begins_with(pattern, head):
    from draftsmith.components.patterns import literal_head, literal_of

    assert literal_head(pattern) == head
    assert (literal_of(r"fc\."), literal_of(r"ab+"), literal_of(r"a\d")) == ("fc.", None, None)


@pytest.mark.parametrize("pattern, head", [(r"^model\.mtp\.|^mtp\.", ""), (r"^a(b|c)", "a"), (r"^a[|]b", "a"),
                                           (r"^a\|b", "a|b"), (r"^a[]|]b", "a"), (r"^a[^]|]b", "a"),
                                           (r"^a(?:b)|c", ""), (r"^x[a-z]|y", "")])
def test_a_pattern_with_alternatives_at_its_top_has_no_literal_head(pattern, head):
    """'^model\\.mtp\\.|^mtp\\.' matches mtp.* names, which do not begin with 'model.mtp.' (the idle-rule note took it
    as the head every name begins with); a '|' inside a group, a class or escaped is no alternative of the whole."""
    from draftsmith.components.patterns import literal_head

    assert literal_head(pattern) == head


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab|()[]^\\.*?", max_size=8))
def test_every_name_an_anchored_pattern_matches_begins_with_its_literal_head(body):
    """Semantic: over every string of up to 4 characters from the pattern's letters, each one the pattern matches
    begins with literal_head (where the pattern compiles)."""
    import itertools
    import re
    import warnings

    from draftsmith.components.patterns import literal_head

    pattern = "^" + body
    try:
        with warnings.catch_warnings():   # "possible nested set": a '[[' the pattern holds by chance
            warnings.simplefilter("ignore")
            compiled = re.compile(pattern)
    except re.error:
        return
    head = literal_head(pattern)
    for n in range(5):
        for chars in itertools.product("ab|.", repeat=n):
            name = "".join(chars)
            assert not compiled.match(name) or name.startswith(head), (pattern, head, name)


def test_a_mistyped_rule_whose_names_a_catch_all_took_is_said(folders):
    """A mistyped rule before a catch-all (`'^blocks\\.0\\.self_atn\\.'`, then `'^blocks\\.'`): the catch-all made its
    names into ones the model lacks, so they were no 'matched no rule' and no note was said (a new-user walk,
    2026-12-01)."""
    root, target, _, blocks = folders
    rules = (r"- {match: '^blocks\.0\.self_atn\.', replace: 'layers.0.self_attn.'}" + "\n    "
             r"- {match: '^blocks\.', replace: 'stray.'}")
    assert notes(spec_with(root, rules), target, blocks) == [
        r"note: rule 0 (line 24): '^blocks\.0\.self_atn\.' -> 'layers.0.self_attn.' matched no checkpoint name, "
        "and names it "
        "would make are missing ('layers.0.self_attn.k_proj.weight', 'layers.0.self_attn.o_proj.weight' and 2 "
        "more), while another rule made 'blocks.0.self_attn.k_proj.weight', 'blocks.0.self_attn.o_proj.weight' and "
        "2 more into names the model does not have: check the rule's match against the checkpoint's names"]


def test_rules_an_earlier_catch_all_shadows_are_said_as_order_not_typos(folders):
    """Per-module rules after '^blocks\\.0\\.' (which takes every name first): each was said as 'matched no
    checkpoint name ... check the rule's match' (the first only) though its match is right; now every shadowed rule
    is named with the rule that takes its names first (a rule-writing hunt, 2026-12-01)."""
    root, target, _, blocks = folders
    rules = (r"- {match: '^blocks\.0\.', replace: 'layers.0.'}" + "\n    "
             r"- {match: '^blocks\.0\.mlp\.', replace: 'layers.0.ffn.'}" + "\n    "
             r"- {match: '^blocks\.0\.hidden_norm\.', replace: 'layers.0.hn.'}")
    assert spec_with(root, rules) is not None
    # loads: the catch-all made every name right, so nothing is said
    draftsmith.assemble(spec_with(root, rules), target=target, draft=blocks)
    wrong = (r"- {match: '^blocks\.0\.', replace: 'layers.0.x.'}" + "\n    "
             r"- {match: '^blocks\.0\.mlp\.', replace: 'layers.0.mlp.'}" + "\n    "
             r"- {match: '^blocks\.0\.hidden_norm\.', replace: 'layers.0.hidden_norm.'}" + "\n    "
             r"- {match: '^blocks\.0\.nothing\.', replace: 'layers.0.self_attn.'}")
    said = notes(spec_with(root, wrong), target, blocks)
    assert said[0] == (
        r"note: a name takes the first rule whose match is found in it: rule 1 (line 25): '^blocks\.0\.mlp\.' -> "
        r"'layers.0.mlp.' matches 'blocks.0.mlp.down_proj.weight', 'blocks.0.mlp.gate_proj.weight' and 1 more, "
        r"which rule 0 (line 24): '^blocks\.0\.' -> 'layers.0.x.' takes first; rule 2 (line 26): "
        r"'^blocks\.0\.hidden_norm\.' -> "
        r"'layers.0.hidden_norm.' matches 'blocks.0.hidden_norm.weight', which rule 0 (line 24): '^blocks\.0\.' -> "
        "'layers.0.x.' takes first: put each rule above the one that takes its names"), said
    assert not any("rule 1" in n or "rule 2" in n for n in said[1:]), said   # not also said as typos


def test_a_rule_for_names_the_model_does_not_miss_is_not_said_shadowed():
    from draftsmith.assembler.names import shadowed_rule_note
    from draftsmith.components.weights import RegexRule, RuleSet

    rules = RuleSet([RegexRule(match=r"^model\.fc_norm\.", replace="fc.aux_norm."),
                     RegexRule(match=r"^model\.", replace="")])
    names = ["model.fc_norm.0.weight"]
    assert shadowed_rule_note(rules, names, ["fc_norm.0.weight"]) == (
        r"note: a name takes the first rule whose match is found in it: rule 1: '^model\.' -> '' matches "
        r"'model.fc_norm.0.weight', which rule 0: '^model\.fc_norm\.' -> 'fc.aux_norm.' takes first: put each rule "
        "above the one that takes its names", {1})
    assert shadowed_rule_note(rules, names, ["norm.weight"]) == (None, set())
    assert shadowed_rule_note(rules, ["model.norm.weight"], ["norm.weight"]) == (None, set())   # rule 1 took it


def test_the_names_a_rule_would_make_are_those_its_replacement_makes():
    """A mistyped rule whose replacement names one module of every layer: the note listed every missing layers.*
    name (its literal head, 'layers.', began them all), not the post_attention_layernorm ones it makes (a
    walk-through, 2026-12-01)."""
    from types import SimpleNamespace

    from draftsmith.assembler.names import idle_rule_note, makes

    replace = r"layers.\1.post_attention_layernorm."
    assert makes(replace, "layers.12.post_attention_layernorm.weight")
    assert not makes(replace, "layers.1.input_layernorm.weight") and not makes(replace, "fc.weight")
    assert makes(r"a.\g<n>.b.", "a.x.b.w") and makes("fc.", "fc.weight") and not makes("fc.", "lm_head.fc.weight")
    rule = SimpleNamespace(match=r"^draft_blok\.(\d+)\.ln_ffn\.", replace=replace)
    rules = SimpleNamespace(rules=[rule], to_parts=lambda n: (n, None), describe=lambda i: "rule 0")
    missing = ["layers.0.input_layernorm.weight", "layers.0.post_attention_layernorm.weight",
               "layers.1.post_attention_layernorm.weight"]
    note = idle_rule_note(rules, [], missing, ["draft_block.0.ln_ffn.weight", "draft_block.1.ln_ffn.weight"])
    assert note is not None and "('layers.{0,1}.post_attention_layernorm.weight')" in note, note
