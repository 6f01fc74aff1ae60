"""The spec's ``decoding.topk`` against the draft's vocabulary is checked with the checkpoints (assemble and
validate), naming ``decoding.topk``: checked per call only, such a spec loaded and then refused every call as
if the caller had passed a topk (``--topk`` on the command line, though none was given)."""
import pytest

import draftsmith
from draftsmith.assembler.assemble import plan_assembly
from draftsmith.errors import SpecError
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("topk")
    target = write_target(root / "t", tokenizer=True)
    return target, write_eagle3(root / "d", target, draft_vocab=10)


@pytest.mark.parametrize("check", [plan_assembly, draftsmith.assemble])
def test_a_topk_past_the_drafts_vocabulary_is_the_specs_problem(pair, check):
    spec = draftsmith.load_spec("eagle3-llama").with_decoding(topk=16, draft_tokens=40)
    with pytest.raises(SpecError) as info:
        check(spec, *pair)
    (p,) = info.value.problems
    assert (p.path, p.message, p.allowed) == ("decoding.topk", "16 candidates per node, but the draft's vocabulary "
                                              "has 10 tokens", "1..10")


def test_a_topk_of_the_whole_vocabulary_decodes(pair):
    model = draftsmith.assemble(draftsmith.load_spec("eagle3-llama").with_decoding(topk=10, draft_tokens=40), *pair)
    out = model.generate([1, 2, 3], max_new_tokens=6)
    assert out.token_ids == model.generate_baseline([1, 2, 3], max_new_tokens=6).token_ids
