"""Mutation round 12 on draftsmith/cli/specs.py: what ``validate``, ``list``, ``inspect`` and ``convert`` print,
where, and with which exit code, pinned where a planted bug survived the other CLI tests.

validate: a spec whose target is a ``cache:NAME`` already in the cache has its checkpoints checked against the
cached folder, and one not fetched yet is only said ok (nothing is fetched); a spec file that trips a bug in loading
is named on stderr, then the next file is still checked; a spec whose rules cannot be bound to the draft's config
says so on stderr, never on stdout. list: a long DRAFTSMITH_SPEC_PATH folder is folded at 40 characters, never cut;
a broken spec's row shows its one problem, not the "has 1 problem" heading; a params default made by a factory is
shown as made. inspect: a built-in detector is not named as a plugin; the spec is printed in the order a spec is
written (name first), not sorted. convert: the config printed is the config.json written, byte for byte."""
import os

import pytest
import yaml
from pydantic import BaseModel, Field
from typer.testing import CliRunner

import draftsmith
from draftsmith import hub
from draftsmith.cli import app
from draftsmith.cli.specs import param_summary
from draftsmith.registry.spec_path import SPEC_PATH
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import write_eagle3, write_target

DEMO = yaml.safe_load((BUILTIN_DIR / "demo.yaml").read_text())
DEMO_CKPT = {k: (BUILTIN_DIR / v).resolve() for k, v in DEMO["checkpoints"].items()}


def run(*args, env=None):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "1000", **(env or {})})


def said(text: str) -> str:
    return " ".join(text.split())


# --- validate -------------------------------------------------------------------------------------------------------

def cached_demo_spec(tmp_path):
    """The demo spec with its target as cache:smollm2, and an empty cache folder for DRAFTSMITH_CACHE."""
    data = {**DEMO, "checkpoints": {"target": "cache:smollm2", "draft": str(DEMO_CKPT["draft"])}}
    path = tmp_path / "cached.yaml"
    path.write_text(yaml.safe_dump(data))
    cache = tmp_path / "cache"
    cache.mkdir()
    return path, cache


def test_validate_checks_the_checkpoints_of_a_cached_target_already_fetched(tmp_path):
    path, cache = cached_demo_spec(tmp_path)
    os.symlink(DEMO_CKPT["target"], cache / hub.SMOLLM2.name)   # "fetched": its config.json is there
    res = run("validate", path, env={"DRAFTSMITH_CACHE": str(cache)})
    assert res.exit_code == 0, res.output
    assert f"{path}: ok (demo); checkpoints fit (target {cache / hub.SMOLLM2.name}, draft " in said(res.stdout)


def test_validate_does_not_fetch_a_cached_target_and_calls_the_spec_ok(tmp_path):
    path, cache = cached_demo_spec(tmp_path)
    res = run("validate", path, env={"DRAFTSMITH_CACHE": str(cache)})
    assert res.exit_code == 0, res.output
    assert res.stdout == f"{path}: ok (demo)\n" and res.stderr == "", res.output
    assert os.listdir(cache) == []


def test_validate_names_a_file_whose_loading_hit_a_bug_on_stderr_and_checks_the_next(tmp_path, monkeypatch):
    real = draftsmith.load_spec

    def load_spec(name):
        if name == "buggy.yaml":
            raise RuntimeError("boom")
        return real(name)

    monkeypatch.setattr(draftsmith, "load_spec", load_spec)
    res = run("validate", "buggy.yaml", "demo")
    assert res.exit_code == 1, res.output
    assert res.stderr.startswith("buggy.yaml:\ninternal error: RuntimeError: boom\n"), res.output
    assert "buggy" not in res.stdout and "Traceback" not in res.output, res.output
    assert "demo: ok (demo); checkpoints fit" in res.stdout, res.output


def test_validate_says_a_spec_with_unbindable_rules_has_problems_on_stderr(tmp_path):
    data = dict(DEMO, weights={"rules": [{"match": r"^midlayer\.", "replace": "layers.0."},
                                         {"match": r"^x${nope}\.", "replace": "y."}]})
    data["checkpoints"] = {k: str(v) for k, v in DEMO_CKPT.items()}
    path = tmp_path / "unbound.yaml"
    path.write_text(yaml.safe_dump(data))
    res = run("validate", path)
    assert res.exit_code == 1 and res.stdout == "", res.output
    assert said(res.stderr).startswith(f"{path}: the spec (demo) has problems its checkpoints show (weight rules or "
                                       "ignore patterns that cannot be bound to the draft's config):"), res.output
    assert "${nope} cannot be bound" in res.stderr, res.output


# --- list -----------------------------------------------------------------------------------------------------------

@pytest.fixture
def spec_folder(tmp_path):
    """A DRAFTSMITH_SPEC_PATH folder with a long name, holding a spec with one problem said in one line (invalid
    YAML after its name: the error is its heading and that line); the process-wide registry rebuilt before and
    after."""
    folder = tmp_path / ("a-spec-folder-with-a-rather-long-name-" * 2)
    folder.mkdir()
    (folder / "one.yaml").write_text("name: oneproblem\ndraft: [unclosed\n")
    draftsmith.default_registry.cache_clear()
    yield folder
    draftsmith.default_registry.cache_clear()


def spec_row(stdout: str, name: str) -> list[list[str]]:
    """The specs table's lines of ``name``'s row (its first line, then those its folded cells add)."""
    lines = [[c.strip() for c in line.split("│")[1:-1]] for line in stdout.splitlines() if line.startswith("│")]
    first = next(i for i, cells in enumerate(lines) if cells[0] == name)
    rest = lines[first + 1:]
    return [lines[first], *rest[: next(i for i, cells in enumerate(rest) if cells[0])]]


def test_list_folds_a_long_spec_folder_at_40_characters(spec_folder):
    res = run("list", env={SPEC_PATH: str(spec_folder)})
    assert res.exit_code == 1, res.output   # the spec is broken
    folded = [cells[1] for cells in spec_row(res.stdout, "oneproblem")]
    assert "".join(folded) == str(spec_folder) and len(str(spec_folder)) > 80, folded
    assert [len(part) for part in folded[:-1]] == [40] * (len(folded) - 1), folded


def test_list_shows_the_one_problem_of_a_broken_spec_in_its_row(spec_folder):
    res = run("list", env={SPEC_PATH: str(spec_folder)})
    assert res.exit_code == 1, res.output
    description = " ".join(cells[2] for cells in spec_row(res.stdout, "oneproblem") if cells[2])
    assert description.startswith("BROKEN: <top>: not valid YAML: line 3, column 1: "), description
    assert description.endswith(" (the errors follow the tables)") and "problem" not in description, description
    assert res.stderr.startswith(f"error: {spec_folder / 'one.yaml'} has 1 problem\n  <top>: not valid YAML: line 3"), \
        res.stderr


def test_a_params_default_made_by_a_factory_is_shown_as_made():
    class Params(BaseModel):
        tags: list[str] = Field(default_factory=lambda: ["a"])
        plain: int = 3

    assert param_summary(Params) == "tags (['a']), plain (3)"


# --- inspect and convert --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def eagle3_draft(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    target = write_target(root / "target", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32)
    return write_eagle3(root / "draft", target)


def test_inspect_names_no_plugin_when_a_builtin_detector_recognised_the_layout(eagle3_draft):
    res = run("inspect", eagle3_draft)
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(f"# {eagle3_draft}: midlayer.* tensors with hidden_norm and fc (EAGLE-3, "
                                 "yuhuili/lmsys)\n"), res.stdout
    assert "detected by plugin" not in res.stdout, res.stdout


def test_inspect_prints_the_spec_in_the_order_a_spec_is_written(eagle3_draft):
    res = run("inspect", eagle3_draft)
    assert res.exit_code == 0, res.output
    yaml_lines = [line for line in res.stdout.splitlines() if not line.startswith("#")]
    assert yaml_lines[0] == "name: eagle3-llama-draft", res.stdout
    spec = yaml.safe_load(res.stdout)
    assert list(spec)[:4] == ["name", "description", "checkpoints", "draft"], list(spec)
    assert list(spec["draft"])[:3] == ["num_layers", "layer", "attention"], list(spec["draft"])


def test_convert_prints_the_config_it_wrote_as_written(tmp_path, eagle3_draft):
    res = run("convert", eagle3_draft, "--to", "layers", tmp_path / "out")
    assert res.exit_code == 0, res.output
    first, printed = res.stdout.split("\n", 1)
    assert first.startswith(f"# {eagle3_draft} -> {tmp_path / 'out'} (layers: "), first
    assert printed == (tmp_path / "out" / "config.json").read_text(), printed
    assert printed.startswith('{\n  "architectures": [\n    "LlamaForCausalLM"\n  ],\n'), printed
