"""FP8 siblings stack too (components/stacked.py's protocol, quant.FP8Weight's methods): q | k | v and gate | up
of one setting run as one FP8 product whose output is the siblings' own; their stored fp8 weights and row scales
become views of the stacked ones, per-tensor scales a per-channel copy; what would mix settings, split a block of
rows between siblings or quantize siblings' inputs with different static scales runs one by one."""
import pytest
import torch
from torch import nn

from draftsmith.components import fp8_kernels, quant
from draftsmith.components.quant import FP8Params, FP8Weight, fp8_linear, quantize
from draftsmith.components.stacked import stack, stackable


def fp8_siblings(scheme="block", activation="dynamic", sizes=(256, 128, 128), width=256, block=(128, 128),
                 bias=False, dtype=torch.float32, input_scales=None):
    gen = torch.Generator().manual_seed(0)
    out = []
    for i, n in enumerate(sizes):
        lin = fp8_linear(nn.Linear(width, n, bias=bias), FP8Params(scheme=scheme, activation=activation, block=block),
                         dtype)
        q, s = quantize(torch.randn(n, width, generator=gen) * 2.0 ** (i - 1), scheme, block)
        lin._parameters["weight"].data = q
        setattr(lin, lin.scale_key, s)
        if bias:
            lin.bias.data = torch.randn(n, generator=gen).to(dtype)
        if activation == "static":
            lin.input_scale = torch.tensor([(input_scales or [0.02] * len(sizes))[i]])
        out.append(lin)
    return out


@pytest.mark.parametrize("scheme, activation, bias", [("block", "dynamic", False), ("channel", "dynamic", True),
                                                      ("channel", "static", False), ("block", "none", True)])
def test_fp8_siblings_stack_into_one_fp8_product_that_gives_each_siblings_output(scheme, activation, bias):
    lins = fp8_siblings(scheme, activation, bias=bias)
    x = torch.randn(2, 5, 256, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = [l(x) for l in lins]
        before = [(l._parameters["weight"].clone(), getattr(l, l.scale_key).clone()) for l in lins]
        s = stack(lins)
        got = s(x)
    twin = s.linear
    assert isinstance(twin, FP8Weight) and (twin.scheme, twin.activation, twin.block) == (scheme, activation,
                                                                                         (128, 128))
    assert twin._parameters["weight"].shape == (512, 256) and twin._parameters["weight"].dtype == torch.float8_e4m3fn
    assert getattr(twin, twin.scale_key).shape == ((4, 2) if scheme == "block" else (512, 1))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)
    for l, (w, sc) in zip(lins, before):   # the same values, now views of the stacked weight and scales
        assert torch.equal(l._parameters["weight"].view(torch.uint8), w.view(torch.uint8))
        assert torch.equal(getattr(l, l.scale_key), sc)
        assert l._parameters["weight"].untyped_storage().data_ptr() == twin._parameters["weight"].data_ptr()
        assert getattr(l, l.scale_key).untyped_storage().data_ptr() == getattr(twin, twin.scale_key).data_ptr()
    if activation == "static":
        assert torch.equal(twin.input_scale, lins[0].input_scale)


def test_an_in_place_update_of_a_siblings_scale_is_seen_by_the_stacked_product():
    lins = fp8_siblings("channel")
    s = stack(lins)
    x = torch.randn(3, 256)
    with torch.no_grad():
        lins[1].weight_scale.mul_(-2.0)
        got = s(x)
        torch.testing.assert_close(got[1], lins[1](x), rtol=1e-6, atol=1e-6)
        lins[2].weight_scale = lins[2].weight_scale.clone()   # a replaced scale is no longer a view
        assert s(x) is None


@pytest.mark.parametrize("case", ["a block of rows split", "another activation",
                                  "static scales differ", "a plain sibling", "another block"])
def test_what_no_stacked_fp8_product_computes_alike_runs_one_by_one(case):
    lins = {"a block of rows split": lambda: fp8_siblings(sizes=(256, 64, 128)),
            "another activation": lambda: fp8_siblings()[:2] + fp8_siblings(activation="none")[2:],
            "static scales differ": lambda: fp8_siblings("channel", "static", input_scales=[0.02, 0.02, 0.03]),
            "a plain sibling": lambda: fp8_siblings()[:2] + [nn.Linear(256, 128, bias=False)],
            "another block": lambda: fp8_siblings(block=(128, 128))[:2] + fp8_siblings(block=(128, 64))[2:]}[case]()
    assert not stackable(lins) and stack(lins) is None
    assert not stackable(list(reversed(lins)))


def test_the_last_sibling_may_end_in_a_partial_block():
    lins = fp8_siblings(sizes=(256, 128, 64))
    x = torch.randn(3, 256)
    with torch.no_grad():
        want = [l(x) for l in lins]
        got = stack(lins)(x)
    assert stack(lins).linear.weight_scale_inv.shape == (4, 2)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)


def test_a_stacked_block_product_on_the_native_kernel(monkeypatch):
    """On an emulated GPU the stacked linear is a kind of its own (512 rows): probed once, kept, the siblings'
    outputs to bf16 roundings."""
    from tests.components.test_fp8_kernels import close, contract_scaled_mm

    monkeypatch.setattr(fp8_kernels, "VERDICTS", {})
    monkeypatch.setattr(quant, "native_ok", lambda x: x.dtype == torch.bfloat16)
    monkeypatch.setattr(torch, "_scaled_mm", contract_scaled_mm)
    lins = fp8_siblings(dtype=torch.bfloat16, width=512)
    x = torch.randn(3, 512).to(torch.bfloat16)
    with torch.no_grad():
        want = [l._reference(x) for l in lins]
        got = stack(lins)(x)
    assert list(fp8_kernels.VERDICTS) == ["block 128x128 512x512 (dynamic inputs, bfloat16, cpu)"]
    assert all(close(g, w) for g, w in zip(got, want))


def test_an_fp8_target_runs_its_siblings_stacked(tmp_path):
    """assemble stacks a FineGrainedFP8 target's gate | up (256 rows each, whole 128-row blocks) into one FP8
    product, and q | k | v where every sibling but v holds whole blocks; decoding equals the unstacked target's."""
    import draftsmith
    from draftsmith.testing import write_eagle1, write_target
    from draftsmith.testing.quant import quantize_folder

    folder = write_target(tmp_path / "t", "llama", num_hidden_layers=2, seed=1, hidden_size=256,
                          intermediate_size=256, num_attention_heads=4, num_key_value_heads=2)
    draft = write_eagle1(tmp_path / "d", folder, bias=False)
    quantize_folder(folder, r"^model\.layers\.\d+\.", scheme="block", quantization_config=True)
    model = draftsmith.assemble("eagle1-llama", target=folder, draft=draft, dtype="float32")
    layer = model.target.model.layers[0]
    assert isinstance(layer.mlp.gate_up.linear, FP8Weight) and isinstance(layer.self_attn.qkv.linear, FP8Weight)
    ids = [[1, 2, 3, 4], [7, 8]]
    stacked = model.generate(ids, max_new_tokens=8, stop=[], topk=2, steps=3, draft_tokens=6)
    for m in model.target.modules():
        for attr in ("gate_up", "qkv"):
            if getattr(m, attr, None) is not None:
                setattr(m, attr, None)
    plain = model.generate_baseline(ids, max_new_tokens=8, stop=[])
    assert [o.token_ids for o in stacked] == [o.token_ids for o in plain]


def test_a_changed_static_input_scale_runs_the_siblings_one_by_one():
    """The stacked product reads the first sibling's input scale: after any sibling's changes (in place, or
    loaded), the siblings run one by one, each with its own."""
    x = torch.randn(3, 256) * 4
    for changed in (0, 1):
        lins = fp8_siblings("channel", "static")
        s = stack(lins)
        with torch.no_grad():
            assert s(x) is not None
            lins[changed].input_scale.mul_(10)
            assert s(x) is None
            lins[changed].load_state_dict({**lins[changed].state_dict(), "input_scale": torch.tensor([0.02])})
            assert s(x) is None


@pytest.mark.parametrize("activation", ["dynamic", "static", "none"])
def test_per_tensor_siblings_stack_into_a_per_channel_product(activation):
    """Each sibling's one scale on each of its rows (a copy: no row view holds it): the product per channel gives
    each sibling's output; a changed scale (in place or loaded) runs the siblings one by one."""
    lins = fp8_siblings("tensor", activation)
    x = torch.randn(2, 5, 256, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = [l(x) for l in lins]
        s = stack(lins)
        got = s(x)
    twin = s.linear
    assert (twin.scheme, twin.activation) == ("channel", activation) and twin.weight_scale.shape == (512, 1)
    assert torch.equal(twin.weight_scale, torch.cat([l.weight_scale.expand(l.out_features, 1) for l in lins]))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)
    with torch.no_grad():
        lins[2].weight_scale.mul_(2)
        assert s(x) is None
    lins = fp8_siblings("tensor", activation)
    s = stack(lins)
    lins[0].load_state_dict({**lins[0].state_dict(), "weight_scale": torch.tensor([0.5])})
    with torch.no_grad():
        assert s(x) is None
