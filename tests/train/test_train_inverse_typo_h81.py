"""A rename's stated inverse with a typo (`'^layers\\.(\\d+)\\.hiden_norm\\.'` for the names 'layers.\\1.hidden_norm.'
makes) validated, and train wrote those tensors under their canonical names without a word, where a rule with no
inverse at all gets export_notes.canonical_kept's note (a YAML-only new-layout walk-through, h81)."""
from test_train_review import written

from draftsmith.train.export_notes import canonical_kept

TYPO = ("{match: '^blocks\\.(\\d+)\\.hnorm\\.', replace: 'layers.\\1.hidden_norm.', "
        "inverse: ['^layers\\.(\\d+)\\.hiden_norm\\.', 'blocks.\\1.hnorm.']}")
RIGHT = TYPO.replace("hiden_norm", "hidden_norm")


def test_an_inverse_that_does_not_match_what_its_rule_makes_is_said(tmp_path):
    model, folder = written(tmp_path, [TYPO, "{match: '^fuse\\.', replace: 'fc.'}"],
                            ["fuse.weight", "layers.0.hidden_norm.weight", "layers.0.input_layernorm.weight"])
    assert canonical_kept(model, folder) == (
        f"note: 1 tensor(s) in {folder} are written under their canonical names ('layers.0.hidden_norm.weight'): "
        r"rule 0 (line 5): '^blocks\.(\d+)\.hnorm\.' -> 'layers.\1.hidden_norm.' has an inverse that does not match "
        "the names "
        "it makes (the spec reads both); state (or correct) `inverse: [match, replace]` on such a rule to write one "
        "naming")


def test_an_inverse_that_wrote_the_spec_names_is_not_said(tmp_path):
    model, folder = written(tmp_path, [RIGHT, "{match: '^midlayer\\.', replace: 'layers.0.'}"],
                            ["blocks.0.hnorm.weight", "layers.0.input_layernorm.weight", "layers.1.mlp.up_proj.weight"])
    assert canonical_kept(model, folder) is None
