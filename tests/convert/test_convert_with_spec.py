"""`convert --spec SPEC`: a draft in a spec's own names (no detector knows them: a YAML family, a draft `train`
wrote with such a spec) is read with that spec instead of detection and written in a layout vLLM reads; the result
computes what the source computes under its spec (a new-user walk, 2026-12-01: train's note sent such a draft to
a convert that refused it)."""
from __future__ import annotations

import json
import textwrap

import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.convert.run import convert
from draftsmith.errors import DraftsmithError
from draftsmith.testing import write_eagle3, write_target

ACME = textwrap.dedent(r"""
    name: acme
    extends: eagle3-llama
    draft:
      fusion: {norm_before_residual: true, norm_output: feed_back}
    weights:
      rules:
        - {match: '^fuse\.proj\.', replace: 'fc.'}
        - {match: '^blocks\.(\d+)\.attn\.', replace: 'layers.\1.self_attn.',
           inverse: ['^layers\.(\d+)\.self_attn\.', 'blocks.\1.attn.']}
        - {match: '^blocks\.', replace: 'layers.'}
        - {match: '^final_norm\.', replace: 'norm.'}
""")


@pytest.fixture(scope="module")
def acme(tmp_path_factory):
    root = tmp_path_factory.mktemp("acme")
    target = write_target(root / "t", "llama", num_hidden_layers=7, seed=1)
    draft = write_eagle3(root / "d", target, layout="layers", d2t="offset", draft_vocab=64)
    held = load_file(str(draft / "model.safetensors"))
    renamed = {}
    for name, tensor in held.items():
        name = name.replace("fc.", "fuse.proj.", 1) if name.startswith("fc.") else name
        name = name.replace("layers.0.self_attn.", "blocks.0.attn.").replace("layers.", "blocks.")
        renamed["final_norm.weight" if name == "norm.weight" else name] = tensor
    save_file(renamed, str(draft / "model.safetensors"))
    (root / "acme.yaml").write_text(ACME)
    return root, target, draft, root / "acme.yaml"


def hidden(spec, target, draft) -> list[torch.Tensor]:
    model = draftsmith.assemble(spec, target=target, draft=draft, dtype="float64")
    seen = []
    model.draft.layers[-1].mlp.register_forward_hook(lambda m, args, out: seen.append(out))
    model.generate([[5, 6, 7, 8, 9, 10]], max_new_tokens=8, stop=[], topk=1, steps=3)
    return seen


def test_a_draft_in_a_specs_own_names_converts_and_computes_the_same(acme, tmp_path):
    root, target, draft, spec = acme
    to = "speculators"
    assert inspect_checkpoint(draft).match is None   # no detector knows the acme names
    result = CliRunner().invoke(app, ["convert", str(draft), "--to", to, str(tmp_path / to), "--spec", str(spec)])
    assert result.exit_code == 0, result.output
    detected = draftsmith.parse_spec(inspect_checkpoint(tmp_path / to).spec, source="inspect")
    assert detected.draft.fusion.params["norm_output"] == "feed_back"   # stated where the layout can say it
    want, got = hidden(str(spec), target, draft), hidden(detected, target, tmp_path / to)
    assert len(want) == len(got) > 1
    for a, b in zip(want, got):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("to", ["layers", "midlayer"])
def test_a_layout_that_cannot_say_the_specs_feedback_is_refused_naming_the_spec(acme, tmp_path, to):
    """A flat Llama config cannot say norm_output: feed_back: refused, and what loads the source as it is is its
    spec (detection does not know it: 'generate --draft detects it' was said)."""
    root, target, draft, spec = acme
    result = CliRunner().invoke(app, ["convert", str(draft), "--to", to, str(tmp_path / to), "--spec", str(spec)])
    assert result.exit_code == 1 and not (tmp_path / to).exists()
    assert "norm_output: 'feed_back' would read back as 'head'" in result.output
    assert f"keep it in a layout that says it, or load it as it is: --spec {spec}" in " ".join(result.output.split())


def test_without_the_spec_the_folder_is_refused_and_a_bad_spec_is_said_before_out_is_made(acme, tmp_path):
    root, target, draft, spec = acme
    with pytest.raises(DraftsmithError, match="not a layout draftsmith recognises"):
        convert(draft, "speculators", tmp_path / "plain")
    with pytest.raises(DraftsmithError, match="no spec named 'acm'"):
        convert(draft, "speculators", tmp_path / "bad", spec="acm")
    assert not (tmp_path / "bad").exists() and not (tmp_path / "plain").exists()
    # a spec that does not read the folder: its names are refused as convert refuses any misfit
    with pytest.raises(DraftsmithError):
        convert(draft, "speculators", tmp_path / "wrong", spec="eagle3-llama")
    assert not (tmp_path / "wrong").exists()


def test_a_spec_file_is_named_by_its_path_where_detection_builds_another_draft(acme, tmp_path, monkeypatch):
    """The given spec is named as given (its path), which loads it again: named by its name ('acme', no registered
    spec), the comment line's other-draft check failed after OUT was written (exit 1), and refusals said
    '--spec acme' (a review, 2026-12-01). The built-in components leave convert no difference it cannot state, so
    one is made up (a plugin's: tests/convert/test_review_convert_spec.py)."""
    from draftsmith.convert import run as convert_run

    root, target, draft, spec = acme
    other = tmp_path / "other.yaml"
    other.write_text(spec.read_text().replace("name: acme", "name: acme-other"))
    monkeypatch.setattr(convert_run, "build_differences", lambda ours, theirs: [("draft.norm", "plugin", "rms")])
    result = CliRunner().invoke(app, ["convert", str(draft), "--to", "speculators", str(tmp_path / "o"),
                                      "--spec", str(other)])
    assert result.exit_code == 0, result.output
    assert f"load it with spec {other}, the spec its source was read with" in " ".join(result.output.split())


@pytest.mark.parametrize("said", ["feed_back: post_norm", "feed_back: post_norm, norm_output: head"])
def test_post_norm_feedback_said_by_draft_feed_back_is_written_for_vllm(acme, tmp_path, said):
    """``draft.feed_back: post_norm`` is the README's other spelling of ``norm_output: feed_back`` (either one):
    convert --to speculators states it as ``norm_output: true`` (it wrote false beside a head norm, so vLLM fed the
    pre-norm state back), and the result's detected spec builds the source's draft (a walk-through, 2026-12-01)."""
    root, target, draft, spec = acme
    other = tmp_path / "post.yaml"
    feed_back, *norm_output = said.split(", ")
    text = spec.read_text().replace("draft:\n", f"draft:\n  {feed_back}\n", 1)
    if norm_output:
        text = text.replace("norm_output: feed_back", norm_output[0])
    other.write_text(text)
    out = tmp_path / "o"
    result = CliRunner().invoke(app, ["convert", str(draft), "--to", "speculators", str(out), "--spec", str(other)])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "config.json").read_text())["norm_output"] is True
    assert "load it with spec eagle3-speculators (or omit --spec" in " ".join(result.output.split()), result.output
    torch.testing.assert_close(hidden("eagle3-speculators", target, out), hidden(other, target, draft))
