"""The graph-replay wrappers on CPU, at their edges (mutation run 2026-11-25): graphs follow the setting and the
device, a disabled Replay is the function itself, and EmulatedReplay's capture runs the warm-ups a capture runs
(at least one, each from the kept state, which is restored after) and then replays into the same buffers."""
import pytest
import torch

from draftsmith.decoding.graphs import EmulatedReplay, Replay, graphs_enabled
from draftsmith.errors import OptionError


@pytest.mark.parametrize("setting, device, on", [("auto", "cuda", True), ("on", "cuda:0", True),
                                                 ("compile", "cuda", True), ("off", "cuda", False),
                                                 ("auto", "cpu", False), ("off", "cpu", False)])
def test_graphs_follow_the_setting_and_the_device(setting, device, on):
    assert graphs_enabled(setting, device) is on


@pytest.mark.parametrize("setting", ["on", "compile"])
def test_required_graphs_are_refused_without_cuda(setting):
    with pytest.raises(OptionError, match="needs a CUDA device"):
        graphs_enabled(setting, "cpu")


def test_a_disabled_replay_is_the_function_itself():
    """No graph, no CUDA pool, no copies: each call runs the function on the arguments it is given."""
    calls = []
    replay = Replay(lambda x: calls.append(x) or (x * 2,), False)
    x = torch.arange(3.0)
    assert replay.pool is None and Replay(lambda x: (x,), False, pool="mine").pool == "mine"
    (out,) = replay(x)
    assert torch.equal(out, x * 2) and calls[0] is x and len(calls) == 1 and replay.graphs == {}


def counting(state: torch.Tensor):
    """fn(x) -> (x + state,), advancing ``state`` by one in place (a step that commits); records each call."""
    calls = []

    def fn(x):
        calls.append(int(state))
        out = (x + state,)
        state.add_(1)
        return out
    return fn, calls


@pytest.mark.parametrize("warmup, runs", [(None, 2), (0, 1), (1, 1), (3, 3)])
def test_a_capture_warms_up_from_the_kept_state_and_restores_it(warmup, runs):
    """Each warm-up starts from the state the real call sees (restored before it), at least one runs (a capture
    needs an output to copy), two by default; the state is restored after, so the real call commits once."""
    state = torch.tensor(5)
    fn, calls = counting(state)
    replay = EmulatedReplay(fn, keep=(state,), **({} if warmup is None else {"warmup": warmup}))
    (out,) = replay(torch.zeros(2))
    assert calls == [5] * runs + [5] and int(state) == 6
    assert torch.equal(out, torch.full((2,), 5.0))


def test_emulated_outputs_are_the_same_buffers_overwritten_by_the_next_call():
    state = torch.tensor(0)
    fn, _ = counting(state)
    replay = EmulatedReplay(fn, keep=(state,))
    (first,) = replay(torch.zeros(2))
    (second,) = replay(torch.ones(2))
    assert second is first and torch.equal(first, torch.full((2,), 2.0))   # 1 + the state after one commit
    (other,) = replay(torch.zeros(3))       # another shape: its own buffers, in the same memory pool, so its
    assert other is not first and first.isnan().all()   # replay may overwrite the first shape's outputs
