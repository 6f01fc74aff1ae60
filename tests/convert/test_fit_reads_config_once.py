"""convert's fit reads the draft's config once: stand_in_model read it, and fit read it again for the vocabulary
sizes its tensors contradict (a review, h108); what it says is what it said. One helper (vocab.held_shapes) gives
the shapes those contradictions are judged on to a load, its refusal's note and fit."""
from __future__ import annotations

import json

from draftsmith.assembler import config
from draftsmith.assembler.vocab import held_shapes
from draftsmith.components.split_rule import SplitRule
from draftsmith.components.weights import RegexRule, RuleSet
from draftsmith.convert.fits import fit
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.testing import write_eagle3, write_target


def test_fit_reads_the_config_once_and_says_its_contradictions(tmp_path, monkeypatch):
    draft = write_eagle3(tmp_path / "d", write_target(tmp_path / "t"), draft_vocab=50)
    said = json.loads((draft / "config.json").read_text()) | {"vocab_size": 70}
    (draft / "config.json").write_text(json.dumps(said))
    spec = inspect_checkpoint(draft).spec
    reads, real = [], config.read_config_aside
    monkeypatch.setattr(config, "read_config_aside", lambda folder: reads.append(folder) or real(folder))
    found = fit(draft, spec)
    assert len(reads) == 1, reads
    assert found.contradictions == ["its config.json says vocab_size 70, but its t2d is [96]"]


class Info:
    def __init__(self, *shape):
        self.shape = shape


def test_held_shapes_leave_out_split_parts_ignored_and_colliding_names():
    rules = RuleSet([RegexRule(match=r"^midlayer\.", replace="layers.0."),
                     SplitRule(match=r"^qkv\.", into=["q.", "k."])], ignore=[r"^extra$"])
    infos = {"midlayer.fc.weight": Info(4, 8), "layers.0.fc.weight": Info(4, 9), "lm_head.weight": Info(50, 8),
             "qkv.weight": Info(6, 8), "extra": Info(1)}
    assert held_shapes(rules.remap(infos), infos) == {"lm_head.weight": (50, 8)}
