"""What the commands print is the data as it is: generate's text is not broken into lines past the console's width
(rich wrapped a 197-character output with a newline the text does not hold), and convert's comment stays one line
whatever the folders' names hold (found by a dogfooding helper)."""
import json
import re
import shutil

from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.testing import write_eagle3, write_target


def test_generate_prints_long_text_as_the_model_gave_it():
    prompt = "x = 1; " * 30   # 210 characters: past the 110-column console
    res = CliRunner().invoke(app, ["generate", "--spec", "demo", "--prompt", prompt, "--max-new-tokens", "120",
                                   "--no-compare", "--threads", "1"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    printed = re.search(r"^output (.*?)\n +statistics", res.stdout, re.S | re.M).group(1)
    text = draftsmith.assemble("demo").generate(prompt, max_new_tokens=120).text
    assert len(text) > 110 and printed == text
    assert re.search(r"^prompt (.*?)\noutput ", res.stdout, re.S | re.M).group(1) == repr(prompt)


def test_convert_says_a_folder_with_a_newline_on_its_one_comment_line(tmp_path):
    target = write_target(tmp_path / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32)
    source = tmp_path / "nl\nname"
    shutil.copytree(write_eagle3(tmp_path / "d", target), source)
    res = CliRunner().invoke(app, ["convert", str(source), "--to", "layers", str(tmp_path / "out\nx")])
    assert res.exit_code == 0, res.output
    comment, *config = res.stdout.splitlines()
    assert comment.startswith(f"# {tmp_path}/nl\\nname -> {tmp_path}/out\\nx (layers: ")
    json.loads("\n".join(config))


def test_inspects_misfit_error_names_a_strange_folder_on_one_line_with_no_escape_sequence(tmp_path):
    from safetensors.torch import load_file, save_file

    target = write_target(tmp_path / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32)
    folder = tmp_path / "esc\x1b[31mred\nline"
    shutil.copytree(write_eagle3(tmp_path / "d", target), folder)
    tensors = load_file(str(folder / "model.safetensors"))
    save_file(tensors | {"extra.weight": tensors["fc.weight"].clone()}, str(folder / "model.safetensors"))
    res = CliRunner().invoke(app, ["inspect", str(folder)])
    assert res.exit_code == 1, res.output
    line = next(x for x in res.stderr.splitlines() if x.startswith("error: "))
    assert line.startswith(f"error: {tmp_path}/esc\\x1b[31mred\\nline: the proposed spec does not load")
    assert "\x1b" not in res.stderr
