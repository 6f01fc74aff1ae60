"""Mutation round 18 (decoding/arguments.py): gaps the hardening and decoding tests left."""
import pytest

from draftsmith.testing.longrope import write_longrope_pair

SMALL = dict(vocab_size=32)
ORIGINAL = 32   # the longrope target's original_max_position_embeddings (its context stays larger)


@pytest.fixture(scope="module")
def longrope(tmp_path_factory):
    import draftsmith

    folder, draft = write_longrope_pair(tmp_path_factory.mktemp("round18"), ORIGINAL, **SMALL)
    return draftsmith.assemble("eagle3-llama", target=folder, draft=draft, device="cpu", dtype="float32")


def test_a_longrope_prompt_past_the_original_positions_is_refused_with_one_new_token(longrope):
    """One new token still prefills the whole prompt, which transformers rotates with the long factors past
    original_max_position_embeddings: the call is refused at max_new_tokens=1 too, not only from 2 on."""
    from draftsmith.decoding.arguments import check_call
    from draftsmith.errors import ArgumentError

    ids = [(i * 7) % SMALL["vocab_size"] for i in range(ORIGINAL + 8)]
    with pytest.raises(ArgumentError) as err:
        check_call(longrope, ids, max_new_tokens=1)
    assert f"a {ORIGINAL + 8}-token prompt + max_new_tokens 1 runs past {ORIGINAL} positions" in str(err.value)
    check_call(longrope, ids[:ORIGINAL], max_new_tokens=1)   # a prompt of exactly the original positions fits


def test_the_floating_parameters_are_listed_once_and_reused_while_nothing_changed():
    """placement_problems' promise: the parameters are listed once (walking the modules was most of a call's cost)
    and checked by identity at each later call; a parameter swapped in since is listed again."""
    import torch

    import draftsmith
    from draftsmith.decoding.arguments import _floating

    model = draftsmith.assemble("demo")
    first = _floating(model, "target", model.target)
    walks = []
    real = type(model.target).modules
    model.target.modules = lambda: walks.append(1) or real(model.target)   # an instance attribute: a spy
    assert _floating(model, "target", model.target) is first and walks == []
    head = model.target.lm_head
    head.weight = torch.nn.Parameter(head.weight.detach().clone())   # swapped in: listed again
    again = _floating(model, "target", model.target)
    assert walks == [1] and any(p is head.weight for p in again[0]) and not any(p is head.weight for p in first[0])


@pytest.mark.parametrize("new", [0, -3])
def test_a_max_new_tokens_below_one_is_one_problem_not_also_a_longrope_one(longrope, new):
    """A count that is no count is refused on its own; it is not also measured against the longrope limit."""
    from draftsmith.decoding.arguments import check_call
    from draftsmith.errors import ArgumentError

    ids = [(i * 7) % SMALL["vocab_size"] for i in range(ORIGINAL + 8)]
    with pytest.raises(ArgumentError) as err:
        check_call(longrope, ids, max_new_tokens=new)
    lines = str(err.value).splitlines()
    assert lines[0].startswith("generate(): 1 problem") and f"max_new_tokens is {new};" in lines[1], lines


@pytest.mark.parametrize("names, field", [(None, "mode"), ({"mode": "--mode"}, "--mode")])
def test_mode_v2_on_a_recurrent_target_is_refused_under_the_callers_name(names, field):
    """A recurrent target's state is not rolled back: a call asking for v2 is refused (an ArgumentError naming the
    mode as its caller does), not an AttributeError, and not said under the Python name on the command line."""
    import dataclasses

    import draftsmith
    from draftsmith.decoding.arguments import check_overrides
    from draftsmith.decoding.modes import RECURRENT
    from draftsmith.errors import ArgumentError

    model = dataclasses.replace(draftsmith.assemble("demo"), recurrent=True)
    with pytest.raises(ArgumentError) as err:
        check_overrides(model, topk=4, steps=3, draft_tokens=8, mode="v2", what="generate()", names=names)
    assert str(err.value).splitlines()[1:] == [f"  {field}: v2 (tree drafting with compaction) is unsupported here: "
                                               f"{RECURRENT}; auto falls back to v1"]
    assert check_overrides(model, topk=4, steps=3, draft_tokens=8, mode="v1", what="generate()")["mode"] == "v1"
