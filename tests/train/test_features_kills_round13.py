"""Mutation round 13 (train/features.py): the edges its surviving mutants showed untested. features.json is read up
to exactly 65536 bytes, a dangling link in its place is refused, and its layout takes 0 .. 2**31 - 1 taps, a seq and
per_shard of 1 and every source key; shard_problem names two bad shards in the plural, checks a 2-D ids with no
features.json to compare against, and takes a shard without aux when there are no taps; extract writes ceil(N /
per_shard) shards of int32 ids and top and bfloat16 features into a folder it makes, reports each shard it writes,
keeps the complete ones on a resume, records the source only for a target given and never claims one for an older
record; extract_with_log logs every tenth shard and the last; FeatureStore needs both shards and features.json,
serves epoch e in the order seeded by seed * 1000 + e, and ``batches`` starts at step 0 unless told otherwise.
A stand-in target (ids in, ids + 1 out) keeps it fast and every value known."""
import itertools
import json
import os
import re
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file

import draftsmith.train.features as F
from draftsmith.errors import NotFound, short_text
from draftsmith.train.checks import TrainError
from draftsmith.train.features import (META, FeatureStore, extract, extract_with_log, read_meta, shard_problem,
                                       show)
from draftsmith.train.provenance import windows_digest

V, H = 10, 3
LAYOUT = {"taps": [], "seq": 6, "per_shard": 16}
FP = {"config": "c0ffee", "weights": {"model.safetensors": 1234}, "hidden_size": H,
      "content": {"model.safetensors": "abc123"}}


class Target(torch.nn.Module):
    """hidden[..., 0] = the id, hidden[..., 1] = the position; aux = the hidden state times tap + 1 per tap; the
    greedy next token is (id + 1) % V."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(()))

    def forward(self, ids, pos, mask, taps=()):
        h = torch.stack([ids.float(), pos.float(), torch.ones_like(ids, dtype=torch.float)], -1) + self.w
        return h, (torch.cat([h * (t + 1) for t in taps], -1) if taps else None)

    def logits(self, hidden):
        return torch.nn.functional.one_hot((hidden[..., 0].round().long() + 1) % V, V).float()


def fake_model(taps=(1, 3)):
    return SimpleNamespace(target=Target(), draft=SimpleNamespace(taps=taps))


def fake_wins(n, seq=6):
    return (torch.arange(n * seq) % V).view(n, seq)


def shards(folder):
    return sorted(folder.glob("shard-*.safetensors"))


def write_meta(folder, **meta):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / META).write_text(json.dumps({**LAYOUT, **meta}))
    return folder


def write_shard(path, k, seq=6, **shapes):
    """A shard of ``k`` windows of ids w (window w in every position), top and hidden, or of ``shapes``."""
    w = torch.arange(k, dtype=torch.int32)[:, None].expand(k, seq).contiguous()
    tensors = {"ids": w, "top": w.clone(), "hidden": w[..., None].expand(k, seq, 4).float().contiguous()}
    tensors.update({name: torch.zeros(*shape) for name, shape in shapes.items()})
    save_file(tensors, str(path))


# ---------------------------------------------------------------------------------------------------- read_meta

def test_a_features_json_of_exactly_65536_bytes_is_read_and_one_byte_more_is_refused(tmp_path):
    assert F.META_BYTES == 65536
    text = json.dumps(LAYOUT)
    (tmp_path / META).write_text(text + " " * (65536 - len(text)))
    assert read_meta(tmp_path) == LAYOUT
    (tmp_path / META).write_text(text + " " * (65537 - len(text)))
    with pytest.raises(TrainError, match="is over 65536 bytes, so not one draftsmith wrote; remove the folder"):
        read_meta(tmp_path)


def test_a_dangling_link_in_place_of_features_json_is_refused_not_taken_for_none(tmp_path):
    os.symlink(tmp_path / "nowhere.json", tmp_path / META)
    with pytest.raises(TrainError, match=f"{re.escape(str(tmp_path / META))} is not a regular file"):
        read_meta(tmp_path)
    assert read_meta(tmp_path / "missing") is None


@pytest.mark.parametrize("error, why", [(PermissionError(13, "Permission denied"), "Permission denied"),
                                        (OSError(), "OSError"), (OSError(5, "x" * 100), "x" * 100),
                                        (OSError(5, "x" * 101), "x" * 48 + "..." + "x" * 48)])
def test_a_features_json_that_cannot_be_read_is_named_with_why(tmp_path, monkeypatch, error, why):
    write_meta(tmp_path)
    real = type(tmp_path).open

    def refuse(self, *a, **k):
        if self.name == META:
            raise error
        return real(self, *a, **k)

    monkeypatch.setattr(type(tmp_path), "open", refuse)
    with pytest.raises(TrainError) as e:
        read_meta(tmp_path)
    assert str(e.value) == f"{tmp_path / META} cannot be read ({why})"


@pytest.mark.parametrize("meta", [{"taps": [0, 2**31 - 1]}, {"seq": 1, "per_shard": 1}, {"seq": 2**31 - 1},
                                  {"target": FP, "windows": "ab", "bf16": False, "distill": None}])
def test_the_layouts_edges_and_every_source_key_are_taken(tmp_path, meta):
    write_meta(tmp_path, **meta)
    assert read_meta(tmp_path) == {**LAYOUT, **meta}


@pytest.mark.parametrize("meta", [{"taps": [-1]}, {"taps": [2**31]}, {"taps": [True]}, {"seq": 0}, {"seq": 2**31},
                                  {"per_shard": 0}, {"per_shard": False}, {"other": 1}, {"bf16": 1}])
def test_a_layout_past_an_edge_is_refused(tmp_path, meta):
    write_meta(tmp_path, **meta)
    with pytest.raises(TrainError, match="is not of the form"):
        read_meta(tmp_path)


# ------------------------------------------------------------------------------------------------ shard_problem

def test_two_bad_shards_are_named_in_the_plural(tmp_path):
    write_meta(tmp_path)
    write_shard(tmp_path / "shard-00000.safetensors", 2)
    (tmp_path / "shard-00001.safetensors").write_bytes(b"garbage")
    write_shard(tmp_path / "shard-00002.safetensors", 2, hidden=(3, 6, 4))
    said = shard_problem(tmp_path, read_meta(tmp_path))
    assert said.startswith(f"{tmp_path} holds 2 shards training cannot read: shard-00001.safetensors (not "
                           "safetensors: ")
    assert said.endswith(", shard-00002.safetensors (its features differ in row count or window length); remove "
                         "them (extraction writes them again) or give another features folder")


def test_without_features_json_a_shard_needs_2_d_ids_of_any_length(tmp_path):
    write_shard(tmp_path / "shard-00000.safetensors", 2, seq=5)
    assert shard_problem(tmp_path, None) is None
    write_shard(tmp_path / "shard-00000.safetensors", 2, ids=(2,))
    assert shard_problem(tmp_path, None) == (f"{tmp_path} holds 1 shard training cannot read: shard-00000.safetensors"
                                             " (ids of shape [2], not [windows, seq]); remove it (extraction writes it"
                                             " again) or give another features folder")


def test_a_shard_needs_no_aux_without_taps_and_aux_with_them(tmp_path):
    write_meta(tmp_path)
    write_shard(tmp_path / "shard-00000.safetensors", 2)
    assert shard_problem(tmp_path, read_meta(tmp_path)) is None
    assert "(no aux)" in shard_problem(tmp_path, {**LAYOUT, "taps": [1]})


def test_four_bad_shards_name_three_each_cut_at_200_characters(tmp_path):
    write_meta(tmp_path / "four")
    for i in range(4):
        write_shard(tmp_path / "four" / f"shard-{i:05d}.safetensors", 2, ids=(2, 5))
    said = shard_problem(tmp_path / "four", LAYOUT)
    assert said.count("(ids of shape [2, 5], not [windows, 6])") == 3 and " and 1 more; remove them" in said
    write_meta(tmp_path / "long")
    write_shard(tmp_path / "long" / ("shard-" + "0" * 230 + ".safetensors"), 2, ids=(2, 5))
    said = shard_problem(tmp_path / "long", LAYOUT)
    entry = said.split("training cannot read: ")[1].split("; remove it")[0]
    # cut in the middle to at most 200: two halves of 98 around "..." (a limit of 199 cuts the same; 201 does not)
    assert len(entry) == 199 and "..." in entry
    assert entry.endswith(".safetensors (ids of shape [2, 5], not [windows, 6])")


def test_show_cuts_the_taps_at_120_characters():
    taps = [10 ** 18 + i for i in range(6)]        # repr: 126 characters
    shown = show({"taps": taps, "seq": 6, "per_shard": 16})
    cut = shown.split(", 'seq'")[0].removeprefix("{'taps': ")
    assert len(cut) == 120 and cut.endswith("...") and shown.endswith(", 'seq': 6, 'per_shard': 16}")
    assert show({"taps": [1, 2], "seq": 6, "per_shard": 16}) == "{'taps': [1, 2], 'seq': 6, 'per_shard': 16}"


def test_a_shard_whose_features_are_shorter_than_its_windows_is_named(tmp_path):
    write_meta(tmp_path)
    write_shard(tmp_path / "shard-00000.safetensors", 2, top=(2, 5), hidden=(2, 5, 4))
    said = shard_problem(tmp_path, read_meta(tmp_path))
    assert said is not None and "shard-00000.safetensors" in said


# ------------------------------------------------------------------------------------------------------ extract

def test_extract_writes_every_window_once_in_shards_of_per_shard(tmp_path):
    wins, calls = fake_wins(5), []
    folder = tmp_path / "a" / "b"   # made, parents too
    assert extract(fake_model(), wins, folder, per_shard=2, batch=1, on_shard=lambda *a: calls.append(a)) == 5
    assert calls == [(1, 3), (2, 3), (3, 3)]
    assert json.loads((folder / META).read_text()) == {"taps": [1, 3], "seq": 6, "per_shard": 2}
    got = [load_file(str(p)) for p in shards(folder)]
    assert [len(t["ids"]) for t in got] == [2, 2, 1]
    t = {k: torch.cat([g[k] for g in got]) for k in got[0]}
    assert t["ids"].dtype == t["top"].dtype == torch.int32 and t["hidden"].dtype == t["aux"].dtype == torch.bfloat16
    assert torch.equal(t["ids"], wins.int()) and torch.equal(t["top"], (wins.int() + 1) % V)
    assert torch.equal(t["hidden"][..., 0].long(), wins) and torch.equal(t["hidden"][..., 1], torch.arange(6.)[None]
                                                                         .expand(5, 6).bfloat16())
    assert t["aux"].shape == (5, 6, 2 * H) and torch.equal(t["aux"][..., H:], 4 * t["hidden"])


def test_a_resume_keeps_complete_shards_and_extracts_a_short_last_one_again(tmp_path):
    wins, calls = fake_wins(5), []
    assert extract(fake_model(), wins, tmp_path, per_shard=2, limit=3) == 3
    assert [len(load_file(str(p))["ids"]) for p in shards(tmp_path)] == [2, 1]
    assert extract(fake_model(), wins, tmp_path, per_shard=2, on_shard=lambda *a: calls.append(a)) == 5
    assert calls == [(2, 3), (3, 3)]
    calls.clear()
    assert extract(fake_model(), wins, tmp_path, per_shard=2, on_shard=lambda *a: calls.append(a)) == 5
    assert calls == []


def test_the_default_shard_holds_16_windows(tmp_path):
    assert extract(fake_model(()), fake_wins(17), tmp_path) == 17
    assert [len(load_file(str(p))["ids"]) for p in shards(tmp_path)] == [16, 1]
    assert "aux" not in load_file(str(shards(tmp_path)[0]))


def test_the_source_is_recorded_only_for_a_target_given(tmp_path):
    wins = fake_wins(3)
    extract(fake_model(), wins, tmp_path / "none")
    assert set(json.loads((tmp_path / "none" / META).read_text())) == {"taps", "seq", "per_shard"}
    extract(fake_model(), wins, tmp_path / "fp", target=FP)   # without bf16 autocast unless asked
    assert json.loads((tmp_path / "fp" / META).read_text()) == {
        "taps": [1, 3], "seq": 6, "per_shard": 16, "target": FP, "windows": windows_digest(wins), "bf16": False,
        "distill": None}


def test_an_older_record_is_not_claimed_and_a_target_without_content_keeps_none(tmp_path):
    old = write_meta(tmp_path / "old", taps=[1, 3])
    extract(fake_model(), fake_wins(3), old, target=FP)
    assert json.loads((old / META).read_text()) == {**LAYOUT, "taps": [1, 3]}
    bare = {k: v for k, v in FP.items() if k != "content"}
    older = write_meta(tmp_path / "older", taps=[1, 3], target=bare)
    extract(fake_model(), fake_wins(3), older, target=FP)
    assert json.loads((older / META).read_text())["target"] == bare
    whole = write_meta(tmp_path / "whole", taps=[1, 3], target=FP)
    extract(fake_model(), fake_wins(3), whole, target=FP)
    assert json.loads((whole / META).read_text())["target"] == FP


def test_extract_with_log_logs_every_tenth_shard_and_the_last(tmp_path):
    lines = []
    assert extract_with_log(fake_model(()), fake_wins(21, seq=2), tmp_path, lines.append, per_shard=1) == 21
    assert [line.rsplit(",", 1)[0] for line in lines] == ["features: shard 10/21", "features: shard 20/21",
                                                          "features: shard 21/21"]
    assert all(re.fullmatch(r"features: shard \d+/21, \d{1,2}s", line) for line in lines), lines


# ------------------------------------------------------------------------------------------------- FeatureStore

def test_the_store_needs_both_shards_and_features_json(tmp_path):
    write_meta(tmp_path / "no-shards")
    (tmp_path / "no-meta").mkdir()
    write_shard(tmp_path / "no-meta" / "shard-00000.safetensors", 2)
    for name in ("no-shards", "no-meta"):
        with pytest.raises(NotFound, match=f"no feature shards in {re.escape(str(tmp_path / name))}"):
            FeatureStore(tmp_path / name)


def make_store(folder, sizes, seq=6):
    write_meta(folder, seq=seq)
    n = 0
    for s, k in enumerate(sizes):
        w = torch.arange(n, n + k, dtype=torch.int32)[:, None].expand(k, seq).contiguous()
        save_file({"ids": w, "top": w.clone(), "hidden": torch.zeros(k, seq, 4)}, str(folder / f"shard-{s:05d}"
                                                                                          ".safetensors"))
        n += k
    return FeatureStore(folder)


def seeded_epoch(sizes, seed, epoch):
    """Epoch ``epoch``'s windows as resumed runs rely on: the shards in randperm order of a generator seeded with
    seed * 1000 + epoch, then each shard's rows in randperm order of the same generator."""
    g, starts = torch.Generator().manual_seed(seed * 1000 + epoch), [sum(sizes[:s]) for s in range(len(sizes))]
    return [starts[s] + r for s in torch.randperm(len(sizes), generator=g).tolist()
            for r in torch.randperm(sizes[s], generator=g).tolist()]


def test_each_epoch_is_served_in_the_order_its_seed_gives(tmp_path):
    sizes = [4, 3, 5]
    store = make_store(tmp_path / "f", sizes)
    it = store.batches(12, 7)   # one epoch a step
    for epoch in range(3):
        assert next(it)["ids"][:, 0].tolist() == seeded_epoch(sizes, 7, epoch)
    served = [w for b in itertools.islice(store.batches(5, 7), 8) for w in b["ids"][:, 0].tolist()]
    assert served == sum((seeded_epoch(sizes, 7, e) for e in range(4)), [])[:40]   # epochs turned inside a step


def test_batches_start_at_the_first_step_by_default(tmp_path):
    store = make_store(tmp_path / "f", [4, 3])
    first = next(store.batches(3, 1, start=0))["ids"]
    assert torch.equal(next(store.batches(3, 1))["ids"], first)


# ---------------------------------------------------------------------------------------- paths in refusals

def deep(tmp_path, length, ch):
    """A folder (made) whose path is ``length`` characters long."""
    folder = tmp_path / (ch * (length - len(str(tmp_path)) - 1))
    folder.mkdir()
    return folder


def refusal(call) -> str:
    with pytest.raises((TrainError, NotFound)) as e:
        call()
    return str(e.value)


@pytest.mark.parametrize("length", [300, 301])
def test_every_path_in_a_refusal_is_whole_up_to_300_characters(tmp_path, length):
    meta_dir = deep(tmp_path, length - len("/" + META), "m")
    (meta_dir / META).mkdir()                                  # read_meta: not a regular file
    other = write_meta(deep(tmp_path, length, "o"))            # made_for: other seq
    bad = write_meta(deep(tmp_path, length, "b"))              # shard_problem: garbage
    (bad / "shard-00000.safetensors").write_bytes(b"garbage")
    empty = write_meta(deep(tmp_path, length, "e"))            # FeatureStore: no shards
    said = {meta_dir / META: refusal(lambda: read_meta(meta_dir)),
            other: refusal(lambda: extract(fake_model(), fake_wins(1, seq=7), other)),
            bad: shard_problem(bad, read_meta(bad)),
            empty: refusal(lambda: FeatureStore(empty))}
    for size, ch in ((2, "s"), (3, "t")):   # the store emptied at a step's start, and within a step
        gone = deep(tmp_path, length, ch)
        store = make_store(gone, [size])
        it = store.batches(2, 0)
        next(it)
        os.remove(gone / "shard-00000.safetensors")
        said[gone] = refusal(lambda: next(it))
        assert said[gone] == f"no feature windows in {short_text(gone, 300)}"
    for path, text in said.items():
        assert len(str(path)) == length and short_text(path, 300) in text
        assert (str(path) in text) == (length == 300), text


# Survivors left, and why they are equivalent:
# - features.py:132 ``batch: int = 4`` -> 5 or 3: extract's batch only cuts a shard's windows into forwards; the
#   target reads each window alone (no padding, no cross-window attention), so the features are the same.
# - features.py:281 ``len(parts) == 1`` -> ``== 0``: a step of one part is then torch.cat of that one part, the same
#   tensors copied.
# - features.py:281 ``for key in parts[0]`` -> ``parts[1]``: every shard extract writes holds the same keys (ids,
#   hidden, top, and aux when there are taps), so the batch's keys are the same.
# - features.py:50 ``fh.read(META_BYTES + 1)`` -> ``+ 2``: one byte more read from a file past the limit is still
#   past it; the test above pins the limit itself at 65536 (one byte less read, ``+ 0``, is killed by it).
# The round found one bug: shard_problem compared the features' row counts only (``get_shape()[:1]``), so a shard
# whose top / hidden were shorter than its ids' windows was served; it compares [windows, seq] now
# (test_a_shard_whose_features_are_shorter_than_its_windows_is_named).
