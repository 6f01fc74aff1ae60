"""Mutation round 13 on draftsmith.scale.run's run_scale and draftsmith.scale.report, on fakes (measure, plot and
compile_summary replaced; nothing is assembled or timed):

* :func:`_previous` and :func:`run_scale`: what a previous results.json keeps, the folder made and marked before
  the first shape, what each shape's saves hold (the shapes before it, itself, the partial header until the last),
  its defaults (tiny on the CPU is small) and results.json's format;
* draftsmith.scale.report: a shape's whole markdown (header, about line, plurals, cells, shares, projections).

measure and hf_rows: test_scale_kills_round13.py; draftsmith.scale.timing: test_scale_timing_kills_round13.py.
"""
import json
import types

import pytest

import draftsmith.scale.run as bs
from draftsmith.scale.run import LIMIT, PARTIAL


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
