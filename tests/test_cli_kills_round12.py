"""Mutation round 12 on the command line (draftsmith/cli/run.py first): what ``generate`` and ``bench`` print and
refuse, pinned where a planted bug survived the other CLI tests.

generate on the shipped demo pair: the rows of its statistics table (no second chain row when the plan is already a
chain, no comparison columns without --compare, no token comparison when sampling), the output shown as text when
the target has a tokenizer and as ids when it has none, a negative --temperature refused as a usage error. bench:
--graphs' and --batches' messages and what reaches the scale run, and the --scale option clash said in the right
number ("it" / "them"). Every refusal is one message and exit 2, before anything is loaded or run."""
import re

import pytest
from typer.testing import CliRunner

import draftsmith.scale.run as scale_run
from draftsmith.cli import app
from draftsmith.errors import DraftsmithError
from draftsmith.testing import edit_config, write_eagle3, write_target


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


# --- draftsmith/cli/app.py: how errors are said, stdout that cannot be written, what a target folder tells ----------

def test_a_draftsmith_error_is_said_with_its_notes_on_stderr(capsys):
    from draftsmith.cli.app import report
    from draftsmith.errors import OptionError

    e = DraftsmithError("the draft does not fit")
    e.add_note("note: are the folders swapped?")
    assert report(e) == 1
    assert tuple(capsys.readouterr()) == ("", "error: the draft does not fit\nnote: are the folders swapped?\n")
    assert report(OptionError("--topk: 0 is not allowed")) == 2
    assert capsys.readouterr().err == "error: --topk: 0 is not allowed\n"


HINT = "  rerun with `draftsmith --debug ...` for the traceback\n"


@pytest.mark.parametrize("message, first", [
    ("", ""), ("  \n ", ""), ("first\nsecond", ": first"), ("x" * 300, ": " + "x" * 300),
    ("y" * 301, ": " + "y" * 148 + "..." + "y" * 148),   # cut in the middle to 299 characters, at most 300
])
def test_an_unexpected_error_is_its_type_and_first_line_at_most_300_characters(message, first, capsys):
    from draftsmith.cli.app import report

    assert report(ValueError(message)) == 70
    assert tuple(capsys.readouterr()) == ("", f"internal error: ValueError{first}\n{HINT}")


class Failing:
    """A stream whose writes and flushes fail with ``error``."""

    def __init__(self, error):
        self.error, self.encoding = error, "utf-8"

    def write(self, text):
        raise self.error

    def flush(self):
        raise self.error


@pytest.mark.parametrize("error, says", [(OSError(28, "No space left on device"), "No space left on device"),
                                         (OSError("a plain OSError"), "a plain OSError")])
def test_a_failed_write_or_flush_of_stdout_is_output_failed_by_its_reason(error, says):
    from draftsmith.cli.app import OutputFailed, _Output

    stream = _Output(Failing(error))
    for call in (lambda: stream.write("x"), stream.flush):
        with pytest.raises(OutputFailed) as got:
            call()
        assert str(got.value) == says and got.value.__cause__ is error
    assert stream.encoding == "utf-8"
    closed = _Output(Failing(BrokenPipeError(32, "Broken pipe")))   # a closed pipe stays one
    with pytest.raises(BrokenPipeError):
        closed.write("x")
    with pytest.raises(BrokenPipeError):
        closed.flush()


def main_exit(args, capsys) -> tuple[int, str]:
    """The exit code and stderr of the command run as the installed script runs it."""
    import typer

    with pytest.raises(SystemExit) as done:
        typer.main.get_command(app).main(args, prog_name="draftsmith")
    return done.value.code, capsys.readouterr().err


def test_stdout_full_or_closed_is_one_line_on_stderr_and_exit_74(monkeypatch, capsys):
    import sys

    monkeypatch.setattr(sys, "stdout", Failing(OSError(28, "No space left on device")))
    assert main_exit(["list"], capsys) == (74, "error: cannot write the output: No space left on device\n")
    monkeypatch.setattr(sys, "stdout", None)
    assert main_exit(["list"], capsys) == (74, "error: cannot write the output: standard output is closed\n")


def test_no_arguments_is_the_help_without_completion_options():
    res = run()
    assert "Speculative-decoding draft models from YAML." in res.output and "generate" in res.output, res.output
    assert "--install-completion" not in res.output and "--debug" in res.output


def test_the_output_console_is_at_least_110_columns_wide():
    from rich.console import Console

    from draftsmith.cli.app import err, out

    assert out.width >= 110 and (out.width == 110 or Console().width > 110)
    assert err.stderr and not out.stderr


@pytest.fixture(scope="module")
def demo_target():
    from draftsmith.specs.catalog import BUILTIN_DIR

    return BUILTIN_DIR.parents[1] / "demo_data" / "target"


NAMES = {"max_new_tokens": "--max-new-tokens", "prompt": "--prompt"}


def test_a_text_prompt_fits_new_tokens_up_to_the_context(demo_target):
    from draftsmith.cli.app import target_folder_problems

    assert target_folder_problems(demo_target, "hi", 2048, NAMES) == []
    [problem] = target_folder_problems(demo_target, "hi", 2049, NAMES)
    assert problem.startswith("--max-new-tokens is 2049: past the target's context of 2048 tokens "
                              "(max_position_embeddings in "), problem
    chat = [{"role": "user", "content": "hi"}]
    assert target_folder_problems(demo_target, chat, 2048, NAMES) == []   # a conversation is text too
    assert len(target_folder_problems(demo_target, chat, 2049, NAMES)) == 1


def test_a_config_without_a_context_or_with_a_vocabulary_not_an_int_bounds_nothing(demo_target, tmp_path):
    import shutil

    from draftsmith.cli.app import target_folder_problems

    shutil.copytree(demo_target, tmp_path / "t", ignore=shutil.ignore_patterns("*.safetensors"))
    edit_config(tmp_path / "t", drop=["max_position_embeddings"], vocab_size="258")
    assert target_folder_problems(tmp_path / "t", "hi", 10 ** 6, NAMES) == []
    assert target_folder_problems(tmp_path / "t", [1, 10 ** 6], 10 ** 6, NAMES) == []   # no vocab_size to check


def test_token_ids_are_checked_against_the_vocabulary_even_with_a_tokenizer(demo_target):
    from draftsmith.cli.app import target_folder_problems

    [problem] = target_folder_problems(demo_target, [1, 258], 4, NAMES)
    assert "outside the model's vocabulary 0..257: [258]" in problem
    assert target_folder_problems(demo_target, [1, 257], 4, NAMES) == []


def test_a_draft_no_detector_knows_is_said_on_stderr_with_the_swap_note_once(tmp_path):
    target = write_target(tmp_path / "t", num_hidden_layers=8, vocab_size=32)
    draft = write_eagle3(tmp_path / "d", target)
    res = run("generate", "--target", draft, "--draft", target)   # the folders given the wrong way round
    assert res.exit_code == 2 and res.stdout == "", res.output
    assert res.stderr.startswith(f"error: --draft {target}: no registered detector recognises this layout"), res.stderr
    assert "; pass --spec\n  closest: " in res.stderr and res.stderr.count("looks like a whole model") == 1


def test_a_draft_no_detector_knows_with_a_draft_as_target_says_the_target_looks_like_a_draft(tmp_path):
    import torch
    from safetensors.torch import save_file

    target = write_target(tmp_path / "t", num_hidden_layers=8, vocab_size=32)
    draft = write_eagle3(tmp_path / "d", target)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "config.json").write_text("{}")
    save_file({"foo.weight": torch.zeros(2)}, str(tmp_path / "junk" / "model.safetensors"))
    res = run("generate", "--target", draft, "--draft", tmp_path / "junk")
    assert res.exit_code == 2 and res.stdout == "", res.output
    assert f"\nnote: {draft} looks like a draft " in res.stderr and "folders swapped?" in res.stderr, res.stderr
    res = run("generate", "--draft", tmp_path / "junk")
    assert res.exit_code == 2 and "pass --spec" in res.stderr and "note:" not in res.stderr, res.stderr


def test_generate_says_the_plan_it_runs_not_the_spec_s_fallback_warning(tmp_path, caplog):
    """A spec asking for trees that fall back to a chain (page_size 2): assemble() warns of it; generate does not,
    its plan line says the chain it runs."""
    import logging

    import yaml

    import draftsmith
    from draftsmith.specs.catalog import BUILTIN_DIR

    data = yaml.safe_load((BUILTIN_DIR / "demo.yaml").read_text())
    data["decoding"]["page_size"] = 2
    data["checkpoints"] = {k: str(BUILTIN_DIR / v) for k, v in data["checkpoints"].items()}
    (tmp_path / "paged.yaml").write_text(yaml.safe_dump(data))
    with caplog.at_level(logging.WARNING):
        draftsmith.assemble(str(tmp_path / "paged.yaml"))
        assert "asks for trees (topk 4)" in caplog.text   # what generate leaves out
        caplog.clear()
        res = run("generate", "--spec", tmp_path / "paged.yaml", "--no-compare", "--max-new-tokens", "2")
    assert res.exit_code == 0 and "\nplan v1, topk 1" in res.stdout, res.output
    assert "asks for trees" not in caplog.text + res.output


def test_the_unknown_draft_lines_are_never_wrapped_at_the_terminal_width(tmp_path):
    import torch
    from safetensors.torch import save_file

    junk = tmp_path / ("j" * 120)
    junk.mkdir()
    (junk / "config.json").write_text("{}")
    save_file({"foo.weight": torch.zeros(2)}, str(junk / "model.safetensors"))
    res = CliRunner().invoke(app, ["generate", "--draft", str(junk)], env={"COLUMNS": "80"})
    assert res.exit_code == 2, res.output
    assert res.stderr.splitlines()[0] == (f"error: --draft {junk}: no registered detector recognises this layout "
                                          "(1 tensor); pass --spec"), res.stderr


@pytest.mark.parametrize("length, cut", [(300, False), (301, True)])
def test_the_config_file_in_the_context_problem_is_cut_past_300_characters(length, cut, demo_target, tmp_path):
    import shutil

    from draftsmith.cli.app import target_folder_problems

    folder = tmp_path / ("a" * 200) / ("b" * (length - len(f"{tmp_path}/{'a' * 200}//config.json")))
    shutil.copytree(demo_target, folder, ignore=shutil.ignore_patterns("*.safetensors"))
    file = str(folder / "config.json")
    assert len(file) == length
    [problem] = target_folder_problems(folder, "hi", 2049, NAMES)
    assert (f"(max_position_embeddings in {file})" in problem) is not cut, problem
    assert ("..." in problem) is cut
