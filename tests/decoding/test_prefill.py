"""The prefill: right-padded prompts go through target and draft in one forward over an empty pool (attention
over the prompt alone, no mask) and leave every row exactly as its prompt would alone."""
import pytest
import torch

from draftsmith.decoding import engine
from draftsmith.decoding.stats import Stats

PROMPTS = [[7], [5, 17, 3], [9, 1, 33, 7, 12, 40]]


def _prefill(model, prompts):
    target, draft = model._runners(prompts, 8)
    s = model._settings(8, 0.0, 1.0, 0, None, [])
    with torch.inference_mode():
        state = engine.prefill(target, draft, [engine.Seq(list(p)) for p in prompts], s, Stats())
    return state, target.pool, draft.pool


def test_a_padded_prefill_leaves_each_row_as_its_prompt_alone(pairs):
    model = pairs["eagle3"]
    batch, tpool, dpool = _prefill(model, PROMPTS)
    assert tpool.lens.tolist() == dpool.lens.tolist() == [len(p) for p in PROMPTS]
    kv = [[{n: t.clone() for n, t in pool.view(i).items()} for i in range(len(pool.layouts))]
          for pool in (tpool, dpool)]
    for b, prompt in enumerate(PROMPTS):
        alone, tp, dp = _prefill(model, [prompt])
        for name in ("root", "feed", "dlogits"):      # the first token, the draft's state and logits after it
            torch.testing.assert_close(getattr(batch, name)[b], getattr(alone, name)[0], rtol=0, atol=1e-12)
        for got, pool in zip(kv, (tp, dp)):           # the prompt's keys and values, in every layer
            for i in range(len(pool.layouts)):
                for n, t in pool.view(i).items():
                    torch.testing.assert_close(got[i][n][b, :len(prompt)], t[0, :len(prompt)], rtol=0, atol=1e-12)


def test_the_prefill_ignores_whatever_the_pool_held(pairs):
    """Invariant 16 at the prefill: rows at or past the length (here every row) are never read."""
    model = pairs["eagle1"]
    want = model.generate_baseline(PROMPTS[2], max_new_tokens=6, stop=[]).token_ids
    with torch.inference_mode():
        for runner in model._runners([PROMPTS[2]], 6):
            for t in runner.pool._stacked:
                t.fill_(float("nan"))
    assert model.generate_baseline(PROMPTS[2], max_new_tokens=6, stop=[]).token_ids == want
    assert model.generate(PROMPTS[2], max_new_tokens=6, stop=[]).token_ids == want


def test_the_prefill_is_timed_apart_from_decoding(pairs):
    out = pairs["eagle1"].generate(PROMPTS[2], max_new_tokens=6, stop=[])
    s = out.stats
    assert 0 < s.prefill_seconds < s.wall_seconds
    assert s.decode_tokens_per_second == pytest.approx((s.new_tokens - 1) / (s.wall_seconds - s.prefill_seconds))
    assert Stats(new_tokens=5, committed=4, wall_seconds=3.0, prefill_seconds=1.0).decode_tokens_per_second == 2.0
    assert Stats(new_tokens=1, wall_seconds=3.0, prefill_seconds=1.0).decode_tokens_per_second == 0.0


@pytest.mark.parametrize("call", ["generate", "generate_baseline"])
def test_a_batchs_decoding_rate_counts_each_rows_first_token_as_the_prefills(pairs, call):
    # a review: 4 rows of 12 tokens read (48 - 1) / rest, as if the prefill made one token in all; it made 4
    out = getattr(pairs["eagle1"], call)(PROMPTS[:3] + PROMPTS[:1], max_new_tokens=12, stop=[])
    s = out[0].stats
    assert s.new_tokens == 48 and s.committed == 44
    assert s.decode_tokens_per_second == pytest.approx(44 / (s.wall_seconds - s.prefill_seconds))


def test_one_new_token_is_the_prefills_and_runs_no_draft(pairs):
    model = pairs["eagle3"]
    out = model.generate(PROMPTS, max_new_tokens=1, stop=[])
    base = model.generate_baseline(PROMPTS, max_new_tokens=1, stop=[])
    assert [o.token_ids for o in out] == [b.token_ids for b in base] and all(len(o.token_ids) == 1 for o in out)
    assert out[0].stats.draft_forwards == out[0].stats.target_forwards == 0
