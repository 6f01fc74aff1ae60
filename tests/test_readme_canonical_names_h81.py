"""README's "Weight rules" lists the canonical names a new layout's rules must produce; it said `fc_norm.N.weight`
and `input_norm.weight`, the names EAGLE 3.1 / norm-before-fc checkpoints store, while the built-in fusion reads
`fc.aux_norm.N.weight` and `fc.input_norm.weight` (a rule written to README's name was refused as missing)."""
import re
from pathlib import Path

import pytest

from draftsmith.assembler.assemble import plan_assembly
from draftsmith.testing import write_eagle3, write_target

README = Path(__file__).resolve().parents[1] / "README.md"


def listed() -> str:
    text = README.read_text()
    start = text.index("### Weight rules")
    return text[start:text.index("A new layout is a spec", start)]


@pytest.mark.parametrize("spec, flag", [("eagle3.1-llama", "fc_norm"), ("eagle3-norm-before-fc", "norm_before_fc")])
def test_the_fusion_norms_readme_names_are_the_models(tmp_path, spec, flag):
    target = write_target(tmp_path / "t")
    draft = write_eagle3(tmp_path / "d", target, **{flag: True})
    names = set(plan_assembly(spec, target, draft).draft_model.state_dict())
    norms = {re.sub(r"\.\d+\.", ".N.", n) for n in names if n.startswith("fc.") and "norm" in n}
    assert norms and all(f"`{n}`" in listed() for n in norms), (norms, listed()[:400])
