"""`draftsmith bench` (the side-by-side runner) on a fake clock and fake methods: each method's seconds are the
median of its timed rounds after an untimed warm-up, the methods take turns, and the table's tokens/s and speed
are against draftsmith target-only. run_bench runs with its pair, the transformers peers and the argument checks
replaced by recorders, so the whole table is known to the digit without loading a model or timing anything."""
import inspect
import io
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from rich.console import Console

import draftsmith
import draftsmith.bench as bench
from draftsmith.decoding.stats import Stats
from draftsmith.threads import ThreadChoice

PROMPT_IDS = [5, 6, 7]


class Clock:
    """time.perf_counter for draftsmith.bench: it moves only when a fake method says it took some seconds."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(bench.time, "perf_counter", c)
    return c


def timed(clock, log, name, seconds, result=None):
    """A method that takes seconds[k] on its k-th call (0: the warm-up) and returns (name, k)."""
    calls = []

    def fn():
        k = len(calls)
        calls.append(k)
        log.append(name)
        clock.now += seconds[k]
        return (name, k) if result is None else result
    return fn


# --- _turns / _round_robin -----------------------------------------------------------------------

def test_seconds_are_the_median_of_the_timed_rounds_and_leave_the_warm_up_out(clock):
    log = []
    methods = {"a": timed(clock, log, "a", [50.0, 1.0, 9.0, 2.0]), "b": timed(clock, log, "b", [70.0, 4.0, 3.0, 8.0])}
    # catches bench.py:28 time.perf_counter() - t0 -> time.perf_counter() + t0
    assert bench._turns(methods, 3) == {"a": ([1.0, 9.0, 2.0], [("a", 1), ("a", 2), ("a", 3)]),
                                        "b": ([4.0, 3.0, 8.0], [("b", 1), ("b", 2), ("b", 3)])}
    log.clear()
    methods = {"a": timed(clock, log, "a", [50.0, 1.0, 9.0, 2.0]), "b": timed(clock, log, "b", [70.0, 4.0, 3.0, 8.0])}
    # the median (2 and 4), not the mean (4 and 5) nor the warm-up's 50 and 70; with the result of the round that
    # took it (a's third, b's first), not the last round's
    assert bench._round_robin(methods, 3) == {"a": (2.0, ("a", 3)), "b": (4.0, ("b", 1))}
    assert log == ["a", "b"] * 4   # one warm-up each, then the methods take turns


def test_one_method_is_timed_as_the_median_after_its_warm_up(clock):
    log = []
    f = timed(clock, log, "f", [30.0, 5.0, 1.0, 3.0, 2.0, 4.0])
    assert bench._round_robin({"f": f}, 5) == {"f": (3.0, ("f", 3))}
    assert len(log) == 6


def test_a_caller_that_warmed_up_the_methods_itself_gets_only_the_timed_rounds(clock):
    log = []
    methods = {"a": timed(clock, log, "a", [1.0, 3.0]), "b": timed(clock, log, "b", [2.0, 4.0])}
    assert bench._turns(methods, 2, warm_up=False) == {"a": ([1.0, 3.0], [("a", 0), ("a", 1)]),
                                                       "b": ([2.0, 4.0], [("b", 0), ("b", 1)])}
    assert log == ["a", "b", "a", "b"]
    # the default warms up: a first round nobody times
    # catches bench.py:15 warm_up: bool = True -> warm_up: bool = False
    log.clear()
    methods = {"a": timed(clock, log, "a", [9.0, 1.0]), "b": timed(clock, log, "b", [9.0, 2.0])}
    assert bench._turns(methods, 1) == {"a": ([1.0], [("a", 1)]), "b": ([2.0], [("b", 1)])}
    assert log == ["a", "b", "a", "b"]


def test_on_cuda_each_timed_run_is_bracketed_by_a_synchronize(clock, monkeypatch):
    """CUDA launches return before the GPU is done: the clock is read only after a synchronize, before and after
    each run (the warm-up needs none); on the CPU there is nothing to wait for."""
    log = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: log.append("sync"))
    # catches bench.py:43 torch.device(device).type == 'cuda' -> torch.device(device).type != 'cuda'
    bench._turns({"a": timed(clock, log, "a", [1.0, 1.0])}, 1, device="cpu")
    assert log == ["a", "a"]
    log.clear()
    assert bench._turns({"a": timed(clock, log, "a", [1.0, 2.0])}, 1, device="cuda:0") == {"a": ([2.0], [("a", 1)])}
    assert log == ["a", "sync", "a", "sync"]


# --- run_bench on a fake pair -----------------------------------------------------------------------------------

SECONDS = {   # per call: the warm-up first, then the timed rounds (the median of 1, 3 or 2 rounds is the middle one)
    "draftsmith target-only": [60.0, 2.0, 2.0, 2.0],
    "draftsmith chain (topk=1)": [60.0, 1.0, 1.0, 1.0],
    "draftsmith tree": [60.0, 0.5, 0.5, 0.5],
    "draftsmith tree, attention: flex": [60.0, 0.25, 0.25, 0.25],
    "draftsmith target-only, plain matmuls": [60.0, 4.0, 4.0, 4.0],
    "draftsmith tree, plain matmuls": [60.0, 1.0, 1.0, 1.0],
    "HF generate (target only)": [60.0, 4.0, 4.0, 4.0],
    "HF assisted (2-layer skip)": [60.0, 2.0, 2.0, 2.0],
    "HF prompt lookup (10 tokens)": [60.0, 8.0, 8.0, 8.0],
}


class Spec:
    def __init__(self, **decoding):
        self.decoding = decoding

    def with_decoding(self, **kw):
        return Spec(**(self.decoding | kw))


class Harness:
    """run_bench's collaborators as recorders: the pair (and its flex / plain-matmul twins), the argument check,
    the target's folder and the transformers peers."""

    def __init__(self, monkeypatch, clock, *, packed=False, made=16, hf_made=None):
        self.clock, self.made, self.hf_made = clock, made, made if hf_made is None else hf_made
        self.calls, self.counts, self.assembled, self.hf_args, self.checked = [], {}, [], None, None
        self.packed = packed
        monkeypatch.setattr("draftsmith.specs.loader.load_spec", lambda spec: Spec(spec=spec))
        monkeypatch.setattr(draftsmith, "assemble", self.assemble)
        monkeypatch.setattr("draftsmith.assembler.folders.checkpoint_dir",
                            lambda spec, target, kind: Path(f"/fake/{kind}"))
        monkeypatch.setattr("draftsmith.decoding.arguments.check_call", self.check_call)
        monkeypatch.setattr(bench, "_hf_models", self.hf_models)
        self.auto = []   # the devices --threads auto was measured on (run_bench's default: threads=None)
        monkeypatch.setattr(bench, "auto_threads", lambda run, device: self.auto.append(device) or ThreadChoice(
            1, {1: 0.25}))

    def check_call(self, model, prompt, **kw):
        self.checked = (prompt, kw)
        return [list(PROMPT_IDS)], True   # (prompts, single), as check_call returns

    def run(self, name, result):
        k = self.counts.get(name, 0)
        self.counts[name] = k + 1
        self.clock.now += SECONDS[name][k]
        return result

    def ds_result(self, tau, mode="v2", wall=1.0):
        # 4 verification steps in ``wall`` s (no prefill), a quarter of it outside forwards and an eighth addressing
        # keys; tau = committed / steps
        stats = Stats(mode=mode, wall_seconds=wall, forward_seconds=0.75 * wall, addressing_seconds=0.125 * wall,
                      steps=2, committed=round(2 * tau), target_forwards=4)
        return SimpleNamespace(token_ids=list(range(self.made)), stats=stats)

    def assemble(self, spec, *, target, draft, device, dtype):
        self.assembled.append(spec.decoding)
        suffix = {"flex": ", attention: flex"}.get(spec.decoding.get("attention"), "")
        suffix = ", plain matmuls" if spec.decoding.get("linear") == "plain" else suffix
        h = self

        class Pair:
            target = torch.nn.Sequential(torch.nn.Linear(1, 1))

            def generate(self, ids, **kw):
                h.calls.append(("generate" + suffix, ids, kw))
                name = "draftsmith chain (topk=1)" if kw.get("topk") == 1 else "draftsmith tree" + suffix
                return h.run(name, h.ds_result(2.5))

            def generate_baseline(self, ids, **kw):
                h.calls.append(("generate_baseline" + suffix, ids, kw))
                # the plain-matmul target-only twice as slow a step: each tree's step is measured against its own
                return h.run("draftsmith target-only" + suffix, h.ds_result(1.0, "baseline", 2.0 if suffix else 1.0))

        if self.packed and not suffix:
            Pair.target[0].packs = True   # what components.packed.is_packed reads
        return Pair()

    def hf_models(self, target_dir, keep_layers, device, dtype):
        self.hf_args = (target_dir, keep_layers, device, dtype)
        assistant = object()
        h = self

        class HF:
            def generate(self, x, **kw):
                h.calls.append(("hf", x.tolist(), kw))
                name = ("HF assisted (2-layer skip)" if kw.get("assistant_model") is assistant else
                        "HF prompt lookup (10 tokens)" if "prompt_lookup_num_tokens" in kw else
                        "HF generate (target only)")
                assert not torch.is_grad_enabled()   # the peers run under inference_mode
                return h.run(name, torch.zeros(1, x.shape[1] + h.hf_made, dtype=torch.long))

        return HF(), assistant


def rows_of(console):
    """The table's rows: method -> its cells, split on rich's box bars."""
    out = {}
    for line in console.file.getvalue().splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0] and cells[0] != "method":
            out[cells[0]] = cells[1:]
    return out


def bench_table(**kw):
    console = Console(file=io.StringIO(), width=250)
    rows = bench.run_bench(console=console, **kw)
    return rows, console


def test_the_table_gives_median_seconds_tokens_per_second_and_speed_against_target_only(monkeypatch, clock):
    h = Harness(monkeypatch, clock, made=16)
    rows, console = bench_table(max_new_tokens=16, repeats=3)
    # catches bench.py:109 made['draftsmith target-only'] / rows[...][0] -> made[...] * rows[...][0]
    # catches bench.py:125 made[name] / sec / base -> made[name] / sec * base  (and made[name] / sec -> * sec)
    # catches bench.py:123 100 * stats.decode_addressing_share -> 100 // ... (and 100 -> 99 / 101): 12.5, not 12.4/12.6
    share = "25.0% (+12.5% KV addressing, inside forwards)"
    assert rows_of(console) == {
        "draftsmith target-only": ["2.000", "8.0", "1.00x", "1.00", share],
        "draftsmith chain (topk=1)": ["1.000", "16.0", "2.00x", "2.50", share],
        "draftsmith tree": ["0.500", "32.0", "4.00x", "2.50", share],
        "HF generate (target only)": ["4.000", "4.0", "0.50x", "-", "-"],
        "HF assisted (2-layer skip)": ["2.000", "8.0", "1.00x", "-", "-"],
        "HF prompt lookup (10 tokens)": ["8.000", "2.0", "0.25x", "-", "-"],
    }
    assert {name: sec for name, (sec, _) in rows.items()} == {
        "draftsmith target-only": 2.0, "draftsmith chain (topk=1)": 1.0, "draftsmith tree": 0.5,
        "HF generate (target only)": 4.0, "HF assisted (2-layer skip)": 2.0, "HF prompt lookup (10 tokens)": 8.0}
    assert all(n == 4 for n in h.counts.values())   # a warm-up and 3 timed rounds each
    # catches bench.py:110 repeats != 1 -> repeats == 1 (the plural)
    title = ("bench: 16 new tokens, median of 3 rounds after a warm-up, cpu float32, 1 thread, prompt "
             "'def fibonacci(n):'")
    assert title in " ".join(console.file.getvalue().split())
    assert h.auto == ["cpu"]   # the default measured the thread count once, before anything was timed


def test_one_round_is_named_in_the_singular(monkeypatch, clock):
    Harness(monkeypatch, clock)
    _, console = bench_table(max_new_tokens=16, repeats=1)
    # catches bench.py:110 repeats != 1 -> repeats != 0 (and -> repeats != 2 with two rounds below)
    assert "median of 1 round after a warm-up" in console.file.getvalue()
    Harness(monkeypatch, clock)
    _, console = bench_table(max_new_tokens=16, repeats=2)
    assert "median of 2 rounds after a warm-up" in console.file.getvalue()


def test_the_prompts_markup_is_printed_as_text(monkeypatch, clock):
    Harness(monkeypatch, clock)
    _, console = bench_table(prompt="[bold]x[/bold]", repeats=1)
    assert "prompt '[bold]x[/bold]'" in console.file.getvalue()


def test_the_defaults_are_the_command_lines_64_tokens_and_3_rounds(monkeypatch, clock):
    """`draftsmith bench` passes its own defaults, so run_bench()'s are the Python API's: they are the same."""
    from draftsmith.cli.run import bench as cli_bench   # the command's options, defaults included

    options = inspect.signature(cli_bench).parameters
    assert (options["max_new_tokens"].default.default, options["repeats"].default.default) == (64, 3)
    h = Harness(monkeypatch, clock, made=64)
    _, console = bench_table()
    # catches bench.py:60 max_new_tokens=64 -> 63 / 65, and bench.py:61 repeats=3 -> 2 / 4
    assert "bench: 64 new tokens, median of 3 rounds" in console.file.getvalue()
    assert all(n == 4 for n in h.counts.values())
    assert {kw["max_new_tokens"] for _, _, kw in h.calls} == {64}


def test_a_console_given_gets_the_table(monkeypatch, clock, capsys):
    Harness(monkeypatch, clock)
    _, console = bench_table(repeats=1, max_new_tokens=16)
    # catches bench.py:74 console or Console() -> console and Console()
    assert "draftsmith tree" in console.file.getvalue() and capsys.readouterr().out == ""


def test_every_method_gets_the_checked_prompt_and_makes_exactly_n_tokens(monkeypatch, clock):
    """The prompt's ids are what the argument check encoded; draftsmith runs with no stop ids and transformers
    with min_new_tokens = max_new_tokens, greedy, so every method's seconds are for the same n tokens."""
    h = Harness(monkeypatch, clock)
    bench_table(max_new_tokens=16, repeats=1, prompt="hello", names={"max_new_tokens": "--max-new-tokens"})
    assert h.checked == ("hello", {"max_new_tokens": 16, "what": "draftsmith bench",
                                   "names": {"max_new_tokens": "--max-new-tokens"}})
    # catches bench.py:80 check_call(...)[0][0] -> [0][1] / [1][0] (the first prompt's ids)
    assert {str(ids) for _, ids, _ in h.calls} == {str(PROMPT_IDS), str([PROMPT_IDS])}
    ds = [kw for who, _, kw in h.calls if who != "hf"]
    assert ds and all(kw["max_new_tokens"] == 16 and kw["stop"] == [] for kw in ds)
    # catches bench.py:98 do_sample False -> True
    hf = [kw for who, _, kw in h.calls if who == "hf"]
    assert hf and all((kw["max_new_tokens"], kw["min_new_tokens"], kw["do_sample"]) == (16, 16, False) for kw in hf)


def test_the_method_labels_say_what_runs(monkeypatch, clock):
    """The chain is topk=1, the assistant keeps the target's first 2 layers, prompt lookup copies 10 tokens: the
    table's labels say so, and the calls must match them."""
    h = Harness(monkeypatch, clock)
    bench_table(max_new_tokens=16, repeats=1, dtype="bfloat16")
    # catches bench.py:84 topk=1 -> topk=2 / topk=0
    assert [kw.get("topk") for who, _, kw in h.calls if who == "generate"] == [1, None, 1, None]   # chain, tree
    # catches bench.py:96 _hf_models(target_dir, 2, ...) -> 3 / 1
    assert h.hf_args == (Path("/fake/target"), 2, "cpu", torch.bfloat16)
    # catches bench.py:103 prompt_lookup_num_tokens=10 -> 11 / 9
    assert [kw["prompt_lookup_num_tokens"] for who, _, kw in h.calls if "prompt_lookup_num_tokens" in kw] == [10, 10]


def test_tokens_per_second_counts_what_each_transformers_run_produced(monkeypatch, clock):
    """transformers returns the prompt and the new tokens: the tokens made are the difference in length."""
    Harness(monkeypatch, clock, made=16, hf_made=8)
    rows, console = bench_table(max_new_tokens=16, repeats=1)
    # catches bench.py:107 res.shape[1] - x.shape[1] -> + / shape[0] on either side
    table = rows_of(console)
    assert [table[name][1] for name in rows if name.startswith("HF")] == ["2.0", "4.0", "1.0"]
    assert table["HF assisted (2-layer skip)"][2] == "0.50x"


def test_the_flex_row_is_cuda_only(monkeypatch, clock):
    h = Harness(monkeypatch, clock)
    rows, _ = bench_table(max_new_tokens=16, repeats=1)
    # catches bench.py:87 torch.device(device).type == 'cuda' -> != 'cuda'
    assert "draftsmith tree, attention: flex" not in rows
    assert h.assembled == [{"spec": "demo", "graphs": "auto"}]


def test_a_packed_target_is_also_timed_with_plain_matmuls(monkeypatch, clock):
    """What decoding.linear buys: with packed weights, target-only and tree again with linear: plain."""
    h = Harness(monkeypatch, clock, packed=True)
    _, console = bench_table(max_new_tokens=16, repeats=1)
    table = rows_of(console)
    assert table["draftsmith target-only, plain matmuls"][:3] == ["4.000", "4.0", "0.50x"]
    assert table["draftsmith tree, plain matmuls"][:3] == ["1.000", "16.0", "2.00x"]
    assert h.assembled == [{"spec": "demo", "graphs": "auto"}, {"spec": "demo", "graphs": "auto", "linear": "plain"}]


def test_each_speculative_row_gets_its_step_against_its_own_target_only(monkeypatch, clock):
    """Under the table, as generate prints it: a draftsmith tree or chain's step in target-only steps of the same
    assembly (the plain-matmul tree against the plain-matmul target-only), and none for the other rows."""
    Harness(monkeypatch, clock, packed=True)
    _, console = bench_table(max_new_tokens=16, repeats=1)
    text = " ".join(console.file.getvalue().split())
    parts = "{} target-only decode steps (verification {}, draft forwards 0.00, the rest {}): faster than target-only "
    line = "{}: a step cost " + parts + "where tau > {} (this run: 2.50)"
    for name in ("draftsmith chain (topk=1)", "draftsmith tree"):
        assert line.format(name, "1.00", "0.75", "0.25", "1.00") in text
    assert line.format("draftsmith tree, plain matmuls", "0.50", "0.38", "0.12", "0.50") in text
    assert text.count("a step cost") == 3    # not the target-only rows, not transformers'
    monkeypatch.setattr("draftsmith.decoding.graphs.graphs_enabled", lambda setting, device: True)
    Harness(monkeypatch, clock)
    _, console = bench_table(max_new_tokens=16, repeats=1)
    text = " ".join(console.file.getvalue().split())
    # under whole-step graphs no split, only the whole step
    whole = ("draftsmith tree: a step cost 1.00 target-only decode steps: faster than target-only where tau > 1.00 "
             "(this run: 2.50)")
    assert whole in text


def test_the_outside_share_is_shown_only_where_the_runners_time_the_decoding(monkeypatch, clock):
    """With whole-step CUDA graphs the runners' timers do not see the decoding: the column says '-'."""
    Harness(monkeypatch, clock)
    # catches bench.py:116 not graphs_enabled(graphs, device) -> graphs_enabled(graphs, device)
    _, console = bench_table(max_new_tokens=16, repeats=1, graphs="off")
    assert rows_of(console)["draftsmith tree"][4].startswith("25.0% (+12.5%")
    monkeypatch.setattr("draftsmith.decoding.graphs.graphs_enabled", lambda setting, device: True)
    Harness(monkeypatch, clock)
    _, console = bench_table(max_new_tokens=16, repeats=1)
    assert {cells[4] for cells in rows_of(console).values()} == {"-"}
    assert rows_of(console)["draftsmith tree"][3] == "2.50"   # tau is still shown


def test_threads_given_are_set_and_named_and_nothing_is_measured(monkeypatch, clock):
    h = Harness(monkeypatch, clock)
    try:
        _, console = bench_table(repeats=1, max_new_tokens=16, threads=2)
        seen = torch.get_num_threads()
    finally:
        torch.set_num_threads(1)
    assert seen == 2 and h.auto == []
    assert "cpu float32, 2 threads, prompt" in " ".join(console.file.getvalue().split())


def test_auto_threads_says_its_choice_above_the_table(monkeypatch, clock):
    Harness(monkeypatch, clock)
    _, console = bench_table(repeats=1, max_new_tokens=16)
    text = " ".join(console.file.getvalue().split())
    assert "threads 1 thread: 0.25 s (--threads auto: the fastest of the tree timed at each count)" in text
    assert text.index("threads 1 thread") < text.index("bench: 16 new tokens")
