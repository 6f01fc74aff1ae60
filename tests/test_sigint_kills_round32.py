"""sigint (round 32 mutation run): a process that never had a Ctrl-C is not interrupted, before any install(): the
CLI run in-process (typer's CliRunner, with no console.main to install the handler) ends as its command does, not
with 130."""
import subprocess
import sys
import textwrap


def test_a_fresh_process_is_not_interrupted_and_its_in_process_cli_runs():
    script = textwrap.dedent("""
        from draftsmith import sigint
        print("interrupted", sigint.interrupted())
        from typer.testing import CliRunner
        from draftsmith.cli import app
        print("exit", CliRunner().invoke(app, ["validate", "demo"]).exit_code)
    """)
    res = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120)
    assert res.stdout.split() == ["interrupted", "False", "exit", "0"], res.stdout + res.stderr
