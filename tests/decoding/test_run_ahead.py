"""The decode loop runs one step ahead of the host (decoding/inflight.py, engine._loop): the step launched before
the host read the last one changes no token, never writes outside its row's region of the KV pools (a row that
finished runs it too), and is launched only where some row will need it."""
import pytest
import torch

from draftsmith.decoding import engine
from draftsmith.decoding.inflight import HostCopy, worth_running_ahead
from draftsmith.decoding.static_pool import StaticKVPool

PROMPTS = [[5, 6, 7, 8, 9], [1, 2], [9, 3, 3]]
CHAIN, TREE = dict(topk=1, steps=3), dict(topk=2, steps=3, draft_tokens=6)


def test_ahead_only_where_a_row_will_need_another_step():
    assert worth_running_ahead([[1], [1, 2]], [False, False], 4, 2)          # row 0: 1 + 2 < 4
    assert not worth_running_ahead([[1, 2], [1, 2]], [False, False], 4, 2)   # each: 2 + 2 = 4, done by then
    assert not worth_running_ahead([[1], [1, 2]], [True, False], 4, 2)       # row 0 is done already
    assert worth_running_ahead([[1], [1, 2]], [True, False], 5, 2)


def test_only_an_asynchronous_device_runs_ahead():
    from draftsmith.decoding import inflight

    assert inflight.runs_ahead(torch.device("cuda:1")) and not inflight.runs_ahead(torch.device("cpu"))
    t = torch.arange(3)
    assert inflight.to_device(t, torch.device("cpu")) is t


def test_a_model_decodes_with_its_own_cuda_device_current():
    """Events, streams and graph captures are made on the current device: a model on cuda:1 makes it current."""
    from draftsmith.decoding.model import on_device

    guard = on_device("cuda:1")
    assert isinstance(guard, torch.cuda.device) and guard.idx == 1
    assert not isinstance(on_device("cpu:0"), torch.cuda.device)


def test_a_dropped_step_is_waited_for_and_the_cpu_runs_in_lockstep(monkeypatch):
    """Where a stop token ends the run with a step launched ahead, the call waits for that step (its device time
    is this call's, not the next prefill's); on the CPU no step is launched ahead."""
    class Launched:
        def __init__(self, log, n):
            self.log, self.n = log, n

        def wait(self):
            self.log.append(f"wait {self.n}")

        def tolist(self):
            self.log.append(f"read {self.n}")
            return [[7]]

    def run(ahead: bool):
        monkeypatch.setattr(engine, "runs_ahead", lambda device: ahead)
        log, q = [], engine.Seq([1])
        st = engine.State(root=torch.zeros(1, dtype=torch.long), active=torch.ones(1, dtype=torch.bool))

        def launch():
            log.append(f"launch {len(log)}")
            return Launched(log, len(log) - 1)

        def emit(host):
            q.emit(host[0], engine.Settings(max_new_tokens=9, stop=frozenset({7})))

        engine._loop([q], engine.Settings(max_new_tokens=9), st, launch, emit, most_per_step=1)
        return log

    assert run(True) == ["launch 0", "launch 1", "read 0", "wait 1"]   # the stop token comes with step 0
    assert run(False) == ["launch 0", "read 0"]                        # lockstep (the CPU)


def test_a_host_copy_keeps_the_values_of_its_step():
    """What the host reads is copied out of the step's outputs, which the next replay overwrites."""
    root, new = torch.tensor([3, 4]), torch.tensor([[1, 2], [5, 6]])
    copy = HostCopy(root, new)
    root.fill_(0)
    new.fill_(0)
    assert copy.tolist() == [[3, 1, 2], [4, 5, 6]]


def _checked_writes(monkeypatch):
    """Every KV write lands in its own row's region of its pool or in the trash slot; every commit keeps each
    row's length within the capacity."""
    write, commit = StaticKVPool.write, StaticKVPool.commit
    seen = []

    def checked_write(self, layer, slots, **values):
        rows = torch.arange(slots.shape[0])[:, None]
        inside = (slots // self.capacity == rows) | (slots == self.trash)
        assert bool(inside.all()), f"a write left its row: {slots.tolist()} (capacity {self.capacity})"
        seen.append(1)
        return write(self, layer, slots, **values)

    def checked_commit(self, *args):
        commit(self, *args)
        assert int(self.lens.max()) <= self.capacity, (self.lens.tolist(), self.capacity)

    monkeypatch.setattr(StaticKVPool, "write", checked_write)
    monkeypatch.setattr(StaticKVPool, "commit", checked_commit)
    return seen


@pytest.mark.parametrize("run", [CHAIN, TREE])
def test_a_step_launched_after_every_row_finished_stays_in_the_pools(pairs, monkeypatch, run):
    """The worst case: a step launched ahead at the end of every run, after rows that commit steps + 1 tokens a
    step (the self draft accepts everything) reach max_new_tokens. 54 new tokens after a 5-token prompt needed
    exactly 64 slots before run-ahead: the step launched ahead wrote past them into the next row."""
    monkeypatch.setattr(engine, "worth_running_ahead", lambda *a: True)
    model = pairs["self"]
    monkeypatch.setattr(model, "_runners_cache", {})
    want = [o.token_ids for o in model.generate_baseline(PROMPTS[:2], max_new_tokens=54, stop=[])]
    seen = _checked_writes(monkeypatch)
    out = model.generate(PROMPTS[:2], max_new_tokens=54, stop=[], **run)
    assert [o.token_ids for o in out] == want and seen


@pytest.mark.parametrize("run", [CHAIN, TREE])
def test_running_ahead_changes_no_token(pairs, monkeypatch, run):
    """Greedy and sampled, batch 3, rows ended at different steps by stop tokens: the same tokens and statistics
    with and without run-ahead, greedy equal to target-only."""
    model = pairs["eagle3"]
    base = [o.token_ids for o in model.generate_baseline(PROMPTS, max_new_tokens=14, stop=[])]
    stop = [base[0][3], base[2][9]]
    want = [b[: next((i + 1 for i, t in enumerate(b) if t in stop), len(b))] for b in base]
    _checked_writes(monkeypatch)
    calls = dict(greedy={}, sampled=dict(temperature=0.9, seed=5))
    ahead = {k: model.generate(PROMPTS, max_new_tokens=14, stop=stop, **run, **kw) for k, kw in calls.items()}
    ahead["baseline"] = model.generate_baseline(PROMPTS, max_new_tokens=14, stop=stop)
    monkeypatch.setattr(engine, "worth_running_ahead", lambda *a: False)
    lockstep = {k: model.generate(PROMPTS, max_new_tokens=14, stop=stop, **run, **kw) for k, kw in calls.items()}
    lockstep["baseline"] = model.generate_baseline(PROMPTS, max_new_tokens=14, stop=stop)
    assert [o.token_ids for o in ahead["greedy"]] == want == [o.token_ids for o in ahead["baseline"]]
    for k in ahead:
        assert [o.token_ids for o in ahead[k]] == [o.token_ids for o in lockstep[k]], k
        a, b = ahead[k][0].stats, lockstep[k][0].stats
        assert (a.committed, a.accepted_per_position) == (b.committed, b.accepted_per_position), k
        assert a.target_forwards >= b.target_forwards   # a step launched ahead of a stop token is dropped


def test_a_row_the_prefill_ended_runs_no_step(pairs, monkeypatch):
    """A row whose first token is a stop token is inactive from the first step on (it ran one step before, and
    a step launched ahead made it two)."""
    model, prompts = pairs["eagle3"], [[5, 6, 7, 8, 9], [1, 2]]
    first = [o.token_ids[0] for o in model.generate_baseline(prompts, max_new_tokens=1, stop=[])]
    assert first[0] != first[1]
    seen = []
    spec_step, decode_step = engine.spec_step, engine.decode_step
    monkeypatch.setattr(engine, "spec_step", lambda t, d, p, s, root, active, *rest: seen.append(active.tolist())
                        or spec_step(t, d, p, s, root, active, *rest))
    monkeypatch.setattr(engine, "decode_step", lambda t, s, root, active, u: seen.append(active.tolist())
                        or decode_step(t, s, root, active, u))
    monkeypatch.setattr(model, "_runners_cache", {})
    out = model.generate(prompts, max_new_tokens=8, stop=[first[0]], **CHAIN)
    out += model.generate_baseline(prompts, max_new_tokens=8, stop=[first[0]])
    assert out[0].token_ids == out[2].token_ids == [first[0]] and seen and all(a == [False, True] for a in seen), seen
