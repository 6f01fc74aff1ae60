"""--threads auto (draftsmith/threads.py): the counts tried, the interleaved timing on a fake clock, the margin that
keeps fewer threads on a near-tie, what is set afterwards, and the CLI's option around it."""

import pytest
import torch
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.threads import MARGIN, ThreadChoice, auto_threads, counts, fastest_threads


@pytest.mark.parametrize("cpus, want", [(1, [1]), (2, [1, 2]), (3, [1, 2, 3]), (4, [1, 2, 4]), (6, [1, 2, 4, 6]),
                                        (8, [1, 2, 4, 8]), (96, [1, 2, 4, 8])])
def test_counts_are_powers_of_two_up_to_8_and_the_cpus_below_it(cpus, want):
    assert counts(cpus) == want


def test_counts_default_to_the_cpus_this_process_may_use(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2} if pid == 0 else set(range(64)), raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 64)   # the machine's; the affinity mask is what this process gets
    assert counts() == [1, 2, 3]
    monkeypatch.delattr("os.sched_getaffinity")       # (macOS, Windows): the CPU count, 1 when it is unknown
    monkeypatch.setattr("os.cpu_count", lambda: 3)
    assert counts() == [1, 2, 3]
    monkeypatch.setattr("os.cpu_count", lambda: None)
    assert counts() == [1]


class Fake:
    """A run whose seconds depend on torch's thread count (one list per count: its k-th run's time), on a clock
    that moves only when it runs; log: the counts it ran at, in order."""

    def __init__(self, seconds: dict[int, list[float]]):
        self.seconds, self.now, self.log = seconds, 0.0, []

    def clock(self) -> float:
        return self.now

    def __call__(self):
        n = torch.get_num_threads()
        self.now += self.seconds[n][sum(1 for m in self.log if m == n)]
        self.log.append(n)


def test_the_fastest_count_is_chosen_and_left_set():
    run = Fake({1: [1.0, 1.0], 2: [0.5, 0.5], 4: [0.75, 0.75]})   # (binary fractions: the clock's sums are exact)
    choice = fastest_threads(run, [1, 2, 4], clock=run.clock)
    assert choice == ThreadChoice(2, {1: 1.0, 2: 0.5, 4: 0.75}) and torch.get_num_threads() == 2


def test_rounds_interleave_and_each_count_keeps_its_fastest_run():
    run = Fake({1: [0.875, 0.25], 2: [0.375, 0.75]})   # a load that came and went: min, not the first nor the mean
    choice = fastest_threads(run, [2, 1], clock=run.clock)
    assert run.log == [1, 2, 2, 1]                  # every round starts one count later
    assert choice == ThreadChoice(1, {1: 0.25, 2: 0.375})
    run = Fake({1: [1.0] * 3, 2: [1.0] * 3, 4: [1.0] * 3})
    fastest_threads(run, [1, 2, 4], rounds=3, clock=run.clock)
    assert run.log == [1, 2, 4, 2, 4, 1, 4, 1, 2]


def test_more_threads_must_be_more_than_the_margin_faster():
    near = 1.0 / (1 + MARGIN) + 1e-3                # within the margin of 1 thread's time: 1 thread kept
    run = Fake({1: [1.0, 1.0], 2: [near, near]})
    assert fastest_threads(run, [1, 2], clock=run.clock).threads == 1 and torch.get_num_threads() == 1
    past = 1.0 / (1 + MARGIN) - 1e-3
    run = Fake({1: [1.0, 1.0], 2: [past, past]})
    assert fastest_threads(run, [1, 2], clock=run.clock).threads == 2
    # the fewest within the margin of the fastest, even when that is not the count next to it
    run = Fake({1: [1.0, 1.0], 2: [0.62, 0.62], 4: [0.6, 0.6]})
    assert fastest_threads(run, [1, 2, 4], clock=run.clock).threads == 2


def test_a_choice_is_a_value():
    choice = ThreadChoice(2, {2: 0.5})
    with pytest.raises(AttributeError):   # frozen: what was measured stays what it says
        choice.threads = 1


def test_one_count_is_set_without_running():
    torch.set_num_threads(2)
    run = Fake({})
    assert fastest_threads(run, [1], clock=run.clock) == ThreadChoice(1, {}) and run.log == []
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize("bad", [[], [0], [1, -2], [True], [1.5]])
def test_choices_that_are_not_thread_counts_are_refused(bad):
    with pytest.raises(ValueError, match="thread counts >= 1"):
        fastest_threads(lambda: None, bad)


def test_the_reason_names_the_choice_first_then_the_rest_fastest_first():
    choice = ThreadChoice(2, {1: 0.75, 2: 0.5, 4: 0.625})
    assert choice.reason() == "2 threads: 0.50 s, 4 threads 0.62 s, 1 thread 0.75 s"
    assert choice.said("the tree") == ("2 threads: 0.50 s, 4 threads 0.62 s, 1 thread 0.75 s (--threads auto: the "
                                       "fastest of the tree timed at each count)")
    assert ThreadChoice(1, {}).said("x") == "1 thread, nothing timed (one count) (--threads auto)"
    assert ThreadChoice(1, {}, why="one CPU").reason() == "1 thread, nothing timed (one CPU)"


def test_auto_on_the_cpu_warms_up_once_then_times_every_count(monkeypatch):
    monkeypatch.setattr("draftsmith.threads.counts", lambda: [1, 2])
    calls = []
    choice = auto_threads(lambda: calls.append(torch.get_num_threads()), "cpu")
    assert len(calls) == 5 and set(calls[1:]) == {1, 2}   # the warm-up at the count set before, then 2 rounds of 2
    assert choice.threads in (1, 2) and set(choice.seconds) == {1, 2}


def test_auto_on_an_accelerator_is_one_thread_and_runs_nothing():
    torch.set_num_threads(2)
    calls = []
    choice = auto_threads(lambda: calls.append(1), "cuda:0")
    assert choice == ThreadChoice(1, {}, why="on cuda the host only launches kernels") and calls == []
    assert torch.get_num_threads() == 1


def test_auto_on_one_cpu_is_one_thread_and_runs_nothing(monkeypatch):
    monkeypatch.setattr("draftsmith.threads.counts", lambda: [1])
    torch.set_num_threads(2)
    calls = []
    assert auto_threads(lambda: calls.append(1), "cpu") == ThreadChoice(1, {}, why="one CPU") and calls == []
    assert torch.get_num_threads() == 1


# --- the option ---------------------------------------------------------------------------------------------------

def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def plain(res) -> str:
    return " ".join(res.output.replace("│", " ").split())


@pytest.mark.parametrize("verb", ["generate", "bench"])
@pytest.mark.parametrize("value", ["x", "0", "-1", "2.0", "Auto", ""])
def test_a_threads_value_neither_auto_nor_a_count_is_a_usage_error(verb, value, monkeypatch):
    monkeypatch.setattr("draftsmith.assemble", lambda *a, **k: pytest.fail("assembled a pair"))
    res = run(verb, "--spec", "demo", "--threads", value)
    assert res.exit_code == 2 and "Invalid value for '--threads'" in plain(res), res.output
    assert "Input should be auto or an integer greater than or equal to 1" in plain(res), res.output


def test_past_the_cpu_count_the_message_offers_auto(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    res = run("generate", "--spec", "demo", "--threads", "3")
    assert res.exit_code == 2, res.output
    assert ("--threads is 3: allowed an integer in 1..2, this machine's CPU count (os.cpu_count()), or auto (the "
            "fastest count, measured)") in plain(res), res.output


def test_generate_measures_the_count_on_its_speculative_run_and_keeps_it(monkeypatch):
    from draftsmith.decoding.model import SpeculativeModel

    seen = []   # (max_new_tokens, thread count) of every generate call
    real = SpeculativeModel.generate
    now = [0.0]   # the probes' clock: a probe takes 1 s on one thread, 0.25 s on two (a real clock measured the
    # machine's load: 2 threads lost to 1 while another process held a core), so 2 threads must win

    def generate(self, p, **kw):
        seen.append((kw["max_new_tokens"], torch.get_num_threads()))
        now[0] += 1.0 if torch.get_num_threads() == 1 else 0.25
        return real(self, p, **kw)

    monkeypatch.setattr(SpeculativeModel, "generate", generate)
    monkeypatch.setattr("draftsmith.threads.CLOCK", lambda: now[0])
    monkeypatch.setattr("draftsmith.threads.counts", lambda: [1, 2])
    res = run("generate", "--spec", "demo", "--max-new-tokens", "12", "--no-compare")   # auto: the default
    assert res.exit_code == 0, res.output
    probes, timed = seen[:5], seen[5:]
    assert [n for n, _ in probes] == [8] * 5 and {t for _, t in probes[1:]} == {1, 2}
    assert plain(res).split("threads ", 1)[1].startswith("2 threads: 0.25 s, 1 thread 1.00 s")
    assert timed == [(12, 2)]                     # the run shown ran at the count chosen
    assert "(--threads auto: the fastest of the speculative run timed at each count)" in plain(res)
    seen.clear()
    res = run("generate", "--spec", "demo", "--max-new-tokens", "12", "--no-compare", "--threads", "2")
    assert res.exit_code == 0 and seen == [(12, 2)] and "--threads auto" not in res.output, res.output
