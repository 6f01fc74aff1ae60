"""Mutation round 11c (train/checks.py, train/resume.py, train/feature_checks.py): the edges its surviving mutants
showed untested. TrainConfig and Job refuse a bool or a float where an integer is asked, a rate or decay of 0 or
infinity, a seed outside 0..2**32 - 1 and each Job count one below its bound, naming the field and the bound; a
window's least length follows ttt and self-distillation; a FIFO where trainer.pt should be is not opened; a features
folder that records windows but holds no shard is refused with --max-windows 0; a link loop in it is named; the
features folder is whole up to 300 characters in each refusal and its lists are cut at three names. The round's
preflight.py tests: test_preflight_kills_round11.py; limits.py's: test_limits_kills_round11.py."""
import math
import os
import threading
from types import SimpleNamespace

import pytest

from draftsmith.train import Job, TrainConfig
from draftsmith.train.checks import TrainError
from draftsmith.train.loop import STATE


def refusal(make, **kw) -> list[tuple[str, str]]:
    with pytest.raises(TrainError) as e:
        make(**kw)
    return e.value.problems


# checks.py: TrainConfig's bounds


@pytest.mark.parametrize("field, value", [("steps", True), ("batch", 2.5), ("ttt", False), ("save_every", 4.0)])
def test_an_integer_field_refuses_a_bool_or_a_float(field, value):
    assert refusal(TrainConfig, **{field: value}) == [(field, f"{value!r}: allowed an integer >= 1")]


@pytest.mark.parametrize("field", ["lr", "decay"])
@pytest.mark.parametrize("value", [True, 0, 0.0, -1.0, math.inf])
def test_a_rate_or_decay_refuses_a_bool_zero_or_less_or_infinity(field, value):
    assert refusal(TrainConfig, **{field: value}) == [(field, f"{value!r}: allowed a finite number > 0")]


@pytest.mark.parametrize("field", ["lr", "decay"])
def test_a_rate_or_decay_takes_any_small_positive_number(field):
    assert getattr(TrainConfig(**{field: 1e-9}), field) == 1e-9
    assert getattr(TrainConfig(**{field: 2}), field) == 2


@pytest.mark.parametrize("seed", [-1, 2**32, True, 1.0])
def test_a_seed_outside_0_to_2_32_is_refused(seed):
    assert refusal(TrainConfig, seed=seed) == [("seed", f"{seed!r}: allowed an integer from 0 to 2**32 - 1")]


def test_a_seed_of_0_or_2_32_minus_1_is_taken():
    assert TrainConfig(seed=0).seed == 0 and TrainConfig(seed=2**32 - 1).seed == 2**32 - 1


# checks.py: Job's bounds


def job(**kw) -> Job:
    return Job(spec="eagle3-llama", target=None, out="out", **kw)


@pytest.mark.parametrize("field, low", [("distill_batch", 1), ("eval_prompts", 0), ("eval_prompt_tokens", 1),
                                        ("eval_new_tokens", 1), ("prompts_per_doc", 1), ("self_distill", 0)])
def test_each_job_count_is_refused_one_below_its_bound_and_taken_at_it(field, low):
    assert getattr(job(**{field: low}), field) == low
    ((name, text),) = refusal(job, **{field: low - 1})
    assert name == field and text.startswith(f"{low - 1}: allowed an integer >= {low}")


@pytest.mark.parametrize("field", ["distill_batch", "eval_prompts", "eval_new_tokens"])
def test_a_job_count_refuses_a_bool_or_a_float(field):
    assert [name for name, _ in refusal(job, **{field: True})] == [field]
    assert [name for name, _ in refusal(job, **{field: 8.0})] == [field]


def test_a_window_holds_ttt_plus_1_tokens_and_4_when_self_distilling():
    one = TrainConfig(ttt=1)
    assert job(seq=2, config=one).seq == 2                           # ttt + 1 = 2
    assert refusal(job, seq=1, config=one) == [("seq", "1: allowed an integer >= 2 (ttt + 1)")]
    assert job(seq=4, self_distill=1, config=one).seq == 4           # its prompts are seq // 4 >= 1 tokens
    assert refusal(job, seq=3, self_distill=1, config=one) == [
        ("seq", "3: allowed an integer >= 4 (ttt + 1, and 4 to self-distill)")]
    assert job(seq=6, self_distill=1, config=TrainConfig(ttt=5)).seq == 6   # ttt + 1 above 4: it rules
    assert refusal(job, seq=5, self_distill=1, config=TrainConfig(ttt=5)) == [
        ("seq", "5: allowed an integer >= 6 (ttt + 1, and 4 to self-distill)")]


# resume.py


def test_a_fifo_where_trainer_pt_should_be_is_no_trainer_state_and_is_not_opened(tmp_path):
    """Opening a FIFO blocks until something writes to it: saved_state (which resume_problems reads) must tell it
    is no regular file first and answer None at once."""
    from draftsmith.train.resume import saved_state

    os.mkfifo(tmp_path / STATE)
    said = []
    reader = threading.Thread(target=lambda: said.append(saved_state(tmp_path)), daemon=True)
    reader.start()
    reader.join(3)
    if reader.is_alive():   # blocked in open(): give it a writer that closes at once, then fail
        os.close(os.open(tmp_path / STATE, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(3)
        pytest.fail("saved_state opened the FIFO in place of trainer.pt and blocked")
    assert said == [None]


# feature_checks.py


def shown(path) -> str:
    """A path as the messages show it: whole up to 300 characters, else cut in the middle to 299."""
    path = str(path)
    return path if len(path) <= 300 else path[:148] + "..." + path[-148:]


def path_of(base, n: int):
    """A path under ``base`` exactly ``n`` characters long (parts under the 255-character name limit)."""
    pad = n - len(str(base)) - 2
    path = base / ("a" * (pad // 2)) / ("b" * (pad - pad // 2))
    assert len(str(path)) == n
    return path


def features_job(tmp_path, feats, **kw):
    return SimpleNamespace(**{"features": feats, "out": tmp_path / "out", "max_windows": None, "seq": 48,
                              "target": tmp_path / "no-target", "config": SimpleNamespace(bf16=True), **kw})


def write_meta(feats, seq: int = 48) -> None:
    import json

    feats.mkdir(parents=True, exist_ok=True)
    (feats / "features.json").write_text(json.dumps({"taps": [1, 2, 3], "seq": seq, "per_shard": 16}))


def feature_problems(tmp_path, feats, **kw):
    from draftsmith.train.feature_checks import feature_problems

    return feature_problems(features_job(tmp_path, feats, **kw))


def test_max_windows_0_is_refused_with_no_shard_even_where_features_json_is(tmp_path):
    """0 trains on the features on disk alone: a features.json without a shard holds none."""
    feats = tmp_path / "feats"
    write_meta(feats)
    assert feature_problems(tmp_path, feats, max_windows=0) == [
        ("max_windows", f"0: no features in {feats} to train on (0 uses only the features already on disk)")]
    assert feature_problems(tmp_path, feats, max_windows=1) == []


@pytest.mark.parametrize("made", [False, True])
def test_max_windows_0_is_refused_on_a_new_features_folder_and_1_is_not(tmp_path, made):
    feats = tmp_path / "feats"
    if made:
        feats.mkdir()
    ((field, text),) = feature_problems(tmp_path, feats, max_windows=0)
    assert field == "max_windows" and text.startswith(f"0: no features in {feats} to train on")
    assert feature_problems(tmp_path, feats, max_windows=1) == []
    assert feature_problems(tmp_path, feats, max_windows=None) == []


def test_a_link_loop_in_the_features_folder_is_named_as_foreign(tmp_path):
    """A link whose target cannot be resolved (a loop) is no folder draftsmith writes: named, not set aside as if
    it were --out."""
    feats = tmp_path / "feats"
    feats.mkdir()
    (feats / "loop").symlink_to(feats / "loop")
    ((field, text),) = feature_problems(tmp_path, feats)
    assert field == "features" and text.startswith(f"{feats} holds loop, which no extraction wrote")


def test_foreign_names_are_listed_three_at_most_each_cut_past_120_characters(tmp_path):
    feats = tmp_path / "feats"
    feats.mkdir()
    names = ["a" * 120, "b" * 121, "c.txt", "d.txt"]
    for name in names:
        (feats / name).write_text("mine")
    ((_, text),) = feature_problems(tmp_path, feats)
    assert text.startswith(f"{feats} holds {'a' * 120}, {'b' * 58}...{'b' * 58}, c.txt and 1 more, which no "
                           "extraction wrote")


def test_shards_without_features_json_are_listed_three_at_most_each_cut_past_80_characters(tmp_path):
    feats = tmp_path / "feats"
    feats.mkdir()
    names = [f"shard-{c * n}.safetensors" for c, n in (("a", 62), ("b", 63), ("c", 1), ("d", 1))]
    assert [len(n) for n in names[:2]] == [80, 81]
    for name in names:
        (feats / name).write_bytes(b"")
    ((_, text),) = feature_problems(tmp_path, feats)
    cut = names[1][:38] + "..." + names[1][-38:]
    assert text.startswith(f"{feats} holds 4 feature shards ({names[0]}, {cut}, {names[2]} and 1 more) but no "
                           "features.json")


@pytest.mark.parametrize("n", [300, 301])
def test_the_features_folder_is_named_whole_up_to_300_characters_in_each_refusal(tmp_path, n):
    feats = path_of(tmp_path, n)
    feats.parent.mkdir()
    feats.write_text("a file")                                        # not a folder
    assert feature_problems(tmp_path, feats) == [("features", f"{shown(feats)}: is not a folder")]
    feats.unlink()
    feats.mkdir()
    (feats / "notes.txt").write_text("mine")                          # the user's own
    ((_, text),) = feature_problems(tmp_path, feats)
    assert text.startswith(f"{shown(feats)} holds notes.txt, which")
    (feats / "notes.txt").unlink()
    (feats / "shard-00000.safetensors").write_bytes(b"")              # a shard, no features.json
    ((_, text),) = feature_problems(tmp_path, feats)
    assert text.startswith(f"{shown(feats)} holds 1 feature shard (shard-00000.safetensors) but no")
    (feats / "shard-00000.safetensors").unlink()
    assert feature_problems(tmp_path, feats, max_windows=0) == [   # nothing to train on
        ("max_windows", f"0: no features in {shown(feats)} to train on (0 uses only the features already on disk)")]
    write_meta(feats, seq=64)                                         # windows of another length
    assert feature_problems(tmp_path, feats) == [
        ("seq", f"48: {shown(feats)} holds features of 64-token windows; give seq 64 to resume, or another "
                "features folder")]
