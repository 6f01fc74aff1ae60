"""A draft_tokens a call asks for that a chain does not take (``--topk 1 --draft-tokens 50``: a chain verifies steps
+ 1) is said in the plan's reason, which generate prints; it was taken silently (a CLI bad-input hunt, 2026-12-02).
The spec's own draft_tokens, or one a chain does take, adds nothing."""
import numpy as np
import pytest
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app


@pytest.fixture(scope="module")
def demo():
    return draftsmith.assemble("demo")


NOTE = "draft_tokens 50 does not apply to a chain, which verifies steps + 1 = 6"


@pytest.mark.parametrize("kw", [dict(topk=1), dict(mode="v1")])
def test_an_unused_draft_tokens_is_said(demo, kw):
    plan = demo.plan(steps=5, draft_tokens=np.int64(50), **kw)
    assert (plan.mode, plan.draft_tokens) == ("v1", 6) and plan.reason.endswith(NOTE), plan.reason


@pytest.mark.parametrize("kw", [dict(topk=1), dict(topk=1, steps=5, draft_tokens=6), dict(draft_tokens=9)])
def test_nothing_is_said_of_a_draft_tokens_taken_or_not_asked(demo, kw):
    assert "does not apply" not in demo.plan(**kw).reason


def test_generate_prints_it():
    res = CliRunner().invoke(app, ["generate", "--spec", "demo", "--token-ids", "1,2", "--max-new-tokens", "3",
                                   "--topk", "1", "--steps", "5", "--draft-tokens", "50"], env={"COLUMNS": "1000"})
    assert res.exit_code == 0, res.output
    assert NOTE in " ".join(res.output.split())
