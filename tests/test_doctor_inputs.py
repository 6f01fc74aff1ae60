"""doctor's own inputs (the second review, 2026-11-26): a token count too small to measure a whole chain step, and
a call argument the target refuses, are bad input (exit 2) said once, not a low tau blamed on the draft or the spec."""
import pytest
from typer.testing import CliRunner

from draftsmith.cli import app
from draftsmith.doctor import diagnose
from draftsmith.errors import ArgumentError


@pytest.mark.parametrize("tokens", [1, 6])
def test_fewer_tokens_than_one_whole_chain_step_are_refused_before_anything_loads(tokens, monkeypatch):
    import draftsmith.doctor as doctor
    monkeypatch.setattr(doctor, "run_candidate", lambda *a, **k: pytest.fail("a reading was measured"))
    with pytest.raises(ArgumentError, match=f"max_new_tokens is {tokens}; .* 5-token chain of spec 'demo' needs at "
                                            "least 7"):
        diagnose("demo", max_new_tokens=tokens)
    out = CliRunner().invoke(app, ["doctor", "--spec", "demo", "--max-new-tokens", str(tokens)])
    assert out.exit_code == 2 and "needs at least 7" in out.output and "weak" not in out.output


def test_a_call_argument_the_target_refuses_is_said_once_not_blamed_on_the_spec():
    out = CliRunner().invoke(app, ["doctor", "--spec", "demo", "--max-new-tokens", "3000"])
    assert out.exit_code == 2, out.output
    assert out.output.count("runs past the target's context") == 1 and "does not load" not in out.output
    assert "spec as given" not in out.output


@pytest.mark.parametrize("args, says", [
    (["--token-ids", "999"], "error: --token-ids: it holds ids outside the model's vocabulary 0..257: [999]"),
    (["--probe", "x" * 3000], "error: --probe: 3000 tokens; the target's context (max_position_embeddings) is 2048"),
    (["--max-new-tokens", "2040", "--no-search"], "error: --max-new-tokens is 2040: with a 85-token prompt"),
])
def test_a_probe_or_count_the_target_refuses_names_doctors_option(args, says):
    """They were said in generate()'s words ("error: generate(): 1 problem / prompt 0: ..."), naming arguments
    doctor has no option for."""
    out = CliRunner().invoke(app, ["doctor", "--spec", "demo", *args])
    assert out.exit_code == 2 and says in out.output and "generate()" not in out.output, out.output


def test_the_default_probes_past_a_small_context_say_which_option_replaces_them(tmp_path):
    from draftsmith.testing import edit_config
    from draftsmith.specs.loader import load_spec
    from draftsmith.assembler.folders import checkpoint_ref

    spec = load_spec("demo")
    small = edit_config(checkpoint_ref(spec, "target"), tmp_path / "t", max_position_embeddings=64)
    out = CliRunner().invoke(app, ["doctor", str(small), str(checkpoint_ref(spec, "draft")), "--spec", "demo"])
    assert out.exit_code == 2, out.output
    assert "error: --probe (its default texts) 0: 85 tokens; the target's context (max_position_embeddings) is 64" \
        in out.output


def test_seven_tokens_measure_a_whole_step():
    dx = diagnose("demo", max_new_tokens=7, search=False)
    assert dx.base.measure is not None and dx.base.tau > 2


def test_a_bug_inside_doctor_is_an_internal_error_not_bad_input(monkeypatch):
    # the CLI caught ValueError and LookupError too, so a bug read as "doctor: ..." with exit 2 (a code review)
    import draftsmith.doctor as doctor
    monkeypatch.setattr(doctor, "diagnose", lambda *a, **k: {}["a bug"])
    out = CliRunner().invoke(app, ["doctor", "--spec", "demo"])
    assert out.exit_code == 70 and "internal error" in out.output and "doctor:" not in out.output, out.output


def test_attention_auto_is_read_as_the_kind_the_draft_gets(tmp_path, monkeypatch):
    # a code review: doctor read an MLA draft's attention.rope with gqa's params (default neox), so it took neox for
    # the current reading and never tried it, while the MLA layer read interleaved from the config
    import draftsmith.doctor as doctor
    from draftsmith.doctor import Ambiguity
    from draftsmith.specs.edits import field_info, spec_data
    from draftsmith.registry import default_registry
    from draftsmith.specs.loader import load_spec
    from draftsmith.testing import write_target
    from draftsmith.testing.mla import write_mla_eagle

    data = spec_data(load_spec("eagle-mla-deepseek").model_copy(deep=True))
    data["draft"]["attention"] = {"kind": "auto"}
    assert field_info(data, "draft.attention.rope", default_registry()).default == "neox"        # gqa's, no draft
    assert field_info(data, "draft.attention.rope", default_registry(), "mla").default is None   # from the config
    target = write_target(tmp_path / "t", hidden_size=32, intermediate_size=64, num_attention_heads=4,
                          num_key_value_heads=2, num_hidden_layers=4, vocab_size=64)
    draft = write_mla_eagle(tmp_path / "d", target)
    (tmp_path / "s.yaml").write_text(__import__("yaml").safe_dump(data | {"name": "mla-auto"}))
    tried = []
    monkeypatch.setattr(doctor, "run_candidate", lambda spec, changes, *a, **k: tried.append(changes) or
                        doctor.Candidate(changes, error="not measured here"))
    doctor.diagnose(tmp_path / "s.yaml", target, draft, search=True, rounds=1,
                    ambiguities=[Ambiguity("draft.attention.rope", "")])
    assert sorted(v for ((_, v),) in tried[1:]) == ["interleaved", "neox"]   # after the spec as given


def test_doctor_takes_the_token_ids_its_tokenizer_hint_names(tmp_path):
    # a target without a tokenizer: the default (text) probes are refused with a hint at --token-ids, which doctor
    # did not have; given, the ids are the probe and the pair is measured
    from draftsmith.testing import write_eagle3, write_target

    target = write_target(tmp_path / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=8, vocab_size=32, max_position_embeddings=64)
    draft = write_eagle3(tmp_path / "d", target)
    base = ["doctor", str(target), str(draft), "--spec", "eagle3-llama", "--max-new-tokens", "8"]
    out = CliRunner().invoke(app, base)
    assert out.exit_code == 2 and "needs a tokenizer" in out.output and "--token-ids" in out.output, out.output
    out = CliRunner().invoke(app, [*base, "--token-ids", "1,2,3"])
    assert out.exit_code in (0, 1) and "spec as given" in out.output, out.output


@pytest.mark.parametrize("extra, says", [(["--token-ids", "1,,2"], "an item is empty"),
                                         (["--token-ids", "1,2", "--probe", "hi"], "both give the probe"),
                                         (["--token-ids", "x"], "token ids are integers")])
def test_bad_token_ids_are_refused_before_anything_loads(extra, says, monkeypatch):
    import draftsmith.doctor as doctor
    monkeypatch.setattr(doctor, "diagnose", lambda *a, **k: pytest.fail("the pair was run"))
    out = CliRunner().invoke(app, ["doctor", "--spec", "demo", *extra])
    assert out.exit_code == 2 and says in out.output, out.output


def test_the_token_ids_are_the_probe(monkeypatch):
    import draftsmith.doctor as doctor
    seen = {}
    monkeypatch.setattr(doctor, "diagnose", lambda *a, probes, **k: seen.setdefault("probes", probes) and {}["x"])
    CliRunner().invoke(app, ["doctor", "--spec", "demo", "--token-ids", "5 6,7"])
    assert seen["probes"] == [[5, 6, 7]]


def test_no_search_with_low_acceptance_concludes_nothing_from_readings_it_never_tried():
    # it printed "no reading tried does better (0 tried, ...): the spec reads this draft as well as any reading
    # tried; its acceptance ... is the draft's own", a conclusion from nothing
    out = CliRunner().invoke(app, ["doctor", "--spec", "demo", "--no-search", "--min-tau", "50",
                                   "--max-new-tokens", "8"])
    assert out.exit_code == 1, out.output
    assert "not tried (--no-search)" in out.output and "no reading tried does better" not in out.output


def test_every_bad_option_is_said_at_once(tmp_path, monkeypatch):
    # each was said only after the one before it was fixed (a review, 2026-11-28)
    import draftsmith.doctor as doctor
    monkeypatch.setattr(doctor, "diagnose", lambda *a, **k: pytest.fail("diagnosed"))
    out = CliRunner().invoke(app, ["doctor", "--spec", "demo", "--max-new-tokens", "0", "--min-tau", "-1",
                                   "--threads", "9999", "--probe", f"@{tmp_path / 'none.txt'}", "--dtype", "int8"])
    assert out.exit_code == 2, out.output
    for says in ("--threads is 9999", "dtype 'int8'", "--max-new-tokens", "--min-tau -1.0", "none.txt: cannot read"):
        assert says in out.output, (says, out.output)
    both = CliRunner().invoke(app, ["doctor", "--spec", "demo", "--probe", "x", "--token-ids", "1,,2"])
    assert both.exit_code == 2 and "both give the probe" in both.output and "an item is empty" in both.output
