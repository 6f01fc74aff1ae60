"""Invariant 10 with power: sampled speculative decoding emits the target's exact distribution, checked where a
wrong rule would show.

test_sampling_e2e.py checks it with a draft that accepts little (tau ~1.1): almost every step is one rejection
and a bonus, so a wrong rule in the later part of verification barely moves the output. Here the draft is close
to the target (the target's own layers with noise on the MLP weights: tau 2.7-3.5 over long runs, and rejections
at every depth), the vocabulary is tiny (8 tokens) and the target's exact distribution over the first new tokens
is computed by enumeration with transformers (float64, with top-k/top-p written here): an oracle that shares no
code with the decoder.

- test_generate_emits_the_target_joint: ``generate`` (many copies of one prompt in one batched call, a fixed seed,
  so the test is deterministic) against the exact joint of the first 4 new tokens, chi-squared on the joints of
  (t1, t2, t3) and (t2, t3, t4), with the acceptance of the run checked too, so the test keeps its power;
- test_verification_keeps_the_target_joint: draftsmith's own verification (sample_verify_fixed, what generate
  runs) and tree drafting on random context-dependent tables, 2 x 10^5 rows each: verify, then finish the rows
  with exact target draws; the joint of the D + 1 tokens (and the first token alone) must be the target's.

Planted in fixed.sample_verify_fixed, each of these known-wrong rules fails both tests (p < 1e-14 where it
applies): the bonus drawn from p instead of the leftover after a rejection (every configuration); no
renormalisation of the leftover after a rejected top-k sibling, and the rejected sibling not zeroed (every tree
configuration: a chain has no siblings).
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
from draftsmith.assembler.vocab import make_vocab_map
from draftsmith.decoding.fixed import draft_tree_fixed, sample, sample_verify_fixed
from draftsmith.decoding.tree import chain_tree
from draftsmith.testing import edit_config, write_self_draft, write_target

V = 8                                  # target vocabulary of the end-to-end pairs
PROMPT = [5, 0, 7, 4, 6]               # a prompt where the first step accepts often but not always
N_ROWS, L = 3000, 4                    # rows per generate call, new tokens per row
P_MIN = 1e-5                           # per chi-square (22 of them): seeds are fixed, so the outcome is too;
#                                        a reshuffled random stream would fail a correct decoder with p < 1e-3
TAU_MIN = 2.2                          # tau of a long run of each configuration (measured 2.7-3.5)
SIZES = dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1)
KEPT = [0, 1, 2, 4, 5, 7]              # the reduced pair's draft vocabulary


# --- pairs ------------------------------------------------------------------------------------------------------
def build_pair(root: Path, name: str, *, reduced=None, seed=21, attn_std=0.02, noise=0.1):
    """A 2-layer llama target whose next token depends on the context (small random o_proj) and a close draft:
    write_self_draft's copy of the target's layers, with the target's o_proj (the draft's context lacks only x_0)
    and Gaussian noise (noise x the weight's std) on its MLP weights. ``reduced``: the draft's own lm_head over
    those target ids (rows copied from the target's), with d2t/t2d."""
    t, d = root / f"{name}-t", root / f"{name}-d"
    write_target(t, "llama", vocab_size=V, num_hidden_layers=2, seed=seed, init_std=0.3, **SIZES)
    write_self_draft(d, t, margin=0.0)                 # zeroes the target's o_proj; margin 0 keeps its head
    tt = load_file(str(t / "model.safetensors"))
    g = torch.Generator().manual_seed(seed + 100)
    for k, v in tt.items():
        if k.endswith("o_proj.weight"):
            tt[k] = torch.randn(v.shape, generator=g, dtype=v.dtype) * attn_std
    save_safetensors(tt, t)
    dt = load_file(str(d / "model.safetensors"))
    g = torch.Generator().manual_seed(seed + 200)
    for k, v in dt.items():
        if k.endswith("o_proj.weight"):
            dt[k] = tt["model." + k].clone()
        elif "mlp." in k and v.dim() == 2:
            dt[k] = v + torch.randn(v.shape, generator=g, dtype=v.dtype) * noise * v.std()
    spec = yaml.safe_load((Path(draftsmith.__file__).parent / "specs" / "builtin" / "eagle1-llama.yaml").read_text())
    spec |= {"name": f"self-{name}"}
    spec["draft"]["norms"] = {"input": "all", "final": True}
    if reduced:
        kept = torch.tensor(sorted(reduced))
        dt["lm_head.weight"] = tt["lm_head.weight"][kept].clone()
        dt["d2t"], dt["t2d"] = make_vocab_map(kept, V)
        edit_config(d, draft_vocab_size=len(kept))
        spec["draft"]["share"] = {"embed": "target", "lm_head": "draft"}
        spec["draft"]["vocab"] = {"reduced": "auto", "d2t": "offset"}
    save_safetensors(dt, d)
    (root / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    return draftsmith.assemble(str(root / f"{name}.yaml"), target=t, draft=d, dtype="float64"), t


@pytest.fixture(scope="module")
def power_pairs(tmp_path_factory):
    """name -> (SpeculativeModel, the target as a transformers model): the close pair and the reduced one."""
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("power")
    pairs = {"close": build_pair(root, "close"), "reduced": build_pair(root, "reduced", reduced=KEPT)}
    return {name: (model, AutoModelForCausalLM.from_pretrained(str(t), dtype=torch.float64).eval())
            for name, (model, t) in pairs.items()}


# --- the oracle -------------------------------------------------------------------------------------------------
def process(logits: torch.Tensor, temperature=1.0, top_p=1.0, top_k=0) -> torch.Tensor:
    """transformers' order: logits / T, top-k (ties with the k-th kept), top-p (the smallest most-likely set whose
    mass reaches top_p), renormalised. Written here, not draftsmith's target_probs: the oracle shares no code."""
    x = logits.double() / temperature
    if 0 < top_k < x.shape[-1]:
        x = x.masked_fill(x < torch.topk(x, top_k, dim=-1).values[..., -1:], -math.inf)
    if top_p < 1:
        p = torch.softmax(x, -1)
        sp, order = torch.sort(p, -1, descending=True)
        drop = torch.zeros_like(sp, dtype=torch.bool).scatter(-1, order, sp.cumsum(-1) - sp >= top_p)
        x = x.masked_fill(drop, -math.inf)
    return torch.softmax(x, -1)


@torch.no_grad()
def exact_joint(model, prompt, n: int, **kw) -> np.ndarray:
    """[V] * n: P(t1..tn | prompt) under the target alone (a transformers model), each position processed."""
    joint, prefixes = torch.ones(1, dtype=torch.float64), torch.tensor([prompt])
    for i in range(n):
        joint = (joint[:, None] * process(model(prefixes).logits[:, -1], **kw)).reshape(-1)
        if i + 1 < n:
            P = prefixes.shape[0]
            prefixes = torch.cat([prefixes.repeat_interleave(V, 0), torch.arange(V).repeat(P)[:, None]], 1)
    return joint.reshape([V] * n).numpy()


def gof(samples: np.ndarray, expected: np.ndarray) -> float:
    """samples [N, k] token tuples vs expected [V'] * k probabilities: asserts no impossible tuple was drawn and
    returns the chi-square p-value, cells of expected count < 5 pooled into one."""
    counts = np.bincount(np.ravel_multi_index(samples.T, expected.shape), minlength=expected.size).astype(float)
    e = expected.reshape(-1)
    assert counts[e <= 0].sum() == 0, "a tuple the target cannot emit"
    e = e * counts.sum()
    big = e >= 5
    o, e = np.append(counts[big], counts[~big].sum()), np.append(e[big], e[~big].sum())
    keep = e > 0
    stat = ((o[keep] - e[keep]) ** 2 / e[keep]).sum()
    return float(chi2.sf(stat, keep.sum() - 1))


# --- end to end -------------------------------------------------------------------------------------------------
CHAIN = dict(topk=1, steps=3)
TREE3, TREE2 = dict(topk=3, steps=3, draft_tokens=8), dict(topk=2, steps=2, draft_tokens=5)
CONFIGS = {   # name: pair, plan, sampling
    "chain-T1": ("close", CHAIN, dict(temperature=1.0)),
    "tree-k3s3n8-T1": ("close", TREE3, dict(temperature=1.0)),
    "tree-k2s2n5-top_p0.8": ("close", TREE2, dict(temperature=1.0, top_p=0.8)),
    "chain-T0.5-top_k4": ("close", CHAIN, dict(temperature=0.5, top_k=4)),
    "reduced-chain-T1": ("reduced", CHAIN, dict(temperature=1.0)),
    "reduced-tree-k3s3n8-T1": ("reduced", TREE3, dict(temperature=1.0)),
    # the processing's order and each filter against the oracle's, above T = 1 and below, both filters at once
    "tree-k3s3n8-T1.5-top_k5-top_p0.9": ("close", TREE3, dict(temperature=1.5, top_k=5, top_p=0.9)),
    "chain-T0.7-top_p0.9": ("close", CHAIN, dict(temperature=0.7, top_p=0.9)),
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_generate_emits_the_target_joint(power_pairs, config):
    name, plan, sampling = CONFIGS[config]
    model, hf_target = power_pairs[name]
    outs = model.generate([PROMPT] * N_ROWS, max_new_tokens=L, seed=1, stop=[], **plan, **sampling)
    samples = np.array([o.token_ids for o in outs])
    assert samples.shape == (N_ROWS, L)
    joint = exact_joint(hf_target, PROMPT, L, **sampling)
    p = {"t1-t3": gof(samples[:, :3], joint.sum(3)), "t2-t4": gof(samples[:, 1:], joint.sum(0))}
    # power: inside the window drafts were accepted two deep and rejected (rows needing a second step), and a
    # long run of the same configuration keeps tau high (its window cuts the steps short: tau there is no measure)
    stats = outs[0].stats
    long = model.generate([PROMPT] * 64, max_new_tokens=32, seed=2, stop=[], **plan, **sampling)
    tau = long[0].stats.acceptance_length
    print(f"{config}: p={p} accepted_per_position={stats.accepted_per_position} steps={stats.steps} tau={tau:.2f}")
    assert min(p.values()) > P_MIN, p
    assert stats.accepted_per_position[1] > 0.1 * N_ROWS and stats.steps > 1.1 * N_ROWS, stats
    assert tau > TAU_MIN, tau


@pytest.mark.parametrize("plan", [CHAIN, TREE3], ids=["chain", "tree"])
def test_a_batch_of_unlike_prompts_emits_each_prompts_joint(power_pairs, plan):
    """Prompts of three lengths interleaved in one call (their rows' KV, positions and verification apart): each
    row's first three tokens follow its own prompt's joint, at T = 1.3 with top_p 0.9."""
    model, hf_target = power_pairs["close"]
    prompts, sampling = [PROMPT, [3, 1], [2, 6, 1, 0, 3, 7, 4, 5, 1]], dict(temperature=1.3, top_p=0.9)
    rows = 1300   # 3900 rows: a call takes at most 4096
    outs = model.generate([prompts[i % 3] for i in range(3 * rows)], max_new_tokens=3, seed=3, stop=[], **plan,
                          **sampling)
    samples = np.array([o.token_ids for o in outs])
    p = [gof(samples[i::3], exact_joint(hf_target, prompt, 3, **sampling)) for i, prompt in enumerate(prompts)]
    assert min(p) > P_MIN, p
    assert outs[0].stats.accepted_per_position[0] > 0.5 * len(outs), outs[0].stats   # drafts were accepted


# --- verification alone, on tables ------------------------------------------------------------------------------
def tables(seed: int, D: int, Vu: int, truncate: int = 0):
    """Target p(.|prefix) and draft q logits for every prefix of length 0..D+1, as [Vu**length, Vu] tensors
    indexed by the prefix's base-Vu code: random, context dependent, q = p's logits plus noise.
    truncate: that many least likely tokens of each p row get probability 0 (as top-k / top-p make)."""
    g = torch.Generator().manual_seed(seed)
    P, Q = [], []
    for length in range(D + 2):
        lp = torch.randn(Vu ** length, Vu, generator=g, dtype=torch.float64) * 1.5
        Q.append(lp + torch.randn(lp.shape, generator=g, dtype=torch.float64) * 0.5)
        if truncate:
            lp = lp.masked_fill(lp < lp.sort(-1).values[:, truncate:truncate + 1], -math.inf)
        P.append(torch.softmax(lp, -1))
    return P, Q


UNIT = {   # name: kind, topk, steps, nodes, truncate, reduced draft vocabulary, rows
    "chain": ("chain", 1, 3, 4, 0, None, 200_000),
    "chain-truncated-reduced": ("chain", 1, 3, 4, 2, [0, 2, 3, 5], 200_000),
    "tree-k2s3n6": ("tree", 2, 3, 6, 0, None, 200_000),
    "tree-k3s3n10": ("tree", 3, 3, 10, 0, None, 200_000),
    "tree-k3s2n7-truncated-reduced": ("tree", 3, 2, 7, 1, [0, 1, 3, 4, 5], 200_000),
}


@pytest.mark.parametrize("case", list(UNIT))
def test_verification_keeps_the_target_joint(case):
    kind, topk, D, n, truncate, reduced, B = UNIT[case]
    Vu = 6
    P, Q = tables(7, D, Vu, truncate)
    if reduced is not None:
        off = torch.full((Vu,), -math.inf, dtype=torch.float64)
        off[reduced] = 0
        Q = [q + off for q in Q]
    g = torch.Generator().manual_seed(11)

    def code(prefix) -> int:
        return sum(t * Vu ** (len(prefix) - 1 - i) for i, t in enumerate(prefix))

    if kind == "chain":   # each row draws its own chain from q (fixed.sample, the engine's inverse CDF)
        qs, ps, toks, c = [], [P[0][torch.zeros(B, dtype=torch.long)]], [], torch.zeros(B, dtype=torch.long)
        for depth in range(D):
            q = torch.softmax(Q[depth][c], -1)
            toks.append(sample(q, torch.rand(B, generator=g)))
            c = c * Vu + toks[-1]
            qs.append(q)
            ps.append(P[depth + 1][c])
        tree = chain_tree(torch.zeros(B, dtype=torch.long), torch.stack(toks, 1))
        probs, q_draft = torch.stack(ps, 1), torch.stack([torch.zeros_like(qs[0]), *qs], 1)
    else:                 # one top-k tree for every row, drafted by draftsmith's own code from the q table
        prefix_of = []    # candidate index -> its prefix, replaying draft_candidates_fixed's layout

        def logprobs(prefix):
            return torch.log_softmax(Q[len(prefix)][code(prefix)], -1).float()

        def expand(frontier, fed):
            rows = []
            for f in frontier[0].tolist():
                lp = logprobs(prefix_of[f])
                prefix_of.extend(prefix_of[f] + (t,) for t in torch.topk(lp, topk).indices.tolist())
                rows.append(lp)
            return torch.stack(rows)[None]

        root_lp = logprobs(())
        prefix_of.extend((t,) for t in torch.topk(root_lp, topk).indices.tolist())
        one = draft_tree_fixed(torch.tensor([0]), root_lp[None], expand, topk, D, n)
        toks, parents = one.tokens[0].tolist(), one.parents[0].tolist()
        node_prefix = []
        for i in range(n):
            node_prefix.append(() if i == 0 else node_prefix[parents[i]] + (toks[i],))
            assert i == 0 or node_prefix[i] == prefix_of[one.cand[0, i]]      # the replay drafted the same tree
        tree = type(one)(*(x.expand(B, *x.shape[1:]) for x in (one.tokens, one.parents, one.mask, one.depth,
                                                                 one.retrieve, one.cand)))
        probs = torch.stack([P[len(pr)][code(pr)] for pr in node_prefix]).expand(B, n, Vu)
        q_draft = None
    v = sample_verify_fixed(tree, probs.float(), None if q_draft is None else q_draft.float(),
                            torch.rand(B, D, topk, generator=g), torch.rand(B, generator=g), topk)
    # the emitted tokens (path, then the bonus), finished with exact target draws up to D + 1 tokens
    seq = tree.tokens.gather(1, v.path.clamp(min=0).roll(-1, 1))
    seq.scatter_(1, v.accepted[:, None], v.bonus[:, None])
    c = torch.zeros(B, dtype=torch.long)
    for j in range(D + 1):
        drawn = sample(P[j][c].float(), torch.rand(B, generator=g))
        seq[:, j] = torch.where(j > v.accepted, drawn, seq[:, j])
        c = c * Vu + seq[:, j]
    joint = P[0][0]
    for j in range(1, D + 1):
        joint = (joint.reshape(-1, 1) * P[j]).reshape(-1)
    joint = joint.reshape([Vu] * (D + 1)).numpy()
    s = seq.numpy()
    mean_accepted = v.accepted.double().mean().item()
    p = {"joint": gof(s, joint), "first": gof(s[:, :1], joint.sum(tuple(range(1, D + 1))))}
    print(f"{case}: p={p} mean accepted={mean_accepted:.2f}")
    assert min(p.values()) > P_MIN, p
    assert 0.3 < mean_accepted < D - 0.3         # acceptances and rejections, at several depths
