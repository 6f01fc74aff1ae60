"""decoding.draft_dtype: a bfloat16 draft next to a float32 target proposes in bfloat16 (weights, activations, its KV)
and the output stays the target's, token for token; acceptance on the trained demo pair barely moves."""
import pytest
import torch

import draftsmith
from draftsmith import load_spec


@pytest.fixture(scope="module")
def pair():
    spec = load_spec("demo")
    return draftsmith.assemble(spec), draftsmith.assemble(spec.with_decoding(draft_dtype="bfloat16"))


PROMPTS = ["def fibonacci(n):", "import os\nimport sys\n\n", "class Parser:\n    def __init__(self"]


def test_the_draft_and_its_pool_take_the_draft_dtype(pair):
    fp32, bf16 = pair
    assert {p.dtype for p in bf16.draft.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in bf16.target.parameters()} == {torch.float32}
    _, draft_runner = bf16._runners([[1, 2, 3]], 8)
    target_runner, _ = bf16._runners([[1, 2, 3]], 8)
    assert draft_runner.pool.dtype == torch.bfloat16 and target_runner.pool.dtype == torch.float32
    assert fp32.draft_dtype == torch.float32


@pytest.mark.parametrize("plan", [dict(), dict(topk=1, steps=4), dict(topk=3, steps=4, draft_tokens=10)])
def test_a_bfloat16_draft_keeps_greedy_output_and_acceptance(pair, plan):
    torch.set_num_threads(1)
    fp32, bf16 = pair
    for prompt in PROMPTS:
        base = fp32.generate_baseline(prompt, max_new_tokens=40).token_ids
        ours = bf16.generate(prompt, max_new_tokens=40, **plan)
        assert ours.token_ids == base
        ref = fp32.generate(prompt, max_new_tokens=40, **plan)
        assert ours.stats.acceptance_length > 0.8 * ref.stats.acceptance_length


def test_a_bfloat16_draft_samples_and_batches(pair):
    _, bf16 = pair
    outs = bf16.generate(PROMPTS, max_new_tokens=16, temperature=0.8, seed=1)
    again = bf16.generate(PROMPTS, max_new_tokens=16, temperature=0.8, seed=1)
    assert [o.token_ids for o in outs] == [o.token_ids for o in again] and all(len(o.token_ids) == 16 for o in outs)
