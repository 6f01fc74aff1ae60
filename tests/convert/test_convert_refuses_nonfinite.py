"""convert refuses a draft holding NaN or inf weights, naming the file and the tensor, before anything is written:
it used to write them through into a draft every load refuses."""
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.testing import write_eagle3, write_target


def test_a_nan_weight_is_refused_and_nothing_is_written(tmp_path):
    target = write_target(tmp_path / "t")
    src = write_eagle3(tmp_path / "d", target)
    tensors = load_file(src / "model.safetensors")
    tensors["fc.weight"][0, 1] = float("nan")
    tensors["fc.weight"][2, 3] = float("inf")
    save_file(tensors, src / "model.safetensors", metadata={"format": "pt"})
    res = CliRunner().invoke(app, ["convert", str(src), "--to", "layers", str(tmp_path / "out")],
                             env={"COLUMNS": "1000"})
    assert res.exit_code == 1, res.output
    assert "NaN or inf values in 'fc.weight' (2 of" in res.output and "Traceback" not in res.output, res.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
