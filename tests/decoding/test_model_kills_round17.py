"""Kills survivors of scripts/mutate.py on draftsmith/decoding/model.py SpeculativeModel._runners: runners reused
by a later call of the same size (not remade every call), and the cache keeps the 4 most recently used."""
import pytest

import draftsmith
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    root = tmp_path_factory.mktemp("runners-pair")
    target = write_target(root / "target", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32, max_position_embeddings=64)
    return draftsmith.assemble("eagle3-llama", target=target, draft=write_eagle3(root / "draft", target))


def test_a_call_of_the_same_size_reuses_the_runners(model):
    """line 148 `a is not b` (as `is`) and line 149 `pair[0].model` (as pair[1]): the pair was dropped and made
    again at every call (its pools and CUDA graphs with it)."""
    first = model._runners([[1, 2]], 2)
    assert model._runners([[1, 2]], 2) is first
    out = model.generate([1, 2], max_new_tokens=2, stop=[])
    assert model._runners([[1, 2]], 2) is first and len(out.token_ids) == 2


def test_the_4_most_recently_used_runners_are_kept(model):
    """line 152 `lru_get(..., 4, ...)` (as 3 or 5)."""
    model._runners_cache.clear()
    pairs = [model._runners([[1, 2]] * rows, 2) for rows in range(1, 6)]   # five batch sizes: five keys
    assert len(model._runners_cache) == 4
    assert [k[0] for k in model._runners_cache] == [2, 3, 4, 5]
    assert model._runners([[1, 2]] * 5, 2) is pairs[-1]


def test_a_draft_dtype_of_its_own_sizes_the_draft_pool_alone(model):
    """line 127 (_pool, not changed today) `(self.draft_dtype or self.dtype) if model is self.draft` (as `is not`,
    or `and`): each pool in its own model's dtype."""
    import torch

    folders = model.folders
    own = draftsmith.assemble(model.spec.with_decoding(draft_dtype="bfloat16"), target=folders["target"],
                              draft=folders["draft"])
    target_runner, draft_runner = own._runners([[1, 2]], 2)
    assert (target_runner.pool.dtype, draft_runner.pool.dtype) == (torch.float32, torch.bfloat16)
    assert len(own.generate([1, 2], max_new_tokens=2, stop=[]).token_ids) == 2
