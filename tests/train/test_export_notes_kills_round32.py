"""export_notes.canonical_kept (round 32 mutation run): the note names at most three of the rules without an
inverse and says "and more" only past three; a folder with no weights written (an evaluation alone) gets no note,
whatever the spec's rules."""
import re

import pytest
from test_train_review import written

from draftsmith.train.export_notes import canonical_kept

RULES = ["{match: '^a\\.(\\d+)\\.', replace: 'layers.\\1.mlp.'}",
         "{match: '^b\\.(\\d+)\\.', replace: 'layers.\\1.self_attn.'}",
         "{match: '^c\\.(\\d+)\\.', replace: 'layers.\\1.input_layernorm.'}",
         "{match: '^e\\.(\\d+)\\.', replace: 'layers.\\1.post_attention_layernorm.'}"]
NAMES = ["layers.0.mlp.up_proj.weight", "layers.0.self_attn.q_proj.weight", "layers.0.input_layernorm.weight",
         "layers.0.post_attention_layernorm.weight"]


@pytest.mark.parametrize("count", [3, 4])
def test_three_rules_are_named_and_more_is_said_only_past_three(tmp_path, count):
    model, folder = written(tmp_path, RULES[:count], NAMES[:count])
    note = canonical_kept(model, folder)
    said = note.split("): ", 1)[1].split(" have no inverse")[0]
    # "rule i:" or, for a spec file's rule, "rule i (line N):"
    assert [bool(re.search(rf"rule {i}( \(line \d+\))?:", said)) for i in range(4)] == [True, True, True, False]
    assert said.endswith(" and more") == (count == 4), note


def test_no_note_where_no_weights_were_written(tmp_path):
    model, folder = written(tmp_path, RULES[:1], NAMES[:1])
    assert canonical_kept(model, folder) is not None
    (folder / "model.safetensors").unlink()
    assert canonical_kept(model, folder) is None
