"""The catch-up feeds the draft every committed token but runs its head at each row's last one only: the rows
before it only write the draft's KV (a head over all D + 1 rows took 8 of the ~31 ms a step of the demo's draft
matmuls took on an AVX2 CPU)."""
import pytest

from draftsmith.decoding import runners


@pytest.mark.parametrize("name", ["eagle3", "eagle1"])
def test_the_catch_up_runs_the_draft_head_at_one_row_and_keeps_the_output(pairs, monkeypatch, name):
    model, prompts = pairs[name], [[3, 1, 4, 1, 5], [9, 2]]
    want = [o.token_ids for o in model.generate(prompts, max_new_tokens=12, stop=[])]
    heads, forward = [], runners.DraftRunner.forward

    def recorded(self, ids, hidden, *rest, from_target, **kw):
        head_of = self.model.head_of
        self.model.head_of = lambda x, head: heads.append((from_target, ids.shape[1], tuple(x.shape))) or \
            head_of(x, head)
        try:
            return forward(self, ids, hidden, *rest, from_target=from_target, **kw)
        finally:
            del self.model.head_of

    monkeypatch.setattr(runners.DraftRunner, "forward", recorded)
    got = model.generate(prompts, max_new_tokens=12, stop=[])
    assert [o.token_ids for o in got] == want
    catch_ups = [(t, shape) for from_target, t, shape in heads[1:] if from_target]   # [0]: the prefill
    assert catch_ups and all(t > 1 for t, _ in catch_ups)
    assert all(len(shape) == 2 and shape[0] == 2 for _, shape in catch_ups), catch_ups
