"""Invariant 10 where the sampling tests do not look: stop ids, and the greedy limits of the filters.

test_sampling_power.py and test_sampling_e2e.py decode with ``stop=[]``: every row runs to max_new_tokens, so no row
finishes while the others decode on. Here a stop id the target emits often ends rows at different steps (inside
a step's accepted tokens too) in a batch of three unlike prompts; each row's output, a tuple ending at the stop id
or at max_new_tokens, must follow its prompt's exact joint (enumerated with transformers in float64, an oracle
sharing no code with the decoder), at T = 1.1 with top_p 0.95. Fixed seeds: the outcome is deterministic.

The greedy limits (top_k = 1, a tiny top_p, a tiny temperature) must give greedy's tokens, token for token, from
a sampled chain and a tree alike.

Planted, each fails test_rows_that_stop_keep_their_joint (h88, 2026-12-02): the leftover after a rejected top-k
sibling not renormalised (fixed.sample_verify_fixed; the tree case); a stop id looked for only in a step's last
emitted token (engine.Seq.emit).
"""
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from safetensors.torch import load_file
from scipy.stats import chi2

import draftsmith
from draftsmith.assembler.checkpoint import save_safetensors
from draftsmith.testing import write_self_draft, write_target

V, L = 8, 4
PROMPTS = [[5, 0, 7, 4, 6], [3, 1], [2, 6, 1, 0, 3, 7, 4]]
SAMPLING = dict(temperature=1.1, top_p=0.95)
PLANS = {"chain": dict(topk=1, steps=3), "tree": dict(topk=3, steps=3, draft_tokens=8)}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A 2-layer llama target whose next token depends on the context and a close draft (its own layers, noise on
    the MLP weights), as test_sampling_power builds; and the target as a transformers model (the oracle)."""
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("stops")
    t, d = root / "t", root / "d"
    write_target(t, "llama", vocab_size=V, num_hidden_layers=2, seed=21, init_std=0.3, hidden_size=32,
                 intermediate_size=64, num_attention_heads=2, num_key_value_heads=1)
    write_self_draft(d, t, margin=0.0)
    tt, dt = load_file(str(t / "model.safetensors")), load_file(str(d / "model.safetensors"))
    g = torch.Generator().manual_seed(121)
    for k, v in tt.items():
        if k.endswith("o_proj.weight"):
            tt[k] = torch.randn(v.shape, generator=g, dtype=v.dtype) * 0.02
    for k, v in dt.items():
        if k.endswith("o_proj.weight"):
            dt[k] = tt["model." + k].clone()
        elif "mlp." in k and v.dim() == 2:
            dt[k] = v + torch.randn(v.shape, generator=g, dtype=v.dtype) * 0.1 * v.std()
    save_safetensors(tt, t)
    save_safetensors(dt, d)
    spec = yaml.safe_load((Path(draftsmith.__file__).parent / "specs" / "builtin" / "eagle1-llama.yaml").read_text())
    spec |= {"name": "self-stops"}
    spec["draft"]["norms"] = {"input": "all", "final": True}
    (root / "s.yaml").write_text(yaml.safe_dump(spec))
    model = draftsmith.assemble(str(root / "s.yaml"), target=t, draft=d, dtype="float64")
    return model, AutoModelForCausalLM.from_pretrained(str(t), dtype=torch.float64).eval()


def process(logits, temperature=1.0, top_p=1.0):
    """transformers' order: logits / T, then top-p (the smallest most-likely set reaching top_p), renormalised."""
    x = logits.double() / temperature
    p = torch.softmax(x, -1)
    sp, order = torch.sort(p, -1, descending=True)
    drop = torch.zeros_like(sp, dtype=torch.bool).scatter(-1, order, sp.cumsum(-1) - sp >= top_p)
    return torch.softmax(x.masked_fill(drop, -math.inf), -1)


@torch.no_grad()
def exact(hf, prompt, stop) -> dict:
    """tuple -> probability of a row's output: tokens up to and including the first stop id, at most L."""
    dist = {(): 1.0}
    for _ in range(L):
        grow = [t for t in dist if not (t and t[-1] in stop) and len(t) < L]
        probs = process(hf(torch.tensor([prompt + list(t) for t in grow])).logits[:, -1], **SAMPLING)
        for t, row in zip(grow, probs):
            base = dist.pop(t)
            dist |= {t + (v,): base * float(row[v]) for v in range(V) if row[v] > 0}
    return dist


def gof(samples: list, dist: dict) -> float:
    """chi-square p-value of the samples' tuples against dist, cells expected under 5 pooled; asserts no tuple
    the target cannot emit."""
    counts = {}
    for s in samples:
        counts[s] = counts.get(s, 0) + 1
    assert all(s in dist for s in counts), "a tuple the target cannot emit"
    e = np.array(list(dist.values())) * len(samples)
    o = np.array([counts.get(k, 0) for k in dist], dtype=float)
    big = e >= 5
    o, e = np.append(o[big], o[~big].sum()), np.append(e[big], e[~big].sum())
    keep = e > 0
    return float(chi2.sf(((o[keep] - e[keep]) ** 2 / e[keep]).sum(), keep.sum() - 1))


@pytest.mark.parametrize("plan", list(PLANS))
def test_rows_that_stop_keep_their_joint(pair, plan):
    model, hf = pair
    with torch.no_grad():   # the stop id: the first prompt's likeliest first token (often, and not always, emitted)
        stop = [int(hf(torch.tensor([PROMPTS[0]])).logits[0, -1].argmax())]
    rows = 1200
    outs = model.generate([PROMPTS[i % 3] for i in range(3 * rows)], max_new_tokens=L, seed=4, stop=stop,
                          **PLANS[plan], **SAMPLING)
    samples = [tuple(o.token_ids) for o in outs]
    for s in samples:   # a stop id ends a row, and only a stop id ends it early
        assert all(t not in stop for t in s[:-1]) and (len(s) == L or s[-1] in stop), s
    p = [gof(samples[i::3], exact(hf, prompt, stop)) for i, prompt in enumerate(PROMPTS)]
    lengths = np.bincount([len(s) for s in samples], minlength=L + 1)
    print(f"{plan}: p={p} lengths={lengths.tolist()} stats={outs[0].stats.accepted_per_position}")
    assert min(p) > 1e-5, p
    assert lengths[1:L].sum() > 0.2 * len(samples) and lengths[L] > 0.2 * len(samples), lengths  # rows stopped
    assert outs[0].stats.accepted_per_position[1] > 0.1 * len(samples), outs[0].stats   # two-deep acceptances


@pytest.mark.parametrize("plan", list(PLANS))
def test_greedy_limits_of_the_filters(pair, plan):
    model, _ = pair
    prompts = PROMPTS + [[1], [7, 7, 7, 7]]
    greedy = [o.token_ids for o in model.generate_baseline(prompts, max_new_tokens=16, stop=[])]
    for kw in (dict(temperature=1.0, top_k=1), dict(temperature=2.0, top_p=0.01), dict(temperature=1e-3)):
        for seed in (0, 1):
            got = [o.token_ids for o in model.generate(prompts, max_new_tokens=16, seed=seed, stop=[],
                                                       **PLANS[plan], **kw)]
            assert got == greedy, kw
