"""Command-line findings of a review: a cached target's name in generate and bench, doctor's exit codes for bad
input (2, before anything is read or run), bench's --scale and --graphs, and generate's plan options named as
options. Nothing is downloaded: the cached target's lookup is replaced by a tiny folder."""
import pytest
import torch
from typer.testing import CliRunner

from draftsmith import hub
from draftsmith.cli import app
from draftsmith.errors import DraftsmithError
from draftsmith.testing import write_eagle3, write_target

WIDE = {"COLUMNS": "1000"}


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env=WIDE)


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    """A tiny target with a tokenizer (what 'smollm2' is made to stand for) and an EAGLE-3 draft for it."""
    root = tmp_path_factory.mktemp("cached")
    target = write_target(root / "target", tokenizer=True, num_hidden_layers=8, max_position_embeddings=128)
    return target, write_eagle3(root / "draft", target)


@pytest.fixture
def fake_cache(cached, monkeypatch):
    """hub.target_folder answers 'smollm2' / 'cache:smollm2' with the tiny target (and is recorded)."""
    seen = []
    real = hub.target_folder

    def target_folder(ref, console=None):
        seen.append(str(ref))
        return cached[0] if hub.cache_name(str(ref)) or str(ref) in hub.SOURCES else real(ref, console)

    monkeypatch.setattr(hub, "target_folder", target_folder)
    monkeypatch.setattr(hub, "resolve", lambda *a, **k: pytest.fail("fetched a cached target"))
    return seen


@pytest.mark.parametrize("name", ["smollm2", "cache:smollm2"])
def test_generate_takes_a_cached_target_by_name(cached, fake_cache, name):
    res = run("generate", "--spec", "eagle3-llama", "--target", name, "--draft", cached[1], "--prompt", "ab",
              "--max-new-tokens", "3", "--no-compare")
    assert res.exit_code == 0, res.output
    assert fake_cache == [name] and "does not exist" not in res.output


def test_bench_takes_a_cached_target_by_name(cached, fake_cache, monkeypatch):
    seen = {}
    monkeypatch.setattr("draftsmith.bench.run_bench", lambda spec, **kw: seen.update(kw))
    res = run("bench", "--spec", "eagle3-llama", "--target", "smollm2", "--draft", cached[1])
    assert res.exit_code == 0, res.output
    assert fake_cache == ["smollm2"] and seen["target"] == cached[0]


def doctor_refuses(*args, says):
    res = run("doctor", *args)
    assert res.exit_code == 2, res.output
    assert says in res.stderr and "Traceback" not in res.output and "internal error" not in res.output
    assert "another target" not in res.output   # no reading was tried


@pytest.mark.parametrize("option, says", [
    (["--threads", "0"], "Invalid value for '--threads': Input should be auto or an integer greater than or equal "
                         "to 1, got '0'"),   # typer's usage error, as generate's and bench's
    (["--dtype", "fp16"], "dtype 'fp16'"),
    (["--probe", ""], "--probe is empty"),
    (["--max-new-tokens", "0"], "--max-new-tokens is 0"),
    (["--probe", "@/nonexist/probe.txt"], "/nonexist/probe.txt"),
] + ([] if torch.cuda.is_available() else [(["--device", "cuda"], "device 'cuda'")]))
def test_doctor_exits_2_on_bad_input_before_reading_anything(cached, fake_cache, monkeypatch, option, says):
    monkeypatch.setattr("draftsmith.doctor.diagnose", lambda *a, **k: pytest.fail("ran the readings"))
    doctor_refuses("smollm2", cached[1], "--spec", "eagle3-llama", *option, says=says)
    assert fake_cache == []   # refused before the target is looked up (a cached one may be a download)


def test_doctor_reads_a_probe_file(cached, fake_cache, monkeypatch, tmp_path):
    seen = []

    def diagnose(spec, target, draft, probes, **kw):
        seen.append(probes)
        raise DraftsmithError("stop here")   # bad input: said, exit 2 (a ValueError is a bug: exit 70)

    monkeypatch.setattr("draftsmith.doctor.diagnose", diagnose)
    (tmp_path / "probe.txt").write_text("def f(x):")
    doctor_refuses("smollm2", cached[1], "--spec", "eagle3-llama", "--probe", f"@{tmp_path / 'probe.txt'}",
                   says="stop here")
    assert seen == [["def f(x):"]]


def usage_error(res, *says):
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "internal error" not in res.output
    assert all(s in res.output for s in says), res.output


def test_bench_names_the_shapes_of_an_unknown_scale(tmp_path):
    usage_error(run("bench", "--scale", "tiny,huge", "--out", tmp_path / "o"), "--scale", "'huge'", "tiny, 1b, 8b")
    usage_error(run("bench", "--scale", "tiny", "--batches", "1,x", "--out", tmp_path / "o"), "--batches")
    assert not (tmp_path / "o").exists()   # refused before anything is written


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("graphs", ["compile", "on"])
def test_bench_refuses_cuda_graphs_without_cuda(graphs, monkeypatch):
    monkeypatch.setattr("draftsmith.bench.run_bench", lambda *a, **k: pytest.fail("ran the bench"))
    usage_error(run("bench", "--spec", "demo", "--graphs", graphs), "--graphs", "needs a CUDA device")


@pytest.mark.parametrize("args, says", [
    (["--topk", "0"], "--topk: 0 is not allowed"),
    (["--steps", "0"], "--steps: 0 is not allowed"),
    (["--topk", "2", "--steps", "2", "--draft-tokens", "50"], "--draft-tokens: 50 tokens cannot be drafted"),
])
def test_generate_names_the_plan_options_it_refuses_before_the_model_loads(args, says, monkeypatch):
    # they exited 1 after the model had loaded, where every other bad option exits 2 before anything is read
    monkeypatch.setattr("draftsmith.assemble", lambda *a, **k: pytest.fail("the model was loaded"))
    res = run("generate", "--spec", "demo", "--max-new-tokens", "2", *args)
    usage_error(res, says)
    assert res.stderr.startswith("error: ") and "plan() overrides" not in res.stderr, res.stderr


def test_a_topk_past_the_draft_vocabulary_is_a_usage_error_too(tmp_path):
    # its bound is known once the draft is read: checked after the load, named as the option, exit 2
    target = write_target(tmp_path / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32, max_position_embeddings=64)
    draft = write_eagle3(tmp_path / "d", target)
    res = run("generate", "--spec", "eagle3-llama", "--target", target, "--draft", draft, "--token-ids", "1,2",
              "--max-new-tokens", "2", "--topk", "40")
    usage_error(res, "--topk: 40 candidates per node, but the draft's vocabulary has 32 tokens")
