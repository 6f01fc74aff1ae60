"""Kills survivors of scripts/mutate.py on draftsmith/decoding/arguments.py placement_problems: a draft_dtype of its
own, a model moved to another device (meta here; cuda:N through duck-typed parameters, no GPU needed), the scan
skipping 1-byte (FP8) weights and a cpu:N model's scan."""
from types import SimpleNamespace

import pytest
import torch

import draftsmith
from draftsmith.decoding.arguments import placement_problems
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("placement-pair")
    target = write_target(root / "target", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32, max_position_embeddings=64)
    return target, write_eagle3(root / "draft", target)


def test_a_draft_in_its_own_dtype_is_where_assemble_put_it(pair, tmp_path):
    """line 191 `model.draft_dtype or model.dtype` (as `and`, the draft was held to the target's dtype)."""
    model = draftsmith.assemble("eagle3-llama", target=pair[0], draft=pair[1])
    model = draftsmith.assemble(model.spec.with_decoding(draft_dtype="bfloat16"), target=pair[0], draft=pair[1])
    assert model.draft_dtype == torch.bfloat16 and model.dtype == torch.float32
    assert placement_problems(model) == []


def test_a_target_moved_to_another_device_is_refused(pair):
    """line 194's fast path `d.type == kind and (...)` (as `or`, any parameter on another device passed)."""
    model = draftsmith.assemble("eagle3-llama", target=pair[0], draft=pair[1])
    model.target.to("meta")
    said = placement_problems(model)
    assert len(said) == 1 and said[0].startswith("the target's weights are float32 on meta ("), said


def test_an_fp8_weight_is_not_named_as_the_one_cast(pair):
    """line 197 `p.element_size() > 1` (as `>= 1` or `> 0`, the scan named an FP8 weight, whose dtype is its own,
    instead of the part cast afterwards)."""
    model = draftsmith.assemble("eagle3-llama", target=pair[0], draft=pair[1])
    model.target.register_parameter("fp8", torch.nn.Parameter(torch.zeros(4, dtype=torch.float8_e4m3fn),
                                                               requires_grad=False))   # listed first
    assert placement_problems(model) == []
    model.target.lm_head.to(torch.float64)
    said = placement_problems(model)
    assert len(said) == 1 and said[0].startswith("the target's weights are float64 on cpu (lm_head.weight, "), said


def test_a_cpu_0_model_names_the_part_cast(pair):
    """line 198 `kind != 'cpu' and index != '' and ...` (as `kind == 'cpu'`, a cpu:N model's scan named its first
    parameter, whose CPU device carries no index, instead of the part cast)."""
    model = draftsmith.assemble("eagle3-llama", target=pair[0], draft=pair[1], device="cpu:0")
    assert placement_problems(model) == []
    model.target.lm_head.to(torch.float64)
    said = placement_problems(model)
    assert len(said) == 1 and said[0].startswith("the target's weights are float64 on cpu (lm_head.weight, "), said


# --- CUDA devices, duck-typed: placement_problems reads .device/.dtype/.is_floating_point()/.element_size() --------

class OnDevice(torch.Tensor):
    """A CPU tensor that says it is on ``device`` (a cuda:N without a GPU): placement_problems reads only
    .device, .dtype, .is_floating_point() and .element_size()."""

    @property
    def device(self):
        return self._said


def Param(device, dtype=torch.float32):
    t = torch.zeros(2, dtype=dtype).as_subclass(OnDevice)
    t._said = torch.device(device)
    return t


def Module(*params):
    m = torch.nn.Module()
    for i, p in enumerate(params):
        m._parameters[f"w{i}"] = p   # as a parameter, without nn.Parameter's own device
    return m


def fake(device, target, draft=None):
    return SimpleNamespace(device=device, dtype=torch.float32, draft_dtype=None, target=target,
                           draft=draft or Module(Param(device)), _params={})


def test_cuda_0_model_with_a_module_on_cuda_1_is_refused():
    """line 194 `d.index == int(index)` (as `!=`), `index == ''` (as `!=`), `kind == 'cpu'` (as `!=`): the fast
    path let a parameter on another GPU pass."""
    said = placement_problems(fake("cuda:0", Module(Param("cuda:0"), Param("cuda:1"))))
    assert len(said) == 1 and said[0].startswith("the target's weights are float32 on cuda:1 (w1, "), said


def test_a_cuda_model_without_an_index_takes_any_gpu():
    """device 'cuda' (no index): line 194 `index == ''` (as `!=`: int('') raised ValueError) and line 198
    `index != ''` (as `==`) on a scan."""
    assert placement_problems(fake("cuda", Module(Param("cuda:0"), Param("cuda:0")))) == []
    said = placement_problems(fake("cuda", Module(Param("cuda:0"), Param("cuda:0", torch.float64))))
    assert len(said) == 1 and said[0].startswith("the target's weights are float64 on cuda:0 (w1, "), said


def test_a_cuda_0_scan_names_the_parameter_cast():
    """line 199 `p.device.index != int(index)` (as `==`, the scan named the first parameter on the right GPU)."""
    said = placement_problems(fake("cuda:0", Module(Param("cuda:0"), Param("cuda:0", torch.float64))))
    assert len(said) == 1 and said[0].startswith("the target's weights are float64 on cuda:0 (w1, "), said


def test_cuda_0_model_wholly_on_cuda_1_is_refused():
    """line 194 `d.index == int(index)` (as `!=`: a module wholly on another GPU passed the fast path)."""
    said = placement_problems(fake("cuda:0", Module(Param("cuda:1"), Param("cuda:1"))))
    assert len(said) == 1 and said[0].startswith("the target's weights are float32 on cuda:1 (w0, "), said
