"""Mutation round 12 on the command line (draftsmith/cli/run.py first): what ``generate`` and ``bench`` print and
refuse, pinned where a planted bug survived the other CLI tests.

generate on the shipped demo pair: the rows of its statistics table (no second chain row when the plan is already a
chain, no comparison columns without --compare, no token comparison when sampling), the output shown as text when
the target has a tokenizer and as ids when it has none, a negative --temperature refused as a usage error. bench:
--graphs' and --batches' messages and what reaches the scale run, and the --scale option clash said in the right
number ("it" / "them"). Every refusal is one message and exit 2, before anything is loaded or run. The round's
tests of draftsmith/cli/app.py (how errors are said, stdout that cannot be written, what a target folder tells):
test_cli_app_kills_round12.py."""
import re

import pytest
from typer.testing import CliRunner

import draftsmith.scale.run as scale_run
from draftsmith.cli import app
from draftsmith.errors import DraftsmithError
from draftsmith.testing import write_eagle3, write_target


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "1000"})


def said(res) -> str:
    return " ".join(res.output.split())


def refused(res, *says: str) -> None:
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output
    for s in says:
        assert s in said(res), res.output


def table(stdout: str) -> dict[str, list[str]]:
    """The statistics table's rows: the run's name (its first line) -> its cells after the name."""
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if line.startswith("│") and cells[0] and cells[1]:
            rows[cells[0]] = cells[1:]
    return rows


# --- generate: the statistics table and the output line ----------------------------------------------------------

def test_a_chain_plan_is_compared_with_target_only_and_not_with_a_second_chain():
    res = run("generate", "--spec", "demo", "--topk", "1", "--max-new-tokens", "4")
    assert res.exit_code == 0, res.output
    rows = table(res.stdout)
    assert set(rows) == {"speculative v1", "target only"}, res.stdout
    assert rows["target only"][-2:] == ["1.00x", "True"] and rows["speculative v1"][-1] == "True"


def test_without_compare_there_is_nothing_to_compare_with():
    res = run("generate", "--spec", "demo", "--no-compare", "--max-new-tokens", "4")
    assert res.exit_code == 0, res.output
    rows = table(res.stdout)
    assert list(rows) == ["speculative v2"] and rows["speculative v2"][-2:] == ["-", "-"], res.stdout


def test_sampling_compares_speeds_but_not_tokens():
    res = run("generate", "--spec", "demo", "--temperature", "0.7", "--seed", "1", "--max-new-tokens", "4")
    assert res.exit_code == 0, res.output
    rows = table(res.stdout)
    assert rows["target only"][-2:] == ["1.00x", "-"], res.stdout
    assert all(re.fullmatch(r"[\d.]+x", r[-2]) and r[-1] == "-" for r in rows.values()), res.stdout


def test_the_output_is_text_with_a_tokenizer_and_ids_without_one(tmp_path):
    res = run("generate", "--spec", "demo", "--no-compare", "--max-new-tokens", "4")
    assert res.exit_code == 0 and "\noutput " in res.stdout and "output [" not in res.stdout, res.output
    target = write_target(tmp_path / "t", num_hidden_layers=8, vocab_size=32)
    draft = write_eagle3(tmp_path / "d", target)
    res = run("generate", "--spec", "eagle3-llama", "--target", target, "--draft", draft, "--token-ids", "1,2",
              "--max-new-tokens", "3", "--no-compare")
    assert res.exit_code == 0, res.output
    assert re.search(r"^output \[\d+, \d+, \d+\]$", res.stdout, re.M), res.stdout


@pytest.mark.parametrize("value", ["-1", "-0.001"])
def test_a_negative_temperature_is_a_usage_error(value):
    refused(run("generate", "--spec", "demo", "--temperature", value), "is below 0", "(0 = greedy)")


# --- bench: --graphs, --batches, --scale's clashes ------------------------------------------------------------------

def test_an_unknown_graphs_value_lists_every_value(scale_calls):
    refused(run("bench", "--spec", "demo", "--graphs", "sometimes"),
            "auto, on, off or compile, got 'sometimes'")


@pytest.mark.parametrize("batches, want", [("1", [1]), (" 2, 16 ", [2, 16])])
def test_the_batches_reach_the_scale_run(batches, want, scale_calls, tmp_path):
    res = run("bench", "--scale", "tiny, 1b", "--batches", batches, "--out", tmp_path / "o", "--no-hf")
    assert res.exit_code == 0, res.output
    [(shapes, kw)] = scale_calls
    assert shapes == ["tiny", "1b"] and kw["batches"] == want and kw["hf"] is False


@pytest.mark.parametrize("batches", ["0", "1,0", "-1"])
def test_a_batch_below_1_is_refused(batches, scale_calls, tmp_path):
    refused(run("bench", "--scale", "tiny", "--batches", batches, "--out", tmp_path / "o"),
            f"{batches!r}; comma-separated integers >= 1 are expected")
    assert not scale_calls


@pytest.mark.parametrize("args, ends", [
    (["--out", "x"], "or leave it out"),
    (["--out", "x", "--no-hf"], "or leave them out"),
])
def test_scale_options_without_scale_are_said_in_number(args, ends, scale_calls):
    refused(run("bench", *args), ends)


@pytest.mark.parametrize("args, ends", [
    (["--spec", "demo"], "leave it out, or drop --scale"),
    (["--spec", "demo", "--max-new-tokens", "8"], "leave them out, or drop --scale"),
])
def test_pair_options_with_scale_are_said_in_number(args, ends, scale_calls, tmp_path):
    refused(run("bench", "--scale", "tiny", "--out", tmp_path / "o", *args), ends)
    assert not scale_calls


# --- generate and bench: the defaults and bounds of their numbers -------------------------------------------------

@pytest.fixture
def generate_calls(monkeypatch):
    """SpeculativeModel.generate / generate_baseline record their keyword arguments and run as shipped."""
    from draftsmith.decoding.model import SpeculativeModel

    calls = []
    for name in ("generate", "generate_baseline"):
        real = getattr(SpeculativeModel, name)
        monkeypatch.setattr(SpeculativeModel, name, lambda self, p, *a, _real=real, _n=name, **kw:
                            calls.append((_n, kw)) or _real(self, p, *a, **kw))
    return calls


def test_the_chain_row_runs_topk_1_and_a_topk_2_plan_still_gets_one(generate_calls):
    res = run("generate", "--spec", "demo", "--topk", "2", "--max-new-tokens", "3", "--threads", "1")
    assert res.exit_code == 0, res.output
    assert "chain v1" in res.stdout, res.stdout
    timed = generate_calls[3:]   # after the warm-up of the three rows (--threads 1: no runs timed to choose it)
    assert [(n, kw.get("topk")) for n, kw in timed] == [("generate", 2), ("generate", 1), ("generate_baseline", None)]


@pytest.mark.parametrize("verb", ["generate", "bench"])
def test_the_defaults_are_64_new_tokens_and_auto_threads(verb, monkeypatch):
    import torch

    from draftsmith.threads import ThreadChoice

    got, probed = {}, []

    def record(*a, **kw):
        got.update(kw)
        raise DraftsmithError("stop here")   # said as an error, exit 1

    def auto(run, device):   # what --threads auto does, recorded: the count set before, the device
        probed.append((torch.get_num_threads(), device))
        return ThreadChoice(1, {1: 0.5})

    monkeypatch.setattr("draftsmith.decoding.model.SpeculativeModel.generate", record)
    monkeypatch.setattr("draftsmith.bench.run_bench", record)
    monkeypatch.setattr("draftsmith.threads.auto_threads", auto)
    torch.set_num_threads(3)
    try:
        res = run(verb, "--spec", "demo", "--no-compare" if verb == "generate" else "--graphs=auto")
    finally:
        torch.set_num_threads(1)
    assert res.exit_code == 1 and "error: stop here" in res.output, res.output
    assert got["max_new_tokens"] == 64
    if verb == "bench":
        assert got["repeats"] == 3 and got["threads"] is None   # run_bench measures it
    else:
        assert probed == [(1, "cpu")], probed     # 1 while loading, then measured on the CPU
        assert "threads 1 thread: 0.50 s (--threads auto: the fastest of the speculative run" in said(res), res.output


COUNTS = {"generate": ("--max-new-tokens", "--threads"), "bench": ("--max-new-tokens", "--threads", "--repeats")}


@pytest.mark.parametrize("verb, args", [(v, [o, "0"]) for v, options in COUNTS.items() for o in options])
def test_a_count_below_1_is_typers_range_error(verb, args, monkeypatch):
    monkeypatch.setattr("draftsmith.assemble", lambda *a, **k: pytest.fail("assembled a pair"))
    monkeypatch.setattr("draftsmith.bench.run_bench", lambda *a, **k: pytest.fail("ran the benchmark"))
    refused(run(verb, "--spec", "demo", *args), f"Invalid value for '{args[0]}'", "greater than or equal to 1")


def test_one_of_each_count_is_allowed(monkeypatch):
    got = {}
    monkeypatch.setattr("draftsmith.bench.run_bench", lambda spec, **kw: got.update(kw))
    res = run("bench", "--spec", "demo", "--max-new-tokens", "1", "--repeats", "1", "--threads", "1")
    assert res.exit_code == 0 and got["max_new_tokens"] == 1 and got["repeats"] == 1, res.output
    res = run("generate", "--spec", "demo", "--max-new-tokens", "1", "--threads", "1", "--no-compare")
    assert res.exit_code == 0, res.output


def test_the_spec_s_own_target_folder_is_checked_before_the_load(monkeypatch):
    """--spec demo without --target: its checkpoints.target folder says the ids and the length that do not fit,
    each under the option that gave it, before the pair loads."""
    monkeypatch.setattr("draftsmith.assemble", lambda *a, **k: pytest.fail("assembled a pair"))
    refused(run("generate", "--spec", "demo", "--token-ids", "99999"),
            "error: --token-ids: it holds ids outside the model's vocabulary 0..257: [99999]")
    refused(run("generate", "--spec", "demo", "--token-ids", "1", "--max-new-tokens", "100000"),
            "error: --max-new-tokens is 100000", "context of 2048 tokens")
    refused(run("bench", "--spec", "demo", "--token-ids", "300"), "error: --token-ids: it holds ids outside")


def test_the_scale_run_hears_of_hf_unless_no_hf(scale_calls, tmp_path):
    assert run("bench", "--scale", "tiny", "--out", tmp_path / "o").exit_code == 0
    assert scale_calls[-1][1]["hf"] is True


def test_the_scale_report_and_last_line_are_never_wrapped(monkeypatch, tmp_path):
    wide = "| " + " | ".join(f"column {i}" for i in range(30)) + " |"
    monkeypatch.setattr(scale_run, "run_scale", lambda shapes, out, **kw: [])
    monkeypatch.setattr("draftsmith.scale.report.markdown", lambda results: wide)
    deep = tmp_path / ("x" * 60) / ("y" * 60)
    res = run("bench", "--scale", "tiny", "--out", deep)
    assert res.exit_code == 0, res.output
    assert wide in res.stdout.splitlines(), res.stdout
    assert f"wrote {deep}/results.md, results.json; no PNG" in res.stdout, res.stdout


# --- generate --chat on a target with a chat template ----------------------------------------------------------------

def test_chat_renders_the_prompt_through_a_template_the_target_has(tmp_path):
    from draftsmith.testing import write_byte_tokenizer

    target = write_target(tmp_path / "t", tokenizer=True, num_hidden_layers=8)
    write_byte_tokenizer(target, chat_template="{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n"
                                               "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
    draft = write_eagle3(tmp_path / "d", target)
    res = run("generate", "--spec", "eagle3-llama", "--target", target, "--draft", draft, "--chat", "--prompt", "hi",
              "--max-new-tokens", "2", "--no-compare")
    assert res.exit_code == 0, res.output
    assert "prompt [{'role': 'user', 'content': 'hi'}]" in res.stdout, res.stdout
