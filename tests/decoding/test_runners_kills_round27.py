"""Kills for decoding/runners.py survivors (round 27): the size of the step cache a target runner keeps (how many
captured steps, settings x key-span buckets, a process alternates between before one is captured again)."""
from draftsmith.decoding.runners import TargetRunner
from draftsmith.decoding.static_pool import StaticKVPool


def test_a_target_runners_step_cache_keeps_its_32_most_recent_steps():
    """catches runners.py StepCache.__init__: 'size: int = 32' -> 31 / 33 (the runner's cache held one step fewer or
    one more: on CUDA each evicted step is a graph captured again at its next use, and each kept one holds its
    graph's memory). On the CPU the steps run eagerly either way, so only the cache's contents show it."""
    pool = StaticKVPool([{"kv": (2, 1, 4)}], rows=1, capacity=64)
    steps = TargetRunner(None, pool, None, graphs=False).steps
    made = [steps.get(("decode", span), lambda: (), ()) for span in range(32)]
    assert len(steps.replays) == 32
    assert [steps.get(("decode", span), lambda: (), ()) for span in range(32)] == made   # every one a hit
    steps.get(("spec", 0), lambda: (), ())                 # the 33rd evicts the least recently used, span 0
    assert len(steps.replays) == 32 and ("decode", 0) not in steps.replays
    assert ("decode", 1) in steps.replays and steps.get(("decode", 1), lambda: (), ()) is made[1]
