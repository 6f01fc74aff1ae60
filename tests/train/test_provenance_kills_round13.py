"""Mutation round 13 on draftsmith/train/provenance.py, on its own functions (no training run): which records
features.json may hold (SOURCE), the content digest of a weight file (hashed whole up to exactly 3 MiB, else the
stated sample, a safetensors header within its bounds included), the fingerprint of a target folder, and the
comparisons of two records (each difference said exactly, only on the fields both state)."""
import hashlib
import json
import random

import pytest
import torch

from draftsmith.train.provenance import (SOURCE, content_digest, distill_differences, distill_record,
                                         source_differences, source_problem, target_changed, target_differences,
                                         target_fingerprint, windows_digest)

MIB = 1 << 20
BOUND = 2 * MIB + 16 * (1 << 16)      # the largest file hashed whole: 3 MiB


def target(**over):
    return {"config": "c", "weights": {"m.safetensors": 10}, "hidden_size": 8, "content": {"m.safetensors": "h"},
            **over}


@pytest.mark.parametrize(("record", "ok"), [
    (target(), True), ({k: v for k, v in target().items() if k != "content"}, True), (target(hidden_size=None), True),
    (target(content={}), True), (target(weights={}), True),
    (target(extra=1), False), ({"config": "c", "weights": {}, "content": {}}, False), ([], False),
    (target(config=1), False), (target(weights=[]), False), (target(weights={1: 10}), False),
    (target(weights={"m": "10"}), False), (target(hidden_size="8"), False), (target(content=None), False),
    (target(content={1: "h"}), False), (target(content={"m": 1}), False),
])
def test_a_target_record_is_taken_only_in_its_shape(record, ok):
    # catches provenance.py:19-26: each `and`/`or` swapped, == -> !=, set - -> +, is None negated, the True of a
    # record without "content" -> False
    assert SOURCE["target"](record) is ok


def distill(**over):
    return {"tokens": "t", "seed": 0, "new_tokens": 2**32 - 1, "per_doc": 1, **over}


@pytest.mark.parametrize(("record", "ok"), [
    (None, True), (distill(), True), (distill(seed=-1), False), (distill(seed=2**32), False),
    (distill(per_doc=True), False), (distill(tokens=1), False), (distill(extra=1), False),
    ({"tokens": "t", "seed": 0, "new_tokens": 1}, False), ([], False), (distill(seed=1.0), False),
])
def test_a_distill_record_is_taken_only_in_its_shape(record, ok):
    # catches provenance.py:30-32: 0 <= n < 2**32 (each bound and constant), `not isinstance(n, bool)`, and/or
    assert SOURCE["distill"](record) is ok


def test_the_other_source_fields_are_a_string_and_a_boolean():
    assert SOURCE["windows"]("w") and not SOURCE["windows"](1)
    assert SOURCE["bf16"](False) and not SOURCE["bf16"](0)


def data(size, seed=0):
    return random.Random(seed).randbytes(size)


def sampled(raw, header=b""):
    """The digest content_digest states for a file over the bound: header, first MiB, 16 blocks, last MiB."""
    size, span = len(raw), len(raw) - 2 * MIB - (1 << 16)
    parts = [header, raw[:MIB]] + [raw[MIB + span * i // 15:][: 1 << 16] for i in range(16)] + [raw[size - MIB:]]
    return hashlib.sha256(b"".join(parts)).hexdigest()[:16]


def test_a_file_of_exactly_the_bound_is_hashed_whole_and_one_byte_more_is_sampled(tmp_path):
    # catches provenance.py:42-44 (each sample constant), :56-61 (the bound, its arithmetic, the seeks, the chunk
    # read as 0 << 20, the [:16]) and :65-70 (the span, the offsets of the blocks and ends)
    for size in (2 * MIB + 1, BOUND, BOUND + 1, BOUND + 12345):
        raw = data(size)
        path = tmp_path / "w.bin"
        path.write_bytes(raw)
        want = hashlib.sha256(raw).hexdigest()[:16] if size <= BOUND else sampled(raw)
        assert content_digest(path) == want, size


def safetensors_like(tmp_path, n, size, name="w.safetensors"):
    raw = n.to_bytes(8, "little") + data(size - 8)
    path = tmp_path / name
    path.write_bytes(raw)
    return path, raw


@pytest.mark.parametrize("n", [1000, BOUND + 4 * MIB - 8])
def test_a_safetensors_header_within_the_file_is_hashed_before_the_sample(tmp_path, n):
    # catches provenance.py:62-64 read(8) +-1, `and` -> `or`, <= -> <, size - 8 (+-1, -> +)
    path, raw = safetensors_like(tmp_path, n, BOUND + 4 * MIB)
    assert content_digest(path) == sampled(raw, raw[8:8 + n])
    assert content_digest(path.rename(tmp_path / "w.bin")) == sampled(raw)     # not a safetensors file: no header


def test_a_safetensors_file_of_exactly_the_bound_is_hashed_whole_without_its_header_again(tmp_path):
    # catches provenance.py:58 size <= bound -> < (at the bound the sample is the whole file, but the header is
    # hashed before it)
    path, raw = safetensors_like(tmp_path, 1000, BOUND)
    assert content_digest(path) == hashlib.sha256(raw).hexdigest()[:16]


def test_a_header_length_past_the_file_is_not_read(tmp_path):
    path, raw = safetensors_like(tmp_path, BOUND + 4 * MIB - 7, BOUND + 4 * MIB)
    assert content_digest(path) == sampled(raw)


def test_a_header_is_hashed_up_to_100_mib(tmp_path):
    # catches provenance.py:45 HEADER_BYTES = 100 << 20 (each constant +-1); sparse files: nothing big is written
    for n, hashed in ((100 << 20, True), ((100 << 20) + 1, False)):
        path = tmp_path / f"h{n}.safetensors"
        with open(path, "wb") as f:
            f.write(n.to_bytes(8, "little"))
            f.truncate(n + 8 + MIB)
        digest = content_digest(path)
        assert (digest != content_digest(path.rename(tmp_path / f"h{n}.bin"))) is hashed, n


def write_target(folder, config, files=("model.safetensors",)):
    folder.mkdir()
    (folder / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    for name in files:
        (folder / name).write_bytes(name.encode())
    return folder


@pytest.mark.parametrize(("config", "hidden"), [
    ({"hidden_size": 64}, 64), ({"text_config": {"hidden_size": 32}}, 32), ({"hidden_size": True}, None),
    ({"hidden_size": 64, "text_config": {"hidden_size": 32}}, 64), ({"text_config": [1]}, None), ("[1]", None),
    ("{not json", None), ({"hidden_size": "64"}, None),
])
def test_the_fingerprint_reads_the_hidden_size_where_a_config_states_it(tmp_path, config, hidden):
    # catches provenance.py:89 `and` -> `or`, drop `not isinstance(hidden, bool)`
    folder = write_target(tmp_path / "t", config)
    raw, weights = (folder / "config.json").read_bytes(), folder / "model.safetensors"
    assert target_fingerprint(folder) == {"config": hashlib.sha256(raw).hexdigest()[:16],
                                          "weights": {"model.safetensors": 17}, "hidden_size": hidden,
                                          "content": {"model.safetensors": content_digest(weights)}}


def test_the_fingerprint_lists_the_weight_files_only(tmp_path):
    # catches provenance.py:87 `and` -> `or` (a folder named as a weight file, a file of another suffix)
    folder = write_target(tmp_path / "t", {}, files=("b.bin", "a.pt", "notes.txt", "x.gguf.txt"))
    (folder / "dir.safetensors").mkdir()
    fp = target_fingerprint(str(folder))
    assert fp["weights"] == {"a.pt": 4, "b.bin": 5} and list(fp["content"]) == ["a.pt", "b.bin"]
    assert len(fp["config"]) == 16


def test_target_changed_compares_the_fields_both_state():
    # catches provenance.py:96-98 (drop `not`, `and` -> `or`, != -> ==, & -> |)
    old = {k: v for k, v in target().items() if k != "content"}
    assert not target_changed(target(), target()) and not target_changed(old, target(content={"x": "y"}))
    assert target_changed(target(), target(config="d")) and target_changed(old, target(hidden_size=9))
    assert target_changed(None, target()) and not target_changed(None, None) and target_changed(target(), "x")


def test_each_target_difference_is_said():
    # catches provenance.py:105-113 (each != negated, the content comparison's `and`s and `in`s)
    old = {k: v for k, v in target().items() if k != "content"}
    assert target_differences(target(), target()) == []
    assert target_differences(old, target(content={"x": "y"})) == []
    assert target_differences(target(), old) == []
    assert target_differences(target(hidden_size=4), target()) == [
        "they are of a target of hidden size 4, this one's is 8"]
    assert target_differences(target(config="d"), target()) == ["the target's config.json differs"]
    assert target_differences(target(content={"m.safetensors": "g"}), target()) == [
        "the target's weights differ in content (same files and sizes: a retrained target?)"]
    assert target_differences(target(weights={"m.safetensors": 11}, content={}), target()) == [
        "the target's weight files differ ({'m.safetensors': 11}, now {'m.safetensors': 10})"]


@pytest.mark.parametrize("n", [80, 81])
def test_the_weight_files_are_quoted_whole_up_to_80_characters(n):
    # catches provenance.py:110-111 short(..., 80) -> 79 / 81
    weights = {"w" * (n - 7): 1}          # repr: {'www...': 1}
    assert len(repr(weights)) == n
    shown = repr(weights) if n <= 80 else repr(weights)[:77] + "..."
    for found, want, said in ((weights, {"a": 1}, f"{shown}, now {{'a': 1}}"),
                              ({"a": 1}, weights, f"{{'a': 1}}, now {shown}")):
        assert target_differences(target(weights=found), target(weights=want)) == [
            f"the target's weight files differ ({said})"]


def test_windows_digest_reads_the_ids_as_int64():
    # catches provenance.py:120 [:16] +-1
    ids = torch.tensor([[1, 2], [3, 4]], dtype=torch.int32)
    want = hashlib.sha256(torch.tensor([[1, 2], [3, 4]]).numpy().tobytes()).hexdigest()[:16]
    assert windows_digest(ids) == want == windows_digest(ids.t().contiguous().t().to(torch.int64))
    assert distill_record(ids, 1, 2, 3) == {"tokens": want, "seed": 1, "new_tokens": 2, "per_doc": 3}


def test_each_distill_difference_is_said_in_order():
    # catches provenance.py:132-138
    want = distill(seed=5, new_tokens=7, per_doc=3)
    assert distill_differences(None, want) == ["they were made without self-distillation, this run has "
                                               "--self-distill 7"]
    assert distill_differences(want, want) == []
    assert distill_differences(distill(tokens="u", seed=6, new_tokens=8, per_doc=4), want) == [
        "they were self-distilled with --self-distill 8, this run has 7",
        "they were self-distilled with --prompts-per-doc 4, this run has 3",
        "they were self-distilled with --seed 6, this run has 5",
        "they were self-distilled from other text (other --data or tokenizer)"]


def source(**over):
    return {"target": target(), "windows": "w", "distill": None, "bf16": True, **over}


def test_each_source_difference_is_said_only_where_both_state_it():
    # catches provenance.py:147-154: each `and` -> `or`, each `is not None` / `in` / != negated
    assert source_differences(source(), source()) == []
    assert source_differences({}, source()) == [] and source_differences(source(), {}) == []
    nones = {"target": None, "windows": None, "bf16": None}
    assert source_differences(nones, source()) == [] and source_differences(source(), nones) == []
    assert source_differences(source(target=target(config="d")), source()) == ["the target's config.json differs"]
    assert source_differences(source(windows="v"), source()) == [
        "the token windows differ (other --data, tokenizer, --seed or --self-distill)"]
    assert source_differences(source(bf16=False), source()) == [
        "they were extracted with --no-bf16, this run has --bf16"]
    assert source_differences(source(), source(distill=distill())) == [
        "they were made without self-distillation, this run has --self-distill 4294967295"]
    assert source_differences({"bf16": True}, source(distill=distill())) == []    # an older record: not compared
    assert source_differences(source(distill=distill()), source(distill=None)) == []


@pytest.mark.parametrize("n", [300, 301])
def test_source_problem_names_the_folder_up_to_300_characters(tmp_path, n):
    # catches provenance.py:160 (`or` -> `and`, is None negated, drop `not`) and :162 short_text(folder, 300) +-1
    folder = "/" + "f" * (n - 1)
    shown = folder if n <= 300 else folder[:148] + "..." + folder[-148:]
    assert source_problem(folder, None, source()) is None and source_problem(folder, source(), source()) is None
    assert source_problem(folder, source(windows="v"), source()) == (
        "features", f"{shown} holds features made for another run: the token windows differ (other --data, "
                    "tokenizer, --seed or --self-distill); give a new --features folder (or remove this one: its "
                    "features are then extracted again)")


# Equivalent mutants (left alive on purpose):
# - provenance.py:59 `f.read(1 << 20)` -> `2 << 20`, `1 << 21`, `1 << 19`: the chunk size of a whole-file read
#   changes no byte fed to sha256 (`0 << 20`, which reads nothing, is killed above).
