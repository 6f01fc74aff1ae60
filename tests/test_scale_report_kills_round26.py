"""Mutation round 26 on draftsmith.scale.report.plot: matplotlib (the optional extra 'bench') is absent here and in
CI, so plot() is read through a recording stand-in for matplotlib.pyplot: one axes per batch, tau from 1 to 7 in
quarter steps, a speculative row's tokens/s (B x tau / step seconds) only up to its depth's tau, a row that does not
speculate as a dashed level line, a row with an error not drawn, the figure's size, title, grid, legend and dpi,
and the PNG bytes written to the path returned."""
import sys
import types

import pytest

from draftsmith.scale.report import plot


class Axes:
    def __init__(self, log):
        self.log = log

    def plot(self, *args, **kw):
        self.log.append(("plot", args, kw))

    def set(self, **kw):
        self.log.append(("set", kw))

    def grid(self, **kw):
        self.log.append(("grid", kw))

    def legend(self, **kw):
        self.log.append(("legend", kw))


@pytest.fixture
def pyplot(monkeypatch):
    """A stand-in for matplotlib and matplotlib.pyplot that records the calls plot() makes."""
    calls = {"axes": [], "use": [], "subplots": [], "fig": []}

    class Figure:
        def tight_layout(self):
            calls["fig"].append("tight_layout")

        def savefig(self, buffer, **kw):
            calls["fig"].append(("savefig", kw))
            buffer.write(b"PNG bytes")

    def subplots(*args, **kw):
        calls["subplots"].append((args, kw))
        row = []
        for _ in range(args[1]):
            calls["axes"].append([])
            row.append(Axes(calls["axes"][-1]))
        return Figure(), [row]

    plt = types.ModuleType("matplotlib.pyplot")
    plt.subplots = subplots
    plt.close = lambda fig: calls["fig"].append("close")
    mpl = types.ModuleType("matplotlib")
    mpl.use = calls["use"].append
    mpl.pyplot = plt
    monkeypatch.setitem(sys.modules, "matplotlib", mpl)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", plt)
    return calls


TAUS = [1.0 + 0.25 * i for i in range(25)]   # 1.0, 1.25, ..., 7.0
RESULT = {"shape": "1b", "device": "cpu", "dtype": "float32", "batches": {
    1: {"target-only": {"step_ms": 4.0, "tok_s": 250.0},                     # no x_target_only: a level line
        "chain 6": {"step_ms": 8.0, "x_target_only": 2.0, "tau_max": 6},     # up to tau 6
        "broken": {"error": "E: no"}},                                      # not drawn
    4: {"tree 8": {"step_ms": 10.0, "x_target_only": 1.5},                   # no tau_max: every tau
        "hf": {"tok_s": 80.0}}}}


def test_the_plot_of_a_shape(pyplot, tmp_path):
    """What plot() draws and writes (kills the mutants of report.py:92-110: figure size, tau grid, depth cut,
    tokens/s arithmetic, which rows are drawn, title, grid, legend font and dpi)."""
    path = tmp_path / "1b.png"
    assert plot(RESULT, path) == path and path.read_bytes() == b"PNG bytes"
    assert pyplot["use"] == ["Agg"]
    assert pyplot["subplots"] == [((1, 2), {"figsize": (12, 4.5), "squeeze": False})]
    assert pyplot["fig"] == ["tight_layout", ("savefig", {"format": "png", "dpi": 120}), "close"]
    first, second = pyplot["axes"]
    reach = TAUS[:21]   # 1.0 .. 6.0
    assert first == [
        ("plot", (TAUS, [250.0] * 25, "--"), {"label": "target-only"}),
        ("plot", (reach, [1 * t / (8.0 / 1e3) for t in reach]), {"label": "chain 6"}),
        ("set", {"title": "1b, batch 1 (cpu, float32)", "xlabel": "tau (tokens per verification step)",
                 "ylabel": "tokens / s"}),
        ("grid", {"alpha": 0.3}), ("legend", {"fontsize": 7})]
    assert second[:2] == [("plot", (TAUS, [4 * t / (10.0 / 1e3) for t in TAUS]), {"label": "tree 8"}),
                          ("plot", (TAUS, [80.0] * 25, "--"), {"label": "hf"})]
    assert second[2] == ("set", {"title": "1b, batch 4 (cpu, float32)", "xlabel": "tau (tokens per verification step)",
                                 "ylabel": "tokens / s"})
    assert first[1][1][1][-1] == 750.0 and second[0][1][1][-1] == 2800.0   # 6 / 8 ms; 4 x 7 / 10 ms


def test_a_row_at_a_depth_between_the_quarters_stops_below_it(pyplot, tmp_path):
    """The depth's tau is a bound (t <= tau_max): 2.1 keeps 1.0 .. 2.0, and exactly 2.0 keeps 2.0 too."""
    for tau_max, last in ((2.1, 2.0), (2.0, 2.0), (1.9, 1.75)):
        pyplot["axes"].clear()
        result = {"shape": "s", "device": "cpu", "dtype": "bf16",
                  "batches": {2: {"r": {"step_ms": 1.0, "x_target_only": 1.0, "tau_max": tau_max}}}}
        plot(result, tmp_path / "s.png")
        [[draw, *_]] = pyplot["axes"]
        assert draw[1][0][-1] == last and draw[1][0][0] == 1.0
