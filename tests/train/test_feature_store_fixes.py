"""Three fixes to the features store (review of 2026-11-27):

1. ``FeatureStore.batches`` gives every step exactly ``batch`` windows, filled across shards and across an epoch's
   end (it served one shard at a time: --batch 32 was capped at the 16 windows of a shard, and steps were ragged
   at shard ends), each window once per epoch, in a seeded order, ``start=`` landing on the batches an
   uninterrupted run sees; a store smaller than ``batch`` gives all of its windows every step.
2. ``target_fingerprint`` covers the weights' content (a sha256 of each weight file's header and a bounded sample
   of its bytes): a retrained target with weight files of the same names and sizes reused features made for the
   old one, and resumed a run started with it. An older record without the field is not compared on it.
3. ``labels_in(kept, ttt)`` counts the positions as the TTT loss reads them (step s: top[:, 1+s : 1+s+S-ttt]).
"""
import itertools
import json
import shutil

import pytest
import torch
from safetensors.torch import save_file

import draftsmith.train.features as F
import draftsmith.train.provenance as P
from draftsmith.testing import write_target
from draftsmith.train import Job, TrainConfig
from draftsmith.train.checks import TrainError
from draftsmith.train.features import META, FeatureStore, read_meta
from draftsmith.train.provenance import source_differences, target_fingerprint
from draftsmith.train.pipeline import run
from draftsmith.train.resume import run_changes


# ---------------------------------------------------------------------------------------------------- 1. batches

def make_store(folder, sizes, seq=6):
    """Shards of ``sizes`` windows; window w holds w in every position of ids, top and hidden (so each batch
    says which windows it holds, and that its features stayed row-aligned)."""
    folder.mkdir()
    (folder / META).write_text(json.dumps({"taps": [], "seq": seq, "per_shard": 16}))
    n = 0
    for s, k in enumerate(sizes):
        w = torch.arange(n, n + k, dtype=torch.int32)[:, None].expand(k, seq).contiguous()
        save_file({"ids": w, "top": w.clone(), "hidden": w[..., None].expand(k, seq, 4).float().contiguous()},
                  str(folder / f"shard-{s:05d}.safetensors"))
        n += k
    return FeatureStore(folder)


def windows(b) -> list[int]:
    ids = b["ids"][:, 0]
    assert torch.equal(b["ids"], ids[:, None].expand_as(b["ids"])) and torch.equal(b["top"], b["ids"])
    assert torch.equal(b["hidden"], b["ids"][..., None].expand_as(b["hidden"]).float())
    return ids.tolist()


def steps(store, batch, seed=0, start=0, n=8):
    return [windows(b) for b in itertools.islice(store.batches(batch, seed, start=start), n)]


@pytest.mark.parametrize("batch", [3, 5, 12, 16, 32])
def test_every_step_gets_exactly_batch_windows(tmp_path, batch):
    store = make_store(tmp_path / "f", [16, 16, 8])   # 40 windows; the last shard short, as extraction leaves it
    assert [len(w) for w in steps(store, batch, n=10)] == [batch] * 10


@pytest.mark.parametrize("batch", [3, 12, 32])
def test_each_epoch_serves_every_window_once_in_an_order_of_its_own(tmp_path, batch):
    store = make_store(tmp_path / "f", [16, 16, 8])
    served = sum(steps(store, batch, n=40 * 4 // batch + 1), [])
    epochs = [served[i: i + 40] for i in range(0, 4 * 40, 40)]
    assert all(sorted(e) == list(range(40)) for e in epochs)   # batches straddle an epoch's end, windows do not
    assert len({tuple(e) for e in epochs}) == 4


def test_the_order_is_deterministic_in_the_seed(tmp_path):
    store = make_store(tmp_path / "f", [16, 16, 8])
    assert steps(store, 12, seed=3) == steps(store, 12, seed=3) == steps(FeatureStore(tmp_path / "f"), 12, seed=3)
    assert steps(store, 12, seed=3) != steps(store, 12, seed=4)


@pytest.mark.parametrize("batch", [5, 12, 32])
@pytest.mark.parametrize("start", [1, 3, 4, 7, 11])
def test_start_gives_the_batches_an_uninterrupted_run_sees_from_there(tmp_path, batch, start):
    store = make_store(tmp_path / "f", [16, 16, 8])
    assert steps(store, batch, seed=2, start=start, n=4) == steps(store, batch, seed=2, n=start + 4)[start:]


def test_shards_are_read_lazily_one_at_a_time(tmp_path, monkeypatch):
    store = make_store(tmp_path / "f", [16, 16, 16, 8])
    loaded, real = [], F.load_file
    monkeypatch.setattr(F, "load_file", lambda path, *a, **k: (loaded.append(path), real(path, *a, **k))[1])
    it = store.batches(12, 0, start=9)   # 9 steps of 12 = 108 windows: 2 epochs of 56 less 4, unread
    windows(next(it))
    assert len(loaded) <= 2   # the shards this one batch spans, not those of the steps skipped
    loaded.clear()
    for _ in range(14):       # 3 epochs: each shard read once per epoch, when its windows come up
        windows(next(it))
    assert len(loaded) <= 3 * 4 + 1


@pytest.mark.parametrize("sizes", [[5, 3], [8]])
def test_a_store_smaller_than_batch_gives_all_of_it_every_step(tmp_path, sizes):
    store = make_store(tmp_path / "f", sizes)
    got = steps(store, 32, n=6)
    assert all(sorted(w) == list(range(8)) for w in got)   # each window once per step, never twice
    assert len({tuple(w) for w in got}) > 1                 # in each epoch's own order
    assert steps(store, 32, start=3, n=3) == got[3:]


def test_training_with_batch_above_a_shard_takes_that_many_windows(tiny, tmp_path, monkeypatch):
    """The reviewer's run: --batch 32 over 40 windows (shards of 16, 16, 8) took 16, 8, 16, ... windows a step."""
    import draftsmith.train.loop as L

    seen, real = [], L.ttt_losses
    monkeypatch.setattr(L, "ttt_losses", lambda model, b, *a, **k: (seen.append(len(b["ids"])),
                                                                    real(model, b, *a, **k))[1])
    run(make_job(tiny, tmp_path / "out", max_windows=40, config={"steps": 3, "batch": 32, "save_every": 3}),
        log=lambda m: None)
    assert seen == [32, 32, 32]


# ---------------------------------------------------------------------------------------------- 2. fingerprint

def make_job(tiny, out, **kw):
    cfg = TrainConfig(**{"steps": 1, "batch": 2, "lr": 3e-3, "save_every": 4, **kw.pop("config", {})})
    return Job(spec="eagle3-llama", target=kw.pop("target", tiny / "target"), out=out, data=[tiny / "data"],
               draft_vocab=96, seq=48, max_windows=kw.pop("max_windows", 8), eval_prompts=0, config=cfg, **kw)


@pytest.fixture(scope="module")
def retrained(tiny, tmp_path_factory):
    """The tiny target trained on: weights of other values, its files of the same names and sizes, the same
    config.json."""
    other = write_target(tmp_path_factory.mktemp("retrained") / "target", tokenizer=True, seed=1)
    for name in ("config.json", "tokenizer.json"):
        assert (other / name).read_bytes() == (tiny / "target" / name).read_bytes()
    assert (other / "model.safetensors").stat().st_size == (tiny / "target" / "model.safetensors").stat().st_size
    assert (other / "model.safetensors").read_bytes() != (tiny / "target" / "model.safetensors").read_bytes()
    return other


@pytest.fixture(scope="module")
def first(tiny, tmp_path_factory):
    """A 1-step run on the tiny target, its features inside it."""
    out = tmp_path_factory.mktemp("first") / "out"
    run(make_job(tiny, out), log=lambda m: None)
    return out


def test_the_fingerprint_tells_a_retrained_target_of_the_same_shape(tiny, retrained):
    old, new = target_fingerprint(tiny / "target"), target_fingerprint(retrained)
    assert {k: old[k] for k in ("config", "weights", "hidden_size")} == {k: new[k] for k in ("config", "weights",
                                                                                           "hidden_size")}
    assert old != new and old == target_fingerprint(shutil.copytree(tiny / "target", tiny.parent / "fp-moved"))
    assert source_differences({"target": old}, {"target": new}) == [
        "the target's weights differ in content (same files and sizes: a retrained target?)"]


def test_features_of_a_retrained_target_are_refused(tiny, retrained, first, tmp_path):
    for max_windows in (8, 0):
        with pytest.raises(TrainError, match=r"holds features made for another run: the target's weights differ in "
                                             r"content \(same files and sizes: a retrained target\?\); give a new "
                                             r"--features folder"):
            run(make_job(tiny, tmp_path / "out", target=retrained, features=first / "features",
                         max_windows=max_windows))
        assert not (tmp_path / "out").exists()


def test_a_run_started_with_another_target_of_the_same_shape_is_not_resumed(tiny, retrained, first, tmp_path):
    out = shutil.copytree(first, tmp_path / "resumed")
    with pytest.raises(TrainError, match=r"target .*: the run in .* was started with a target of another "
                                         r"config.json, weight files \(names, sizes or content\) or hidden size"):
        run(make_job(tiny, out, target=retrained, config={"steps": 2}))


def test_an_older_record_without_the_content_is_used_and_not_compared_on_it(tiny, retrained, first, tmp_path):
    old = {k: v for k, v in target_fingerprint(tiny / "target").items() if k != "content"}
    new = target_fingerprint(retrained)
    assert source_differences({"target": old}, {"target": new}) == []
    assert run_changes({"target": old, "target_folder": "t"}, {"target": new, "target_folder": "t"}, tmp_path) == []
    feats = shutil.copytree(first / "features", tmp_path / "feats")
    meta = json.loads((feats / META).read_text())
    assert "content" in meta["target"]
    (feats / META).write_text(json.dumps({**meta, "target": old}))
    assert read_meta(feats)["target"] == old
    run(make_job(tiny, tmp_path / "out", features=feats, max_windows=16), log=lambda m: None)
    assert json.loads((feats / META).read_text())["target"] == old   # what it was made from is not claimed


def safetensors_file(path, floats: int):
    """A safetensors file of one float32 tensor of ``floats`` zeros, written sparse (a big file costs no disk)."""
    head = json.dumps({"w": {"dtype": "F32", "shape": [floats], "data_offsets": [0, 4 * floats]}}).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(len(head).to_bytes(8, "little") + head)
        f.truncate(8 + len(head) + 4 * floats)


def poke(path, offset, data=b"\x01\x02\x03\x04"):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def test_the_fingerprint_reads_a_bounded_sample_of_a_big_file(tmp_path, monkeypatch):
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 64}')
    big = folder / "model.safetensors"
    safetensors_file(big, 256 << 20)   # 1 GiB
    size = big.stat().st_size
    read, real = [0], open

    class Counted:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

        def read(self, n=-1):
            data = self.f.read(n)
            read[0] += len(data)
            return data

        def __getattr__(self, name):
            return getattr(self.f, name)

    monkeypatch.setattr(P, "open", lambda *a, **k: Counted(real(*a, **k)), raising=False)
    before = target_fingerprint(folder)
    assert 0 < read[0] <= 4 << 20
    monkeypatch.undo()
    block = P.SAMPLE_ENDS + (size - 2 * P.SAMPLE_ENDS - P.SAMPLE_BLOCK) * 5 // (P.SAMPLE_BLOCKS - 1)
    for where in (block + 1000, 100, size - 100):   # a value changed in a sampled block, the first MiB, the last
        poke(big, where)
        now = target_fingerprint(folder)
        assert now["weights"] == before["weights"] and now["content"] != before["content"]
        before = now


def test_a_small_weight_file_is_hashed_whole(tmp_path):
    folder = tmp_path / "small"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    safetensors_file(folder / "model.safetensors", 600_000)   # 2.4 MB: under the sample's 2 MiB + blocks
    before = target_fingerprint(folder)
    for where in range(1 << 20, 2_400_000, 300_001):
        poke(folder / "model.safetensors", where)
        assert target_fingerprint(folder)["content"] != before["content"]
        before = target_fingerprint(folder)


# ---------------------------------------------------------------------------------------------------- 3. labels

def test_labels_in_counts_the_positions_each_ttt_step_reads(tmp_path):
    seq, ttt = 8, 3
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / META).write_text(json.dumps({"taps": [], "seq": seq, "per_shard": 16}))
    g = torch.Generator().manual_seed(0)
    tops = [torch.randint(0, 10, (k, seq), generator=g, dtype=torch.int32) for k in (16, 5)]
    for s, top in enumerate(tops):
        save_file({"ids": top, "top": top.clone(), "hidden": torch.zeros(len(top), seq, 4)},
                  str(folder / f"shard-{s:05d}.safetensors"))
    store, top, T = FeatureStore(folder), torch.cat(tops), seq - ttt
    for kept in (torch.tensor([3]), torch.tensor([0, 4, 7]), torch.arange(10)):
        read = [top[:, 1 + s: 1 + s + T] for s in range(ttt)]   # ttt.ttt_losses' labels, step by step
        assert store.labels_in(kept, ttt) == (sum(int(torch.isin(r, kept).sum()) for r in read), 21 * ttt * T)
    # a window whose target next token at position j is j: position 1 is read by step 0 alone, 3 by steps 0, 1
    # and 2 (each once), position 0 by none; of 3 * 5 reads
    one = tmp_path / "one"
    make_store(one, [1], seq=seq)
    pos = torch.arange(seq, dtype=torch.int32)[None]
    save_file({"ids": pos.clone(), "top": pos.clone(), "hidden": torch.zeros(1, seq, 4)},
              str(one / "shard-00000.safetensors"))
    one = FeatureStore(one)
    assert [one.labels_in(torch.tensor([j]), ttt) for j in (0, 1, 3, 7)] == [(0, 15), (1, 15), (3, 15), (1, 15)]
    assert one.labels_in(torch.tensor([3])) == (1, seq - 1)   # without ttt: each position past the first once
