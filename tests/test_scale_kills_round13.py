"""Mutation round 13 on draftsmith.scale (run, timing, report): the arithmetic and wiring of one scale run, read
off fakes in milliseconds (no model is assembled, nothing is timed by a real clock).

* :func:`measure`: the plans it runs (METHODS), the prompts it draws (seeded, tokens >= 2), the runs of 1 and of
  new_tokens tokens, each row's step cost (median over rounds of (tn - t1) / the run's extra target forwards), the
  ratios and projections, the bandwidth limit row, the single forwards it asks for (the decode forward once, without
  the taps; verify over the plan's tree, draft over topk tokens of a [B, 1, H] hidden), the rounds they take turns
  (max(repeats, 3)), the host-timer shares (CPU only), its log lines, when it saves and its defaults;
* :func:`hf_rows`: the generate calls, the warm-ups run here (so ``_turns`` gets ``warm_up=False``), the step cost
  over new_tokens - 1 steps, the graphs compiled, a compiled static row's name and an error cut to 200 characters;
* :func:`_previous` and :func:`run_scale`: what a previous results.json keeps, the folder made and marked before
  the first shape, what each shape's saves hold (the shapes before it, itself, the partial header until the last),
  its defaults (tiny on the CPU is small) and results.json's format;
* draftsmith.scale.timing off CUDA, on injected clocks: ms per call, 20 calls per turn, the copy bandwidth's bytes,
  the bytes a step reads without an embedding or a head, a single forward's arguments (causal mask, span, hidden
  per token), the CPU's name and torch.compile's figures;
* draftsmith.scale.report: a shape's whole markdown (header, about line, plurals, cells, shares, projections).
"""
import json
import types

import pytest
import torch

import draftsmith
import draftsmith.bench
import draftsmith.hub
import draftsmith.scale.run as bs
from draftsmith.scale.run import LIMIT, METHODS, PARTIAL

LABELS = ("target-only", *METHODS)
N = 6   # new_tokens of the faked runs
T1 = [1.0, 2.0, 3.0, 4.0, 5.0]
# (tn - t1) per round and the target forwards of the N-token run beyond the 1-token run's, per label:
# the step costs are [1, 3, 2], [3, 5, 4], [5, 3, 6], [10, 6, 8] ms, medians 2, 4, 5, 8
DIFFS = {"target-only": [0.005, 0.015, 0.010], "chain 6": [0.006, 0.010, 0.008], "tree 8": [0.015, 0.009, 0.018],
         "tree 32": [0.040, 0.024, 0.032]}
EXTRA = {"target-only": 5, "chain 6": 2, "tree 8": 3, "tree 32": 4}
STEP = {"target-only": 2.0, "chain 6": 4.0, "tree 8": 5.0, "tree 32": 8.0}
SHARES = {"target-only": (0.25, 0.125), "chain 6": (0.5, 0.0625), "tree 8": (0.375, 0.25), "tree 32": (0.75, 0.5)}
# single forwards: median ms of each one's samples (the samples are 0.5x, 1.5x, 1x, 1x, ... of it)
FWD = {"decode": 2.0, ("chain 6", "verify"): 3.0, ("chain 6", "draft"): 0.5, ("tree 8", "verify"): 4.0,
       ("tree 8", "draft"): 0.25, ("tree 32", "verify"): 10.0, ("tree 32", "draft"): 1.0}
WBYTES, BW = 2_000_000, 1e9   # the limit: 2 ms per step, B * 500 tok/s
HIDDEN = 4


def approx(x):
    return pytest.approx(x, rel=1e-9)


class Stats:
    def __init__(self, label, n):
        self.target_forwards = 7 + (EXTRA[label] if n > 1 else 0)   # the prefill and the first token's alike
        self.acceptance_length = 1.0 + len(label) / 10
        self.decode_bookkeeping_share, self.decode_addressing_share = SHARES[label]


class Model:
    """What measure() reads of an assembled model."""
    dtype = torch.float32

    def __init__(self):
        self.target = object()
        self.draft = types.SimpleNamespace(fc=types.SimpleNamespace(out_features=HIDDEN))
        self.generated, self.runners = [], []

    def generate_baseline(self, prompts, max_new_tokens, **kw):
        self.generated.append(("target-only", max_new_tokens, kw))
        return [types.SimpleNamespace(stats=Stats("target-only", max_new_tokens))]

    def generate(self, prompts, max_new_tokens, **kw):
        label = next(name for name, plan in METHODS.items() if plan == {k: v for k, v in kw.items() if k != "stop"})
        self.generated.append((label, max_new_tokens, kw))
        return [types.SimpleNamespace(stats=Stats(label, max_new_tokens))]

    def plan(self, *, topk, steps, draft_tokens=None):
        return types.SimpleNamespace(topk=topk, steps=steps, draft_tokens=draft_tokens or steps + 1)

    def _runners(self, prompts, new_tokens, plan=None):
        self.runners.append((len(prompts), new_tokens, plan and plan.draft_tokens))
        tag = "base" if plan is None else f"plan{plan.draft_tokens}"
        return f"target-{tag}", f"draft-{tag}"


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """measure()'s collaborators replaced; returns the record of what they were asked."""
    seen = types.SimpleNamespace(model=Model(), turns=[], forwards=[], fwd_turns=[], saves=[], logs=[], hf=[],
                                 assembled=[], pairs=[], bytes_of=[])

    def write_pair(root, name, device):
        seen.pairs.append((root, name, device))
        return root / "t", root / "d"

    def assemble(spec, *, target, draft, device, dtype):
        seen.assembled.append((spec.decoding.graphs, target, draft, device, dtype))
        return seen.model

    def turns(runs, repeats, device):
        seen.turns.append((list(runs), repeats, device))
        done = {key: fn() for key, fn in runs.items()}
        return {(label, n): ([t + (DIFFS[label][r % 3] if n > 1 else 0) for r, t in enumerate(T1[:repeats])],
                             [done[label, n]] * repeats) for label, n in runs}   # one result per round

    def forward_call(runner, T, B, prefix, device, hidden=None, hand_over=True):
        seen.forwards.append((runner, T, B, prefix, device, None if hidden is None else tuple(hidden.shape),
                              hand_over))
        return (lambda: None), f"{runner}/{T}"

    def turns_ms(fns, device, rounds):
        seen.fwd_turns.append((list(fns), device, rounds))
        return {name: [FWD[name] * f for f in (0.5, 1.5, *[1.0] * (rounds - 2))] for name in fns}

    def hf_rows(target_dir, prompts, device, dtype, new_tokens, repeats, log):
        seen.hf.append((target_dir, len(prompts), device, dtype, new_tokens, repeats))
        return {"transformers generate (dynamic cache)": {"step_ms": 1.0}}

    monkeypatch.setattr(bs, "write_pair", write_pair)
    monkeypatch.setattr(draftsmith, "assemble", assemble)
    monkeypatch.setattr(draftsmith.bench, "_turns", turns)
    monkeypatch.setattr(bs, "forward_call", forward_call)
    monkeypatch.setattr(bs, "turns_ms", turns_ms)
    monkeypatch.setattr(bs, "hf_rows", hf_rows)
    monkeypatch.setattr(bs, "copy_bandwidth", lambda device: BW)
    monkeypatch.setattr(bs, "weight_bytes", lambda model: seen.bytes_of.append(model) or WBYTES)
    monkeypatch.setattr(bs, "device_name", lambda device: f"name of {device}")
    monkeypatch.setitem(bs.SHAPES, "toy", {"vocab_size": 4})   # prompt tokens are 2 or 3
    seen.root = tmp_path
    seen.kw = dict(log=seen.logs.append, save=lambda partial: seen.saves.append(json.loads(json.dumps(partial))))
    return seen


def run_measure(fake, **kw):
    return bs.measure("toy", fake.root, **(dict(device="cpu", dtype="float32", batches=(1, 3), prompt_len=8,
                                                 new_tokens=N, repeats=3, hf=False) | fake.kw | kw))


# --- measure ---------------------------------------------------------------------------------------------------


def test_the_methods_are_the_published_plans():
    """benchmarks/results/*.md were measured with these plans: a chain of 6 nodes (5 steps), trees of 8 and 32."""
    assert METHODS == {"chain 6": dict(topk=1, steps=5), "tree 8": dict(topk=4, steps=5, draft_tokens=8),
                       "tree 32": dict(topk=8, steps=6, draft_tokens=32)}
    assert LIMIT == "bandwidth limit (target-only)" and PARTIAL == "(partial: measuring"


def test_every_method_runs_1_and_n_tokens_taking_turns(fake):
    run_measure(fake)
    keys = [(label, n) for label in LABELS for n in (1, N)]
    assert fake.turns == [(keys, 3, "cpu")] * 2
    want = [(label, n, {"stop": []} | ({} if label == "target-only" else METHODS[label])) for label, n in keys]
    assert fake.model.generated == want * 2
    assert fake.pairs == [(fake.root, "toy", "cpu")]
    assert fake.assembled == [("auto", fake.root / "t", fake.root / "d", "cpu", "float32")]
    assert fake.bytes_of == [fake.model.target]


def test_the_prompts_are_seeded_and_skip_the_special_tokens(fake, monkeypatch):
    seen = []
    monkeypatch.setattr(fake.model, "generate_baseline", lambda prompts, max_new_tokens, **kw: seen.append(
        prompts) or [types.SimpleNamespace(stats=Stats("target-only", max_new_tokens))])
    run_measure(fake, batches=(8, 2))
    g = torch.Generator().manual_seed(0)
    want = [torch.randint(2, 4, (B, 8), generator=g).tolist() for B in (8, 2)]
    assert seen == [want[0], want[0], want[1], want[1]]
    assert {t for row in want[0] for t in row} == {2, 3}


def test_each_rows_step_cost_ratios_and_projections(fake):
    out = run_measure(fake)
    assert list(out["batches"]) == [1, 3]
    for B, rows in out["batches"].items():
        assert rows[LIMIT] == {"step_ms": approx(2.0), "tok_s": approx(B * 500.0)}
        base = rows["draftsmith target-only"]
        assert base["step_ms"] == approx(2.0) and base["tok_s"] == approx(B * 500.0)
        assert base["step_samples_ms"] == approx([1.0, 3.0, 2.0])
        assert base["t1_s"] == T1[:3] and base["tn_s"] == approx([t + d for t, d in zip(T1, DIFFS["target-only"])])
        for label in LABELS:
            row = rows[f"draftsmith {label}"]
            assert row["step_ms"] == approx(STEP[label]) and row["target_forwards"] == EXTRA[label]
            assert row["tau_measured"] == Stats(label, N).acceptance_length
            assert (row["bookkeeping_share"], row["addressing_share"]) == SHARES[label]
        for label, plan in METHODS.items():
            row, step = rows[f"draftsmith {label}"], STEP[label]
            assert row["x_target_only"] == approx(step / 2.0) and row["tau_max"] == plan["steps"] + 1
            assert {k: row[k] for k in row if k.startswith("tok_s")} == {
                "tok_s_tau3": approx(B * 3 * 1e3 / step), "tok_s_tau4": approx(B * 4 * 1e3 / step),
                "tok_s_tau6": approx(B * 6 * 1e3 / step)}
            assert "tok_s" not in row   # a speculative row's speed is projected, not measured


def test_the_single_forwards_and_their_ratios(fake):
    out = run_measure(fake, repeats=2)
    for B in (1, 3):
        assert [f for f in fake.forwards if f[2] == B] == [
            ("target-base", 1, B, 8, "cpu", None, False),
            ("target-plan6", 6, B, 8, "cpu", None, True), ("draft-plan6", 1, B, 8, "cpu", (B, 1, HIDDEN), True),
            ("target-plan8", 8, B, 8, "cpu", None, True), ("draft-plan8", 4, B, 8, "cpu", (B, 1, HIDDEN), True),
            ("target-plan32", 32, B, 8, "cpu", None, True), ("draft-plan32", 8, B, 8, "cpu", (B, 1, HIDDEN), True)]
    assert fake.model.runners == [(B, N, tokens) for B in (1, 3) for tokens in (None, 6, 8, 32)]
    every = ["decode", *((label, kind) for label in METHODS for kind in ("verify", "draft"))]
    assert fake.fwd_turns == [(every, "cpu", 3)] * 2   # max(repeats, 3) rounds
    rows = out["batches"][3]
    base = rows["draftsmith target-only"]
    assert base["decode_forward_ms"] == 2.0 and base["decode_forward_samples_ms"] == [1.0, 3.0, 2.0]
    assert base["decode_forward_timed"] == "target-base/1"
    for label in METHODS:
        row, verify, draft = rows[f"draftsmith {label}"], FWD[label, "verify"], FWD[label, "draft"]
        assert row["verify_forward_ms"] == verify and row["draft_forward_ms"] == draft
        assert row["verify_forward_samples_ms"] == [verify * f for f in (0.5, 1.5, 1.0)]
        assert row["draft_forward_samples_ms"] == [draft * f for f in (0.5, 1.5, 1.0)]
        assert row["decode_forward_ms"] == 2.0 and row["verify_x_decode_forward"] == approx(verify / 2.0)
        assert row["draft_x_target_only"] == approx(draft / STEP["target-only"])
        assert row["draft_x_decode_forward"] == approx(draft / 2.0)
        assert row["forwards_timed"] == {"chain 6": "target-plan6/6", "tree 8": "target-plan8/8",
                                         "tree 32": "target-plan32/32"}[label]


def test_more_repeats_more_rounds_of_single_forwards(fake):
    run_measure(fake, repeats=5, batches=(1,))
    assert [rounds for *_, rounds in fake.fwd_turns] == [5]


def test_the_host_timer_shares_are_kept_on_the_cpu_only(fake):
    out = run_measure(fake, device="meta", batches=(2,))   # not a CPU: the host timers time no compute there
    rows = out["batches"][2]
    assert all(rows[f"draftsmith {label}"]["bookkeeping_share"] is None for label in LABELS)
    assert all(rows[f"draftsmith {label}"]["addressing_share"] is None for label in LABELS)
    assert out["device"] == "meta" and out["device_name"] == "name of meta" and out["graphs_enabled"] is False


def test_the_log_says_each_step_cost_and_ratio(fake):
    run_measure(fake, batches=(2,))
    assert fake.logs == ["  toy B=2 target-only 2.00 ms/step", "  toy B=2 chain 6 4.00 ms/step (2.00x)",
                         "  toy B=2 tree 8 5.00 ms/step (2.50x)", "  toy B=2 tree 32 8.00 ms/step (4.00x)",
                         "  toy B=2 one-token decode forward 2.00 ms; verify forwards chain 6 1.50x, tree 8 2.00x, "
                         "tree 32 5.00x"]


def test_each_phase_is_saved_as_it_ends(fake):
    out = run_measure(fake, batches=(1, 2), hf=True)
    assert len(fake.saves) == 6   # whole runs, single forwards, transformers' rows: per batch
    first, second, third = fake.saves[:3]
    assert "verify_forward_ms" not in first["batches"]["1"]["draftsmith tree 8"] and "2" not in first["batches"]
    assert "verify_forward_ms" in second["batches"]["1"]["draftsmith tree 8"]
    assert "transformers generate (dynamic cache)" not in second["batches"]["1"]
    assert "transformers generate (dynamic cache)" in third["batches"]["1"]
    assert fake.hf == [(fake.root / "t", B, "cpu", "float32", N, 3) for B in (1, 2)]
    assert json.loads(json.dumps(out)) == fake.saves[-1]


def test_the_defaults(fake):
    out = bs.measure("toy", fake.root, device="cpu", dtype="float32", log=fake.logs.append)
    assert list(out["batches"]) == [1, 8] and out["repeats"] == 3 and out["graphs"] == "auto"
    assert (out["prompt_len"], out["new_tokens"]) == (128, 128)
    assert [(B, n, repeats) for _, B, _, _, n, repeats in fake.hf] == [(1, 128, 3), (8, 128, 3)]
    assert fake.turns[0][0][:2] == [("target-only", 1), ("target-only", 128)] and fake.turns[0][1] == 3
    assert out["batches"][8][LIMIT]["tok_s"] == approx(8 * 500.0)


def test_the_record_says_what_ran_where(fake):
    out = run_measure(fake, graphs="off", batches=(1,))
    assert {k: out[k] for k in ("shape", "device", "device_name", "dtype", "graphs", "graphs_enabled", "repeats",
                                "weight_bytes", "copy_bandwidth", "prompt_len", "new_tokens")} == {
        "shape": "toy", "device": "cpu", "device_name": "name of cpu", "dtype": "float32", "graphs": "off",
        "graphs_enabled": False, "repeats": 3, "weight_bytes": WBYTES, "copy_bandwidth": BW, "prompt_len": 8,
        "new_tokens": N}
    assert out["threads"] == torch.get_num_threads() and fake.assembled[0][0] == "off"


# --- hf_rows ---------------------------------------------------------------------------------------------------


class HF:
    def __init__(self, seen, fail=None, compiled=False):
        self.seen, self.fail = seen, fail
        if compiled:
            self._compiled_call = object()

    def to(self, device):
        self.seen.append(("to", device))
        return self

    def eval(self):
        return self

    def generate(self, x, **kw):
        self.seen.append(("generate", tuple(x.shape), kw))
        if self.fail and kw.get("cache_implementation") == self.fail:
            raise RuntimeError("no " + "static cache " * 30)
        return x


@pytest.fixture
def hf(monkeypatch):
    """hf_rows()'s collaborators replaced: a fake transformers model, turns and compile counts."""
    from transformers import AutoModelForCausalLM

    seen = types.SimpleNamespace(calls=[], turns=[], loaded=[], quiet=[], model=None, graphs=iter([10, 10, 10, 13]))

    def load(path, dtype):
        seen.loaded.append((path, dtype))
        return seen.model

    def turns(runs, repeats, device, warm_up=True):
        seen.turns.append((list(runs), repeats, device, warm_up))
        diffs = {"dynamic": [0.005, 0.015, 0.010], "static": [0.010, 0.030, 0.020]}
        return {(label, n): ([t + (diffs[label.split()[2][1:]][r] if n == N else 0) for r, t in enumerate(T1[:3])],
                             None) for label, n in runs}

    real_quiet = draftsmith.hub.quiet_transformers
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", load)
    monkeypatch.setattr(draftsmith.bench, "_turns", turns)
    monkeypatch.setattr(draftsmith.hub, "quiet_transformers", lambda **kw: seen.quiet.append(kw) or real_quiet(**kw))
    monkeypatch.setattr(bs, "compile_summary", lambda: {"graphs": next(seen.graphs), "seconds": 0.0})
    return seen


PROMPTS = [[2, 3, 4, 5], [5, 4, 3, 2], [2, 2, 2, 2]]   # B = 3 rows of 4 tokens


def test_hf_rows_runs_its_warm_ups_and_reads_each_step(hf, tmp_path):
    hf.model = HF(hf.calls)
    logs = []
    rows = bs.hf_rows(tmp_path, PROMPTS, "cpu", "float32", N, 3, logs.append)
    assert hf.loaded == [(str(tmp_path), torch.float32)] and hf.quiet == [{"bars": False}]
    common = dict(do_sample=False, pad_token_id=0)
    assert hf.calls == [("to", "cpu")] + [
        ("generate", (3, 4), dict(max_new_tokens=n, min_new_tokens=n, **common, **extra))
        for extra in ({}, {"cache_implementation": "static"}) for n in (1, N)]
    dynamic, static = "transformers generate (dynamic cache)", "transformers generate (static cache)"
    assert hf.turns == [([(dynamic, 1), (dynamic, N), (static, 1), (static, N)], 3, "cpu", False)]
    assert list(rows) == [dynamic, static]
    for label, step, compiled in ((dynamic, 2.0, 0), (static, 4.0, 3)):
        row = rows[label]
        assert row["step_ms"] == approx(step) and row["tok_s"] == approx(3 / (step / 1e3))
        assert row["target_forwards"] == N - 1 and row["graphs_compiled"] == compiled
        assert row["t1_s"] == T1[:3] and len(row["tn_s"]) == len(row["step_samples_ms"]) == 3
    assert "compiled" not in rows[dynamic] and rows[static]["compiled"] is False
    assert logs == [f"  HF B=3 {dynamic}: 2.00 ms/step", f"  HF B=3 {static}: 4.00 ms/step"]


def test_a_compiled_static_row_is_named_so(hf, tmp_path):
    hf.model = HF(hf.calls, compiled=True)
    rows = bs.hf_rows(tmp_path, PROMPTS, "cpu", "float32", N, 3, lambda line: None)
    assert list(rows) == ["transformers generate (dynamic cache)", "transformers generate (static cache, compiled)"]
    assert rows["transformers generate (static cache, compiled)"]["compiled"] is True


def test_a_failing_peer_is_an_error_row_of_200_characters(hf, tmp_path):
    hf.model = HF(hf.calls, fail="static")
    hf.graphs = iter([10, 12, 12])
    rows = bs.hf_rows(tmp_path, PROMPTS, "cpu", "float32", N, 3, lambda line: None)
    error = rows["transformers generate (static cache)"]["error"]
    assert len(error) == 200 and error.startswith("RuntimeError: no static cache")
    dynamic = "transformers generate (dynamic cache)"
    assert [keys for keys, *_ in hf.turns] == [[(dynamic, 1), (dynamic, N)]]
    assert rows[dynamic]["graphs_compiled"] == 2


def test_failing_turns_are_an_error_row_per_peer(hf, tmp_path, monkeypatch):
    hf.model = HF(hf.calls)
    monkeypatch.setattr(draftsmith.bench, "_turns", lambda *a, **k: (_ for _ in ()).throw(ValueError("x" * 300)))
    rows = bs.hf_rows(tmp_path, PROMPTS, "cpu", "float32", N, 3, lambda line: None)
    assert rows == {f"transformers generate ({c} cache)": {"error": ("ValueError: " + "x" * 300)[:200]}
                    for c in ("dynamic", "static")}


# --- _previous and run_scale -----------------------------------------------------------------------------------


def test_previous_keeps_the_shapes_a_run_wrote(tmp_path):
    assert bs._previous(tmp_path) == []
    (tmp_path / "results.json").write_text("[{")
    assert bs._previous(tmp_path) == []
    (tmp_path / "results.json").write_text('{"shape": "1b", "batches": {}}')
    assert bs._previous(tmp_path) == []
    good = {"shape": "1b", "batches": {}}
    (tmp_path / "results.json").write_text(json.dumps([1, {"shape": 3, "batches": {}}, {"shape": "8b"},
                                                       {"batches": {}}, {"shape": "x", "batches": []}, good]))
    assert bs._previous(tmp_path) == [good]


@pytest.fixture
def scale(monkeypatch, tmp_path):
    """run_scale() with measure(), plot() and compile_summary() replaced; records what measure was asked and what
    the files held when it saved."""
    seen = types.SimpleNamespace(measured=[], at_start=[], files=[], plots=[], graphs=iter(range(100)))

    def measure(name, root, *, save, **kw):
        seen.measured.append((name, root, kw))
        folder = seen.out
        seen.at_start.append((folder / "results.json").read_text())
        r = {"shape": name, "device": kw["device"], "dtype": kw["dtype"], "prompt_len": 8, "new_tokens": 6,
             "weight_bytes": 1e9, "copy_bandwidth": 1e10, "batches": {1: {LIMIT: {"tok_s": 1.0}}}}
        save(r)
        seen.files.append(((folder / "results.md").read_text(), json.loads((folder / "results.json").read_text())))
        return r

    def plot(r, path):
        seen.plots.append(path)
        return seen.png

    monkeypatch.setattr(bs, "measure", measure)
    monkeypatch.setattr(bs, "plot", plot)
    monkeypatch.setattr(bs, "compile_summary", lambda: {"graphs": next(seen.graphs), "seconds": 0.5})
    seen.png, seen.out = None, tmp_path / "a" / "b"
    return seen


def test_run_scale_defaults_on_the_cpu(scale):
    logs = []
    [r] = bs.run_scale(out=scale.out, log=logs.append)
    [(name, root, kw)] = scale.measured
    assert (name, root) == ("tiny", scale.out / "checkpoints")
    assert {k: v for k, v in kw.items() if k != "log"} == dict(
        device="cpu", dtype="float32", batches=(1, 8), prompt_len=32, new_tokens=24, repeats=3, hf=True,
        graphs="auto")
    assert scale.at_start == ["[]\n"]   # the folder is made and marked before the first shape
    assert r["compile"] == {"graphs": 1, "seconds": 0.5} and r["plot"] is None   # as the log line says it
    assert logs == ["  tiny: torch.compile so far: 1 graphs, 0.5 s compiling"]
    assert scale.plots == [scale.out / "tiny.png"]


def test_a_shape_named_twice_is_measured_once_and_a_stale_plot_is_removed(scale):
    """--scale tiny,tiny wrote tiny's rows twice; a rerun without matplotlib left the previous run's tiny.png,
    whose numbers are not results.json's."""
    scale.out.mkdir(parents=True)
    (scale.out / "results.json").write_text("[]\n")
    (scale.out / "tiny.png").write_bytes(b"old plot")
    (scale.out / "1b.png").write_bytes(b"another shape's")
    bs.run_scale(["tiny", "tiny"], scale.out, log=lambda line: None)
    assert [m[0] for m in scale.measured] == ["tiny"]
    assert [r["shape"] for r in json.loads((scale.out / "results.json").read_text())] == ["tiny"]
    assert not (scale.out / "tiny.png").exists() and (scale.out / "1b.png").read_bytes() == b"another shape's"


@pytest.mark.parametrize("shape, device, want", [("tiny", "cuda", (128, 128, "bfloat16")),
                                                 ("1b", "cpu", (128, 128, "float32"))])
def test_only_tiny_on_the_cpu_is_small(scale, shape, device, want):
    bs.run_scale([shape], scale.out, device=device, log=lambda line: None)
    [(_, _, kw)] = scale.measured
    assert (kw["prompt_len"], kw["new_tokens"], kw["dtype"]) == want


def test_run_scale_passes_what_it_is_given(scale, tmp_path):
    bs.run_scale(["tiny"], scale.out, device="cpu", dtype="bfloat16", batches=(2,), prompt_len=5, new_tokens=7,
                 repeats=1, hf=False, graphs="off", checkpoints=tmp_path / "ck", log=lambda line: None)
    [(_, root, kw)] = scale.measured
    assert root == tmp_path / "ck"
    assert {k: v for k, v in kw.items() if k != "log"} == dict(
        device="cpu", dtype="bfloat16", batches=(2,), prompt_len=5, new_tokens=7, repeats=1, hf=False, graphs="off")


def test_each_save_holds_the_shapes_before_and_says_partial_until_the_last(scale):
    scale.out.mkdir(parents=True)
    previous = [{"shape": "old", "batches": {}}, {"shape": "1b", "batches": {}, "run": 1}]
    (scale.out / "results.json").write_text(json.dumps(previous))
    scale.png = scale.out / "x.png"
    results = bs.run_scale(["tiny", "1b", "8b"], scale.out, log=lambda line: None)
    assert scale.at_start[0] == json.dumps(previous)   # not reset to [] before the first shape
    # the previous 1b stays until the new one is complete; the shape being measured is marked partial
    assert [[(r["shape"], r.get("partial", r.get("run"))) for r in rows] for _, rows in scale.files] == [
        [("old", None), ("1b", 1), ("tiny", True)], [("old", None), ("tiny", None), ("1b", 1), ("1b", True)],
        [("old", None), ("tiny", None), ("1b", None), ("8b", True)]]
    assert [md.splitlines()[0] for md, _ in scale.files] == [
        f"{PARTIAL} {name}; this run is still going, or was cut off)" for name in ("tiny", "1b", "8b")]
    saved = (scale.out / "results.json").read_text()
    assert [r["shape"] for r in json.loads(saved)] == ["old", "tiny", "1b", "8b"]
    assert saved == json.dumps(json.loads(saved), indent=1)
    assert not (scale.out / "results.md").read_text().startswith(PARTIAL)
    assert [r["plot"] for r in results] == [str(scale.out / "x.png")] * 3
    assert scale.plots == [scale.out / f"{name}.png" for name in ("tiny", "1b", "8b")]


def test_the_last_save_of_each_shape_before_the_last_is_still_partial(scale, monkeypatch):
    heads = []
    real = bs.write_atomic
    monkeypatch.setattr(bs, "write_atomic", lambda path, text: heads.append((path.name, text.split("\n")[0])) or
                        real(path, text))
    bs.run_scale(["tiny", "1b"], scale.out, log=lambda line: None)
    md = [head for name, head in heads if name == "results.md"]
    assert [h.startswith(PARTIAL) for h in md] == [True, True, True, False]   # measure's save, run_scale's


def test_an_existing_out_folder_is_taken_again(scale):
    scale.out.mkdir(parents=True)
    bs.run_scale(["tiny"], scale.out, log=lambda line: None)
    assert scale.at_start == ["[]\n"]


# --- timing ---------------------------------------------------------------------------------------------------


class Clock:
    """time.perf_counter stand-in: the readings given, in order."""

    def __init__(self, *readings):
        self.readings = list(readings)

    def __call__(self):
        return self.readings.pop(0)


def test_block_ms_is_ms_per_call_off_cuda(monkeypatch):
    import time

    from draftsmith.scale import timing

    calls = []
    monkeypatch.setattr(time, "perf_counter", Clock(10.0, 10.5))
    assert timing._block_ms(lambda: calls.append(1), "cpu", 4) == approx(0.5 * 1e3 / 4)
    assert len(calls) == 4


def test_turns_ms_runs_20_per_turn_by_default(monkeypatch):
    import time

    from draftsmith.scale import timing

    calls = []
    monkeypatch.setattr(time, "perf_counter", Clock(*[0.0, 0.2, 1.0, 1.6]))
    samples = timing.turns_ms({"f": lambda: calls.append(1)}, "cpu", rounds=2)
    assert len(calls) == 1 + 2 * 20 and samples == {"f": [approx(10.0), approx(30.0)]}
    monkeypatch.setattr(time, "perf_counter", Clock(*[0.0, 0.2, 1.0, 1.6, 2.0, 2.1]))
    assert timing.back_to_back_ms(lambda: None, "cpu", rounds=3) == approx(10.0)   # the median of 10, 30, 5


def test_captured_is_the_function_itself_off_cuda():
    from draftsmith.scale import timing

    def fn():
        return None

    assert timing.captured(fn, "cpu") is fn and timing.captured(fn, "meta") is fn


def test_copy_bandwidth_counts_read_and_write_of_64_mib_off_cuda(monkeypatch):
    from draftsmith.scale import timing

    seen = []

    def back_to_back(fn, device, rounds, reps):
        seen.append((device, rounds, reps))
        return 4.0   # ms

    monkeypatch.setattr(timing, "back_to_back_ms", back_to_back)
    assert timing.copy_bandwidth("cpu") == approx(2 * (1 << 26) / 4e-3)
    assert seen == [("cpu", 5, 5)]


def test_weight_bytes_without_an_embedding_or_a_head():
    from draftsmith.scale.timing import weight_bytes

    bare = torch.nn.Sequential(torch.nn.Linear(8, 4, bias=False))   # no .model: nothing skipped
    assert weight_bytes(bare) == 8 * 4 * 4

    class Headless(torch.nn.Module):   # an embedding but no head: the embedding is not the head, so not read whole
        def __init__(self):
            super().__init__()
            self.model = torch.nn.Module()
            self.model.embed_tokens = torch.nn.Embedding(100, 8)
            self.model.layer = torch.nn.Linear(8, 8, bias=False)

    assert weight_bytes(Headless()) == 8 * 8 * 4


class Pool:
    def __init__(self, B):
        self.lens, self.span, self.needs = torch.zeros(B, dtype=torch.long), None, []

    def bucket(self, need):
        self.needs.append(need)
        return ("span", need)


class Runner:
    def __init__(self, B):
        self.pool, self.calls = Pool(B), []

    def __call__(self, *args, **kw):
        self.calls.append((args, kw, self.pool.span))


def test_forward_call_builds_a_targets_arguments():
    from draftsmith.scale.timing import forward_call

    runner = Runner(2)
    fn, how = forward_call(runner, 3, 2, 5, "cpu", hand_over=False)
    fn()
    assert how == "eager" and len(runner.calls) == 2 and runner.pool.span is None
    (ids, pos, ctx, mask), kw, span = runner.calls[1]
    assert kw == {"hand_over": False} and span == ("span", 5 + 3 + 1) and runner.pool.needs == [9]
    assert runner.pool.lens.tolist() == [5, 5] and type(runner.stats).__name__ == "Stats"
    assert ids.tolist() == [[0, 0, 0]] * 2 and pos.tolist() == ctx.tolist() == [[0, 1, 2]] * 2
    assert mask.tolist() == [[[True, False, False], [True, True, False], [True, True, True]]] * 2
    forward_call(runner, 2, 2, 5, "cpu")
    assert runner.calls[-1][1] == {"hand_over": True}


def test_forward_call_gives_a_draft_its_hidden_per_token():
    from draftsmith.scale.timing import forward_call

    runner = Runner(2)
    hidden = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)   # only the first position is read
    forward_call(runner, 2, 2, 5, "cpu", hidden=hidden)
    (ids, h, pos, ctx, mask), kw, _ = runner.calls[0]
    assert kw == {"from_target": False} and h.shape == (2, 2, 4)
    assert torch.equal(h, hidden[:, :1].expand(2, 2, 4))


def test_device_name_reads_the_cpus_model_name(monkeypatch):
    import io
    import platform

    from draftsmith.scale import timing

    text = "processor\t: 0\nvendor_id\t: x\nmodel name\t: Fancy CPU: rev 2 \nmodel name\t: other\n"
    monkeypatch.setattr(timing, "open", lambda *a, **k: io.StringIO(text), raising=False)
    assert timing.device_name("cpu") == "Fancy CPU: rev 2"
    monkeypatch.setattr(timing, "open", lambda *a, **k: io.StringIO("processor\t: 0\n"), raising=False)
    monkeypatch.setattr(platform, "processor", lambda: "")
    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    assert timing.device_name("cpu") == "riscv64"
    monkeypatch.setattr(platform, "processor", lambda: "x86_64-ish")
    assert timing.device_name("cpu") == "x86_64-ish"


def test_compile_summary_reads_dynamos_counters(monkeypatch):
    import collections

    import torch._dynamo.utils as dynamo_utils

    from draftsmith.scale import timing

    counters = collections.defaultdict(collections.Counter, stats=collections.Counter(unique_graphs=7))
    monkeypatch.setattr(dynamo_utils, "counters", counters)
    times = (["other", "_compile.compile_inner"], ["9.9", "12.345"])

    def compile_times(repr, aggregate):
        assert (repr, aggregate) == ("csv", True)   # one figure per function, as a table of strings
        return times

    monkeypatch.setattr(dynamo_utils, "compile_times", compile_times)
    assert timing.compile_summary() == {"graphs": 7, "seconds": 12.3}
    times = (["other"], ["9.9"])
    assert timing.compile_summary() == {"graphs": 7, "seconds": 0.0}


# --- report -----------------------------------------------------------------------------------------------------


RESULT = {"shape": "1b", "device": "cpu", "dtype": "float32", "prompt_len": 32, "new_tokens": 24,
          "weight_bytes": 2.5e9, "copy_bandwidth": 4.44e10, "device_name": "Fancy CPU", "torch": "2.13",
          "transformers": "5.0", "threads": 1, "graphs": "auto", "graphs_enabled": False, "repeats": 1,
          "batches": {2: {"draftsmith target-only": {"step_ms": 2.0, "tok_s": 1000.0, "decode_forward_ms": 1.25,
                                                     "bookkeeping_share": 0.125, "addressing_share": 0.25},
                          "draftsmith tree 8": {"step_ms": 4.0, "x_target_only": 2.0, "verify_forward_ms": 3.0,
                                                "verify_x_decode_forward": 2.4, "draft_forward_ms": 0.5,
                                                "draft_x_target_only": 0.25, "bookkeeping_share": None,
                                                "addressing_share": None, "tau_max": 6, "tok_s_tau3": 1500.0,
                                                "tok_s_tau4": 2000.0, "tok_s_tau6": 3000.0}}}}


def test_the_report_of_a_shape(monkeypatch):
    from draftsmith.scale.report import COLUMNS, NOTE, markdown

    lines = markdown([RESULT]).split("\n")
    assert lines[:6] == [
        "## 1b (cpu, float32, prompt 32, 24 new tokens; weights 2.50 GB, copy bandwidth 44 GB/s)", "",
        "Fancy CPU, torch 2.13, transformers 5.0, 1 thread, graphs auto (off), median of 1 round after a warm-up", "",
        NOTE, ""]
    assert lines[6:10] == ["### batch 2 (one-token decode forward 1.25 ms: the x decode fwd unit)", "",
                           "| " + " | ".join(COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
    assert lines[10:] == [
        "| draftsmith target-only | 2.00 | - | - | - | 12.5% (+25.0%) | 1000.0 | - | - | - |",
        "| draftsmith tree 8 | 4.00 | 2.00 | 3.00 (2.40x) | 0.50 (0.250x) | - | - | 1500.0 | 2000.0 | 3000.0 (max) |",
        ""]
    more = RESULT | {"threads": 4, "repeats": 3, "graphs_enabled": True}
    assert "4 threads, graphs auto (on), median of 3 rounds after a warm-up" in markdown([more])
    chosen = markdown([RESULT | {"products": ["4096x4096 bfloat16: reduction (...)", "6144x8192 bfloat16: cublas"]}])
    assert chosen.split("\n")[4:6] == ["One-row products chosen by measurement (`decoding.linear: auto`, "
                                       "components/gemv.py): 4096x4096 bfloat16: reduction (...); 6144x8192 bfloat16: "
                                       "cublas", ""]


def test_a_bare_record_still_renders():
    from draftsmith.scale.report import markdown

    text = markdown([{"shape": "x", "batches": {1: {"a row": {"error": "E: no"}}}}])
    assert text.startswith("## x (None, None, prompt None, None new tokens; weights 0.00 GB, copy bandwidth 0 GB/s)\n\n"
                           "Nodes count")
    assert "### batch 1\n" in text
    assert [line for line in text.split("\n") if line.startswith("| a row")] == [
        "| a row | E: no | - | - | - | - | - | - | - | - |"]   # the error, then a dash per column left


def test_a_projection_at_tau_below_the_depth_is_not_a_ceiling():
    from draftsmith.scale.report import _projected

    row = {"tau_max": 6, "tok_s_tau3": 1.0, "tok_s_tau4": 2.0, "tok_s_tau6": 3.0}
    assert [_projected(row, t) for t in (3.0, 4.0, 6.0)] == ["1.0", "2.0", "3.0 (max)"]


# --- mutants these tests leave, and why -------------------------------------------------------------------------
# CUDA-only (no GPU here; not faked, so not tested):
#   timing.py:16  torch.cuda.Event(enable_timing=True -> False), either event: elapsed_time() would raise on a GPU.
#   timing.py:22  start.elapsed_time(end) / reps -> * reps: the CUDA events' ms per call.
#   timing.py:65  (1 << 30) -> (2 << 30), (0 << 30), (1 << 31), (1 << 29): the copy size on CUDA (off CUDA, 1 << 26
#                 is pinned by test_copy_bandwidth_counts_read_and_write_of_64_mib_off_cuda).
# Equivalent: report.py:40/41  r.get('weight_bytes', 0) / r.get('copy_bandwidth', 0) -> default 1: 1 byte is
#                 "0.00 GB" and 1 B/s "0 GB/s", as 0 is.
# Killed elsewhere: timing.py:75 head.data_ptr() != embed.data_ptr() -> == (an untied head beside an embedding):
#                 tests/test_bench_scale.py::test_the_limit_counts_what_a_step_reads.
# Not in range: report.plot (matplotlib is the optional extra 'bench', absent here and in CI: plot returns None).
