"""The `draftsmith` command: validate, list, inspect, generate (run in-process with typer's CliRunner)."""
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


# --- generate -------------------------------------------------------------------------------------------------------

def test_generate_warms_up_each_row_then_compares_speeds(monkeypatch):
    from draftsmith.decoding.model import SpeculativeModel

    calls = []
    for name in ("generate", "generate_baseline"):
        real = getattr(SpeculativeModel, name)
        monkeypatch.setattr(SpeculativeModel, name,
                            lambda self, p, *a, _real=real, _n=name, **kw: calls.append((_n, kw["max_new_tokens"]))
                            or _real(self, p, *a, **kw))
    res = run("generate", "--spec", "demo", "--max-new-tokens", "12", "--threads", "1")   # auto would time runs too
    assert res.exit_code == 0, res.output
    assert [n for _, n in calls] == [8, 8, 8, 12, 12, 12]          # an untimed 8-token warm-up of every row first
    # name, tok/s, vs target-only, same as target-only
    row = r"│ (speculative v\d|chain v1|target only) +│.*?│ ([\d.]+) +│ ([\d.]+)x +│ (\w+)"
    rows = {m[0]: m for m in re.findall(row, res.stdout)}
    assert set(rows) == {"speculative v2", "chain v1", "target only"}, res.stdout
    base = float(rows["target only"][1])
    assert rows["target only"][2] == "1.00" and all(r[3] == "True" for r in rows.values())
    for _, tps, ratio, _ in rows.values():
        assert abs(float(ratio) - float(tps) / base) < 0.02    # tok/s over target-only's (both rounded)
    # under the table, each speculative row's step in target-only steps, its parts summing to it, and its tau
    cost = (r"(speculative v2|chain v1 \(topk=1\)): a step cost ([\d.]+) target-only decode steps \(verification "
            r"([\d.]+), draft forwards ([\d.]+), the rest (-?[\d.]+)\): faster than target-only where tau > \2 "
            r"\(this run: ([\d.]+)\)")
    costs = {m[0].split()[0]: m for m in re.findall(cost, " ".join(res.stdout.split()))}
    assert set(costs) == {"speculative", "chain"} and res.stdout.count("a step cost") == 2, res.stdout
    taus = dict(re.findall(r"│ (speculative|chain) v\d +│ ([\d.]+)", res.stdout))
    for name, (_, step, verify, draft, rest, tau) in costs.items():
        assert abs(float(verify) + float(draft) + float(rest) - float(step)) <= 0.02 and float(draft) > 0
        assert tau == taus[name]


def test_generate_detects_the_spec_of_a_draft_and_takes_token_ids(eagle3_pair):
    target, draft = eagle3_pair
    res = run("generate", "--target", target, "--draft", draft, "--token-ids", "1, 2,3", "--max-new-tokens", "4",
              "--no-compare")
    assert res.exit_code == 0, res.output
    assert "spec eagle3-llama (detected: " in res.stdout          # not the default smollm2 spec
    assert "prompt [1, 2, 3]" in res.stdout and "speculative v" in res.stdout
    assert "a step cost" not in res.stdout      # no target-only run to measure a step against


@pytest.mark.parametrize("ids", ["1,x", "", "-1", "1.5", "1,\u00b2"])
def test_generate_refuses_token_ids_that_are_not_ids(ids):
    res = run("generate", "--spec", "demo", "--token-ids", ids)
    assert res.exit_code == 2 and "token ids are integers >= 0 separated by commas" in res.output, res.output[:300]


def test_generate_refuses_a_token_id_too_long_to_be_one_in_a_short_message():
    res = run("generate", "--spec", "demo", "--token-ids", "9" * 5000)
    assert res.exit_code == 2 and "too large to be a token id" in res.output and len(res.output) < 400, res.output
    assert run("generate", "--spec", "demo", "--token-ids", "9" * 19).exit_code == 2   # past an int64's 18 digits


def test_generate_takes_the_prompt_once():
    res = run("generate", "--spec", "demo", "--token-ids", "1,2", "--prompt", "hi")
    assert res.exit_code == 2 and "--prompt and --token-ids both give the prompt: give one" in res.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("verb", ["train", "doctor"])
def test_train_and_doctor_refuse_a_missing_device_before_reading_anything(verb, tmp_path, monkeypatch):
    from draftsmith import hub

    monkeypatch.setattr(hub, "resolve", lambda *a, **k: pytest.fail("resolved the target before checking --device"))
    (tmp_path / "draft").mkdir()   # a missing DRAFT is said first (doctor checks the folders it is given at once)
    (tmp_path / "draft" / "config.json").write_text("{}")   # so is one without a config
    args = (["train", "--target", "smollm2", "--data", tmp_path / "nothing", "--out", tmp_path / "o"]
            if verb == "train" else ["doctor", "smollm2", tmp_path / "draft"])
    res = run(*args, "--device", "cuda")
    assert res.exit_code == 2, res.output   # both say 2 = bad input (train with its other options' problems)
    assert "device 'cuda'" in res.output and "Traceback" not in res.output
    assert res.output.count("device 'cuda'") == 1, res.output   # train said it twice (its CLI, then preflight)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_train_says_a_missing_device_beside_an_empty_out(tmp_path):
    # the empty path's early refusal came before preflight, the one --device check left (a review)
    res = run("train", "--target", "smollm2", "--data", tmp_path, "--out", "", "--device", "cuda")
    assert res.exit_code == 2, res.output
    assert "--device 'cuda'" in res.output and "--out is an empty string" in res.output, res.output


def test_doctor_takes_the_cached_target_by_name(tmp_path, monkeypatch):
    """`draftsmith doctor smollm2 DRAFT` (as `train --target smollm2`): the cached folder, not a path 'smollm2'."""
    from draftsmith import hub

    seen = []
    monkeypatch.setattr(hub, "resolve", lambda ref, console=None: seen.append(ref) or tmp_path / "cached")

    def diagnose(spec, target, draft, **kw):
        seen.append(target)
        raise DraftsmithError("stop here")   # bad input: said, exit 2

    monkeypatch.setattr("draftsmith.doctor.diagnose", diagnose)
    (tmp_path / "draft").mkdir()   # a missing DRAFT (or its config) is said before the target is looked up
    (tmp_path / "draft" / "config.json").write_text("{}")
    res = run("doctor", "smollm2", tmp_path / "draft", "--spec", "smollm2")
    assert seen == ["cache:smollm2", tmp_path / "cached"] and res.exit_code == 2, res.output


def test_doctor_and_train_take_the_folders_the_spec_names(tmp_path, monkeypatch):
    """`draftsmith doctor --spec demo` and `train --spec demo` without folders: the spec's checkpoints (as generate
    and assemble() take them); a spec that names none, or no spec and no DRAFT, is a one-line error (exit 2)."""
    from draftsmith import load_spec
    from draftsmith.assembler.folders import checkpoint_ref

    seen = []

    def stop(*args, **kwargs):   # records what the verb was given, and goes no further
        seen.append(args[0].target if len(args) == 1 else args)
        raise DraftsmithError("stop here")   # bad input: said, exit 2

    monkeypatch.setattr("draftsmith.doctor.diagnose", stop)
    assert run("doctor", "--spec", "demo").exit_code == 2 and seen == [("demo", None, None)]
    monkeypatch.setattr("draftsmith.train.run", stop)   # after preflight, which takes the spec's target
    (tmp_path / "data.txt").write_text("def f(x):\n    return x\n" * 50)
    res = run("train", "--spec", "demo", "--out", tmp_path / "o", "--data", tmp_path / "data.txt")
    demo_target = checkpoint_ref(load_spec("demo"), "target")
    assert seen and str(seen[-1]) == demo_target and seen[-1].is_dir(), res.output
    for args in (["train", "--spec", "eagle3-llama", "--out", tmp_path / "o"], ["doctor", tmp_path / "draft"]):
        res = run(*args)
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        assert ("names no checkpoints.target" if args[0] == "train" else "give TARGET and DRAFT") in res.output
    # a spec that does not load: its problem and the others, listed at once (the target cannot be taken from it)
    res = run("train", "--spec", tmp_path / "nope.yaml", "--out", tmp_path / "o", "--data", tmp_path / "missing")
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "--spec" in said and "--target not given" in said and "--data" in said, said


# --- bench ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, named", [(["--out", "x"], "--out"), (["--no-hf", "--batches", "1"],
                                                                      "--batches, --hf/--no-hf")])
def test_bench_refuses_the_scale_options_without_scale(args, named, monkeypatch):
    import draftsmith.bench

    monkeypatch.setattr(draftsmith.bench, "run_bench", lambda *a, **k: pytest.fail("ran the benchmark"))
    res = run("bench", *args)
    assert res.exit_code == 2 and f"error: {named}: options of the scale benchmark; add --scale" in res.output, \
        res.output


def test_a_cached_target_is_found_only_once_fetched(tmp_path, monkeypatch):
    from draftsmith import hub

    monkeypatch.setenv("DRAFTSMITH_CACHE", str(tmp_path))
    assert hub.fetched("cache:smollm2") is None and hub.fetched("cache:nosuch") is None
    folder = hub.target_dir(hub.SOURCES["smollm2"])
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    assert hub.fetched("cache:smollm2") == folder
