"""The side-by-side benchmark's timing: a warm-up per method, then the methods take turns (a drifting machine
slows all of them alike)."""
import pytest
from transformers.utils import logging as hf_logging

from draftsmith.bench import _round_robin
from draftsmith.hub import quiet_transformers


def test_round_robin_warms_up_each_method_then_takes_turns():
    order = []
    methods = {"a": lambda: order.append("a") or len(order), "b": lambda: order.append("b") or len(order)}
    rows = _round_robin(methods, 3)
    assert order == ["a", "b"] * 4
    assert rows["a"][1] in (3, 5, 7) and rows["b"][1] in (4, 6, 8) and all(sec >= 0 for sec, _ in rows.values())
    assert _round_robin({"": lambda: "x"}, 2)[""][1] == "x"


def test_transformers_warnings_are_silenced_only_while_the_peers_run():
    before = hf_logging.get_verbosity()
    with quiet_transformers():
        assert hf_logging.get_verbosity() == hf_logging.ERROR
    assert hf_logging.get_verbosity() == before

    with pytest.raises(RuntimeError, match="peer failed"), quiet_transformers():
        raise RuntimeError("peer failed")
    assert hf_logging.get_verbosity() == before


def test_the_peers_loading_bar_is_hidden_only_while_they_load(monkeypatch):
    # transformers' "Loading weights" bar broke into the bench's table
    seen = []
    monkeypatch.setattr("transformers.AutoModelForCausalLM.from_pretrained",
                        lambda *a, **k: seen.append(hf_logging.is_progress_bar_enabled()) or pytest.fail("loaded"))
    assert hf_logging.is_progress_bar_enabled()
    with pytest.raises(pytest.fail.Exception):
        from draftsmith.bench import _hf_models
        _hf_models("nowhere", 1, "cpu", None)
    assert seen == [False] and hf_logging.is_progress_bar_enabled()
    with quiet_transformers():   # the default keeps them (a first fetch of the demo target shows its progress)
        assert hf_logging.is_progress_bar_enabled()


def test_every_method_makes_the_same_number_of_tokens(monkeypatch):
    """transformers is held to n tokens (min_new_tokens); draftsmith's runs must not stop earlier at a stop id,
    or its seconds (and its speed-up) would be for fewer tokens. tokens/s is what each run produced."""
    import io

    from rich.console import Console

    from draftsmith.bench import run_bench
    from draftsmith.decoding.model import SpeculativeModel

    calls = []
    for name in ("generate", "generate_baseline"):
        real = getattr(SpeculativeModel, name)
        monkeypatch.setattr(SpeculativeModel, name, lambda self, *a, _real=real, **kw: calls.append(kw) or
                            _real(self, *a, **kw))
    console = Console(file=io.StringIO(), width=200)
    rows = run_bench("demo", max_new_tokens=3, repeats=1, console=console)
    assert calls and all(kw.get("stop") == [] for kw in calls), calls
    assert all(len(res.token_ids) == 3 for name, (_, res) in rows.items() if name.startswith("draftsmith"))
    assert "draftsmith target-only" in console.file.getvalue()


def test_the_outside_share_is_the_decodings_and_absent_under_whole_step_graphs(monkeypatch):
    """The share outside forwards leaves the prefill out (its wall time and its forwards); where whole steps are
    CUDA graphs the runners' timers run only in the prefill and at capture, so the column says '-'."""
    import io

    from rich.console import Console

    from draftsmith.bench import run_bench

    console = Console(file=io.StringIO(), width=300)
    rows = run_bench("demo", max_new_tokens=4, repeats=1, console=console)
    st = rows["draftsmith tree"][1].stats
    assert 0 < st.prefill_forward_seconds <= st.forward_seconds and st.prefill_seconds > 0
    rest = st.wall_seconds - st.prefill_seconds
    assert st.decode_bookkeeping_share == pytest.approx(1 - (st.forward_seconds - st.prefill_forward_seconds) / rest)
    assert f"{100 * st.decode_bookkeeping_share:.1f}% (+" in console.file.getvalue()
    assert "inside forwards" in console.file.getvalue()
    assert "draftsmith tree: a step cost " in " ".join(console.file.getvalue().split())

    monkeypatch.setattr("draftsmith.decoding.graphs.graphs_enabled", lambda setting, device: True)
    console = Console(file=io.StringIO(), width=300)
    run_bench("demo", max_new_tokens=4, repeats=1, console=console)
    assert "inside forwards" not in console.file.getvalue() and "% (+" not in console.file.getvalue()
