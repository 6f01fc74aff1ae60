"""Where `draftsmith bench --scale` writes (draftsmith.bench_out): a folder is taken as a previous run's only when
its results.json is one run_scale wrote (a regular file, not over the JSON size limit, a JSON list of rows with a
shape), each unusable path is named once, and a write cut off leaves the cut-off's own error."""
import json
import os

import pytest

import draftsmith.bench_out as bo
from draftsmith import limits
from draftsmith.errors import OptionError


@pytest.mark.parametrize("text", ["[]", '[{"shape": "tiny"}]', '[{"shape": "tiny", "batches": {}}, {"shape": "1b"}]'])
def test_a_list_of_rows_with_a_shape_is_a_previous_runs_results(tmp_path, text):
    (tmp_path / "results.json").write_text(text)
    (tmp_path / "results.md").write_text("## tiny")
    assert bo.others(tmp_path) == []


@pytest.mark.parametrize("text", [
    '["shape"]',                        # catches bench_out.py:62 isinstance(runs, list) and all(...) -> or
    '[{"mine": 1}]',                    # catches bench_out.py:62 isinstance(r, dict) and 'shape' in r -> or
    '[{"shape": "tiny"}, 3]',
    '{"shape": "tiny"}',
    '"shape"',
])
def test_a_results_json_no_run_wrote_is_no_marker(tmp_path, text):
    """Only a JSON list whose every item is a row (a dict with a shape) is what run_scale writes."""
    (tmp_path / "results.json").write_text(text)
    (tmp_path / "results.md").write_text("my notes")
    assert bo.others(tmp_path) == ["results.json", "results.md"]


def test_a_results_json_that_is_a_link_is_no_marker(tmp_path):
    """A link named results.json (even to a run's results) is the user's: run_scale writes a regular file."""
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps([{"shape": "tiny"}]))
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").symlink_to(elsewhere)
    # catches bench_out.py:60 f.is_file() and not f.is_symlink() and ... -> or
    assert bo.others(out) == ["results.json"]
    with pytest.raises(OptionError, match="holds results.json but a results.json that is not one a previous"):
        bo.check_folders(out, out / "checkpoints", ["tiny"])


def test_a_results_json_over_the_json_limit_is_not_read(tmp_path, monkeypatch):
    """The limit is inclusive: a file of exactly limits.JSON_BYTES is read, one byte more is not."""
    text = json.dumps([{"shape": "tiny"}])
    (tmp_path / "results.json").write_text(text)
    monkeypatch.setattr(limits, "JSON_BYTES", len(text))
    # catches bench_out.py:60 f.stat().st_size <= limits.JSON_BYTES -> <
    assert bo.others(tmp_path) == []
    monkeypatch.setattr(limits, "JSON_BYTES", len(text) - 1)
    assert bo.others(tmp_path) == ["results.json"]


def test_a_checkpoints_folder_inside_a_good_out_is_still_checked(tmp_path):
    """--checkpoints under --out is left out only when --out itself was refused (said once); under a usable
    --out (a previous run's) a --checkpoints that is a file is refused."""
    out = tmp_path / "b"
    out.mkdir()
    (out / "results.json").write_text("[]")
    (out / "checkpoints").write_text("x")
    # catches bench_out.py:37 found and checkpoints.is_relative_to(out) -> found or ...
    with pytest.raises(OptionError) as e:
        bo.check_folders(out, out / "checkpoints", ["tiny"])
    assert str(e.value) == f"--checkpoints {out / 'checkpoints'}: is not a folder"


def test_a_checkpoints_folder_under_a_refused_out_is_not_named_again(tmp_path):
    (tmp_path / "afile").write_text("mine")
    out = tmp_path / "afile" / "sub"
    with pytest.raises(OptionError) as e:
        bo.check_folders(out, out / "checkpoints", ["tiny"])
    assert str(e.value).splitlines() == [f"--out {out}: cannot be created: {tmp_path / 'afile'} is not a folder"]
    # elsewhere it is named too
    with pytest.raises(OptionError) as e:
        bo.check_folders(out, tmp_path / "afile" / "c", ["tiny"])
    assert [line.split(":")[0] for line in str(e.value).splitlines()] == ["--out " + str(out),
                                                                           "--checkpoints " + str(tmp_path / "afile/c")]


def test_write_atomic_writes_the_whole_text_and_leaves_no_temporary_file(tmp_path):
    (tmp_path / "results.md").write_text("old")
    bo.write_atomic(tmp_path / "results.md", "new ü\n")
    assert (tmp_path / "results.md").read_text(encoding="utf-8") == "new ü\n"
    assert os.listdir(tmp_path) == ["results.md"]


def test_a_write_cut_off_before_its_temporary_file_exists_raises_the_cut_off(tmp_path, monkeypatch):
    """The time limit can arrive before open() made the temporary file: the clean-up must not replace that
    KeyboardInterrupt with a FileNotFoundError about the file that was never made."""
    (tmp_path / "results.md").write_text("old")

    def cut_off(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(bo, "open", cut_off, raising=False)   # the module's open(), before the builtin
    # catches bench_out.py:24 tmp.unlink(missing_ok=True) -> tmp.unlink(missing_ok=False)
    with pytest.raises(KeyboardInterrupt):
        bo.write_atomic(tmp_path / "results.md", "new")
    assert (tmp_path / "results.md").read_text() == "old" and os.listdir(tmp_path) == ["results.md"]


def path_of(base, length: int, name: str):
    """A path under ``base`` of exactly ``length`` characters (components of at most 200)."""
    path = base
    while len(str(path)) + 1 + 200 < length:
        path = path / ("d" * 199)
    return path / (name + "x" * (length - len(str(path)) - 1 - len(name)))


def shown(path) -> str:
    """A path as a message names it: whole up to 300 characters, else its ends around '...' (300 at most)."""
    text = str(path)
    return text if len(text) <= 300 else f"{text[:148]}...{text[-148:]}"


@pytest.mark.parametrize("length", [300, 301])
@pytest.mark.parametrize("case", ["out a file", "checkpoints a file", "out the user's", "shape's folder a file"])
def test_messages_name_a_path_whole_up_to_300_characters(tmp_path, case, length):
    """Every message about --out and --checkpoints bounds the path it names: whole up to 300 characters, cut in
    the middle past that, so a long path cannot flood the terminal."""
    # catches bench_out.py:36 short_text(out, 300) -> 299 / 301, and the same at :38, :40 and :43
    out, checkpoints = tmp_path / "out", tmp_path / "ckpt"
    if case == "out a file":
        out = path_of(tmp_path, length, "o")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("mine")
        named, says = out, "--out {}: is not a folder"
    elif case == "checkpoints a file":
        checkpoints = path_of(tmp_path, length, "c")
        checkpoints.parent.mkdir(parents=True, exist_ok=True)
        checkpoints.write_text("mine")
        named, says = checkpoints, "--checkpoints {}: is not a folder"
    elif case == "out the user's":
        out = path_of(tmp_path, length, "o")
        out.mkdir(parents=True)
        (out / "notes.txt").write_text("mine")
        named, says = out, "--out {}: holds notes.txt but no results.json"
    else:
        out.mkdir()
        (out / "results.json").write_text("[]")
        checkpoints = path_of(tmp_path, length, "c")
        checkpoints.mkdir(parents=True)
        (checkpoints / "tiny-draft").write_text("x")
        named, says = checkpoints, "--checkpoints {}: tiny-draft is not a folder"
    assert len(str(named)) == length
    with pytest.raises(OptionError) as e:
        bo.check_folders(out, checkpoints, ["tiny"])
    assert str(e.value).startswith(says.format(shown(named))), str(e.value)
