"""A suggestion is never the word as written: a kind one letter case away gets the registered spelling ('GQA' ->
'gqa'), and a quoted true / false where a boolean goes is told to drop the quotes (it said "'True' is not
allowed. Did you mean 'True'?"; found by a dogfooding helper)."""
import pytest

from draftsmith.errors import SpecError, suggest
from draftsmith.specs.loader import load_spec


def test_suggest_matches_case_first_and_never_echoes_the_word():
    assert suggest("GQA", ["gqa", "mla"]) == " Did you mean 'gqa'?"
    assert suggest("Gqa", ["gqa", "GQA2"]) == " Did you mean 'gqa'?"
    assert suggest("gqa", ["gqa", "mla"]) == ""
    assert suggest("gqb", ["gqa", "mla"]) == " Did you mean 'gqa'?"


def test_a_spec_with_cased_kinds_and_quoted_booleans_gets_fixes(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text('name: my-draft\ndraft:\n  attention: {kind: GQA}\n  norms: {hidden: "True"}\n'
                    '  fusion: {kind: eagle3, norm_before_residual: false, fc_norm: "false"}\nquant: {method: FP8}\n')
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    hints = {p.path: p.hint for p in info.value.problems}
    assert hints == {"draft.attention.kind": "Did you mean 'gqa'?",
                     "draft.norms.hidden": "Write true without quotes (in quotes it is a string)",
                     "draft.fusion.fc_norm": "Write false without quotes (in quotes it is a string)",
                     "quant.method": "Did you mean 'fp8'?"}, hints
