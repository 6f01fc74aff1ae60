"""transformers as the oracle: target-only and speculative greedy output equal HF's own greedy generate and HF
assisted generation (its chain speculative loop) on the same folder."""
import pytest
import torch
from transformers import AutoModelForCausalLM

import draftsmith
from draftsmith.testing import write_eagle3, write_target


@pytest.mark.parametrize("model_type", ["llama", "qwen2"])
def test_greedy_matches_transformers(tmp_path, model_type):
    write_target(tmp_path / "t", model_type, num_hidden_layers=7, seed=21)
    write_eagle3(tmp_path / "d", tmp_path / "t", draft_vocab=64, seed=22)
    model = draftsmith.assemble("eagle3-llama", target=tmp_path / "t", draft=tmp_path / "d", dtype="float64")
    hf = AutoModelForCausalLM.from_pretrained(str(tmp_path / "t"), dtype=torch.float64).eval()
    assistant = AutoModelForCausalLM.from_config(hf.config.__class__.from_dict(
        {k: v for k, v in hf.config.to_dict().items() if k != "layer_types"} | {"num_hidden_layers": 2}))
    assistant = assistant.to(torch.float64).eval()
    prompt = [5, 17, 3, 40, 2]
    gen = dict(max_new_tokens=24, min_new_tokens=24, do_sample=False, pad_token_id=0)
    with torch.inference_mode():
        want = hf.generate(torch.tensor([prompt]), **gen)[0, len(prompt):].tolist()
        assisted = hf.generate(torch.tensor([prompt]), assistant_model=assistant, **gen)[0, len(prompt):].tolist()
    assert assisted == want
    assert model.generate_baseline(prompt, max_new_tokens=24, stop=[]).token_ids == want
    assert model.generate(prompt, max_new_tokens=24, stop=[], topk=1).token_ids == want
    assert model.generate(prompt, max_new_tokens=24, stop=[]).token_ids == want
    prompts = [prompt, [9, 1, 33, 7, 12]]  # a batch: rows must not mix (an attention that swaps batch and tokens
    with torch.inference_mode():           # is exact at batch 1)
        rows = hf.generate(torch.tensor(prompts), **gen)[:, len(prompt):].tolist()
    assert [r.token_ids for r in model.generate_baseline(prompts, max_new_tokens=24, stop=[])] == rows
    assert [r.token_ids for r in model.generate(prompts, max_new_tokens=24, stop=[])] == rows


def test_prompts_of_different_lengths_match_transformers_row_by_row(tmp_path):
    """A prefill of right-padded prompts (1, 2 and 6 tokens) attends over each prompt alone, with no mask, and
    reads the logits at each row's own last token: every row equals HF's greedy generate of that prompt."""
    write_target(tmp_path / "t", "llama", num_hidden_layers=3, seed=23)
    write_eagle3(tmp_path / "d", tmp_path / "t", draft_vocab=64, seed=24)
    model = draftsmith.assemble("eagle3-llama", target=tmp_path / "t", draft=tmp_path / "d", dtype="float64")
    hf = AutoModelForCausalLM.from_pretrained(str(tmp_path / "t"), dtype=torch.float64).eval()
    hf.generation_config.eos_token_id = None   # never stop early (min_new_tokens would instead ban the eos id:
    prompts = [[7], [5, 17], [9, 1, 33, 7, 12, 40]]  # this target's greedy continuation of the last prompt has it)
    gen = dict(max_new_tokens=10, do_sample=False, pad_token_id=0)
    with torch.inference_mode():
        want = [hf.generate(torch.tensor([p]), **gen)[0, len(p):].tolist() for p in prompts]
    assert [r.token_ids for r in model.generate_baseline(prompts, max_new_tokens=10, stop=[])] == want
    assert [r.token_ids for r in model.generate(prompts, max_new_tokens=10, stop=[])] == want
