"""Checkpoint listing and reading, and the layout round trip of invariant 22 (names and tensors, bit for bit)."""

import dataclasses
import json
import os
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from draftsmith.assembler import checkpoint
from draftsmith.assembler.checkpoint import list_tensors, read_tensors, save_safetensors
from draftsmith.components.weights import RegexRule, RuleSet

PROJ = ["q", "k", "v", "o"]
MLP = ["gate", "up", "down"]
EAGLE1 = (["fc.weight", "fc.bias", "layers.0.post_attention_layernorm.weight", "embed_tokens.weight"]
          + [f"layers.0.self_attn.{p}_proj.weight" for p in PROJ] + [f"layers.0.mlp.{p}_proj.weight" for p in MLP])
EAGLE3 = (["fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d"]
          + [f"midlayer.{n}.weight" for n in ("input_layernorm", "hidden_norm", "post_attention_layernorm")]
          + [f"midlayer.self_attn.{p}_proj.weight" for p in PROJ] + [f"midlayer.mlp.{p}_proj.weight" for p in MLP])
LAYOUTS = {"eagle1": (EAGLE1, RuleSet([])),
           "eagle3": (EAGLE3, RuleSet([RegexRule(match=r"^midlayer\.", replace="layers.0.")]))}
FIXED_DTYPES = {"d2t": torch.int64, "t2d": torch.bool}
FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn]


def random_tensor(gen: torch.Generator, shape, dtype) -> torch.Tensor:
    """Random bit patterns (NaNs and infs included), so equality is tested on bits, not values."""
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    nbytes = torch.Size(shape).numel() * dtype.itemsize
    raw = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=gen)
    return raw.view(dtype).reshape(shape)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.dtype == b.dtype and a.shape == b.shape
            and torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8)))


@st.composite
def layout_checkpoints(draw):
    layout = draw(st.sampled_from(sorted(LAYOUTS)))
    names, rules = LAYOUTS[layout]
    subset = draw(st.lists(st.sampled_from(names), unique=True, min_size=1))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    tensors = {}
    for name in subset:
        dtype = FIXED_DTYPES.get(name) or draw(st.sampled_from(FLOATS))
        shape = draw(st.lists(st.integers(0, 5), min_size=1, max_size=1 if name in FIXED_DTYPES else 2))
        tensors[name] = random_tensor(gen, shape, dtype)
    return rules, tensors


@given(layout_checkpoints())
def test_layout_to_canonical_and_back_is_the_identity(case):
    rules, tensors = case
    with tempfile.TemporaryDirectory() as tmp:
        save_safetensors(tensors, Path(tmp, "a"))
        infos = list_tensors(Path(tmp, "a"))
        assert {n: (i.shape, i.dtype) for n, i in infos.items()} == {
            n: (tuple(t.shape), t.dtype) for n, t in tensors.items()}
        mapping = rules.map_names(infos)  # injective on the layout's names, or this raises
        assert not any(c.startswith("midlayer.") for c in mapping)
        loaded = read_tensors(infos, [src for src, _ in mapping.values()])
        canonical = {c: loaded[src] for c, (src, _) in mapping.items()}
        back = {rules.from_canonical(c): t for c, t in canonical.items()}
        assert sorted(back) == sorted(tensors)  # names: A -> canonical -> A is the identity
        save_safetensors(back, Path(tmp, "b"))
        infos_b = list_tensors(Path(tmp, "b"))
        again = read_tensors(infos_b, infos_b)
    assert sorted(again) == sorted(tensors)
    for name, tensor in tensors.items():
        assert same_bits(again[name], tensor), name


def test_pytorch_model_bin_is_listed_through_weights_only_load(tmp_path, monkeypatch):
    state = {"fc.weight": torch.randn(4, 8), "d2t": torch.arange(3), "t2d": torch.tensor([True, False])}
    torch.save(state, tmp_path / "pytorch_model.bin")
    calls = []
    real_load = torch.load

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(checkpoint.torch, "load", spy)
    infos = list_tensors(tmp_path)
    assert {n: (i.shape, i.dtype) for n, i in infos.items()} == {
        "fc.weight": ((4, 8), torch.float32), "d2t": ((3,), torch.int64), "t2d": ((2,), torch.bool)}
    got = read_tensors(infos, ["t2d", "fc.weight"])
    assert list(got) == ["t2d", "fc.weight"] and all(torch.equal(got[n], state[n]) for n in got)
    assert calls and all(c.get("weights_only") is True and c.get("mmap") is True for c in calls)


class NotATensor:  # pickled by reference: only a full unpickler could rebuild it
    pass


def test_a_pickle_with_arbitrary_objects_is_refused(tmp_path):
    torch.save({"fc.weight": torch.zeros(2), "payload": NotATensor()}, tmp_path / "pytorch_model.bin")
    with pytest.raises(ValueError, match="holds pickled Python objects other than tensors, which draftsmith never "
                                         "loads: .*GLOBAL .*NotATensor") as info:
        list_tensors(tmp_path)
    assert "weights_only=False" not in str(info.value) and "Re-run" not in str(info.value)   # torch's advice
    assert "allowlist" not in str(info.value) and "safe_globals" not in str(info.value)   # nor its allowlisting


def test_sharded_bin_with_index(tmp_path):
    torch.save({"a": torch.ones(2)}, tmp_path / "pytorch_model-00001-of-00002.bin")
    torch.save({"b": torch.zeros(3, dtype=torch.int32)}, tmp_path / "pytorch_model-00002-of-00002.bin")
    (tmp_path / "training_args.bin").write_bytes(b"not weights")
    index = {"weight_map": {"a": "pytorch_model-00001-of-00002.bin", "b": "pytorch_model-00002-of-00002.bin"}}
    (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    infos = list_tensors(tmp_path)
    assert {n: i.file.name for n, i in infos.items()} == index["weight_map"]
    assert read_tensors(infos, ["b"])["b"].dtype == torch.int32
    with pytest.raises(dataclasses.FrozenInstanceError):  # a listing records the files; no consumer edits it
        infos["b"].shape = (4,)
    index["weight_map"]["c"] = "pytorch_model-00001-of-00002.bin"
    (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="pytorch_model-00001-of-00002.bin: .* does not hold: c$"):
        list_tensors(tmp_path)


def test_any_bin_files_without_index_except_training_args(tmp_path):
    torch.save({"a": torch.ones(2)}, tmp_path / "consolidated.bin")
    (tmp_path / "training_args.bin").write_bytes(b"not weights")  # a trainer's pickle beside the weights
    assert {n: i.file.name for n, i in list_tensors(tmp_path).items()} == {"a": "consolidated.bin"}


def test_sharded_safetensors_with_index(tmp_path):
    save_safetensors({"fc.weight": torch.randn(2, 4), "norm.weight": torch.ones(2)}, tmp_path,
                     "model-00001-of-00002.safetensors")
    save_safetensors({"lm_head.weight": torch.randn(3, 2)}, tmp_path, "model-00002-of-00002.safetensors")
    save_safetensors({"stray": torch.zeros(1)}, tmp_path, "stray.safetensors")  # not in the index: not listed
    weight_map = {"fc.weight": "model-00001-of-00002.safetensors", "norm.weight": "model-00001-of-00002.safetensors",
                  "lm_head.weight": "model-00002-of-00002.safetensors"}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    infos = list_tensors(tmp_path)
    assert {n: i.file.name for n, i in infos.items()} == weight_map
    assert infos["lm_head.weight"].shape == (3, 2)
    assert read_tensors(infos, ["norm.weight"])["norm.weight"].tolist() == [1.0, 1.0]
    weight_map["extra"] = "model-00003-of-00003.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(FileNotFoundError, match=r"that are not in .*: model-00003-of-00003\.safetensors$"):
        list_tensors(tmp_path)
    weight_map["extra"] = "model-00002-of-00002.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(ValueError, match="does not hold: extra"):
        list_tensors(tmp_path)


def test_any_safetensors_files_without_index(tmp_path):
    save_safetensors({"layers.0.attention.wq.weight": torch.zeros(2, 2)}, tmp_path, "consolidated.safetensors")
    save_safetensors({"fc.weight": torch.zeros(2, dtype=torch.float8_e4m3fn)}, tmp_path, "extra.safetensors")
    infos = list_tensors(tmp_path)
    assert infos["fc.weight"].dtype == torch.float8_e4m3fn and len(infos) == 2
    save_safetensors({"fc.weight": torch.zeros(1)}, tmp_path, "dup.safetensors")
    with pytest.raises(ValueError, match="'fc.weight' is in both"):
        list_tensors(tmp_path)


def test_a_folder_without_weights_names_what_was_looked_for(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError) as info:
        list_tensors(tmp_path)
    for part in (str(tmp_path), "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"):
        assert part in str(info.value)


def non_utf8(folder: Path, name: bytes) -> Path:
    """``folder / name`` for a name that is not UTF-8, as Python sees it (a lone surrogate); skipped where the file
    system refuses such names (macOS)."""
    path = Path(os.fsdecode(os.fsencode(folder) + b"/" + name))
    try:
        path.mkdir()
    except OSError:
        pytest.skip("this file system takes no name that is not UTF-8")
    path.rmdir()
    return path


def test_a_checkpoint_named_in_bytes_that_are_not_utf8_is_refused_by_name(tmp_path):
    """safetensors and torch's memory map open UTF-8 paths only: such a folder or file is refused for its name,
    not reported as an unreadable safetensors file."""
    from draftsmith.errors import CheckpointError, CheckpointNotFound

    folder = non_utf8(tmp_path, b"\xff")
    save_safetensors({"fc.weight": torch.zeros(2)}, tmp_path / "ok").rename(tmp_path / "ok" / "m.safetensors")
    (tmp_path / "ok").rename(folder)
    with pytest.raises(CheckpointNotFound) as info:
        list_tensors(folder)
    assert str(info.value) == (f"checkpoint folder {folder} has a name that is not valid UTF-8 (b'\\xff'); "
                               "safetensors and torch open only UTF-8 paths: rename it")
    shard = tmp_path / "shard"
    shard.mkdir()
    save_safetensors({"fc.weight": torch.zeros(2)}, shard).rename(non_utf8(shard, b"\xfe.safetensors"))
    utf8_only = r"\(b'\\xfe.safetensors'\); safetensors and torch open only UTF-8"
    with pytest.raises(CheckpointError, match=utf8_only) as info:
        list_tensors(shard)
    assert "not a readable safetensors file" not in str(info.value)


def test_read_tensors_refuses_unknown_names_and_save_copies_views(tmp_path):
    base = torch.arange(12.0).reshape(3, 4)
    path = save_safetensors({"row": base[1], "col": base[:, 0], "all": base}, tmp_path)
    assert path == tmp_path / "model.safetensors"
    infos = list_tensors(tmp_path)
    got = read_tensors(infos, infos)
    assert torch.equal(got["row"], base[1]) and torch.equal(got["col"], base[:, 0]) and torch.equal(got["all"], base)
    with pytest.raises(KeyError, match="nope"):
        read_tensors(infos, ["row", "nope"])
