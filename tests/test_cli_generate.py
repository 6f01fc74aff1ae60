"""The `draftsmith` command, the verbs that run a pair (in-process with typer's CliRunner): generate (its warm-up,
speed table and step costs, a detected spec, --token-ids and --prompt refused as they should be), train and doctor
(a missing --device said once, before anything is read; a cached target by name; the folders a spec names), bench's
scale options without --scale, a cached target found once fetched. validate, list, inspect: test_cli.py."""
import re

import pytest
import torch

from draftsmith.errors import DraftsmithError

from test_cli import eagle3_pair, run  # noqa: F401  (a target of 8 layers and its EAGLE-3 draft; the CliRunner)


# --- generate -------------------------------------------------------------------------------------------------------

def test_generate_warms_up_each_row_then_compares_speeds(monkeypatch):
    from draftsmith.decoding.model import SpeculativeModel

    calls = []
    for name in ("generate", "generate_baseline"):
        real = getattr(SpeculativeModel, name)
        monkeypatch.setattr(SpeculativeModel, name,
                            lambda self, p, *a, _real=real, _n=name, **kw: calls.append((_n, kw["max_new_tokens"]))
                            or _real(self, p, *a, **kw))
    res = run("generate", "--spec", "demo", "--max-new-tokens", "12", "--threads", "1")   # auto would time runs too
    assert res.exit_code == 0, res.output
    assert [n for _, n in calls] == [8, 8, 8, 12, 12, 12]          # an untimed 8-token warm-up of every row first
    # name, tok/s, vs target-only, same as target-only
    row = r"│ (speculative v\d|chain v1|target only) +│.*?│ ([\d.]+) +│ ([\d.]+)x +│ (\w+)"
    rows = {m[0]: m for m in re.findall(row, res.stdout)}
    assert set(rows) == {"speculative v2", "chain v1", "target only"}, res.stdout
    base = float(rows["target only"][1])
    assert rows["target only"][2] == "1.00" and all(r[3] == "True" for r in rows.values())
    for _, tps, ratio, _ in rows.values():
        assert abs(float(ratio) - float(tps) / base) < 0.02    # tok/s over target-only's (both rounded)
    # under the table, each speculative row's step in target-only steps, its parts summing to it, and its tau
    cost = (r"(speculative v2|chain v1 \(topk=1\)): a step cost ([\d.]+) target-only decode steps \(verification "
            r"([\d.]+), draft forwards ([\d.]+), the rest (-?[\d.]+)\): faster than target-only where tau > \2 "
            r"\(this run: ([\d.]+)\)")
    costs = {m[0].split()[0]: m for m in re.findall(cost, " ".join(res.stdout.split()))}
    assert set(costs) == {"speculative", "chain"} and res.stdout.count("a step cost") == 2, res.stdout
    taus = dict(re.findall(r"│ (speculative|chain) v\d +│ ([\d.]+)", res.stdout))
    for name, (_, step, verify, draft, rest, tau) in costs.items():
        assert abs(float(verify) + float(draft) + float(rest) - float(step)) <= 0.02 and float(draft) > 0
        assert tau == taus[name]


def test_generate_detects_the_spec_of_a_draft_and_takes_token_ids(eagle3_pair):  # noqa: F811 (imported above)
    target, draft = eagle3_pair
    res = run("generate", "--target", target, "--draft", draft, "--token-ids", "1, 2,3", "--max-new-tokens", "4",
              "--no-compare")
    assert res.exit_code == 0, res.output
    assert "spec eagle3-llama (detected: " in res.stdout          # not the default smollm2 spec
    assert "prompt [1, 2, 3]" in res.stdout and "speculative v" in res.stdout
    assert "a step cost" not in res.stdout      # no target-only run to measure a step against


@pytest.mark.parametrize("ids", ["1,x", "", "-1", "1.5", "1,\u00b2"])
def test_generate_refuses_token_ids_that_are_not_ids(ids):
    res = run("generate", "--spec", "demo", "--token-ids", ids)
    assert res.exit_code == 2 and "token ids are integers >= 0 separated by commas" in res.output, res.output[:300]


def test_generate_refuses_a_token_id_too_long_to_be_one_in_a_short_message():
    res = run("generate", "--spec", "demo", "--token-ids", "9" * 5000)
    assert res.exit_code == 2 and "too large to be a token id" in res.output and len(res.output) < 400, res.output
    assert run("generate", "--spec", "demo", "--token-ids", "9" * 19).exit_code == 2   # past an int64's 18 digits


def test_generate_takes_the_prompt_once():
    res = run("generate", "--spec", "demo", "--token-ids", "1,2", "--prompt", "hi")
    assert res.exit_code == 2 and "--prompt and --token-ids both give the prompt: give one" in res.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("verb", ["train", "doctor"])
def test_train_and_doctor_refuse_a_missing_device_before_reading_anything(verb, tmp_path, monkeypatch):
    from draftsmith import hub

    monkeypatch.setattr(hub, "resolve", lambda *a, **k: pytest.fail("resolved the target before checking --device"))
    (tmp_path / "draft").mkdir()   # a missing DRAFT is said first (doctor checks the folders it is given at once)
    (tmp_path / "draft" / "config.json").write_text("{}")   # so is one without a config
    args = (["train", "--target", "smollm2", "--data", tmp_path / "nothing", "--out", tmp_path / "o"]
            if verb == "train" else ["doctor", "smollm2", tmp_path / "draft"])
    res = run(*args, "--device", "cuda")
    assert res.exit_code == 2, res.output   # both say 2 = bad input (train with its other options' problems)
    assert "device 'cuda'" in res.output and "Traceback" not in res.output
    assert res.output.count("device 'cuda'") == 1, res.output   # train said it twice (its CLI, then preflight)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_train_says_a_missing_device_beside_an_empty_out(tmp_path):
    # the empty path's early refusal came before preflight, the one --device check left (a review)
    res = run("train", "--target", "smollm2", "--data", tmp_path, "--out", "", "--device", "cuda")
    assert res.exit_code == 2, res.output
    assert "--device 'cuda'" in res.output and "--out is an empty string" in res.output, res.output


def test_doctor_takes_the_cached_target_by_name(tmp_path, monkeypatch):
    """`draftsmith doctor smollm2 DRAFT` (as `train --target smollm2`): the cached folder, not a path 'smollm2'."""
    from draftsmith import hub

    seen = []
    monkeypatch.setattr(hub, "resolve", lambda ref, console=None: seen.append(ref) or tmp_path / "cached")

    def diagnose(spec, target, draft, **kw):
        seen.append(target)
        raise DraftsmithError("stop here")   # bad input: said, exit 2

    monkeypatch.setattr("draftsmith.doctor.diagnose", diagnose)
    (tmp_path / "draft").mkdir()   # a missing DRAFT (or its config) is said before the target is looked up
    (tmp_path / "draft" / "config.json").write_text("{}")
    res = run("doctor", "smollm2", tmp_path / "draft", "--spec", "smollm2")
    assert seen == ["cache:smollm2", tmp_path / "cached"] and res.exit_code == 2, res.output


def test_doctor_and_train_take_the_folders_the_spec_names(tmp_path, monkeypatch):
    """`draftsmith doctor --spec demo` and `train --spec demo` without folders: the spec's checkpoints (as generate
    and assemble() take them); a spec that names none, or no spec and no DRAFT, is a one-line error (exit 2)."""
    from draftsmith import load_spec
    from draftsmith.assembler.folders import checkpoint_ref

    seen = []

    def stop(*args, **kwargs):   # records what the verb was given, and goes no further
        seen.append(args[0].target if len(args) == 1 else args)
        raise DraftsmithError("stop here")   # bad input: said, exit 2

    monkeypatch.setattr("draftsmith.doctor.diagnose", stop)
    assert run("doctor", "--spec", "demo").exit_code == 2 and seen == [("demo", None, None)]
    monkeypatch.setattr("draftsmith.train.run", stop)   # after preflight, which takes the spec's target
    (tmp_path / "data.txt").write_text("def f(x):\n    return x\n" * 50)
    res = run("train", "--spec", "demo", "--out", tmp_path / "o", "--data", tmp_path / "data.txt")
    demo_target = checkpoint_ref(load_spec("demo"), "target")
    assert seen and str(seen[-1]) == demo_target and seen[-1].is_dir(), res.output
    for args in (["train", "--spec", "eagle3-llama", "--out", tmp_path / "o"], ["doctor", tmp_path / "draft"]):
        res = run(*args)
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        assert ("names no checkpoints.target" if args[0] == "train" else "give TARGET and DRAFT") in res.output
    # a spec that does not load: its problem and the others, listed at once (the target cannot be taken from it)
    res = run("train", "--spec", tmp_path / "nope.yaml", "--out", tmp_path / "o", "--data", tmp_path / "missing")
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "--spec" in said and "--target not given" in said and "--data" in said, said


# --- bench ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, named", [(["--out", "x"], "--out"), (["--no-hf", "--batches", "1"],
                                                                      "--batches, --hf/--no-hf")])
def test_bench_refuses_the_scale_options_without_scale(args, named, monkeypatch):
    import draftsmith.bench

    monkeypatch.setattr(draftsmith.bench, "run_bench", lambda *a, **k: pytest.fail("ran the benchmark"))
    res = run("bench", *args)
    assert res.exit_code == 2 and f"error: {named}: options of the scale benchmark; add --scale" in res.output, \
        res.output


def test_a_cached_target_is_found_only_once_fetched(tmp_path, monkeypatch):
    from draftsmith import hub

    monkeypatch.setenv("DRAFTSMITH_CACHE", str(tmp_path))
    assert hub.fetched("cache:smollm2") is None and hub.fetched("cache:nosuch") is None
    folder = hub.target_dir(hub.SOURCES["smollm2"])
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    assert hub.fetched("cache:smollm2") == folder
