"""A Ctrl-C that a library swallows (it lands inside torch's, numpy's or transformers' import and comes back as
"Could not import module 'LlamaConfig'", or as nothing at all) still ends the command with 130 and no message:
draftsmith's SIGINT handler notes it (draftsmith.sigint) (found by a README audit: such runs exited 70 as an internal error, or 1
blaming the user's config.json)."""
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    import draftsmith.console as console
    import draftsmith.specs.loader as loader

    real, how = loader.read_text, sys.argv[1]

    def read_text(path):   # as a library whose import a Ctrl-C broke: the interrupt swallowed, another error raised
        if how != "plain":
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
            except KeyboardInterrupt:
                pass
        if how in ("swallowed", "plain"):
            raise ModuleNotFoundError("Could not import module 'LlamaConfig'")
        return real(path)

    loader.read_text = read_text
    sys.argv = ["draftsmith", *sys.argv[2:]]
    console.main()
""")


def run(how: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, how, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [["generate", "--spec", "demo", "--token-ids", "1,2", "--max-new-tokens", "2"],
                                  ["validate", "demo"]])
def test_an_error_after_a_ctrl_c_is_its_echo(args):
    proc = run("swallowed", *args)
    assert (proc.returncode, proc.stderr.strip()) == (130, ""), proc.stderr


@pytest.mark.parametrize("args, done", [(["validate", "demo"], "demo: ok"),   # ends by typer.Exit
                                        (["generate", "--spec", "demo", "--token-ids", "1,2", "--max-new-tokens",
                                          "2", "--no-compare"], "output")])   # returns
def test_a_ctrl_c_swallowed_whole_still_ends_the_command_with_130(args, done):
    proc = run("whole", *args)
    assert proc.returncode == 130, proc.stderr
    assert done in proc.stdout   # the work was done; the exit says it was interrupted


def test_without_a_ctrl_c_the_error_is_said():
    proc = run("plain", "validate", "demo")
    assert proc.returncode == 1 and "internal error: ModuleNotFoundError: Could not import module" in proc.stderr
