"""Calls a hostile reviewer found wrong (2026-11-26): two threads on one model, a temperature float32 holds as 0,
stop ids as tensors, a misspelt keyword of generate_baseline, and a model cast or moved after assemble()."""
import copy
import threading

import pytest
import torch

import draftsmith
from draftsmith.errors import ArgumentError


@pytest.fixture(scope="module")
def model(tiny_pair):
    return draftsmith.assemble("eagle3-llama", target=tiny_pair[0], draft=tiny_pair[1])  # vocab 32, context 64


def test_calls_from_several_threads_take_turns_and_each_equals_target_only(model):
    # the runners (and their KV pools) are shared by calls of one batch size and length: without the model's lock
    # every row came out wrong, or index_copy_ went out of bounds
    prompts = [[5, 6, 7], [9, 10, 11, 12, 13], [3, 4], [7, 8, 9]]
    ref = [model.generate_baseline(p, max_new_tokens=12, stop=[]).token_ids for p in prompts]
    got, errors = {}, []
    start = threading.Barrier(2 * len(prompts))

    def run(i, fn):
        try:
            start.wait()
            got[i, fn] = getattr(model, fn)(prompts[i], max_new_tokens=12, stop=[]).token_ids
        except Exception as e:   # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i, fn)) for i in range(len(prompts))
               for fn in ("generate", "generate_baseline")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert got == {(i, fn): ref[i] for i in range(len(prompts)) for fn in ("generate", "generate_baseline")}


@pytest.mark.parametrize("temperature", [1e-46, 5e-324, 2.0 ** -127])
def test_a_temperature_float32_cannot_hold_is_refused_not_sampled_as_nan(model, temperature):
    # 0/0 for the best token gave NaN probabilities, and the inverse-CDF draw returned the last id (an empty output
    # at the CLI: EOS at once)
    for call in (model.generate, model.generate_baseline):
        with pytest.raises(ArgumentError, match="at least 1.18e-38"):
            call([5, 6, 7], max_new_tokens=4, temperature=temperature, seed=0)
    out = model.generate([5, 6, 7], max_new_tokens=4, temperature=2.0 ** -126, seed=0, stop=[])
    assert out.token_ids == model.generate_baseline([5, 6, 7], max_new_tokens=4, stop=[]).token_ids   # ~greedy


@pytest.mark.parametrize("temperature", [3.5e38, 1e300])
def test_a_temperature_float32_holds_as_inf_is_refused_not_sampled_uniformly(model, temperature):
    # logits / inf is 0 for every token, so top_k=1 kept them all and sampled uniformly (a review's finding)
    for call in (model.generate, model.generate_baseline):
        with pytest.raises(ArgumentError, match="at most 3.4028e[+]38"):
            call([5, 6, 7], max_new_tokens=4, temperature=temperature, top_k=1, seed=0)


def test_stop_ids_as_a_tensor_stop_as_a_list_does(model):
    first = model.generate_baseline([1, 2], max_new_tokens=8, stop=[]).token_ids[0]
    assert model.generate([1, 2], max_new_tokens=8, stop=torch.tensor([first])).token_ids == [first]
    assert model.generate_baseline([1, 2], max_new_tokens=8, stop=torch.tensor([first])).token_ids == [first]
    with pytest.raises(ArgumentError, match=r"a 0-D array of torch.int64\); a list of token ids"):
        model.generate([1, 2], max_new_tokens=8, stop=torch.tensor(first))   # was a TypeError from list()


def test_generate_baseline_takes_the_draft_keywords_and_refuses_a_misspelt_one(model):
    ref = model.generate_baseline([1, 2], max_new_tokens=3)
    same = model.generate_baseline([1, 2], max_new_tokens=3, topk=2, steps=3, draft_tokens=5, mode="auto")
    assert same.token_ids == ref.token_ids
    for typo in ({"temprature": 1.0}, {"max_tokens": 8}):   # were silently greedy with 64 tokens
        with pytest.raises(TypeError, match=next(iter(typo))):
            model.generate_baseline([1, 2], **typo)


def test_a_model_cast_or_moved_after_assemble_is_refused_by_name(tiny_pair):
    model = draftsmith.assemble("eagle3-llama", target=tiny_pair[0], draft=tiny_pair[1])
    model.target.to(torch.bfloat16)   # was: RuntimeError: Expected query, key, and value to have the same dtype
    with pytest.raises(ArgumentError, match=r"the target's weights are bfloat16 on cpu \(model.embed_tokens.weight, "
                                            r"the first so\), but the model was assembled for float32 on cpu"):
        model.generate([1, 2], max_new_tokens=2)
    model.target.to(torch.float32)
    model.draft.to(torch.float64)
    with pytest.raises(ArgumentError, match="the draft's weights are float64"):
        model.generate_baseline([1, 2], max_new_tokens=2)
    model.draft.to(torch.float32)
    assert len(model.generate([1, 2], max_new_tokens=2, stop=[]).token_ids) == 2
    # a part of one (a helper's notebook: a raw "expected m1 and m2 to have the same dtype" inside a forward)
    for part, name in ((model.target.lm_head, "target"), (model.target.model.layers[3], "target"),
                       (model.draft.layers[0].mlp, "draft")):
        part.to(torch.float64)
        with pytest.raises(ArgumentError, match=f"the {name}'s weights are float64 on cpu \\("):
            model.generate([1, 2], max_new_tokens=2)
        part.to(torch.float32)
    assert len(model.generate([1, 2], max_new_tokens=2, stop=[]).token_ids) == 2
    # the parameters are listed once and checked by identity (a second review): a head swapped in, a parameter
    # assigned, a cast that makes new parameters (torch's overwrite flag) are each read, and the old ones not kept
    old, model.target.lm_head = model.target.lm_head, copy.deepcopy(model.target.lm_head).to(torch.float64)
    old.to(torch.float64)   # out of the model: no reason to refuse
    with pytest.raises(ArgumentError, match=r"weights are float64 on cpu \(lm_head.weight, the first so\)"):
        model.generate([1, 2], max_new_tokens=2)
    model.target.lm_head = old.to(torch.float32)
    assert len(model.generate([1, 2], max_new_tokens=2, stop=[]).token_ids) == 2
    head = model.target.lm_head
    head.weight = torch.nn.Parameter(head.weight.double())
    with pytest.raises(ArgumentError, match=r"\(lm_head.weight, the first so\)"):
        model.generate([1, 2], max_new_tokens=2)
    gone, head.weight = head.weight, torch.nn.Parameter(head.weight.float())
    overwrites = torch.__future__.get_overwrite_module_params_on_conversion()
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        model.draft.layers[0].mlp.to(torch.float64)
        with pytest.raises(ArgumentError, match=r"the draft's weights are float64 on cpu \(layers.0.mlp"):
            model.generate([1, 2], max_new_tokens=2)
        model.draft.layers[0].mlp.to(torch.float32)
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(overwrites)
    assert len(model.generate([1, 2], max_new_tokens=2, stop=[]).token_ids) == 2
    assert all(p is not gone for p in model._params["target"][-1])   # the list of the model as it is, only
    # one registered under a new name, after the list was made, is read too (it was not until something else changed)
    model.target.model.norm.register_parameter("extra", torch.nn.Parameter(torch.zeros(2, dtype=torch.float64)))
    with pytest.raises(ArgumentError, match=r"the target's weights are float64 on cpu \(model.norm.extra, the "
                                            r"first so\)"):
        model.generate([1, 2], max_new_tokens=2)
    del model.target.model.norm.extra
    assert len(model.generate([1, 2], max_new_tokens=2, stop=[]).token_ids) == 2
    model.draft.add_module("extra", torch.nn.Linear(2, 2, dtype=torch.float64))
    with pytest.raises(ArgumentError, match=r"the draft's weights are float64 on cpu \(extra.weight, the first so\)"):
        model.generate([1, 2], max_new_tokens=2)


def test_a_model_assembled_on_cpu_0_is_on_the_cpu(tiny_pair):
    # a CLI review: --device cpu:0 assembled, then every call was refused (a CPU tensor carries no index)
    model = draftsmith.assemble("eagle3-llama", target=tiny_pair[0], draft=tiny_pair[1], device="cpu:0")
    assert model.generate([1, 2], max_new_tokens=3, stop=[]).token_ids == \
        model.generate_baseline([1, 2], max_new_tokens=3, stop=[]).token_ids
