"""A draft whose vocabulary is smaller than its family's ``decoding.topk`` (a toy reduced head of 1-3 tokens): inspect
proposed the family's topk 4 and then refused its own proposal ("decoding.topk: 4 candidates per node, but the draft's
vocabulary has 3 tokens"), so neither ``inspect`` nor ``generate --draft`` took the folder. The proposal's topk is the
vocabulary's size now, with a note; a vocabulary the family's topk fits keeps it."""
import pytest

from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.specs.loader import load_spec, parse_spec
from draftsmith.testing import write_eagle3, write_target


@pytest.mark.parametrize("vocab", [1, 3])
def test_the_proposal_drafts_at_most_the_tokens_the_draft_has(tmp_path, vocab):
    target = write_target(tmp_path / "t", "llama", seed=1)
    found = inspect_checkpoint(write_eagle3(tmp_path / "d", target, draft_vocab=vocab))
    assert found.spec["decoding"]["topk"] == vocab
    token = "token" if vocab == 1 else "tokens"
    assert f"decoding.topk: {vocab} (the draft's vocabulary has {vocab} {token}; the family's topk is more)" in \
        found.match.assumptions
    spec = parse_spec(found.spec)
    import draftsmith

    model = draftsmith.assemble(spec, target=target, device="cpu")
    out, ref = model.generate([1, 2, 3], max_new_tokens=6), model.generate_baseline([1, 2, 3], max_new_tokens=6)
    assert out.token_ids == ref.token_ids


@pytest.mark.parametrize("vocab", [4, 5])
def test_a_vocabulary_the_family_topk_fits_keeps_it(tmp_path, vocab):
    target = write_target(tmp_path / "t", "llama", seed=1)
    found = inspect_checkpoint(write_eagle3(tmp_path / "d", target, draft_vocab=vocab))
    family = load_spec(found.match.spec).decoding.topk
    assert found.spec["decoding"]["topk"] == family == 4
    assert not any(a.startswith("decoding.topk") for a in found.match.assumptions)


def test_the_tree_and_mode_follow_the_lowered_topk(tmp_path):
    """A family drafting a wide tree ({topk: 8, steps: 3, draft_tokens: 30}) on a 3-token draft: topk 3 alone
    left 30 nodes, more than a topk-3 tree of 3 steps drafts (22), and v2 on a 1-token draft left a chain to
    compact; the proposal refused its own folder either way (a review of the change)."""
    target = write_target(tmp_path / "t", "llama", seed=1)
    wide = tmp_path / "wide.yaml"
    wide.write_text("name: wide\nextends: eagle3-llama\ndecoding: {topk: 8, steps: 3, draft_tokens: 30, mode: v2}\n")
    found = inspect_checkpoint(write_eagle3(tmp_path / "d3", target, draft_vocab=3), spec=str(wide))
    assert {k: found.spec["decoding"][k] for k in ("topk", "steps", "draft_tokens", "mode")} == {
        "topk": 3, "steps": 3, "draft_tokens": 22, "mode": "v2"}
    assert "decoding.draft_tokens: 22 (the most a tree of topk 3 drafts in 3 steps)" in found.match.assumptions
    parse_spec(found.spec)
    found = inspect_checkpoint(write_eagle3(tmp_path / "d1", target, draft_vocab=1), spec=str(wide))
    assert {k: found.spec["decoding"][k] for k in ("topk", "draft_tokens", "mode")} == {
        "topk": 1, "draft_tokens": 30, "mode": "auto"}   # a chain of steps + 1: draft_tokens is not its bound
    assert ("decoding.mode: auto (v2, tree drafting with compaction, is unsupported here: topk is 1)"
            in found.match.assumptions)
    parse_spec(found.spec)
