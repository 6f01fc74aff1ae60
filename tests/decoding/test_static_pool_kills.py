"""Mutation survivors of decoding/static_pool.py: fixed_kv's write/read/mask/pos checked against hand-built ones
where the engine's usual shapes hide a mistake (T != P, a query that skips pending offset 0, several queries that
see every key), the fresh prefill's addresses against the general path's on an empty pool, and the trash slot."""
import pytest
import torch

from draftsmith.decoding.static_pool import StaticKVPool, fixed_kv, fresh_index, kv_index


def _pool(lens, capacity=8, trim=True):
    pool = StaticKVPool([{"kv": (2, 1, 2)}], rows=len(lens), capacity=capacity)
    pool.lens.copy_(torch.tensor(lens))
    pool.eager_trim = trim
    return pool


@pytest.mark.parametrize("trim", [True, False])
def test_a_row_that_skips_the_first_pending_key(trim):
    # catches static_pool.py:173 P = rel_mask.shape[-1] -> shape[1] / shape[-2],
    # :153 span ... + rel_mask.shape[-1] -> shape[1] / shape[-2], :180 key < lens -> key <= lens
    # (a growing draft tree: T = 1 query, P = 3 pending; its ancestors are pending 1 and 2, not pending 0). The
    # engine's recorded acceptance (test_regression) catches these too, through the draft's tree; this names them.
    pool = _pool([2], trim=trim)
    kv, pos = fixed_kv(pool, torch.tensor([[2]]), torch.tensor([[2]]), torch.tensor([[[False, True, True]]]))
    S = 5 if trim else 8                                       # max(lens) + P on the eager CPU path
    assert kv.write.tolist() == [[4]] and pos.tolist() == [[4]]
    assert kv.mask.tolist() == [[[[1, 1, 0, 1, 1, 0, 0, 0][:S]]]]
    assert kv.read.tolist() == [[0, 1, 0, 3, 4, 0, 0, 0][:S]]


def test_several_queries_that_see_every_key_keep_their_mask():
    # catches static_pool.py:156 mask.shape[-2] == 1 -> mask.shape[-3] == 1
    # (mask None means bottom-right causal to a layer, not "every key": only one query may drop an all-True mask;
    # here two queries see both pending keys, so the first must still see the second; no engine forward builds
    # such a mask, every multi-query one is causal)
    pool = _pool([3])
    kv, _ = fixed_kv(pool, torch.tensor([[0, 1]]), torch.tensor([[0, 1]]), torch.ones(1, 2, 2, dtype=torch.bool))
    assert kv.mask is not None and kv.mask.shape == (1, 1, 2, 5) and bool(kv.mask.all())
    assert kv.read.tolist() == [[0, 1, 2, 3, 4]]


def test_the_fresh_prefill_addresses_equal_the_general_path_on_an_empty_pool():
    # catches static_pool.py:165 live = rows >= 0 -> rows > 0 / rows >= 1 (a live token at offset 0 would be
    # written to the trash slot; test_hf_oracle catches these too), :166 torch.where(live, rel_pos, 0) ->
    # torch.where(live, rel_pos, 1) (a padding token's position: only padding queries see padding keys and their
    # outputs are dropped, so a generation never shows it; fresh_index is kv_index for an empty pool, pos included)
    pool = _pool([0, 0, 0], capacity=5)
    rows = torch.tensor([[0, 1, 2], [0, -1, -1], [-1, -1, -1]])          # right-padded; row 2 inactive
    rel_pos = torch.arange(3).expand(3, 3)
    write, pos = fresh_index(pool.base, pool.trash, rows, rel_pos)
    t = pool.trash
    assert write.tolist() == [[0, 1, 2], [5, t, t], [t, t, t]]
    assert pos.tolist() == [[0, 1, 2], [0, 0, 0], [0, 0, 0]]
    causal = torch.tril(torch.ones(3, 3, dtype=torch.bool)).expand(3, 3, 3)
    ref_write, _, _, _, ref_pos = kv_index(pool.lens, pool.base, pool.key, pool.trash, rows, rel_pos, causal)
    assert torch.equal(write, ref_write) and torch.equal(pos, ref_pos)
    kv, got = fixed_kv(pool, rows, rel_pos, None, fresh=True)
    assert kv.fresh and torch.equal(kv.write, write) and torch.equal(got, pos)


def test_the_trash_is_the_one_slot_past_every_region():
    # catches static_pool.py:56 trash = rows * capacity -> rows // capacity (test_edge_review catches it too),
    # :52 rows * capacity + 1 slots -> rows * capacity + 2 (a spare slot that
    # nothing addresses: memory only, the layout the module's docstring states)
    pool = StaticKVPool([{"kv": (2, 1, 2)}, {"latent": (3,)}], rows=2, capacity=4)
    assert pool.trash == 8
    assert [t.shape[1] for t in pool._stacked] == [9, 9]
    # a padding token's write lands in the trash and in no row's region
    pool.lens.copy_(torch.tensor([1, 1]))
    kv, _ = fixed_kv(pool, torch.tensor([[0], [-1]]), torch.tensor([[0], [0]]), torch.ones(2, 1, 1, dtype=torch.bool))
    assert kv.write.tolist() == [[1], [8]]
    kv.exchange(0, kv=torch.full((2, 1, 2, 1, 2), 5.0))
    written = (pool.view(0)["kv"] == 5).flatten(2).all(-1)
    assert written.int().tolist() == [[0, 1, 0, 0], [0, 0, 0, 0]] and (pool.storage[0]["kv"][8] == 5).all()


def test_a_made_row_is_stored_where_exchange_would_store_it_and_another_layout_gets_its_error(monkeypatch):
    # KVBatch.exchange_made on the static fused path (one function makes and stores the rows) writes what
    # make-then-exchange writes, and returns what it returns; a layer whose pool tensors are not {name} alone
    # goes through exchange's checked write and its error (the fused store would write one tensor of several)
    from draftsmith.components import attention
    monkeypatch.setattr(attention, "kernel", lambda fn, fused: fn)   # the compiled function's own eager body

    def make(x):
        return x.sum(), x.expand(2, 1, 2, 1, 2)

    def batch(pool):   # one new token a row, after 1 and 2 committed
        pool.lens.copy_(torch.tensor([1, 2]))
        return fixed_kv(pool, torch.tensor([[0], [0]]), torch.tensor([[0], [0]]), torch.ones(2, 1, 1, dtype=bool))[0]

    x = torch.full((1, 1, 1, 1, 2), 5.0)
    pools, outs = [StaticKVPool([{"kv": (2, 1, 2)}], rows=2, capacity=4, fused=True) for _ in range(2)], []
    for pool in pools:
        kv = batch(pool)
        if not outs:
            outs.append(kv.exchange_made(0, "kv", make, (x,), False))
        else:
            out, rows = make(x)
            outs.append((out, *kv.exchange(0, kv=rows)))
    (out_f, got_f, mask_f), (out_e, got_e, mask_e) = outs
    assert torch.equal(pools[0].storage[0]["kv"], pools[1].storage[0]["kv"]) and (pools[0].view(0)["kv"] == 5).any()
    assert torch.equal(out_f, out_e) and torch.equal(got_f["kv"], got_e["kv"]) and torch.equal(mask_f, mask_e)
    other = batch(StaticKVPool([{"k": (1, 2), "v": (1, 2)}], rows=2, capacity=4, fused=True))
    with pytest.raises(ValueError, match="stores"):
        other.exchange_made(0, "kv", make, (x,), False)
