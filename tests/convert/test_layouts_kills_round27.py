"""Kills for convert/layouts.py survivors (round 27): a Layout read from layouts.yaml is frozen (one table row shared
by convert, train's export and ``specs``; no caller can change it for the others)."""
from __future__ import annotations

import dataclasses

import pytest

from draftsmith.convert.layouts import layouts


def test_a_layout_is_frozen():
    """Layout is a frozen dataclass: assigning a field of a table row raises."""
    row = next(iter(layouts().values()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.rope = "interleaved"


def test_the_d2t_length_is_the_draft_vocab_size_only_where_the_facts_state_none():
    """layout_facts: a d2t of N rows says draft_vocab_size N where the facts state none (vLLM and SGLang would build
    the target's vocabulary otherwise); a stated one is kept; a layout that drops the key gets none."""
    from draftsmith.convert.layouts import layout_facts

    plain = dataclasses.replace(next(iter(layouts().values())), drops=(), facts={})
    names = ["layers.0.self_attn.q_proj.weight", "d2t"]
    assert layout_facts(plain, {"hidden_size": 64}, names, 32) == {
        "hidden_size": 64, "num_hidden_layers": 1, "draft_vocab_size": 32}
    assert layout_facts(plain, {"draft_vocab_size": 48}, names, 32)["draft_vocab_size"] == 48
    assert "draft_vocab_size" not in layout_facts(plain, {}, names, None)
    dropping = dataclasses.replace(plain, drops=("draft_vocab_size",))
    assert "draft_vocab_size" not in layout_facts(dropping, {"draft_vocab_size": 48}, names, 32)
