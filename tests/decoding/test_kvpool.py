"""PagedKVPool and compact_rows: invariants 13-21 of docs/INVARIANTS.md, plus growth."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from draftsmith.decoding.kvpool import PagedKVPool, compact_rows

# one GQA layer (k and v of different head dims) and one MLA layer (latent + rope) in the same pool
LAYOUTS = [{"k": (2, 3), "v": (2, 5)}, {"latent": (4,), "rope": (2,)}]


def snapshot(pool):
    return [{name: t.clone() for name, t in layer.items()} for layer in pool.storage]


def write_random(pool, slots, gen):
    """Write fresh random values at slots [n] in every layer; return them as [{name: [n, *shape]}]."""
    out = []
    for layer, layout in enumerate(pool.layouts):
        vals = {name: torch.randn(len(slots), *shape, generator=gen) for name, shape in layout.items()}
        pool.write(layer, slots, **vals)
        out.append(vals)
    return out


def read_seq(pool, seq):
    """Committed KV of seq: [{name: [length, *shape]}] per layer."""
    slots = pool.slots([seq], [pool.length(seq)])
    return [{n: v[0] for n, v in pool.read(layer, slots).items()} for layer in range(len(pool.layouts))]


def committed_slots(pool, seqs):
    return torch.cat([pool.slots([s], [pool.length(s)])[0] for s in seqs])


def assert_bitwise(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(a.view(torch.int32), b.view(torch.int32))  # bit for bit, also for -0.0 / NaN payloads


def selections(n):
    """Strictly increasing lists into range(n) that start with 0 (the root is always kept)."""
    if n == 1:
        return st.just([0])
    return st.lists(st.integers(1, n - 1), unique=True, max_size=n - 1).map(lambda r: [0] + sorted(r))


@st.composite
def steps(draw):
    page_size = draw(st.sampled_from([1, 2, 4, 16]))
    prev_len = draw(st.integers(0, 40))
    n = draw(st.integers(1, 20))
    return page_size, prev_len, n, draw(selections(n)), draw(st.integers(1, 8)), draw(st.integers(0, 2**31 - 1))


# ---- invariants 13-17, 19, 21 on one verification step ------------------------------------------------------
@given(steps())
def test_commit_moves_selected_rows_and_nothing_else(step):
    page_size, prev_len, n, select, num_pages, seed = step
    gen = torch.Generator().manual_seed(seed)
    pool = PagedKVPool(LAYOUTS, page_size=page_size, num_pages=num_pages)
    seq, other = pool.add_sequence(), pool.add_sequence()
    for s in (seq, other):  # interleave so the two page tables are not contiguous
        for chunk in (prev_len // 2, prev_len - prev_len // 2):
            write_random(pool, pool.extend(s, chunk), gen)
            pool.commit(s)
    prefix, other_kv = read_seq(pool, seq), read_seq(pool, other)
    pages_before, free_before, total_before = pool.pages(seq), pool.free_pages, pool.num_pages

    pending_slots = pool.extend(seq, n)
    pending = write_random(pool, pending_slots, gen)
    before, free_pending = snapshot(pool), set(pool._free)
    pool.commit(seq, select)
    m = len(select)

    assert pool.length(seq) == prev_len + m  # 13
    after = read_seq(pool, seq)
    for layer, layout in enumerate(LAYOUTS):
        for name in layout:
            assert_bitwise(after[layer][name][prev_len:], pending[layer][name][select])  # 14
            assert_bitwise(after[layer][name][:prev_len], prefix[layer][name])  # 15
            assert_bitwise(read_seq(pool, other)[layer][name], other_kv[layer][name])

    # 17: the whole storage equals a copy made from a cloned snapshot (no other row moved)
    dst = pending_slots[:m]
    for layer in range(len(LAYOUTS)):
        for name, t in pool.storage[layer].items():
            ref = before[layer][name].clone()
            ref[dst] = before[layer][name][pending_slots[select]]
            assert_bitwise(t, ref)

    # 19: a hidden-state buffer holding the same rows moves with the same index map
    buf = torch.cat([prefix[0]["k"], pending[0]["k"]])
    assert_bitwise(compact_rows(buf, prev_len, torch.tensor(select))[: prev_len + m], after[0]["k"])

    # 21: pages past the committed length are freed, the rest stay; free count moves by the kept pages only
    kept = -(-(prev_len + m) // page_size)
    assert pool.pages(seq)[: len(pages_before)] == pages_before and len(pool.pages(seq)) == kept
    assert pool.free_pages - pool.num_pages == free_before - total_before - (kept - len(pages_before))
    if page_size == 1:
        assert pool.free_pages == free_before + (pool.num_pages - total_before) - m
        freed = set(pending_slots.tolist()) - set(committed_slots(pool, [seq]).tolist())
        assert set(pool._free) - free_pending == freed and len(pool._free) == len(set(pool._free))

    # 16: every slot holding no committed position becomes NaN; reading the committed range never sees one
    live = torch.zeros(pool.num_pages * page_size, dtype=torch.bool)
    live[committed_slots(pool, [seq, other])] = True
    for layer in pool.storage:
        for t in layer.values():
            t[~live] = float("nan")
    for layer, vals in enumerate(read_seq(pool, seq)):
        assert not any(v.isnan().any() for v in vals.values())
        assert_bitwise(vals["rope" if layer else "v"], after[layer]["rope" if layer else "v"])


# ---- 17: a hand-picked overlapping case ---------------------------------------------------------------------
@pytest.mark.parametrize("select", [[0, 2, 3], [0, 3, 4, 5], [0, 1, 3, 4]])
def test_overlapping_source_and_destination(select):
    gen = torch.Generator().manual_seed(0)
    pool = PagedKVPool(LAYOUTS, page_size=2, num_pages=8)
    seq = pool.add_sequence()
    write_random(pool, pool.extend(seq, 3), gen)
    pool.commit(seq)
    slots = pool.extend(seq, 6)
    pending = write_random(pool, slots, gen)
    before = snapshot(pool)
    # the case really overlaps: copying row by row from the last destination down reads a clobbered source
    naive = before[1]["latent"].clone()
    for d in reversed(range(len(select))):
        naive[slots[d]] = naive[slots[select[d]]]
    pool.commit(seq, select)
    ref = before[1]["latent"].clone()
    ref[slots[: len(select)]] = before[1]["latent"][slots[select]]
    assert_bitwise(pool.storage[1]["latent"], ref)
    assert not torch.equal(naive, ref)
    assert_bitwise(read_seq(pool, seq)[0]["k"][3:], pending[0]["k"][select])


# ---- 18: a chain is the identity, with no copy at all ------------------------------------------------------
@given(st.sampled_from([1, 2, 4, 16]), st.integers(0, 20), st.integers(1, 12), st.data())
def test_chain_commit_is_identity(page_size, prev_len, n, data):
    m = data.draw(st.integers(1, n))
    pool = PagedKVPool(LAYOUTS, page_size=page_size, num_pages=64)
    seq = pool.add_sequence()
    gen = torch.Generator().manual_seed(prev_len * 31 + n)
    write_random(pool, pool.extend(seq, prev_len), gen)
    pool.commit(seq)
    write_random(pool, pool.extend(seq, n), gen)
    before = snapshot(pool)
    versions = [{name: t._version for name, t in layer.items()} for layer in pool.storage]
    pool.commit(seq, list(range(m)))
    assert pool.length(seq) == prev_len + m
    for layer, old in zip(pool.storage, before):
        for name, t in layer.items():
            assert_bitwise(t, old[name])
    assert versions == [{name: t._version for name, t in layer.items()} for layer in pool.storage]


# ---- compact_rows -------------------------------------------------------------------------------------------
def test_compact_rows_batched_with_padding_and_tensor_start():
    buf = torch.arange(2 * 8 * 3, dtype=torch.float32).view(2, 8, 3)
    select = torch.tensor([[0, 2, 3], [0, 3, -1]])
    out = compact_rows(buf, torch.tensor([1, 2]), select)
    ref = buf.clone()
    ref[0, 1:4] = buf[0, [1, 3, 4]]
    ref[1, 2:4] = buf[1, [2, 5]]
    assert torch.equal(out, ref)
    assert torch.equal(buf, torch.arange(48, dtype=torch.float32).view(2, 8, 3))  # input untouched
    tokens = torch.arange(16).view(2, 8)
    assert compact_rows(tokens, 1, select)[0, :5].tolist() == [0, 1, 3, 4, 4]
    assert compact_rows(torch.arange(6), 0, torch.tensor([0, 2, 5])).tolist() == [0, 2, 5, 3, 4, 5]


@pytest.mark.parametrize("start,select,expected", [
    (0, [1, 2, 0], [1, 2, 0, 3]),  # a rotation: row 0 is overwritten before it is read as select[2]
    (1, [2, 0], [0, 3, 1, 3]),
])
def test_compact_rows_gathers_before_scattering(start, select, expected):
    assert compact_rows(torch.arange(4), start, torch.tensor(select)).tolist() == expected


@pytest.mark.parametrize("buf,select", [
    (torch.zeros(2, 5), torch.zeros(3, 2, dtype=torch.long)),  # batch sizes differ
    (torch.zeros(2, 5), torch.zeros(2, 2, 1, dtype=torch.long)),  # select is 3-D
])
def test_compact_rows_refuses_a_select_that_does_not_fit(buf, select):
    with pytest.raises(ValueError, match="does not fit buf"):
        compact_rows(buf, 0, select)


# ---- 21: page bookkeeping -----------------------------------------------------------------------------------
def test_free_pages_drop_rollback_and_re_extend():
    pool = PagedKVPool(LAYOUTS, page_size=1, num_pages=16)
    seq = pool.add_sequence()
    pool.extend(seq, 5)
    assert pool.free_pages == 11
    pool.extend(seq, 2)  # replaces the reservation: three pages come back, slots restart at length 0
    assert pool.free_pages == 14 and pool.slots([seq], [2]).tolist() == [pool.pages(seq)]
    pool.commit(seq, [0, 1])
    pool.extend(seq, 4)
    pool.commit(seq, [0, 3])
    assert pool.length(seq) == 4 and pool.free_pages == 12
    pool.rollback(seq, 1)
    assert pool.length(seq) == 1 and pool.free_pages == 15
    pool.drop_sequence(seq)
    assert pool.free_pages == 16 and sorted(pool._free) == list(range(16))
    with pytest.raises(KeyError):
        pool.length(seq)


@pytest.mark.parametrize("before", ["fresh", "commit", "rollback"])
def test_commit_without_a_reservation_keeps_nothing(before):
    pool = PagedKVPool(LAYOUTS, page_size=2, num_pages=4)
    seq = pool.add_sequence()
    if before != "fresh":
        pool.extend(seq, 3)
        pool.commit(seq)
    if before == "rollback":
        pool.rollback(seq, 2)
    length, free = pool.length(seq), pool.free_pages
    pool.commit(seq)
    assert pool.length(seq) == length and pool.free_pages == free
    with pytest.raises(ValueError):
        pool.commit(seq, [0])


def test_defaults_and_bad_sizes():
    pool = PagedKVPool(LAYOUTS)
    assert pool.page_size == 1 and pool.num_pages == pool.free_pages == 256
    for page_size, num_pages in ((0, 4), (4, 0)):
        with pytest.raises(ValueError, match="must be >= 1"):
            PagedKVPool(LAYOUTS, page_size=page_size, num_pages=num_pages)


def test_bad_arguments_are_refused():
    pool = PagedKVPool(LAYOUTS, page_size=2)
    seq = pool.add_sequence()
    slots = pool.extend(seq, 4)
    for bad in ([0, 0, 1], [1, 0], [0, 2, 1], [0, 4], [-1, 0]):
        with pytest.raises(ValueError):
            pool.commit(seq, bad)
    with pytest.raises(ValueError):
        pool.slots([seq], [5])
    with pytest.raises(ValueError):
        pool.write(0, slots, k=torch.zeros(4, 2, 3))  # v missing
    with pytest.raises(ValueError, match=r"layer 1 'latent': expected \(4, 4\), got \(4, 3\)"):
        pool.write(1, slots, latent=torch.zeros(4, 3), rope=torch.zeros(4, 2))
    pool.commit(seq, [0, 2])
    with pytest.raises(ValueError):
        pool.rollback(seq, 3)


def test_slots_pad_with_zero():
    pool = PagedKVPool(LAYOUTS, page_size=4, num_pages=4)
    a, b = pool.add_sequence(), pool.add_sequence()
    pool.extend(a, 6)
    pool.extend(b, 2)
    slots = pool.slots([a, b], [6, 2])
    pa, pb = pool.pages(a), pool.pages(b)
    assert slots.tolist() == [[pa[0] * 4, pa[0] * 4 + 1, pa[0] * 4 + 2, pa[0] * 4 + 3, pa[1] * 4, pa[1] * 4 + 1],
                              [pb[0] * 4, pb[0] * 4 + 1, 0, 0, 0, 0]]
    assert pool.read(1, slots)["latent"].shape == (2, 6, 4)
    assert pool.slots([], []).shape == (0, 0)
    with pytest.raises(ValueError):  # one total per sequence
        pool.slots([a, b], [2])


def test_growth_doubles_and_keeps_data():
    gen = torch.Generator().manual_seed(3)
    pool = PagedKVPool(LAYOUTS, page_size=2, num_pages=2)
    a, b = pool.add_sequence(), pool.add_sequence()
    kv_a = write_random(pool, pool.extend(a, 3), gen)
    pool.commit(a)
    assert pool.num_pages == 2 and pool.free_pages == 0
    kv_b = write_random(pool, pool.extend(b, 5), gen)  # needs 3 pages: 2 -> 4 -> 8
    pool.commit(b)
    assert pool.num_pages == 8 and pool.free_pages == 3
    assert all(t.shape[0] == 16 for layer in pool.storage for t in layer.values())
    for seq, kv in ((a, kv_a), (b, kv_b)):
        for layer, vals in enumerate(read_seq(pool, seq)):
            for name, v in vals.items():
                assert_bitwise(v, kv[layer][name])


# ---- 21: long random interleavings --------------------------------------------------------------------------
class PoolMachine(RuleBasedStateMachine):
    """Random add/extend/commit/rollback/drop over several sequences against a plain-list model of the data."""

    @initialize(page_size=st.sampled_from([1, 2, 4, 16]))
    def make(self, page_size):
        self.pool = PagedKVPool([{"k": (1,)}, {"latent": (2,)}], page_size=page_size, num_pages=2)
        self.model = {}  # seq -> list of committed values (one float per position)
        self.pending = {}  # seq -> pending values
        self.counter = 0.0

    @rule()
    def add(self):
        seq = self.pool.add_sequence()
        self.model[seq], self.pending[seq] = [], []

    @precondition(lambda self: self.model)
    @rule(data=st.data(), n=st.integers(0, 9))
    def extend(self, data, n):
        seq = data.draw(st.sampled_from(sorted(self.model)))
        slots = self.pool.extend(seq, n)
        vals = [self.counter + i for i in range(n)]
        self.counter += n
        v = torch.tensor(vals)
        self.pool.write(0, slots, k=v[:, None])
        self.pool.write(1, slots, latent=torch.stack([v, -v], 1))
        self.pending[seq] = vals

    @precondition(lambda self: any(self.pending.values()))
    @rule(data=st.data())
    def commit(self, data):
        seq = data.draw(st.sampled_from(sorted(s for s, p in self.pending.items() if p)))
        select = data.draw(selections(len(self.pending[seq])))
        self.pool.commit(seq, select)
        self.model[seq] += [self.pending[seq][i] for i in select]
        self.pending[seq] = []

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def rollback(self, data):
        seq = data.draw(st.sampled_from(sorted(self.model)))
        length = data.draw(st.integers(0, len(self.model[seq])))
        self.pool.rollback(seq, length)
        del self.model[seq][length:]
        self.pending[seq] = []

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def drop(self, data):
        seq = data.draw(st.sampled_from(sorted(self.model)))
        self.pool.drop_sequence(seq)
        del self.model[seq], self.pending[seq]

    @invariant()
    def pages_are_conserved_and_unique(self):
        if not hasattr(self, "pool"):
            return
        owned = [p for seq in self.model for p in self.pool.pages(seq)]
        free = self.pool._free
        assert len(owned) + self.pool.free_pages == self.pool.num_pages
        assert sorted(owned + free) == list(range(self.pool.num_pages))  # no duplicates, nothing lost
        for seq, vals in self.model.items():
            assert len(self.pool.pages(seq)) >= -(-len(vals) // self.pool.page_size)
            assert self.pool.length(seq) == len(vals)
            slots = self.pool.slots([seq], [len(vals)])
            assert self.pool.read(0, slots)["k"].flatten().tolist() == vals
            assert self.pool.read(1, slots)["latent"][0, :, 1].tolist() == [-v for v in vals]


TestPoolMachine = PoolMachine.TestCase
TestPoolMachine.settings = settings(TestPoolMachine.settings, stateful_step_count=40)
