"""An option a command takes as an argument (``doctor --target T`` as generate takes it, ``inspect --draft D``) is
told the command's own form on the usage error (h81: 'No such option: --target' and nothing more)."""
import pytest
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.cli.usage import argument_hint


@pytest.mark.parametrize("args, said", [
    (["doctor", "--target", "t"], "doctor takes the target folder as an argument: draftsmith doctor [OPTIONS] "
                                  "[target] [draft]"),
    (["doctor", "--draft", "d"], "doctor takes the draft folder as an argument"),
    (["inspect", "--draft", "d"], "inspect takes the draft folder as an argument: draftsmith inspect [OPTIONS]"),
    (["convert", "--draft", "d", "--to", "midlayer", "o"], "convert takes the draft folder as an argument"),
])
def test_an_argument_given_as_an_option_is_told_the_form(args, said):
    got = CliRunner().invoke(app, args, prog_name="draftsmith")
    assert got.exit_code == 2 and f"No such option: {args[1]}" in got.output and said in got.output, got.output
    assert "Traceback" not in got.output


@pytest.mark.parametrize("args", [["inspect", "--target", "x"], ["doctor", "--bogus", "1"]])
def test_other_unknown_options_get_no_form(args):
    got = CliRunner().invoke(app, args, prog_name="draftsmith")
    assert got.exit_code == 2 and "as an argument" not in got.output, got.output


def test_a_hint_that_fails_says_nothing():
    class Odd(Exception):
        option_name, ctx = "--target", object()   # a context without a command
    assert argument_hint(Odd()) == ""

    class Broken(Exception):
        option_name = "--target"

        class ctx:
            class command:
                params = None   # not a list: the hint fails inside, and says nothing
    assert argument_hint(Broken()) == ""
