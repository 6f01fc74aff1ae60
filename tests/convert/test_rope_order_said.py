"""A GQA spec whose rope order contradicts the draft config's rope_interleave is said when the draft is built (a
convert user's hunt, 2026-12-01): `--spec eagle-mistral` (rope: interleaved) on the HF-named draft `convert --to
layers` wrote in neox order (rope_interleave: false) built a draft that rotates its q/k rows wrong, silently."""
import logging

import draftsmith
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.convert.run import convert
from draftsmith.testing import write_target
from draftsmith.testing.mistral import write_mistral_eagle


def test_a_rope_order_against_the_configs_is_said(tmp_path, caplog):
    target = write_target(tmp_path / "t", "llama", seed=1)
    convert(write_mistral_eagle(tmp_path / "m", target), "layers", tmp_path / "hf")
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        draftsmith.assemble("eagle-mistral", target=target, draft=tmp_path / "hf")
    said = [r.getMessage() for r in caplog.records if "rope_interleave" in r.getMessage()]
    assert said == ["GQA draft: draft.attention.rope is interleaved, but the draft config's rope_interleave is false "
                    "(its q/k rows are stored in neox pair order): the draft rotates them wrong and accepts little; "
                    "state rope: neox (the spec `draftsmith inspect` proposes does)"], said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="draftsmith"):   # the proposed spec: nothing to say
        draftsmith.assemble(draftsmith.parse_spec(inspect_checkpoint(tmp_path / "hf").spec), target=target)
    assert not [r for r in caplog.records if "rope_interleave" in r.getMessage()]
