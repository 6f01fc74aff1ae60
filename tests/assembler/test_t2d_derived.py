"""t2d is derivable: a reduced-vocabulary checkpoint without it (or a spec that ignores it, as DESIGN.md's example
spec does) loads with t2d computed from d2t, equal to the stored one; d2t is still checked, and still required."""
import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("t2d")
    t = write_target(root / "t", num_hidden_layers=8)
    d = write_eagle3(root / "d", t, draft_vocab=40, seed=5)
    return root, t, d, draftsmith.assemble("eagle3-llama", target=t, draft=d)


def without(root, d, name, **change):
    out = root / f"no-{name}-{len(change)}"
    out.mkdir(exist_ok=True)
    (out / "config.json").write_text((d / "config.json").read_text())
    sd = {k: v for k, v in load_file(next(d.glob("*.safetensors"))).items() if k != name} | change
    save_file(sd, out / "model.safetensors", metadata={"format": "pt"})
    return out


def test_a_checkpoint_without_t2d_gets_the_stored_one_back(pair):
    root, t, d, ref = pair
    model = draftsmith.assemble("eagle3-llama", target=t, draft=without(root, d, "t2d"))
    assert not model.draft.t2d.is_meta and torch.equal(model.draft.t2d, ref.draft.t2d)
    prompts = [[3, 1, 4, 1, 5], [9]]
    assert [o.token_ids for o in model.generate(prompts, max_new_tokens=10)] == \
        [o.token_ids for o in ref.generate(prompts, max_new_tokens=10)]


def test_a_spec_that_ignores_t2d_derives_it(pair, tmp_path):
    root, t, d, ref = pair
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    data["weights"]["ignore"] = [*data["weights"].get("ignore", []), "^t2d$"]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    assert torch.equal(draftsmith.assemble(tmp_path / "s.yaml", target=t, draft=d).draft.t2d, ref.draft.t2d)


def test_without_t2d_a_bad_d2t_is_still_refused_and_a_missing_one_still_missing(pair):
    root, t, d, ref = pair
    d2t = load_file(next(d.glob("*.safetensors")))["d2t"]
    shuffled = without(root, d, "t2d", d2t=d2t.flip(0).contiguous())
    with pytest.raises(draftsmith.errors.DraftsmithError, match="not strictly increasing"):
        draftsmith.assemble("eagle3-llama", target=t, draft=shuffled)
    past = without(root, d, "t2d", d2t=(d2t + 1000).contiguous())
    with pytest.raises(draftsmith.errors.DraftsmithError, match="leaves the target vocabulary"):
        draftsmith.assemble("eagle3-llama", target=t, draft=past)
    with pytest.raises(draftsmith.errors.DraftsmithError, match="missing: 'd2t'"):
        draftsmith.assemble("eagle3-llama", target=t, draft=without(root, without(root, d, "t2d"), "d2t"))


def test_absolute_d2t_without_t2d_derives_the_map_of_the_ids_it_holds(pair, tmp_path):
    """vocab.d2t: absolute: d2t holds target ids; the model keeps offsets, and a missing t2d marks those ids."""
    root, t, d, ref = pair
    d2t = load_file(next(d.glob("*.safetensors")))["d2t"]
    absolute = without(root, d, "t2d", d2t=(d2t + torch.arange(d2t.shape[0])).contiguous())
    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    data["draft"]["vocab"]["d2t"] = "absolute"
    (tmp_path / "abs.yaml").write_text(yaml.safe_dump(data))
    model = draftsmith.assemble(tmp_path / "abs.yaml", target=t, draft=absolute)
    assert torch.equal(model.draft.t2d, ref.draft.t2d) and torch.equal(model.draft.d2t, ref.draft.d2t)


def test_without_t2d_the_d2t_convention_inspect_reads_is_said(pair, caplog):
    import logging

    from draftsmith.convert.inspect import inspect_checkpoint

    root, t, d, _ = pair
    folder = without(root, d, "t2d")
    # read from d2t against the config's vocab_size where one reading alone fits (test_d2t_without_t2d.py)
    notes = inspect_checkpoint(folder).match.assumptions
    assert any(a.startswith("vocab.d2t: offset (") and "no t2d" in a for a in notes), notes
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        draftsmith.assemble("eagle3-llama", target=t, draft=folder)
    assert "holds no t2d (or the spec ignores it): derived from d2t read as offsets" in caplog.text
