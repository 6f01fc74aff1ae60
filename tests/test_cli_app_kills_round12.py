"""Mutation round 12 on the command line, draftsmith/cli/app.py: how errors are said (a draftsmith error with its
notes on stderr, an unexpected one as its type and first line cut past 300 characters), stdout that cannot be written
(exit 74, one line on stderr), the help with no arguments, the console's width, what a target folder tells before a
load (the context and the vocabulary a prompt must fit, its config file's name cut past 300 characters), a draft no
detector knows said once with the swap note and never wrapped, generate saying the plan it runs. generate's and
bench's own output and refusals: test_cli_kills_round12.py."""
import pytest
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.errors import DraftsmithError
from draftsmith.testing import edit_config, write_eagle3, write_target

from test_cli_kills_round12 import run   # the CliRunner at 1000 columns


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
