"""The README's whole plugin runs as written: its pyproject table is valid TOML naming the module, and its module,
imported from a package folder with the spec beside it, registers a norm and a spec that assemble and decode as
target-only does (greedy)."""
import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import yaml

import draftsmith
from draftsmith.testing import write_eagle3, write_target

from test_plugins import fresh

README = Path(__file__).resolve().parents[2] / "README.md"
BUILTIN_DIR = Path(draftsmith.__file__).parent / "specs" / "builtin"


def blocks(language: str, first_line: str) -> str:
    """The README's fenced ``language`` block whose first line is ``first_line``."""
    for body in re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.S):
        if body.startswith(first_line):
            return body
    raise AssertionError(f"no {language} block starting {first_line!r} in the README")


def test_the_readme_plugin_table_is_valid_toml():
    table = tomllib.loads(blocks("toml", "# pyproject.toml of my_package"))
    assert table["project"]["entry-points"]["draftsmith"] == {"myplugin": "my_package.plugin"}


def test_the_readme_plugin_registers_and_decodes(tmp_path, monkeypatch):
    package = tmp_path / "my_package"
    package.mkdir()
    (package / "plugin.py").write_text(blocks("python", "# my_package/plugin.py"))
    spec = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    spec["name"], spec["draft"]["norm"] = "my-draft", {"kind": "scaled_rms", "scale": 1.0}
    (package / "my-draft.yaml").write_text(yaml.safe_dump(spec))
    loaded = importlib.util.spec_from_file_location("readme_my_package_plugin", package / "plugin.py")
    module = importlib.util.module_from_spec(loaded)
    monkeypatch.setitem(sys.modules, loaded.name, module)
    loaded.loader.exec_module(module)
    reg = fresh(("myplugin", module))
    assert reg.provider("norm", "scaled_rms") == "myplugin" and ("my-draft", "myplugin") in reg.spec_names()
    target = write_target(tmp_path / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32)
    model = draftsmith.assemble(draftsmith.load_spec("my-draft", reg), target=target,
                                draft=write_eagle3(tmp_path / "d", target), registry=reg)
    assert type(model.draft.norm).__name__ == "ScaledRMS"
    out = model.generate([1, 2, 3], max_new_tokens=6, stop=[])
    assert out.token_ids == model.generate_baseline([1, 2, 3], max_new_tokens=6, stop=[]).token_ids
