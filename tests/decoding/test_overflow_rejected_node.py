"""Only the logits a step's verdict reads are checked for overflow: a draft node the target rejects may overflow
(its logits are never read, its keys are scrubbed before they are attended) and the call decodes on, as the
target-only call does. A float16 target whose head overflows at one token X alone, which it never emits."""
import pytest
import safetensors.torch as st

import draftsmith
from draftsmith.errors import DecodingError
from draftsmith.testing import write_eagle3, write_target

X, Y, J = 50, 7, 5
PROMPTS = [[1, 2, 3], [7] * 40, [9, 4]]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    root = tmp_path_factory.mktemp("rejected_overflow")
    write_target(root / "t", "llama", num_hidden_layers=3, seed=1)
    w = st.load_file(root / "t/model.safetensors")
    embed = w["model.embed_tokens.weight"]
    embed[:, J] = 0
    embed[X] = 0
    embed[X, J] = 1000.0                      # only X carries dimension J, and no layer writes it:
    for i in range(3):
        w[f"model.layers.{i}.self_attn.o_proj.weight"][J] = 0
        w[f"model.layers.{i}.mlp.down_proj.weight"][J] = 0
    w["lm_head.weight"][X] = 0                # never emitted
    w["lm_head.weight"][Y, J] = 60000.0       # at X alone, the logit of Y passes float16's 65504: +inf
    st.save_file(w, root / "t/model.safetensors", metadata={"format": "pt"})
    write_eagle3(root / "d", root / "t", seed=2)
    w = st.load_file(root / "d/model.safetensors")
    row = w["lm_head.weight"][X].clone()
    w["lm_head.weight"].zero_()
    w["lm_head.weight"][X] = row * 50         # a draft that proposes X at most nodes
    st.save_file(w, root / "d/model.safetensors", metadata={"format": "pt"})
    return draftsmith.assemble("eagle3-llama", target=root / "t", draft=root / "d", dtype="float16")


def test_an_overflow_at_a_rejected_draft_node_decodes_on(model):
    with pytest.raises(DecodingError):        # the overflow is real where X is read
        model.generate_baseline([[1, X]], max_new_tokens=2, stop=[])
    want = [o.token_ids for o in model.generate_baseline(PROMPTS, max_new_tokens=40, stop=[])]
    assert all(X not in w for w in want)
    for kw in ({}, {"topk": 1}):
        assert [o.token_ids for o in model.generate(PROMPTS, max_new_tokens=40, stop=[], **kw)] == want, kw
    for kw in ({}, {"topk": 1}):
        got = model.generate(PROMPTS, max_new_tokens=40, stop=[], temperature=0.8, seed=0, **kw)
        assert [len(o.token_ids) for o in got] == [40] * 3, kw
