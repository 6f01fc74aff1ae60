"""Mutation survivors of draftsmith/decoding/engine.py's step functions (scripts/mutate.py), each planted and seen
failing. Expectations come from target-only decoding, hand computation and the invariants (docs/INVARIANTS.md),
never from the engine's own output."""

from pathlib import Path

import pytest
import torch
import yaml

import draftsmith
from draftsmith.components import fused
from draftsmith.decoding import engine
from draftsmith.testing import write_self_draft, write_target

CHAIN = dict(topk=1, steps=3)
V = 16                                 # the flat pair's vocabulary


def _timings_are_parts_of_the_wall(st):
    assert 0 <= st.addressing_seconds <= st.forward_seconds <= st.wall_seconds < 60
    assert 0 < st.prefill_seconds <= st.wall_seconds


@pytest.mark.parametrize("shape", [CHAIN, dict(topk=2, steps=3, draft_tokens=6)])
def test_a_draft_that_is_the_target_counts_its_forwards_as_documented(pairs, shape):
    # engine.py:217 draft_forwards += 1 -> += 2 / += 0; :326 target_forwards += 1 -> 2 / 0; :327 plan.steps - 1
    # -> + 1 / - 2; :333 += any(live) (dropped / swapped); :222 / :337 perf_counter() - t0 -> + t0
    # tau = steps + 1 (invariant 11), so after the first token each step commits steps + 1 of them: n steps for
    # 1 + n * (steps + 1) tokens; README: a step is one target forward and steps - 1 draft forwards after the
    # catch-up, and the prefill feeds the draft once: 1 + n * steps in all (the last catch-up runs, and counts)
    model, steps, n = pairs["self"], shape["steps"], 3
    prompts = [[3, 1, 4], [1, 5]]
    out = model.generate(prompts, max_new_tokens=1 + n * (steps + 1), stop=[], **shape)
    base = model.generate_baseline(prompts, max_new_tokens=1 + n * (steps + 1), stop=[])
    assert [o.token_ids for o in out] == [b.token_ids for b in base]
    st = out[0].stats
    assert st.target_forwards == n and st.draft_forwards == 1 + n * steps
    assert st.steps == 2 * n and st.committed == 2 * n * (steps + 1) and st.new_tokens == 2 * (1 + n * (steps + 1))
    assert st.accepted_per_position == [2 * n] * steps
    _timings_are_parts_of_the_wall(st)


def test_a_target_only_run_counts_one_forward_per_token_after_the_first(pairs):
    # a step per row and token after its first, summed over rows as a speculative run's are (a review found the
    # baseline's counted per forward); :360 perf_counter() - t0 -> + t0
    model = pairs["eagle1"]
    out = model.generate_baseline([[2, 7, 1], [9]], max_new_tokens=6, stop=[])
    st = out[0].stats
    assert [len(o.token_ids) for o in out] == [6, 6]
    assert st.target_forwards == 5 and st.steps == st.committed == 10 and st.new_tokens == 12
    assert st.draft_forwards == 0 and st.accepted_per_position == [] and st.acceptance_length == 1
    _timings_are_parts_of_the_wall(st)


def test_causal_rows_of_the_default_engine_path_stay_eager(monkeypatch):
    # engine.py:171 _causal(..., fused: bool = False) -> True: the CPU path never reaches torch.compile
    monkeypatch.setattr(fused, "_compiled", lambda fn: (_ for _ in ()).throw(AssertionError("compiled")))
    rows, rel_pos, rel_mask = engine._causal(torch.tensor([2, 0, 3]), 3, torch.tensor([True, True, False]))
    assert rows.tolist() == [[0, 1, -1], [-1, -1, -1], [-1, -1, -1]]         # by hand: t < count in live rows
    assert rel_pos.tolist() == [[0, 1, 2]] * 3
    assert rel_mask[0].tolist() == [[True, False, False], [True, True, False], [True, True, True]]


def test_greedy_steps_draw_no_uniforms():
    # engine.py:308 s.temperature > 0 -> >= 0: a greedy run takes nothing from the run's generator
    g = torch.Generator().manual_seed(7)
    before = g.get_state().clone()
    u = engine._draws(engine.Settings(max_new_tokens=4, generator=g), 3, 5, "cpu")
    assert u.shape == (3, 0) and torch.equal(g.get_state(), before)
    u = engine._draws(engine.Settings(max_new_tokens=4, temperature=0.5, generator=g), 3, 5, "cpu")
    assert u.shape == (3, 5) and not torch.equal(g.get_state(), before)


def test_a_finished_row_turns_inactive_on_the_device(pairs, monkeypatch):
    # engine._loop: if not all(live) -> if all(live); catch_up: counts * st.active -> //
    # engine's docstring: finished sequences stay in the batch as inactive rows. The self draft commits
    # steps + 1 = 3 tokens a step (invariant 11), so row 0, whose 3rd token (the prefill's, then 2) is the stop,
    # is done after step 1; row 1 (a stop-free path) needs 3 steps for 10 tokens. Step 2 is launched before the
    # host reads step 1 (run-ahead: row 1 will need it whatever step 1 emits), so it still sees row 0 active, and
    # step 3 does not; target-only (9 tokens), steps 1-3 are launched before the host reads row 0's 3rd token
    # (step 2's), and the 5 after them see row 0 inactive
    model, prompts, chain = pairs["self"], [[3, 1, 4], [80]], dict(topk=1, steps=2)
    base = [b.token_ids for b in model.generate_baseline(prompts, max_new_tokens=10, stop=[])]
    stop = base[0][2]
    assert stop not in base[0][:2] and stop not in base[1]
    seen = {"spec": [], "decode": []}
    spec_step, decode_step = engine.spec_step, engine.decode_step

    def spec(target, draft, plan, s, root, active, *rest):
        seen["spec"].append(active.tolist())
        return spec_step(target, draft, plan, s, root, active, *rest)

    def decode(target, s, root, active, u):
        seen["decode"].append(active.tolist())
        return decode_step(target, s, root, active, u)

    monkeypatch.setattr(engine, "spec_step", spec)
    monkeypatch.setattr(engine, "decode_step", decode)
    monkeypatch.setattr(model, "_runners_cache", {})        # no step captured before the stand-ins
    out = model.generate(prompts, max_new_tokens=10, stop=[stop], **chain)
    assert [o.token_ids for o in out] == [base[0][:3], base[1]]
    assert seen["spec"] == [[True, True]] * 2 + [[False, True]]
    assert out[0].stats.draft_forwards == 1 + out[0].stats.target_forwards * chain["steps"]   # 3 steps, 2 each
    out = model.generate_baseline(prompts, max_new_tokens=9, stop=[stop])
    assert [o.token_ids for o in out] == [base[0][:3], base[1][:9]]
    assert seen["decode"] == [[True, True]] * 3 + [[False, True]] * 5     # row 0's 3rd token ends it


@pytest.mark.parametrize("shape", [CHAIN, None])
def test_a_batch_of_one_token_prompts(pairs, shape):
    # engine.py:203 State(root=ids[:, 0]) -> ids[:, 1] (a prompt of one token has no second column)
    # the self pair's target reads the last token only (testing.write_self_draft), so [[9], [5]] continue as
    # [[2, 7, 9], [1, 5]] do
    model = pairs["self"]
    run = model.generate_baseline if shape is None else lambda p, **kw: model.generate(p, **kw, **shape)
    short = [o.token_ids for o in run([[9], [5]], max_new_tokens=6, stop=[])]
    assert short == [o.token_ids for o in model.generate_baseline([[2, 7, 9], [1, 5]], max_new_tokens=6, stop=[])]


def test_one_token_asked_for_runs_no_draft_forward(pairs):
    # engine.py:206 s.max_new_tokens > 1 -> >= 1: the prefill's token is all, so the draft never runs (README:
    # n steps cost n * steps draft forwards, here n = 0)
    model = pairs["self"]
    out = model.generate([[3, 1, 4], [80]], max_new_tokens=1, stop=[], **CHAIN)
    assert [o.token_ids for o in out] == [b.token_ids for b in model.generate_baseline([[3, 1, 4], [80]],
                                                                                      max_new_tokens=1, stop=[])]
    assert out[0].stats.target_forwards == out[0].stats.draft_forwards == 0


def test_a_sampled_chain_from_a_draft_that_is_the_target_accepts_everything(pairs):
    # engine.py:246 range(plan.steps - 1) -> range(plan.steps - 2) / range(plan.steps) (a chain one node short
    # or long)
    # q = p at every node, so each drawn token is accepted with probability min(1, p/q) = 1: tau = steps + 1
    model = pairs["self"]
    out = model.generate([[3, 1, 4], [80]], max_new_tokens=13, stop=[], temperature=1.0, seed=0, **CHAIN)
    st = out[0].stats
    assert st.acceptance_length == CHAIN["steps"] + 1 and st.target_forwards == 3
    assert [len(o.token_ids) for o in out] == [13, 13]


# --- a flat self-draft pair: sampled steps whose draws show ------------------------------------------------------
@pytest.fixture(scope="module")
def flat(tmp_path_factory):
    """(SpeculativeModel, table [V, V]): a draft that IS the target (write_self_draft: the target reads the last
    token only) with the target's head left unscaled (margin 0), small weights so that p(. | x) at temperature 1
    is spread (its largest entry below 0.3, checked), and the table p(next | last token) computed by transformers
    (float64), an oracle that shares no code with the decoder. The conftest self pair's best token leads by 30
    nats (write_self_draft's margin): there a sampled chain drafts the greedy tokens whatever its uniforms."""
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("flat")
    sizes = dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1)
    write_target(root / "t", "llama", vocab_size=V, num_hidden_layers=1, seed=5, init_std=0.1, **sizes)
    write_self_draft(root / "d", root / "t", margin=0.0)
    spec = yaml.safe_load((Path(draftsmith.__file__).parent / "specs" / "builtin" / "eagle1-llama.yaml").read_text())
    spec |= {"name": "flat-self"}
    spec["draft"]["norms"] = {"input": "all", "final": True}
    (root / "flat.yaml").write_text(yaml.safe_dump(spec))
    model = draftsmith.assemble(str(root / "flat.yaml"), target=root / "t", draft=root / "d", dtype="float64")
    hf = AutoModelForCausalLM.from_pretrained(str(root / "t"), dtype=torch.float64).eval()
    with torch.no_grad():
        table = hf(torch.arange(V)[:, None]).logits[:, 0].softmax(-1)
    assert float(table.max()) < 0.3
    return model, table


def _inverse_cdf(probs, u):
    # the first token whose cumulative mass exceeds u (by hand, float64)
    return int((probs.cumsum(0) <= float(u)).sum().clamp(max=len(probs) - 1))


def test_a_sampled_chain_draws_node_j_with_uniform_j_and_its_bonus_with_the_last(flat):
    # engine.py:240 s.temperature > 0 -> > 1 (and topk == 1 -> != 1): a sampled chain drafted by the tree path
    # (greedy siblings, verified without q: tau 1.1 here); :244 u[:, 0] -> u[:, 1]; :247 u[:, j + 1] -> j - 1 /
    # j + 2; :275 u[:, -1] (the bonus' uniform) -> u[:, -2]
    # the stream (engine.py: one run generator): the prefill draws u0 [B]; a step draws u_draft [B, steps], then
    # u_verify [B, steps * topk + 1]. Node j's token is the inverse CDF of q = p(. | node j - 1) at u_draft[:, j];
    # q = p, so every node is accepted (u * q(x) < p(x)), tau = steps + 1, and the bonus is p(. | last node)'s
    # inverse CDF at u_verify[:, -1]
    model, table = flat
    prompts, steps, n, seed = [[3, 1, 4], [7]], CHAIN["steps"], 3, 5
    out = model.generate(prompts, max_new_tokens=1 + n * (steps + 1), stop=[], temperature=1.0, seed=seed, **CHAIN)
    g = torch.Generator().manual_seed(seed)
    want = [[_inverse_cdf(table[p[-1]], u)] for p, u in zip(prompts, torch.rand(2, generator=g))]
    for _ in range(n):
        u_draft, u_verify = torch.rand(2, steps, generator=g), torch.rand(2, steps + 1, generator=g)
        for row, ud, uv in zip(want, u_draft, u_verify):
            for u in [*ud, uv[-1]]:
                row.append(_inverse_cdf(table[row[-1]], u))
    assert [o.token_ids for o in out] == want
    assert out[0].stats.acceptance_length == steps + 1 and out[0].stats.target_forwards == n


def test_a_sampled_target_only_run_draws_one_uniform_per_row_and_token(flat):
    # engine.py:350 _draws(s, B, 1, dev) -> 2: a step takes one uniform per row from the run's generator, no more
    # (the prefill's [B], then [B, 1] a step): token i is p(. | token i - 1)'s inverse CDF at the i-th draw
    model, table = flat
    prompts, seed = [[3, 1, 4], [7]], 11
    out = model.generate_baseline(prompts, max_new_tokens=6, stop=[], temperature=1.0, seed=seed)
    g = torch.Generator().manual_seed(seed)
    want = [[_inverse_cdf(table[p[-1]], u)] for p, u in zip(prompts, torch.rand(2, generator=g))]
    for _ in range(5):
        for row, u in zip(want, torch.rand(2, 1, generator=g)):
            row.append(_inverse_cdf(table[row[-1]], u[0]))
    assert [o.token_ids for o in out] == want
