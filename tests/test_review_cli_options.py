"""generate's and bench's prompt and --max-new-tokens against what the target folder tells (its config's vocab_size
and max_position_embeddings, its tokenizer files): exit 2 naming the option, before the models load where the
folder tells it, after the load where only the model does; --temperature nan and --token-ids too large for an id
said as what they are; doctor's failed spec said whole, with the load's notes."""

import pytest

from test_cli_inputs import refused, run   # the CLI runner and the one-message check, shared


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """Tiny targets (context 512) with and without a tokenizer (vocabulary 258 and 96), an EAGLE-3 draft for each,
    and a target 128 wide with no draft of its own."""
    from draftsmith.testing import write_eagle3, write_target

    root = tmp_path_factory.mktemp("review-options")
    tok = write_target(root / "tgt", tokenizer=True)
    notok = write_target(root / "tgt_notok")
    wide = write_target(root / "tgt128", tokenizer=True, hidden_size=128, intermediate_size=256)
    return {"tok": (tok, write_eagle3(root / "e3", tok)), "notok": (notok, write_eagle3(root / "e3_notok", notok)),
            "wide": wide}


@pytest.fixture
def no_load(monkeypatch):
    """The test fails if a pair is assembled or a benchmark runs."""
    import draftsmith
    import draftsmith.bench

    monkeypatch.setattr(draftsmith, "assemble", lambda *a, **k: pytest.fail("assembled a pair"))
    monkeypatch.setattr(draftsmith.bench, "run_bench", lambda *a, **k: pytest.fail("ran the benchmark"))


def pair_args(pairs, which: str = "tok") -> list:
    target, draft = pairs[which]
    return ["--spec", "eagle3-llama", "--target", target, "--draft", draft]


@pytest.mark.parametrize("verb", ["generate", "bench"])
@pytest.mark.parametrize("which, args, says", [
    ("tok", ["--max-new-tokens", "600"], ["--max-new-tokens is 600", "context of 512", "at most 512 new tokens"]),
    ("tok", ["--token-ids", "1,2,999"], ["--token-ids:", "outside the model's vocabulary 0..257", "999"]),
    ("tok", ["--token-ids", "1,2", "--max-new-tokens", "512"], ["--max-new-tokens is 512", "at most 511 new"]),
    ("notok", [], ["--prompt: a text prompt needs a tokenizer in the target folder", "--token-ids"]),
    ("notok", ["--token-ids", "95,96"], ["--token-ids:", "vocabulary 0..95"]),
])
def test_what_the_target_folder_tells_is_refused_before_the_load(verb, which, args, says, pairs, no_load):
    res = run(verb, *pair_args(pairs, which), *args)
    refused(res, 2, *says)
    assert "generate()" not in res.output and "max_new_tokens is" not in res.output


def test_the_specs_own_target_is_read_when_no_target_is_given(no_load):
    refused(run("generate", "--spec", "demo", "--max-new-tokens", "5000"), 2, "--max-new-tokens is 5000",
            "context of 2048")


def test_a_fitting_call_is_not_refused_before_the_load(pairs, monkeypatch):
    # the whole context: a 2-token prompt gets 511 new tokens (the last one never fed); it goes on to the load
    import draftsmith

    def loaded(*a, **k):
        raise RuntimeError("the pair loads")

    monkeypatch.setattr(draftsmith, "assemble", loaded)
    res = run("generate", *pair_args(pairs), "--token-ids", "1,2", "--max-new-tokens", "511")
    assert res.exit_code == 70 and "the pair loads" in res.output, res.output
    # a text prompt is one token at least: the whole context of new tokens fits one (the last never fed)
    res = run("generate", *pair_args(pairs), "--prompt", "a", "--max-new-tokens", "512")
    assert res.exit_code == 70 and "the pair loads" in res.output, res.output
    refused(run("generate", *pair_args(pairs), "--prompt", "a", "--max-new-tokens", "513"), 2,
            "--max-new-tokens is 513: past the target's context of 512")


@pytest.mark.parametrize("prompt, args, says", [
    ("a" * 600, [], "--prompt: 600 tokens; the target's context (max_position_embeddings) is 512"),
    ("a" * 500, ["--max-new-tokens", "20"], "--max-new-tokens is 20: with a 500-token prompt"),
], ids=["prompt-past-context", "new-tokens-past-context"])
@pytest.mark.parametrize("verb", ["generate", "bench"])
def test_what_only_the_loaded_model_tells_still_names_the_option(verb, prompt, args, says, pairs):
    more = ["--no-compare"] if verb == "generate" else ["--repeats", "1"]
    res = run(verb, *pair_args(pairs), "--prompt", prompt, *args, *more)
    refused(res, 2, says)
    assert "generate()" not in res.output and "plan " not in res.stdout   # refused before anything runs


def test_temperature_nan_is_said_as_not_finite(pairs, no_load):
    refused(run("generate", *pair_args(pairs), "--temperature", "nan"), 2,
            "--temperature is nan; a finite number >= 0 is expected")


def test_a_token_id_too_long_to_read_is_said_as_too_large(pairs, no_load):
    big = "9" * 26
    refused(run("generate", *pair_args(pairs), "--token-ids", f"1, {big}"), 2, f"--token-ids '{big}': too large "
            "to be a token id")
    # another mistake beside it is said as before, with the value as given
    refused(run("generate", *pair_args(pairs), "--token-ids", f"1,,{big}"), 2, f"'1,,{big}': an item is empty")
    refused(run("doctor", *pairs["tok"], "--spec", "eagle3-llama", "--token-ids", big), 2,
            "too large to be a token id")


@pytest.mark.parametrize("spec, wide, says", [
    ("eagle1-llama", False, ["found no 'layers.N.' tensors", "and 9 more). After the rules:",
                             "note: ", "is detected as eagle3-llama", "without --spec uses it",
                             "(none of the 3 other readings tried loads it either)"]),
    ("eagle3-llama", True, ["allowed: own or own_if_different",
                            "note: the draft's config.json says hidden_size 64 (the target's: 128): is the draft "
                            "made for this target?"]),
])
def test_doctor_says_a_spec_that_does_not_load_whole_with_its_notes(spec, wide, says, pairs):
    target, draft = pairs["tok"]
    res = run("doctor", pairs["wide"] if wide else target, draft, "--spec", spec)
    refused(res, 2, "error: the spec as given does not load: ", *says)
    assert "SpecError" not in res.output   # draftsmith's own errors are said without their class (doctor._named)


def test_doctor_tries_no_reading_of_a_target_config_it_cannot_read(pairs, tmp_path, monkeypatch):
    from draftsmith.testing import edit_config

    target = edit_config(pairs["tok"][0], tmp_path / "tgt", max_position_embeddings="x")
    monkeypatch.setattr("draftsmith.doctor.run_candidate", lambda *a, **k: pytest.fail("tried a reading"))
    res = run("doctor", target, pairs["tok"][1], "--spec", "eagle3-llama")
    refused(res, 2, "error: ", "config.json", "max_position_embeddings")


@pytest.mark.parametrize("args, says", [
    (["generate", "--spec", ""], "the spec is an empty string"),
    (["bench", "--spec", ""], "the spec is an empty string"),
    (["doctor", "--spec", ""], "the spec is an empty string"),
    (["generate", "--target", ""], "the target is an empty string"),
    (["doctor", "", "--spec", "demo"], "the target is an empty string"),
    (["doctor", "--spec", "demo", "smollm2", ""], "the draft is an empty string"),
])
def test_an_empty_spec_or_target_is_refused_as_empty_not_read_as_the_default_or_this_folder(args, says, no_load):
    res = run(*args, "--token-ids", "1")
    assert res.exit_code == 2 and says in res.output, res.output


@pytest.mark.parametrize("args, name", [
    (["inspect", ""], "'CKPT_DIR'"), (["convert", "", "--to", "layers", "o"], "'CKPT_DIR'"),
    (["convert", "x", "--to", "layers", ""], "'OUT'"), (["generate", "--draft", ""], "'--draft'"),
    (["bench", "--draft", ""], "'--draft'"), (["bench", "--scale", "tiny", "--out", ""], "'--out'"),
    (["bench", "--scale", "tiny", "--checkpoints", ""], "'--checkpoints'"),
])
def test_an_empty_path_argument_is_refused_naming_it_not_read_as_this_folder(args, name, no_load, tmp_path,
                                                                             monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = run(*args)
    assert res.exit_code == 2 and f"Invalid value for {name}: an empty string is not a path" in res.output, res.output
    assert list(tmp_path.iterdir()) == []


def test_trains_empty_paths_are_refused_together_before_anything_is_read_or_written(tmp_path, monkeypatch):
    """typer makes "" Path('.'): --out "" trained into the current folder, --data "" read all of it."""
    monkeypatch.chdir(tmp_path)
    res = run("train", "--out", "", "--target", "", "--data", "x.txt", "--data", "", "--eval", "", "--features", "",
              "--from-draft", "", "--threads", "0")
    fix = "not a path: give one (./ names the current folder)"
    assert res.exit_code == 2, res.output
    for line in (f"--out is an empty string, {fix}", f"--target is an empty string, {fix}",
                 f"--data is given an empty string, {fix}", f"--eval is given an empty string, {fix}",
                 f"--features is an empty string, {fix}", f"--from-draft is an empty string, {fix}", "--threads"):
        assert line in res.output, (line, res.output)
    assert list(tmp_path.iterdir()) == []
