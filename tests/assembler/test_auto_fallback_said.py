"""`mode: auto` that falls back to a chain says why where a load is told (a warning at assemble), and `generate`
prints the plan it runs with its reason; a call that asks for a chain (topk 1) is not told the spec's fallback."""
import dataclasses
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


def generate(spec, t, d, *options):
    res = CliRunner().invoke(app, ["generate", "--spec", str(spec), "--target", str(t), "--draft", str(d),
                                   "--token-ids", "1,2,3", "--max-new-tokens", "4", "--no-compare", *options])
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split())


def test_generate_prints_the_plan_and_its_reason(tmp_path, caplog):
    spec, t, d = pair(tmp_path, 2)
    for options in ((), ("--topk", "8")):   # the spec's trees, or the call's: both fall back
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="draftsmith"):
            out = generate(spec, t, d, *options)
        assert "plan v1, topk 1, steps 5, 6 draft tokens: auto chose v1 (chain): page_size is 2" in out, out
        assert "asks for trees" not in caplog.text   # said once, by the plan line


def test_generate_topk_1_is_not_told_the_specs_fallback(tmp_path, caplog):
    """--topk 1 runs a chain whatever page_size says: the plan line gives that reason alone, and the spec's
    fallback to a chain (which this call does not run into) is not warned about."""
    spec, t, d = pair(tmp_path, 2)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        out = generate(spec, t, d, "--topk", "1")
    assert "plan v1, topk 1, steps 5, 6 draft tokens: auto chose v1 (chain): topk is 1 " in out, out
    assert "page_size" not in out and "asks for trees" not in caplog.text


def test_a_chain_call_plan_says_only_its_own_reason(tmp_path, caplog):
    spec, t, d = pair(tmp_path, 2)
    model = draftsmith.assemble(spec, target=t, draft=d)
    assert model.plan().reason == "auto chose v1 (chain): page_size is 2"
    assert model.plan(topk=8).reason == "auto chose v1 (chain): page_size is 2"
    assert model.plan(topk=1).reason == "auto chose v1 (chain): topk is 1"
    recurrent = dataclasses.replace(model, recurrent=True)
    assert recurrent.plan(topk=1).reason == "auto chose v1 (chain): topk is 1"
    assert "recurrent" in recurrent.plan().reason and "page_size is 2" in recurrent.plan().reason
    assert model.plan(mode="v1").reason == "mode v1 requested"
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="draftsmith"):
        model.generate([1, 2, 3], max_new_tokens=2, topk=1)
    assert "auto chose" not in caplog.text


def test_assemble_without_the_warning_says_nothing(tmp_path, caplog):
    spec, t, d = pair(tmp_path, 2)
    with caplog.at_level(logging.WARNING, logger="draftsmith"):
        draftsmith.assemble(spec, target=t, draft=d, warn_fallback=False)
    assert "auto chose" not in caplog.text
