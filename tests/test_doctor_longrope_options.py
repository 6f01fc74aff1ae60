"""doctor over a longrope target whose original positions its probe passes: the refusal names doctor's options
(--max-new-tokens, --probe), never generate()'s or diagnose()'s argument names."""
import pytest
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.testing.longrope import write_longrope_pair

ORIGINAL = 12   # below doctor's probes: every probe passes it


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_longrope_pair(tmp_path_factory.mktemp("doctor_longrope"), ORIGINAL)


@pytest.mark.parametrize("ids, says", [
    (16, "a 16-token prompt + --max-new-tokens 8 runs past 12 positions"),   # the prompt alone passes them
    (8, "--max-new-tokens is 8: with a 8-token prompt it runs past 12 positions")])
def test_a_run_past_the_original_positions_names_doctors_options(pair, ids, says):
    target, draft = pair
    out = CliRunner().invoke(app, ["doctor", str(target), str(draft), "--spec", "eagle3-llama", "--max-new-tokens",
                                   "8", "--no-search", "--token-ids", ",".join(map(str, range(1, ids + 1)))])
    assert out.exit_code == 2, out.output
    assert says in " ".join(out.output.split()) and "max_new_tokens" not in out.output, out.output
