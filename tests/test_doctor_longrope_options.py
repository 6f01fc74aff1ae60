"""doctor over a longrope target whose original positions its probe passes: the refusal names doctor's options
(--max-new-tokens, --probe), never generate()'s or diagnose()'s argument names."""
import pytest
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.testing import edit_config, write_eagle3, write_target

SMALL = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=1, num_hidden_layers=4)
ORIGINAL = 12   # below doctor's probes: every probe passes it


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("doctor_longrope")
    target = write_target(root / "target", **SMALL)
    draft = write_eagle3(root / "draft", target, aux_ids=[0, 1, 2])
    half = SMALL["hidden_size"] // SMALL["num_attention_heads"] // 2
    scaling = {"rope_type": "longrope", "short_factor": [1.0] * half, "long_factor": [4.0] * half,
               "original_max_position_embeddings": ORIGINAL}
    folder = edit_config(target, root / "longrope", drop=["rope_parameters"], rope_theta=10000.0,
                         rope_scaling=scaling)
    return folder, draft


@pytest.mark.parametrize("ids, says", [
    (16, "a 16-token prompt + --max-new-tokens 8 runs past 12 positions"),   # the prompt alone passes them
    (8, "--max-new-tokens is 8: with a 8-token prompt it runs past 12 positions")])
def test_a_run_past_the_original_positions_names_doctors_options(pair, ids, says):
    target, draft = pair
    out = CliRunner().invoke(app, ["doctor", str(target), str(draft), "--spec", "eagle3-llama", "--max-new-tokens",
                                   "8", "--no-search", "--token-ids", ",".join(map(str, range(1, ids + 1)))])
    assert out.exit_code == 2, out.output
    assert says in " ".join(out.output.split()) and "max_new_tokens" not in out.output, out.output
