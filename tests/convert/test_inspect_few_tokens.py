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
