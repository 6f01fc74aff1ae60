"""Every built-in spec decodes greedily equal to target-only (invariant 8), chain and tree, in float32, on a tiny
checkpoint written in the layout it loads: a spec added to specs/builtin/ without a writer here fails the first
test, so no built-in family goes without this check."""
import pytest

import draftsmith
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import write_eagle1, write_eagle1_speculators, write_eagle3, write_target
from draftsmith.testing.mistral import write_mistral_eagle
from draftsmith.testing.mla import write_mla_eagle
from draftsmith.testing.mtp import write_mtp
from draftsmith.testing.quant import quantize_folder


def eagle1_fp8(d, t):
    write_eagle1(d, t, std=0.3)
    quantize_folder(d, r"^layers\.\d+\.", scheme="block")
    return d


# built-in spec -> (target layers, writer(draft folder, target folder) -> the draft folder)
WRITERS = {
    "eagle1-llama": (8, lambda d, t: write_eagle1(d, t, std=0.3)),
    "eagle1-llama-fp8": (8, eagle1_fp8),
    "eagle1-speculators": (8, lambda d, t: write_eagle1_speculators(d, t, layernorms=False, std=0.3)),
    "eagle3-llama": (8, lambda d, t: write_eagle3(d, t, draft_vocab=40, std=0.3)),
    "eagle3-speculators": (8, lambda d, t: write_eagle3(d, t, layout="layers", layers=2, config="speculators",
                                                        std=0.3)),
    "eagle3.1-llama": (8, lambda d, t: write_eagle3(d, t, layout="layers", fc_norm=True, std=0.3,
                                                    flags={"norm_before_residual": False})),
    "eagle3-norm-before-fc": (8, lambda d, t: write_eagle3(d, t, norm_before_fc=True, std=0.3,
                                                           flags={"norm_before_residual": True})),
    "eagle-mistral": (8, lambda d, t: write_mistral_eagle(d, t)),
    "eagle-mla-deepseek": (4, lambda d, t: write_mla_eagle(d, t, layout="deepseek")),
    "eagle-mla-mistral": (4, lambda d, t: write_mla_eagle(d, t, layout="mistral")),
    "deepseek-mtp": (4, lambda d, t: write_mtp(t)),                     # the draft lives in the target's folder
    "glm-mtp": (4, lambda d, t: write_mtp(t)),                          # as deepseek-mtp (GLM's attention params)
    "smollm2": (30, lambda d, t: write_eagle3(d, t, draft_vocab=40, std=0.3, aux_ids=[2, 15, 27])),
    "demo": (None, None),                                             # its own shipped pair
}


def test_every_builtin_spec_has_a_writer_here():
    shipped = {p.stem for p in BUILTIN_DIR.glob("*.yaml")}
    assert shipped == set(WRITERS), (f"give these built-in specs a writer in WRITERS: {sorted(shipped - set(WRITERS))}"
                                     f"; these are gone: {sorted(set(WRITERS) - shipped)}")


@pytest.mark.parametrize("spec", sorted(WRITERS))
def test_every_builtin_spec_decodes_as_the_target_alone(spec, tmp_path):
    layers, write = WRITERS[spec]
    if write is None:
        model = draftsmith.assemble(spec)
    else:
        target = write_target(tmp_path / "target", num_hidden_layers=layers, seed=3)
        model = draftsmith.assemble(spec, target=target, draft=write(tmp_path / "draft", target))
    prompts = [[5, 9, 2, 7, 1], [3]]
    want = [o.token_ids for o in model.generate_baseline(prompts, max_new_tokens=12, stop=[])]
    for plan in (dict(topk=1), dict(topk=3, steps=3, draft_tokens=6)):
        got = [o.token_ids for o in model.generate(prompts, max_new_tokens=12, stop=[], **plan)]
        assert got == want, (spec, plan)
