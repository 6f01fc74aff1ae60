"""The spec's ``decoding.topk`` against the draft's vocabulary is checked with the checkpoints (assemble and
validate), naming ``decoding.topk``: checked per call only, such a spec loaded and then refused every call as
if the caller had passed a topk (``--topk`` on the command line, though none was given)."""
import pytest

import draftsmith
from draftsmith.assembler.assemble import plan_assembly
from draftsmith.errors import SpecError
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("topk")
    target = write_target(root / "t", tokenizer=True)
    return target, write_eagle3(root / "d", target, draft_vocab=10)


@pytest.mark.parametrize("check", [plan_assembly, draftsmith.assemble])
def test_a_topk_past_the_drafts_vocabulary_is_the_specs_problem(pair, check):
    spec = draftsmith.load_spec("eagle3-llama").with_decoding(topk=16, draft_tokens=40)
    with pytest.raises(SpecError) as info:
        check(spec, *pair)
    (p,) = info.value.problems
    assert (p.path, p.message, p.allowed) == ("decoding.topk", "16 candidates per node, but the draft's vocabulary "
                                              "has 10 tokens", "1..10")


def test_a_topk_of_the_whole_vocabulary_decodes(pair):
    model = draftsmith.assemble(draftsmith.load_spec("eagle3-llama").with_decoding(topk=10, draft_tokens=40), *pair)
    out = model.generate([1, 2, 3], max_new_tokens=6)
    assert out.token_ids == model.generate_baseline([1, 2, 3], max_new_tokens=6).token_ids


def test_generate_topk_within_the_vocabulary_runs_a_spec_whose_own_topk_is_past_it(pair, tmp_path):
    """`generate --topk 4` on such a spec: the run never uses the spec's 16, so it is not refused for it."""
    import yaml
    from typer.testing import CliRunner

    from draftsmith.cli import app

    data = draftsmith.load_spec("eagle3-llama").with_decoding(topk=16, draft_tokens=40).model_dump(
        mode="json", exclude_unset=True)
    data["decoding"] = {**data.get("decoding", {}), "topk": 16, "draft_tokens": 40}
    spec = tmp_path / "wide.yaml"
    spec.write_text(yaml.safe_dump(data))
    args = ["generate", "--spec", str(spec), "--target", str(pair[0]), "--draft", str(pair[1]), "--token-ids",
            "1,2,3", "--max-new-tokens", "6", "--no-compare", "--threads", "1"]
    res = CliRunner().invoke(app, [*args, "--topk", "4"])
    assert res.exit_code == 0, res.output
    assert "topk 4" in res.output
    res = CliRunner().invoke(app, args)   # the spec's own topk: refused as before
    assert res.exit_code == 1 and "16 candidates per node" in res.output, res.output


def test_generate_steps_and_draft_tokens_are_not_warned_about_as_the_specs(caplog):
    """--steps 10 --draft-tokens 4 are this call's: the load's warning about a spec whose steps its tree cannot
    reach named spec demo's decoding.steps, which holds 5."""
    from typer.testing import CliRunner

    from draftsmith.cli import app

    with caplog.at_level("WARNING", logger="draftsmith"):
        res = CliRunner().invoke(app, ["generate", "--spec", "demo", "--steps", "10", "--draft-tokens", "4",
                                       "--max-new-tokens", "8", "--threads", "1", "--no-compare"])
    assert res.exit_code == 0, res.output
    # the call's tree is warned of as the call's (round 26), never as the spec's
    said = [r.getMessage() for r in caplog.records if "decoding.steps is 10" in r.getMessage()]
    assert said and all(m.startswith("draftsmith: generate() overrides of spec demo: ") for m in said), said
    assert "steps 10, 4 draft tokens" in res.output   # the plan line says the call's plan


@pytest.mark.parametrize("fusion", [{"num_aux": 2}, {"aux_layers": {"ids": [2, 99, 5]}}])
def test_a_topk_past_the_vocabulary_is_said_with_the_fusions_problems(pair, tmp_path, fusion):
    """A spec-perturbation hunt: with a fusion problem the build raises (num_aux against the taps) or sets aside
    (a tap past the target's layers), the topk was not said until it was fixed."""
    import yaml

    from draftsmith.specs.catalog import BUILTIN_DIR

    data = yaml.safe_load((BUILTIN_DIR / "eagle3-llama.yaml").read_text())
    data["draft"]["fusion"] |= fusion
    data["decoding"] |= {"topk": 16, "draft_tokens": 40}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError) as info:
        draftsmith.assemble(tmp_path / "s.yaml", *pair)
    paths = [p.path for p in info.value.problems]
    assert "decoding.topk" in paths and any(p.startswith("draft.fusion.") for p in paths), paths
