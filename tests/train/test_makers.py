"""The fresh drafts train makes are rows of draft_io.MAKERS: each row's needs refuse exactly the specs its writer
cannot make, phrased as preflight says them; a kind without a row is refused by its kind alone (and by
init_draft, before it writes); and a new row is all a new layout takes."""
import pytest

import draftsmith
from draftsmith.specs.loader import load_spec
from draftsmith.train.draft_io import MAKERS, MAKES, init_draft, tap_convention, unsupported
from draftsmith.train.makers import Maker, Need, refusals


def changed(name, **swap):
    """Builtin spec ``name`` with draft fields swapped (norms.input='all' -> input=..., as keyword paths)."""
    spec = draftsmith.load_spec(name)
    draft = spec.draft
    for path, value in swap.items():
        section, _, leaf = path.partition("__")
        if leaf:
            value = getattr(draft, section).model_copy(update={leaf: value})
        draft = draft.model_copy(update={section: value})
    return spec.model_copy(update={"draft": draft})


@pytest.mark.parametrize(("spec", "says"), [
    (changed("eagle3-llama"), []),
    (changed("eagle3-llama", num_layers=3), []),                                   # any layer count
    (changed("eagle1-llama"), []),
    (changed("eagle1-llama", norms__input="none"), []),
    (changed("eagle1-llama", num_layers=1), []),
    (changed("eagle3-llama", norms__input="not_first"), ["norms {input: not_first, final: true} with EAGLE-3"]),
    (changed("eagle3-llama", norms__final=False), ["norms {input: all, final: false} with EAGLE-3"]),
    (changed("eagle3-llama", share__lm_head="target"), ["share.lm_head 'target' with EAGLE-3"]),
    (changed("eagle1-llama", norms__input="all"), ["norms {input: all, final: false} with EAGLE-1"]),
    (changed("eagle1-llama", norms__final=True), ["norms {input: not_first, final: true} with EAGLE-1"]),
    (changed("eagle1-llama", num_layers=2), ["num_layers 2 with EAGLE-1"]),
    (changed("eagle1-llama", share__lm_head="draft"), ["share.lm_head 'draft' with EAGLE-1"]),
    (changed("eagle3-llama", attention__kind="mla", share__embed="own", share__lm_head="target"),
     ["attention kind 'mla'", "share.embed 'own'", "share.lm_head 'target' with EAGLE-3"]),   # common needs first
    (changed("eagle3-llama", layer__kind="qwen", mlp__kind="gelu", norm__kind="layer"),
     ["layer kind 'qwen'", "mlp kind 'gelu'", "norm kind 'layer'"]),
    (draftsmith.load_spec("eagle-mistral"), ["norms {input: all, final: true} with EAGLE-1"]),
    (draftsmith.load_spec("eagle1-llama-fp8"), ["quant method 'fp8'"]),
    (draftsmith.load_spec("deepseek-mtp"), ["fusion kind 'mtp'"]),                 # its kind alone: no row
    (draftsmith.load_spec("eagle1-speculators"), []),                               # written fresh, exported renamed
    (changed("eagle1-speculators", fusion=draftsmith.load_spec("eagle1-speculators").draft.fusion.model_copy(
        update={"embed_norm": True})), ["fusion.embed_norm True with EAGLE-1"]),   # the writer has no such norm
])
def test_each_row_refuses_what_its_writer_cannot_make(spec, says):
    assert unsupported(spec) == says


def test_every_builtin_spec_of_a_rows_kind_but_no_other_can_be_asked():
    made = {n for n in draftsmith.list_specs() if not unsupported(draftsmith.load_spec(n))}
    assert {"eagle3-llama", "eagle1-llama", "eagle3.1-llama", "eagle3-norm-before-fc"} <= made
    assert not made & {"deepseek-mtp", "eagle-mistral", "eagle-mla-deepseek", "eagle1-llama-fp8"}
    assert MAKES.startswith("EAGLE-3 (llama layers") and " and EAGLE-1 (one llama layer" in MAKES
    assert [m.reduced_vocab for m in MAKERS.values()] == [True, False]   # EAGLE-1 shares the target's head


def test_a_new_row_is_all_a_new_layout_takes():
    spec = draftsmith.load_spec("deepseek-mtp")
    row = Maker("MTP", "one llama layer", write=lambda *a: None,
                needs=(Need("norms", {"draft.norms.input": ("none",), "draft.norms.final": (True,)}),))
    assert refusals(spec, {**MAKERS, "mtp": row}, ()) == ["norms {input: all, final: true} with MTP"]
    assert refusals(spec, {"mtp": Maker("MTP", "", write=lambda *a: None)}, ()) == []


def test_a_kind_without_a_row_is_refused_before_anything_is_written(tiny, tmp_path):
    with pytest.raises(ValueError, match="deepseek-mtp: train cannot make a fresh draft with fusion kind 'mtp'; "
                                         "it makes EAGLE-3"):
        init_draft("deepseek-mtp", tiny / "target", tmp_path / "d", None)
    assert not (tmp_path / "d").exists()


def test_the_tap_convention_is_the_fusions_own(tmp_path):
    text = open(load_spec("eagle3-llama").source).read().replace("name: eagle3-llama", "name: out")
    assert "aux_layers: {at: input}" in text
    (tmp_path / "out.yaml").write_text(text.replace("aux_layers: {at: input}", "aux_layers: {at: output}"))
    assert tap_convention(draftsmith.load_spec(tmp_path / "out.yaml")) == "output"
    assert tap_convention(draftsmith.load_spec("eagle3-llama")) == "input"
    assert tap_convention(draftsmith.load_spec("eagle1-llama")) == "input"          # no taps, no aux_layers
