"""A spec's settings this machine cannot honour (decoding.graphs: on / compile without CUDA, attention: flash
without flash-attn) are refused by assemble() all at once at the spec's file and lines, still a bad option (exit 2),
and `validate` warns of them while the spec stays valid (a spec-perturbation hunt: validate said "ok", and every
CPU load refused the first with an OptionError naming neither file nor line, the second said only after it)."""
import pytest
import torch
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.components import backends
from draftsmith.errors import OptionError, SpecError

pytestmark = pytest.mark.skipif(torch.cuda.is_available() or backends.has_flash_attn(),
                                reason="the machine honours them")


def _spec(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("extends: demo\nname: s\ndecoding:\n  graphs: on\n  attention: flash\n")
    return spec


def test_assemble_refuses_both_at_their_lines_before_reading_a_folder(tmp_path):
    with pytest.raises(OptionError) as info:
        draftsmith.assemble(_spec(tmp_path), target=tmp_path / "none", draft=tmp_path / "none")
    assert isinstance(info.value, SpecError)
    said = {p.path: (p.message, p.line) for p in info.value.problems}
    assert said == {"decoding.graphs": ("on needs a CUDA device, got 'cpu' (use auto or off)", 4),
                    "decoding.attention": ("attention backend 'flash' needs flash-attn: pip install "
                                           "'draftsmith[flash]' on a CUDA machine, or use 'auto' / 'sdpa'", 5)}


def test_validate_keeps_the_spec_valid_and_warns(tmp_path):
    res = CliRunner().invoke(app, ["validate", str(_spec(tmp_path))])
    assert res.exit_code == 0, res.output
    assert "warning: a load on this machine (cpu) refuses it as written:" in res.stderr
    assert "decoding.graphs: on needs a CUDA device" in res.stderr and "(line 5)" in res.stderr


def test_generate_says_it_as_a_bad_option(tmp_path):
    spec = _spec(tmp_path)
    res = CliRunner().invoke(app, ["generate", "--spec", str(spec), "--max-new-tokens", "2"])
    assert res.exit_code == 2, res.output
    assert f"error: {spec} has 2 problems" in res.stderr, res.stderr
    assert "decoding.graphs: on needs a CUDA device, got 'cpu' (use auto or off) (line 4)" in res.stderr


def test_validate_stays_valid_where_a_backend_fails_to_build(tmp_path, monkeypatch):
    """A review: a plugin's attention backend whose factory raises (a GPU library missing) failed validate."""
    from draftsmith.assembler import assemble

    def fails(*_, **__):
        raise ImportError("No module named 'my_gpu_kernels'")

    monkeypatch.setattr(assemble, "machine_problems", fails)
    res = CliRunner().invoke(app, ["validate", str(_spec(tmp_path))])
    assert res.exit_code == 0 and "warning" not in res.stderr, res.output


def test_a_with_decoding_copys_setting_is_not_placed_on_the_files_lines():
    """A review: graphs='on' set by with_decoding() was said at the line where the file says graphs: auto."""
    spec = draftsmith.load_spec("demo").with_decoding(graphs="on")
    with pytest.raises(OptionError) as info:
        draftsmith.assemble(spec)
    assert str(info.value).startswith(f"{spec.source} (its decoding section as with_decoding() left it) has 1 "
                                      "problem") and "(line " not in str(info.value), str(info.value)
