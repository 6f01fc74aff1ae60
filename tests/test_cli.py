"""The `draftsmith` command: validate, list, inspect (run in-process with typer's CliRunner), and the draft zoo:
every family listed, a Mistral-native draft inspected, an unknown layout named with its closest families.
generate, train's and doctor's folders and devices, bench's scale options, a cached target:
test_cli_generate.py."""
import re
import shutil
import sys
import textwrap

import pytest
import torch
import yaml
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.errors import DraftsmithError
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import edit_config, write_eagle3, write_target

WIDE = {"COLUMNS": "1000"}  # rich wraps at the terminal width; these tests are about content
BUILTINS = sorted(BUILTIN_DIR.glob("*.yaml"))


def run(*args, env=WIDE):
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


# --- validate -------------------------------------------------------------------------------------------------------

def test_validate_accepts_the_builtin_specs():
    res = run("validate", *BUILTINS)
    assert res.exit_code == 0, res.output
    for path in BUILTINS:
        assert f"{path}: ok ({path.stem})" in res.stdout


def test_validate_resolves_a_builtin_specs_checkpoints_against_its_own_file(tmp_path, monkeypatch):
    """`validate demo` from any folder: the demo spec's relative checkpoint folders exist beside its file; a spec
    file copied elsewhere has none there, and is warned about."""
    monkeypatch.chdir(tmp_path)
    res = run("validate", "demo")
    assert res.exit_code == 0 and "demo: ok (demo)" in res.stdout and "warning" not in res.stderr, res.output
    (tmp_path / "demo.yaml").write_text((BUILTIN_DIR / "demo.yaml").read_text())
    res = run("validate", tmp_path / "demo.yaml")
    assert res.exit_code == 0 and res.stderr.count("is not a folder") == 2, res.output


def test_validate_lists_every_problem_of_every_file(tmp_path):
    base = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    one = {**base, "draft": {**base["draft"], "attention": {"kind": "gqq"}, "norms": {"inptu": "all"}}}
    two = {**base, "decoding": {"topk": 2, "steps": 1, "page_size": 2, "mode": "v2", "attention": "sdpaa"}}
    files = [tmp_path / "one.yaml", tmp_path / "two.yaml", tmp_path / "broken.yaml"]
    files[0].write_text(yaml.safe_dump(one))
    files[1].write_text(yaml.safe_dump(two))
    files[2].write_text("draft: [unclosed\n")
    res = run("validate", files[0], BUILTINS[0], files[1], files[2], tmp_path / "missing.yaml")
    assert res.exit_code == 1
    err = res.stderr
    assert f"{files[0]} has 2 problems" in err and f"{files[1]} has 3 problems" in err
    assert f"{files[2]} has 1 problem" in err and "not valid YAML" in err and "missing.yaml" in err
    for line in ["draft.attention.kind: unknown attention 'gqq'. Did you mean 'gqa'?",
                 "draft.norms.inptu: unknown field 'inptu'. Did you mean 'input'?",
                 "decoding.mode: v2 (tree drafting with compaction) is unsupported here: page_size is 2",
                 "decoding.attention: unknown attention backend 'sdpaa'. Did you mean 'sdpa'?",
                 "decoding.draft_tokens: 8 tokens cannot be drafted with topk=2, steps=1",
                 "allowed: gqa (builtin)"]:
        assert line in err
    assert f"{BUILTINS[0]}: ok" in res.stdout


def test_validate_checks_a_specs_checkpoints_when_both_folders_are_there(tmp_path, eagle3_pair):
    assert "demo: ok (demo); checkpoints fit (target " in run("validate", "demo").stdout
    target, draft = eagle3_pair
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    data["checkpoints"] = {"target": str(target), "draft": str(draft)}
    data["draft"]["fusion"]["aux_layers"] = {"ids": [1, 4, 9]}   # the target has 8 layers
    (tmp_path / "taps.yaml").write_text(yaml.safe_dump(data))
    res = run("validate", tmp_path / "taps.yaml")
    assert res.exit_code == 1 and f"{tmp_path / 'taps.yaml'}: ok" not in res.stdout, res.output   # no "ok", then
    assert "is valid, but its checkpoints do not fit:" in res.stderr and "tap layers [9]" in res.stderr   # a failure


def test_validate_checks_the_checkpoints_whatever_backend_this_machine_has(tmp_path):
    data = yaml.safe_load((BUILTIN_DIR / "demo.yaml").read_text())
    data["decoding"]["attention"] = "flash"   # flash-attn: CUDA only
    for which in ("target", "draft"):
        data["checkpoints"][which] = str(BUILTIN_DIR / data["checkpoints"][which])
    (tmp_path / "gpu.yaml").write_text(yaml.safe_dump(data))
    res = run("validate", tmp_path / "gpu.yaml")
    assert res.exit_code == 0 and "checkpoints fit" in res.stdout, res.output


def test_validate_needs_a_file():
    assert run("validate").exit_code != 0


# --- list -----------------------------------------------------------------------------------------------------------

def rows(text):
    return {tuple(c.strip() for c in line.strip("│ ").split("│")) for line in text.splitlines() if "│" in line}


def test_list_shows_specs_and_components_with_providers():
    res = run("list")
    assert res.exit_code == 0, res.output
    table = rows(res.stdout)
    reg = draftsmith.default_registry()
    for name, plugin in reg.spec_names():
        assert any(r[:2] == (name, plugin) for r in table), name
    for kind in reg.kinds():
        for name, plugin in reg.names(kind):
            assert any(r[:3] == (kind, name, plugin) for r in table), (kind, name)


def test_list_prints_component_docs_verbatim():
    res = run("list")
    assert ("fusion", "eagle1", "builtin", "fc over [embed; hidden]") in rows(res.stdout)


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    """An installed distribution providing the norm 'cli-norm' as plugin 'cliplug'; the cached process-wide
    registry is rebuilt before and after, so no other test sees it."""
    (tmp_path / "ds_cli_plugin.py").write_text(textwrap.dedent('''
        from draftsmith.hooks import Component, hookimpl

        @hookimpl
        def draftsmith_components():
            return [Component("norm", "cli-norm", lambda params, **kw: None, doc="a norm from a plugin")]
    '''))
    info = tmp_path / "ds_cli_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ds-cli-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[draftsmith]\ncliplug = ds_cli_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    draftsmith.default_registry.cache_clear()
    yield
    draftsmith.default_registry.cache_clear()
    sys.modules.pop("ds_cli_plugin", None)


def test_list_names_a_plugin_as_provider(installed_plugin):
    res = run("list")
    assert res.exit_code == 0, res.output
    assert ("norm", "cli-norm", "cliplug", "a norm from a plugin") in rows(res.stdout)
    assert ("norm", "rms", "builtin", "RMSNorm in float32") in rows(res.stdout)


# --- inspect --------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def eagle3_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    target = write_target(root / "target", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32)
    draft = write_eagle3(root / "draft", target)
    edit_config(draft, num_hidden_layers=40)  # a published midlayer draft says 40; the weights hold one layer
    return target, draft


def test_inspect_prints_a_spec_that_loads_the_checkpoint(eagle3_pair):
    target, draft = eagle3_pair
    res = run("inspect", draft)
    assert res.exit_code == 0, res.output
    assert re.search(r"^# .*num_hidden_layers=40.*1 layer", res.stdout, re.M)
    assert re.search(r"^# .*norm_before_residual", res.stdout, re.M)
    spec = draftsmith.parse_spec(yaml.safe_load(res.stdout), source="inspect output")
    assert spec.draft.fusion.kind == "eagle3" and spec.checkpoints.draft == str(draft.resolve())
    model = draftsmith.assemble(spec, target=target)  # the draft folder comes from the printed spec
    assert len(model.draft.layers) == 1


@pytest.mark.parametrize("change, says", [
    ({"midlayer.mlp.down_proj.weight": None}, "'layers.0.mlp.down_proj.weight' missing"),
    ({"midlayer.mlp.up_proj.weight": "int"}, "tensor 'midlayer.mlp.up_proj.weight' is int32 (int) in the checkpoint"),
    ({"foo.bar": "new"}, "'foo.bar' unexpected"),
    ({"midlayer.self_attn.q_proj.weight": "narrow"}, "tensor 'midlayer.self_attn.q_proj.weight' is [16, 31] in the "
                                                     "checkpoint, the model its config describes expects [16, 32]")])
def test_inspect_says_when_its_spec_does_not_load_the_folder_as_it_is(tmp_path, eagle3_pair, change, says):
    """A folder of a known family missing a tensor, holding one of a refused dtype or one no rule reads got the
    family's spec and exit 0 with no word, though assemble() refuses it; the spec is still printed (with the
    problem as its first comment), and the exit says it does not load."""
    from safetensors.torch import load_file, save_file

    draft = tmp_path / "d"
    shutil.copytree(eagle3_pair[1], draft)
    tensors = load_file(str(draft / "model.safetensors"))
    for name, how in change.items():
        if how is None:
            del tensors[name]
        else:
            tensors[name] = {"int": lambda t: t.to(torch.int32), "narrow": lambda t: t[:, :-1].contiguous(),
                             "new": lambda t: torch.zeros(2)}[how](tensors.get(name))
    save_file(tensors, str(draft / "model.safetensors"))
    res = run("inspect", draft)
    assert res.exit_code == 1 and says in res.stderr and "does not load this folder as it is" in res.stderr, res.output
    first = res.stdout.splitlines()[0]   # the first comment, as the README says (`head -1` shows it)
    assert first.startswith("# the proposed spec does not load this folder as it is") and says in first, res.stdout
    draftsmith.parse_spec(yaml.safe_load(res.stdout), source="inspect output")   # the spec, still printed
    with pytest.raises(DraftsmithError):   # what assemble() says too
        draftsmith.assemble(draftsmith.parse_spec(yaml.safe_load(res.stdout), source="o"), target=eagle3_pair[0])


def test_inspect_output_is_yaml_at_any_terminal_width(eagle3_pair):
    res = run("inspect", eagle3_pair[1], env={"COLUMNS": "80"})
    draftsmith.parse_spec(yaml.safe_load(res.stdout), source="inspect output")


def test_inspect_refuses_an_unknown_layout(tmp_path, eagle3_pair):
    from draftsmith.assembler.checkpoint import save_safetensors
    import torch

    (tmp_path / "config.json").write_text("{}")
    save_safetensors({"something.weight": torch.zeros(2)}, tmp_path)
    res = run("inspect", tmp_path)
    assert res.exit_code == 1 and "no registered detector recognises this layout" in res.stderr


# --- the draft zoo: list, inspect of every family, unknown layouts --------------------------------------------------

def test_list_shows_every_family():
    table = rows(run("list").stdout)
    for name in ("eagle1-llama", "eagle3-llama", "eagle3-speculators", "eagle3.1-llama", "eagle3-norm-before-fc",
                 "eagle-mistral", "demo"):
        assert any(r[:2] == (name, "builtin") for r in table), name


def test_inspect_a_mistral_native_draft(tmp_path):
    from draftsmith.testing.mistral import write_mistral_eagle

    target = write_target(tmp_path / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=4, vocab_size=32)
    draft = write_mistral_eagle(tmp_path / "m", target)
    res = run("inspect", draft)
    assert res.exit_code == 0, res.output
    assert re.search(r"^# .*Mistral-native", res.stdout, re.M) and "interleaved" in res.stdout
    spec = draftsmith.parse_spec(yaml.safe_load(res.stdout), source="inspect output")
    assert spec.draft.attention.params["rope"] == "interleaved" and spec.draft.feed_back == "post_norm"
    assert len(draftsmith.assemble(spec, target=target).draft.layers) == 2


def test_inspect_an_unknown_layout_names_the_closest_families_and_what_did_not_fit(tmp_path, eagle3_pair):
    from safetensors.torch import load_file, save_file

    draft = tmp_path / "odd"
    draft.mkdir()
    tensors = load_file(str(eagle3_pair[1] / "model.safetensors"))
    tensors = {n.replace("midlayer.", "blocks.0."): t for n, t in tensors.items() if "hidden_norm" not in n}
    save_file(tensors, str(draft / "model.safetensors"))
    (draft / "config.json").write_text((eagle3_pair[1] / "config.json").read_text())
    res = run("inspect", draft)
    assert res.exit_code == 1 and "no registered detector recognises this layout" in res.stderr
    closest = [line for line in res.stderr.splitlines() if "closest:" in line]
    assert len(closest) == 2 and "eagle3" in closest[0]
    assert "blocks.0.mlp.{down,gate,up}_proj.weight" in closest[0] or "blocks.0." in closest[0]
    assert closest[0].endswith("tensors it needs that are missing: midlayer.hidden_norm.weight")


def test_inspect_reports_config_keys_it_does_not_read(tmp_path, eagle3_pair):
    draft = edit_config(eagle3_pair[1], tmp_path / "d", use_fancy_norm=True)
    res = run("inspect", draft)
    assert re.search(r"^# config keys draftsmith's built-in components do not read: use_fancy_norm$", res.stdout, re.M)
