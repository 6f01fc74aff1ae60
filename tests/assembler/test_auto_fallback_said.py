"""`mode: auto` that falls back to a chain says why where a load is told (a warning at assemble), and `generate`
prints the plan it runs with its reason."""
import logging

import yaml
from typer.testing import CliRunner

import draftsmith
from draftsmith.cli import app
from draftsmith.specs.catalog import BUILTIN_DIR
from draftsmith.testing import write_eagle1, write_target


def pair(tmp_path, page_size):
    t = write_target(tmp_path / "t", num_hidden_layers=2)
    d = write_eagle1(tmp_path / "d", t)
    data = yaml.safe_load((BUILTIN_DIR / "eagle1-llama.yaml").read_text())
    data["decoding"]["page_size"] = page_size
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(data))
    return spec, t, d


def test_an_auto_tree_spec_that_runs_a_chain_warns_at_assemble(tmp_path, caplog):
    spec, t, d = pair(tmp_path, 2)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        draftsmith.assemble(spec, target=t, draft=d)
    assert "spec eagle1-llama asks for trees (topk 4), and auto chose v1 (chain): page_size is 2" in caplog.text


def test_a_tree_spec_that_gets_trees_says_nothing(tmp_path, caplog):
    spec, t, d = pair(tmp_path, 1)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        draftsmith.assemble(spec, target=t, draft=d)
    assert "auto chose" not in caplog.text


def test_generate_prints_the_plan_and_its_reason(tmp_path):
    spec, t, d = pair(tmp_path, 2)
    res = CliRunner().invoke(app, ["generate", "--spec", str(spec), "--target", str(t), "--draft", str(d),
                                   "--token-ids", "1,2,3", "--max-new-tokens", "4", "--no-compare"])
    assert res.exit_code == 0, res.output
    assert "plan v1, topk 1, steps 5, 6 draft tokens: auto chose v1 (chain): page_size is 2" in " ".join(
        res.output.split()), res.output
