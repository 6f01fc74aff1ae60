"""Target logits that overflow (NaN or +inf) end a call with a DecodingError naming the prompt, the step and the
dtype, read with each step's tokens (no host read of its own); -inf logits (a token the model masks) decode on."""
import pytest
import safetensors.torch as st

import draftsmith
from draftsmith.errors import DecodingError
from draftsmith.testing import write_eagle3, write_target

PROMPTS = [[5, 17, 3], [9, 1, 33, 7]]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("overflow")
    write_target(root / "t", "llama", num_hidden_layers=3, seed=1, init_std=0.5)
    write_eagle3(root / "d", root / "t", draft_vocab=64, seed=2)
    (loud := root / "loud").mkdir()   # the same target with its MLPs 30x: past float16's range, not bfloat16's
    for f in (root / "t").iterdir():
        if f.suffix == ".safetensors":
            w = {k: v * 30 if ".mlp." in k else v for k, v in st.load_file(f).items()}
            st.save_file(w, loud / f.name, metadata={"format": "pt"})
        else:
            (loud / f.name).write_bytes(f.read_bytes())
    return root


CALLS = {"baseline": lambda m, p: m.generate_baseline(p, max_new_tokens=6, stop=[]),
         "tree": lambda m, p: m.generate(p, max_new_tokens=6, stop=[]),
         "chain": lambda m, p: m.generate(p, max_new_tokens=6, stop=[], topk=1),
         "sampled tree": lambda m, p: m.generate(p, max_new_tokens=6, stop=[], temperature=0.8, seed=0),
         "sampled chain": lambda m, p: m.generate(p, max_new_tokens=6, stop=[], temperature=0.8, seed=0, topk=1)}


@pytest.mark.parametrize("call", CALLS)
def test_a_float16_overflow_is_refused_with_the_way_out(pair, call):
    model = draftsmith.assemble("eagle3-llama", target=pair / "loud", draft=pair / "d", dtype="float16")
    with pytest.raises(DecodingError) as e:
        CALLS[call](model, PROMPTS)
    msg = str(e.value)
    assert "NaN or +inf" in msg and "prompt 0 after 0 new tokens" in msg and "prompt 1 after 0" in msg, msg
    assert "dtype float16" in msg and "bfloat16" in msg, msg
    ok = draftsmith.assemble("eagle3-llama", target=pair / "loud", draft=pair / "d", dtype="bfloat16")
    assert len(CALLS[call](ok, PROMPTS)[0].token_ids) == 6   # the way out it names decodes


def _spoiled_after(model, calls: int, row: int, value: float):
    # the target's head gives `value` in one row's logits from its `calls`-th call on (0: the prefill's)
    head, seen = model.target.logits, [0]

    def logits(hidden):
        out = head(hidden)
        seen[0] += 1
        if seen[0] > calls:
            out = out.clone()
            out[row, ..., 3] = value
        return out

    model.target.logits = logits


@pytest.mark.parametrize("call", ["baseline", "tree", "sampled chain"])
def test_a_later_step_is_named_by_its_prompt_and_the_tokens_before(pair, call):
    model = draftsmith.assemble("eagle3-llama", target=pair / "t", draft=pair / "d", dtype="float32")
    _spoiled_after(model, 2, row=1, value=float("nan"))
    with pytest.raises(DecodingError) as e:
        CALLS[call](model, PROMPTS)
    msg = str(e.value)
    assert "prompt 1 after" in msg and "prompt 0" not in msg and "after 0 new" not in msg, msg
    assert "dtype float32" in msg and "try float32" in msg, msg


def test_minus_inf_logits_are_a_masked_token_and_decode_on(pair):
    model = draftsmith.assemble("eagle3-llama", target=pair / "t", draft=pair / "d", dtype="float32")
    want = [r.token_ids for r in CALLS["baseline"](model, PROMPTS)]
    _spoiled_after(model, 0, row=0, value=float("-inf"))
    for call in CALLS:
        got = CALLS[call](model, PROMPTS)
        assert len(got[0].token_ids) == 6 and 3 not in got[0].token_ids, call
    assert [r.token_ids for r in CALLS["tree"](model, PROMPTS)][1] == want[1]


def test_plus_inf_alone_is_refused(pair):
    model = draftsmith.assemble("eagle3-llama", target=pair / "t", draft=pair / "d", dtype="float32")
    _spoiled_after(model, 0, row=0, value=float("inf"))
    with pytest.raises(DecodingError, match="prompt 0 after 0 new tokens"):
        CALLS["tree"](model, PROMPTS)


def test_the_command_line_says_it_as_an_error_line(pair):
    from typer.testing import CliRunner

    from draftsmith.cli import app

    got = CliRunner().invoke(app, ["generate", "--spec", "eagle3-llama", "--target", str(pair / "loud"), "--draft",
                                   str(pair / "d"), "--dtype", "float16", "--token-ids", "5,17,3",
                                   "--max-new-tokens", "6", "--threads", "1"])
    assert got.exit_code == 1, got.output
    assert "error: generate(): the target's logits hold NaN or +inf" in got.output and "Traceback" not in got.output
    assert "--dtype" in got.output


def _spoiled_after_token(model, token: int):
    # the target's logits are NaN wherever its input token is `token`: they decide only what follows it
    forward, head, seen = model.target.forward, model.target.logits, {}

    def spy(ids, *args, **kwargs):
        seen["ids"] = ids
        return forward(ids, *args, **kwargs)

    def logits(hidden):
        out = head(hidden)
        if hidden.dim() == 3:   # a decode or a tree (the prefill's last rows: [B, H], no prompt here ends with it)
            out = out.masked_fill((seen["ids"] == token)[..., None], float("nan"))
        return out

    model.target.forward, model.target.logits = spy, logits


def test_logits_after_a_stop_token_decide_nothing_and_are_not_read():
    """A stop token accepted inside a step's path ends its row: the logits at the nodes after it (a tree's, a
    finished row's in a batch) decide no emitted token and the call decodes on; without the stop it is refused."""
    demo = draftsmith.assemble("demo")
    prompts = [[100, 101, 102, 32, 40], [61, 62, 63]]
    first = demo.generate_baseline(prompts[0], max_new_tokens=12, stop=[]).token_ids
    stop = next(t for i, t in enumerate(first) if i >= 3 and t not in first[:i])
    want = [o.token_ids for o in demo.generate_baseline(prompts, max_new_tokens=12, stop=[stop])]
    assert want[0][-1] == stop and len(want[0]) < 12
    _spoiled_after_token(demo, stop)
    assert [o.token_ids for o in demo.generate_baseline(prompts, max_new_tokens=12, stop=[stop])] == want
    for kw in ({}, {"topk": 1}):
        got = demo.generate(prompts, max_new_tokens=12, stop=[stop], **kw)
        assert [o.token_ids for o in got] == want, kw
    assert got[0].stats.steps > 0
    with pytest.raises(DecodingError, match=f"prompt 0 after {len(want[0])} new tokens"):
        demo.generate(prompts, max_new_tokens=12, stop=[])
