"""Mutation round 13 on draftsmith.scale.run's measure and hf_rows: the arithmetic and wiring of one scale run,
read off fakes in milliseconds (no model is assembled, nothing is timed by a real clock).

* :func:`measure`: the plans it runs (METHODS), the prompts it draws (seeded, tokens >= 2), the runs of 1 and of
  new_tokens tokens, each row's step cost (median over rounds of (tn - t1) / the run's extra target forwards), the
  ratios and projections, the bandwidth limit row, the single forwards it asks for (the decode forward once, without
  the taps; verify over the plan's tree, draft over topk tokens of a [B, 1, H] hidden), the rounds they take turns
  (max(repeats, 3)), the host-timer shares (CPU only), its log lines, when it saves and its defaults;
* :func:`hf_rows`: the generate calls, the warm-ups run here (so ``_turns`` gets ``warm_up=False``), the step cost
  over new_tokens - 1 steps, the graphs compiled, a compiled static row's name and an error cut to 200 characters.

The round's other tests: test_scale_run_kills_round13.py (_previous, run_scale and the report) and
test_scale_timing_kills_round13.py (draftsmith.scale.timing).
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
