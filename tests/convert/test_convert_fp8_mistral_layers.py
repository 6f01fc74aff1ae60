"""A Mistral-native EAGLE whose layer linears are FP8 under Mistral's own scale name (``qscale_weight``): convert
reads it through the spec inspect proposes (its rules read those scales as ``weight_scale``), so the Hugging Face
result names every scale ``weight_scale`` (it wrote ``layers.0.self_attn.q_proj.qscale_weight``, a name no HF
reader knows; found by a dogfooding helper), and the result decodes as the source does."""
import pytest
import torch
from safetensors.torch import load_file, save_file

import draftsmith
from draftsmith.components.quant import quantize
from draftsmith.convert.inspect import inspect_checkpoint
from draftsmith.convert.run import convert
from draftsmith.testing import write_target
from draftsmith.testing.mistral import write_mistral_eagle


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    root = tmp_path_factory.mktemp("fp8mistral")
    target = write_target(root / "t", "llama", num_hidden_layers=4, seed=3)
    src = write_mistral_eagle(root / "native", target)
    out = {}
    for name, value in load_file(str(src / "consolidated.safetensors")).items():
        if name.endswith(".weight") and value.dim() == 2:   # eagle_linear and every layer linear, per channel
            out[name], out[name.removesuffix("weight") + "qscale_weight"] = quantize(value, "channel")
        else:
            out[name] = value
    save_file(out, str(src / "consolidated.safetensors"))
    return root, target, src


def test_the_hf_result_names_every_scale_weight_scale_and_decodes_as_the_source(native):
    root, target, src = native
    convert(src, "layers", root / "hf")
    names = set(load_file(str(root / "hf" / "model.safetensors")))
    assert not [n for n in names if n.endswith("qscale_weight")], sorted(names)
    assert "layers.0.self_attn.q_proj.weight_scale" in names and "fc.weight_scale" in names

    def tokens(folder):
        spec = draftsmith.parse_spec(inspect_checkpoint(folder).spec, source=str(folder))
        model = draftsmith.assemble(spec, target=target, draft=folder, dtype="float32")
        out = model.generate([[5, 6, 7, 8, 9, 10]], max_new_tokens=8, stop=[], topk=1, steps=3)
        return out[0].token_ids, out[0].stats.accepted_per_position   # the same tokens, the same acceptance

    assert tokens(src) == tokens(root / "hf")
    assert torch.equal(load_file(str(root / "hf" / "model.safetensors"))["layers.0.mlp.up_proj.weight_scale"],
                       load_file(str(src / "consolidated.safetensors"))["layers.0.feed_forward.w3.qscale_weight"])


def test_it_converts_back_to_mistral_bit_for_bit_and_to_its_own_layout(native):
    """The mistral layout held only eagle_linear's FP8 scales: this draft could not be written back as mistral,
    from the HF result or as itself (a dogfooding helper). Its layers' scales go back under qscale_weight."""
    root, _, src = native
    convert(src, "layers", root / "hf-2")
    source = load_file(str(src / "consolidated.safetensors"))
    for start, out in ((root / "hf-2", root / "back"), (src, root / "same")):
        convert(start, "mistral", out)
        written = load_file(str(out / "consolidated.safetensors"))
        assert sorted(written) == sorted(source), sorted(set(written) ^ set(source))
        assert all(torch.equal(written[n], source[n]) for n in source)
