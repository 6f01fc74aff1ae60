"""A '{' that Python's re reads as a literal brace is fuzzy matching to the regex package that matches tensor names
(a spec author's hunt, 2026-12-01): 'fc{e}' renamed 'fx.weight', and '${eagle_config.num_hidden_layers}' (a
placeholder with a dot, which binds nothing) was an internal error at load. Both are refused when the spec is read,
naming what to write instead; a real placeholder, a repeat count and an escaped or bracketed brace stay valid."""
import re

import pytest

from draftsmith.components.patterns import pattern_problem, search
from draftsmith.components.weights import RegexRule
from draftsmith.errors import SpecError
from draftsmith.specs.loader import load_spec


@pytest.mark.parametrize("pattern", [r"^fc{e}\.", r"^blocks\.{i}\.attn\.", r"x{}", r"^a{e<=1}b", r"{", r"[ab]x{e}",
                                     r"\N{DIGIT ONE}{e}", r"(?#x)b{e}"])
def test_a_brace_re_reads_as_literal_is_refused(pattern):
    assert "escape it as '\\{'" in pattern_problem(pattern)
    with pytest.raises(ValueError, match="literal brace"):
        RegexRule(match=pattern, replace="x.")


@pytest.mark.parametrize("pattern", [r"^a\.${eagle_config.num_hidden_layers}\.", r"${num-hidden-layers}", r"^${"])
def test_a_dollar_brace_that_is_no_placeholder_is_refused(pattern):
    assert "is no placeholder: a placeholder names one top-level key" in pattern_problem(pattern)


@pytest.mark.parametrize("pattern, name", [(r"^layers\.${num_hidden_layers}\.", None), (r"a{2}", "aa"),
                                           (r"a{2,}", "aaa"), (r"a{,3}b", "ab"), (r"a{1,3}", "a"),
                                           (r"[{]x", "{x"), (r"[]{]x", "{x"), (r"[^{]x", "yx"), (r"[^]{]x", "ax"),
                                           (r"[\]{]x", "{x"), (r"[\\]{2}", "\\\\"), (r"\{e\}", "{e}"),
                                           (r"a\\{2}", "a\\\\"), (r"^fc\.", "fc.weight"),
                                           (r"\N{DIGIT ONE}x", "1x"), (r"(?#{c})a", "a")])
def test_what_re_and_regex_read_alike_stays_valid(pattern, name):
    assert pattern_problem(pattern) is None
    if name is not None:   # and matches as re.search does
        assert search(pattern, name) == (re.search(pattern, name) is not None) is True


def test_the_spec_names_the_rule_and_what_to_write(tmp_path):
    text = """
name: braces
draft:
  layer: {kind: llama}
  fusion: {kind: eagle1}
weights:
  rules:
    - {match: '^midlayer\\.', replace: 'layers.0.'}
    - {match: '^norm{e}\\.', replace: 'norm.'}
    - {match: '^h\\.${cfg.n}\\.', replace: 'layers.0.'}
"""
    (tmp_path / "braces.yaml").write_text(text)
    with pytest.raises(SpecError) as e:
        load_spec(tmp_path / "braces.yaml")
    said = str(e.value)
    assert "weights.rules.1.match" in said and "escape it as '\\{'" in said
    assert "weights.rules.2.match" in said and "'${cfg.n}' is no placeholder" in said


def test_re_and_the_regex_package_agree_on_every_pattern_accepted():
    """Seeded random patterns over regex syntax: each one pattern_problem accepts matches the same span under re
    (the syntax the README promises) and under the regex package (what matches the names)."""
    import random
    import warnings

    import regex

    from draftsmith.components.patterns import PLACEHOLDER

    SYNTAX = "ab.^$*+?{}[]|()\\-,0123:=!<>eE&~wdsSWDbBAZ"
    rng = random.Random(3)
    names = ["".join(rng.choice("ab.{}[]0123e:-_\\ ") for _ in range(rng.randint(1, 8))) for _ in range(30)]
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # re's FutureWarning on a possible nested set
        for _ in range(6000):
            pattern = "".join(rng.choice(SYNTAX) for _ in range(rng.randint(1, 9)))
            if pattern_problem(pattern) is not None:
                continue
            pattern, checked = PLACEHOLDER.sub("0", pattern), checked + 1
            ours, theirs = regex.compile(pattern), re.compile(pattern)
            for name in names:
                a, b = theirs.search(name), ours.search(name)
                assert (a and a.span()) == (b and b.span()), (pattern, name)
    assert checked > 500
