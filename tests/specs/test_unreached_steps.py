"""A tree whose draft_tokens cannot reach its depth (steps past draft_tokens - 1 draft candidates no chosen node
descends to, each a draft forward) is warned of at load and by validate, naming the steps that draft the same
tree; a chain (draft_tokens unused) and a tree that reaches its depth are not (found by a dogfooding helper)."""
import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.specs.resolve import unreached_steps


@pytest.mark.parametrize("topk, steps, n, mode, page, said", [
    (4, 5, 3, "auto", 1, "decoding.steps is 5, but a tree of draft_tokens 3 (the root counted) reaches depth 2 at "
                         "most: steps 2 drafts the same tree with 3 fewer draft forwards a step"),
    (4, 3, 3, "v2", 1, "steps 2 drafts the same tree with 1 fewer draft forward a step"),
    (4, 5, 6, "auto", 1, None),      # depth 5 reachable
    (4, 2, 3, "auto", 1, None),      # exactly reachable
    (1, 5, 2, "auto", 1, None),      # a chain: draft_tokens unused
    (4, 5, 2, "v1", 1, None),
    (4, 5, 2, "auto", 16, None),     # auto with pages: a chain
])
def test_which_trees_are_told(topk, steps, n, mode, page, said):
    got = unreached_steps(topk, steps, n, mode, page)
    assert (got is None) == (said is None) and (said is None or got.endswith(said)), got


def test_a_load_and_validate_say_it(tmp_path, caplog):
    demo = Path(draftsmith.__file__).parent / "specs" / "builtin" / "demo.yaml"
    data = Path(draftsmith.__file__).parent / "demo_data"
    text = demo.read_text().replace("name: demo", "name: shallow").replace("draft_tokens: 8", "draft_tokens: 3")
    spec = tmp_path / "shallow.yaml"
    spec.write_text(text.replace("../../demo_data", str(data)))
    warning = "decoding.steps is 5, but a tree of draft_tokens 3 (the root counted) reaches depth 2 at most"
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        draftsmith.assemble(spec)
    assert [r.getMessage() for r in caplog.records if warning in r.getMessage()] == [f"draftsmith: spec shallow: "
                                                                                     f"{warning}: steps 2 drafts the "
                                                                                     "same tree with 3 fewer draft "
                                                                                     "forwards a step"]
    res = CliRunner().invoke(app, ["validate", str(spec), str(demo)])
    assert res.exit_code == 0 and f"{spec}: warning: {warning}" in res.stderr, res.output
    assert res.stderr.count("warning: decoding.steps") == 1   # the demo's own tree reaches its depth
