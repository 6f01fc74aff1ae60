"""draftsmith.testing.edit_config, which the misfit-checkpoint tests build on: a wrong edit there would let those
tests pass against a folder that is not the misfit they name."""
import json

from draftsmith.testing import edit_config


def folder_with(path, **files):
    path.mkdir()
    for name, data in files.items():
        (path / name).write_text(json.dumps(data) if isinstance(data, dict) else data)
    return path


def read(path):
    return json.loads(path.read_text())


def test_in_place_sets_changes_and_drops_keys(tmp_path):
    src = folder_with(tmp_path / "s", **{"config.json": {"a": 1, "b": 2, "c": 3}})
    assert edit_config(src, drop=["b"], a=10, d=None) == src
    assert read(src / "config.json") == {"a": 10, "c": 3, "d": None}   # None is a value, not a removal
    assert list(tmp_path.iterdir()) == [src]


def test_a_copy_leaves_the_source_untouched(tmp_path):
    src = folder_with(tmp_path / "s", **{"config.json": {"a": 1, "b": 2}, "model.safetensors": "weights"})
    before = {p.name: p.read_text() for p in src.iterdir()}
    out = edit_config(src, tmp_path / "d", drop=("a",), b=3)
    assert out == tmp_path / "d"
    assert read(out / "config.json") == {"b": 3}
    assert (out / "model.safetensors").read_text() == "weights"
    assert {p.name: p.read_text() for p in src.iterdir()} == before


def test_dropping_a_missing_key_is_not_an_error_and_drop_wins_over_changes(tmp_path):
    src = folder_with(tmp_path / "s", **{"config.json": {"a": 1}})
    edit_config(src, drop=["absent", "b"], b=2)
    assert read(src / "config.json") == {"a": 1}


def test_a_string_drop_is_one_key_not_its_letters(tmp_path):
    src = folder_with(tmp_path / "s", **{"config.json": {"dim": 1, "d": 2}})
    edit_config(src, drop="dim")
    assert read(src / "config.json") == {"d": 2}


def test_name_picks_the_file_and_leaves_the_others(tmp_path):
    src = folder_with(tmp_path / "s", **{"params.json": {"dim": 64}, "config.json": {"hidden_size": 64}})
    out = edit_config(src, tmp_path / "d", name="params.json", n_layers=5)
    assert read(out / "params.json") == {"dim": 64, "n_layers": 5}
    assert read(out / "config.json") == {"hidden_size": 64}
    assert read(src / "params.json") == {"dim": 64}
