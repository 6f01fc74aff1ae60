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
    res = CliRunner().invoke(app, ["generate", "--spec", str(_spec(tmp_path)), "--max-new-tokens", "2"])
    assert res.exit_code == 2 and "decoding.graphs: on needs a CUDA device" in res.stderr, res.output
