"""A trained draft is exported in a layout `inspect` recognises and whose proposed spec loads it: one layer as
``midlayer.*`` (yuhuili / lmsys), several as ``layers.N.*`` throughout (SpecForge), never ``midlayer.*`` for layer 0
beside ``layers.1.*`` (the midlayer rule's inverse applied to layer 0 alone)."""
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import draftsmith
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.specs.loader import load_spec
from draftsmith.train.pipeline import run


def names(folder):
    return set(load_file(str(folder / "model.safetensors")))


def two_layers(tmp_path, base):
    """``base`` with num_layers: 2, as a file."""
    text = Path(load_spec(base).source).read_text().replace(f"name: {base}", "name: two")
    assert "num_layers: auto" in text
    (tmp_path / "two.yaml").write_text(text.replace("num_layers: auto", "num_layers: 2"))
    return tmp_path / "two.yaml"


@pytest.mark.parametrize("base", ["eagle3-llama", "eagle3.1-llama"])
def test_a_two_layer_draft_is_exported_as_layers_n_and_inspect_loads_it(job, tiny, tmp_path, base):
    spec, out = two_layers(tmp_path, base), tmp_path / "out"
    run(job(out, spec=spec, max_windows=4, config={"steps": 1}))
    written = names(out)
    assert not any(n.startswith("midlayer.") for n in written), sorted(written)
    assert {n.split(".")[1] for n in written if n.startswith("layers.")} == {"0", "1"}
    found = inspect_checkpoint(out)
    assert found.match is not None, sorted(written)
    back = draftsmith.assemble(draftsmith.parse_spec(found.spec), target=tiny / "target")
    trained = draftsmith.assemble(spec, target=tiny / "target", draft=out)
    assert len(back.draft.layers) == 2
    mine, theirs = trained.draft.state_dict(), back.draft.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_a_one_layer_draft_keeps_the_midlayer_names(job, tmp_path):
    out = tmp_path / "out"
    run(job(out, max_windows=4, config={"steps": 1}))
    written = names(out)
    assert any(n.startswith("midlayer.") for n in written) and not any(n.startswith("layers.") for n in written)
    assert inspect_checkpoint(out).match is not None
