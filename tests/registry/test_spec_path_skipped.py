"""A *.yaml / *.yml file of a DRAFTSMITH_SPEC_PATH folder whose top-level name: cannot be read is skipped, but never
without a word: the registry keeps it with a reason, `draftsmith list` prints it (exit 1, as for a broken spec), and
a spec not found by a name equal to its stem says it was skipped. One such file stops no command."""

import pytest
from typer.testing import CliRunner

import draftsmith
from draftsmith import limits
from draftsmith.cli import app
from draftsmith.registry.spec_path import SPEC_PATH, scan_folder
from draftsmith.specs.catalog import BUILTIN_DIR

LLAMA = (BUILTIN_DIR / "eagle3-llama.yaml").read_text()


def registry(folder):
    return draftsmith.build_registry(entry_points=False, spec_path=str(folder))


@pytest.fixture
def fresh():
    draftsmith.default_registry.cache_clear()
    yield
    draftsmith.default_registry.cache_clear()


@pytest.mark.parametrize(("data", "reason"), [
    (b"draft:\n  a: [1\nname: fam\n", "no top-level name: (a YAML error at line 3)"),
    (b"draft: 1\n\tname: fam\n", "no top-level name: (a YAML error at line 2)"),
    (b"name: 123\n", "name: 123 is not a string (YAML reads it as a number; quote it)"),
    (b"name: yes\n", "name: yes is not a string (YAML reads it as a boolean; quote it)"),
    (b"name:\n", "name: is empty"),
    (b"name: {a: 1}\n", "name: is a mapping, not a string"),
    (b"other: 1\n", "no top-level name:"),
    (b"", "no top-level name: (the file is empty)"),
    (b"- name: fam\n", "no top-level name: (the file is a list, not a mapping)"),
    (b"name: caf\xe9\n", "not UTF-8 text (byte 9)"),
    (b"name: fam\n#" + b"x" * limits.SPEC_BYTES + b"\n", f"over {limits.SPEC_BYTES} bytes"),
])
def test_a_skipped_file_comes_with_its_reason(tmp_path, data, reason):
    (tmp_path / "fam.yaml").write_bytes(data)
    (tmp_path / "ok.yml").write_text("name: fine\n")
    found, skipped = scan_folder(tmp_path)
    assert [s.name for s in found] == ["fine"]
    assert len(skipped) == 1 and skipped[0][0] == tmp_path / "fam.yaml", skipped
    assert skipped[0][1].startswith(reason), skipped


def test_the_registry_keeps_the_skipped_files_and_still_works(tmp_path):
    (tmp_path / "fam.yaml").write_text("name: 123\n")
    (tmp_path / "mine.yaml").write_text(LLAMA.replace("name: eagle3-llama", "name: mine", 1))
    reg = registry(tmp_path)
    assert reg.skipped_spec_files == [(tmp_path.absolute() / "fam.yaml",
                                       "name: 123 is not a string (YAML reads it as a number; quote it)")]
    assert draftsmith.load_spec("mine", registry=reg).name == "mine"     # one bad file stops nothing


def test_a_spec_not_found_names_the_skipped_file_of_its_stem(tmp_path):
    (tmp_path / "fam.yaml").write_text("draft: 1\n\tname: fam\n")
    (tmp_path / "other.yaml").write_text("name: 7\n")                    # another stem: not noted
    with pytest.raises(LookupError) as info:
        draftsmith.load_spec("fam", registry=registry(tmp_path))
    text = str(info.value)
    assert text.startswith("no spec named 'fam' and no such file."), text   # the message as before, then the note
    assert text.endswith(f"\nnote: {tmp_path.absolute() / 'fam.yaml'} in {SPEC_PATH} was skipped: "
                         "no top-level name: (a YAML error at line 2)"), text
    assert "other.yaml" not in text


def test_generate_spec_name_says_the_file_was_skipped(tmp_path, fresh):
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "fam.yaml").write_text("name: yes\n")
    res = CliRunner().invoke(app, ["generate", "--spec", "fam", "--target", str(tmp_path), "--draft", str(tmp_path)],
                             env={SPEC_PATH: str(folder), "COLUMNS": "1000"})
    assert res.exit_code != 0
    assert "no spec named 'fam'" in res.output and "fam.yaml in DRAFTSMITH_SPEC_PATH was skipped: name: yes is " \
        "not a string" in " ".join(res.output.split()), res.output


def test_list_prints_the_skipped_files_after_its_tables_and_exits_1(tmp_path, fresh):
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "mine.yaml").write_text(LLAMA.replace("name: eagle3-llama", "name: mine", 1))
    (folder / "fam.yaml").write_text("name: 123\n")
    res = CliRunner().invoke(app, ["list"], env={SPEC_PATH: str(folder), "COLUMNS": "1000"})
    assert res.exit_code == 1, res.output
    assert "mine" in res.stdout and "components" in res.stdout and "skipped /" not in res.stdout
    assert f"error: skipped {folder / 'fam.yaml'}: name: 123 is not a string" in res.stderr, res.stderr
    assert res.stderr.rstrip().splitlines()[-1].startswith("error: skipped "), res.stderr   # after the tables


def test_list_without_skipped_files_exits_0(tmp_path, fresh):
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "mine.yaml").write_text(LLAMA.replace("name: eagle3-llama", "name: mine", 1))
    res = CliRunner().invoke(app, ["list"], env={SPEC_PATH: str(folder), "COLUMNS": "1000"})
    assert res.exit_code == 0 and "skipped /" not in res.output, res.output
