"""A spec is checked without importing torch: the built-in catalog registers every component from its params
model (components/params.py) and a factory imported at its first call (catalog.later), so `validate` says a bad
spec's problems, and `list` prints the tables, in a torch-free process (torch's import alone took ~1.5 s of each on
the 2-core CPU machine). So is a valid spec's `validate` unless it asks for a setting a machine may refuse (graphs on /
compile, a backend not marked to build anywhere): only then is torch imported to ask this machine. Building a model
still imports the factories' modules, and they build as before."""
from __future__ import annotations

import subprocess
import sys

import pytest

from test_paths_said_fast import RUN


def said(args: list[str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_a_bad_spec_is_said_before_torch_is_imported(tmp_path):
    (tmp_path / "bad.yaml").write_text("name: bad-x\nextends: eagle3-llama\ndecoding: {topk: 0, stpes: 2}\n")
    res = said(["validate", "bad.yaml"], tmp_path)
    assert "decoding.topk: 0 is not allowed" in res.stderr and "decoding.stpes" in res.stderr, res.stderr
    assert res.stdout.split()[-3:] == ["exit", "1", "False"], (res.stdout, res.stderr)


def test_a_valid_spec_alone_is_said_before_torch_is_imported(tmp_path):
    """A review (h96): a valid spec's validate imported torch (~1.5 s of its 2-2.6 s) to ask this machine about
    settings no machine refuses (graphs auto / off, the built-in backends but flash)."""
    (tmp_path / "s.yaml").write_text("name: s-x\nextends: eagle3-llama\ndecoding: {graphs: off, attention: sdpa}\n")
    for spec in ("eagle3-llama", "s.yaml"):
        res = said(["validate", spec], tmp_path)
        assert res.stdout.split()[-3:] == ["exit", "0", "False"] and "warning" not in res.stderr, (res.stdout,
                                                                                                 res.stderr)


@pytest.mark.parametrize("decoding", ["{graphs: on}", "{attention: flash}"])
def test_a_setting_a_machine_may_refuse_is_still_asked_about(tmp_path, decoding):
    (tmp_path / "s.yaml").write_text(f"name: s-x\nextends: eagle3-llama\ndecoding: {decoding}\n")
    res = said(["validate", "s.yaml"], tmp_path)
    assert res.stdout.split()[-3:] == ["exit", "0", "True"], (res.stdout, res.stderr)


def test_list_prints_every_component_without_torch(tmp_path):
    res = said(["list"], tmp_path)
    assert res.stdout.split()[-3:] == ["exit", "0", "False"], (res.stdout, res.stderr)
    for name in ("eagle3-llama", "swiglu", "gqa", "mla", "eagle3", "fp8", "sdpa", "qwen3"):
        assert f" {name} " in res.stdout, name


@pytest.mark.parametrize("kind, name", [("norm", "rms"), ("mlp", "swiglu"), ("attn_backend", "sdpa")])
def test_a_later_factory_builds_what_its_module_s_does(kind, name):
    import draftsmith
    from draftsmith.components import backends, mlp, norms

    reg = draftsmith.default_registry()
    if kind == "attn_backend":
        assert reg.build(kind, name) is backends.sdpa
    elif kind == "norm":
        made = reg.get(kind, name).factory(None, dim=8, eps=1e-6)
        assert type(made) is norms.RMSNorm and made.weight.shape == (8,)
    else:
        from types import SimpleNamespace

        made = reg.get(kind, name).factory(mlp.MLPParams(bias=True), dims=SimpleNamespace(hidden=8, intermediate=12))
        assert type(made) is mlp.SwiGLU and made.gate_proj.bias is not None and made.down_proj.in_features == 12
    assert reg.get(kind, name).factory.__name__ == {"norm": "rms", "mlp": "swiglu"}.get(kind, "<lambda>")
