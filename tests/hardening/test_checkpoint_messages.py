"""A damaged checkpoint's message names the file and the fault that is there: the tokenizer file transformers
could not read (its own error does not say which), a config that is a broken link, a .bin that is a trainer's
nested checkpoint or no zip-format torch file, a size of thousands of digits quoted short, an FP8 weight stored
as a wider float (found by a dogfooding helper)."""
import json
import os
import pickle

import pytest
import torch

import draftsmith
from draftsmith.assembler.checkpoint import list_tensors
from draftsmith.assembler.config import read_raw_config
from draftsmith.errors import CheckpointError, CheckpointNotFound
from draftsmith.testing import edit_config, write_byte_tokenizer

from hardening_helpers import copy_folder, refused


def test_the_tokenizer_file_transformers_cannot_read_is_the_one_named(tiny_pair, tmp_path):
    target = copy_folder(tiny_pair[0], tmp_path / "t")
    write_byte_tokenizer(target)
    (target / "tokenizer_config.json").write_text("[]")   # tokenizer.json is fine, and listed first
    with refused(kind=CheckpointError) as r:
        draftsmith.assemble("eagle3-llama", target=target, draft=tiny_pair[1])
    assert str(r.value).startswith(f"{target / 'tokenizer_config.json'}: transformers cannot read the tokenizer")


def test_a_tokenizer_file_that_starts_with_a_bom_is_the_one_named(tiny_pair, tmp_path):
    """Python's json reads a byte-order mark from bytes, transformers does not: the intact tokenizer.json was named
    for tokenizer_config.json's mark (a bad-input hunt, 2026-12-01)."""
    target = copy_folder(tiny_pair[0], tmp_path / "t")
    write_byte_tokenizer(target)
    said = target / "tokenizer_config.json"
    said.write_bytes(b"\xef\xbb\xbf" + said.read_bytes())
    with refused(kind=CheckpointError) as r:
        draftsmith.assemble("eagle3-llama", target=target, draft=tiny_pair[1])
    assert str(r.value).startswith(f"{said}: transformers cannot read the tokenizer"), str(r.value)


def test_a_tokenizer_key_transformers_misses_is_said_as_one(tiny_pair, tmp_path):
    """transformers' KeyError said its key alone ("...cannot read the tokenizer: 'added_tokens'"; a bad-input hunt,
    2026-12-01)."""
    target = copy_folder(tiny_pair[0], tmp_path / "t")
    write_byte_tokenizer(target)
    (target / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "Nope"}}))
    with refused(kind=CheckpointError) as r:
        draftsmith.assemble("eagle3-llama", target=target, draft=tiny_pair[1])
    assert str(r.value).startswith(f"{target}") and ": transformers cannot read the tokenizer: it lacks the key '" \
        in str(r.value), str(r.value)


def test_a_target_config_that_starts_with_a_bom_is_said_to(tiny_pair, tmp_path):
    """A target's config.json with a UTF-8 byte-order mark: draftsmith reads past it, transformers does not; it was
    said as "not a valid JSON file" (a bad-input hunt, 2026-12-01)."""
    target = copy_folder(tiny_pair[0], tmp_path / "t")
    said = target / "config.json"
    said.write_bytes(b"\xef\xbb\xbf" + said.read_bytes())
    with refused(kind=CheckpointError) as r:
        draftsmith.assemble("eagle3-llama", target=target, draft=tiny_pair[1])
    assert str(r.value) == (f"{said}: it starts with a UTF-8 byte-order mark, which transformers does not read: "
                            "save it as UTF-8 without the mark"), str(r.value)


def test_a_config_that_is_a_broken_link_is_said_to_be_one(tiny_pair, tmp_path):
    draft = copy_folder(tiny_pair[1], tmp_path / "d")
    (draft / "config.json").unlink()
    os.symlink(tmp_path / "gone.json", draft / "config.json")
    with refused(kind=CheckpointNotFound) as r:
        read_raw_config(draft)
    assert str(r.value) == f"{draft / 'config.json'} does not exist (or is a broken link)"


@pytest.mark.parametrize("obj, says", [
    ({"state_dict": {"fc.weight": torch.zeros(2)}, "step": torch.zeros(1)}, "its entry 'state_dict' holds a nested "
                                                                           "mapping (a trainer's checkpoint?"),
    ({"fc.weight": torch.zeros(2), "step": 3}, "its entry 'step' holds int"),
    ([torch.zeros(2)], "got list"),
], ids=["nested", "non-tensor", "list"])
def test_a_bin_that_is_no_state_dict_names_the_entry(tmp_path, obj, says):
    torch.save(obj, tmp_path / "pytorch_model.bin")
    with refused(kind=CheckpointError) as r:
        list_tensors(tmp_path)
    assert "expected a flat mapping of names to tensors" in str(r.value) and says in str(r.value), str(r.value)


def test_a_bin_that_is_a_plain_pickle_is_said_to_be_no_zip_torch_file(tmp_path):
    (tmp_path / "pytorch_model.bin").write_bytes(pickle.dumps({"a": 1}))
    with refused(kind=CheckpointError) as r:
        list_tensors(tmp_path)
    assert "is not a zip-format torch checkpoint" in str(r.value) and "_use_new_zipfile" not in str(r.value)


def test_a_size_of_thousands_of_digits_is_quoted_short(tiny_pair, tmp_path):
    draft = copy_folder(tiny_pair[1], tmp_path / "d")
    edit_config(draft, hidden_size=10 ** 3999)
    with refused() as r:
        draftsmith.assemble("eagle3-llama", target=tiny_pair[0], draft=draft)
    assert "hidden_size is " in str(r.value) and len(str(r.value)) < 1000, str(r.value)[:300]


def test_an_fp8_weight_stored_as_a_wider_float_is_refused(tmp_path):
    """A half-dequantized export: the weight a float, its scale left beside it. Cast to FP8 and scaled again, it
    loaded silently (relative error 0.9995)."""
    from safetensors.torch import load_file, save_file
    from draftsmith.testing import write_eagle1, write_target
    from draftsmith.testing.quant import quantize_folder

    target = write_target(tmp_path / "t", hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, num_hidden_layers=4, vocab_size=32)
    draft = write_eagle1(tmp_path / "d", target)
    name = "layers.0.self_attn.q_proj.weight"
    before = load_file(str(draft / "model.safetensors"))[name]
    quantize_folder(draft, r"layers\.0\.(self_attn|mlp)\.")
    stored = load_file(str(draft / "model.safetensors"))
    stored[name] = before
    save_file(stored, str(draft / "model.safetensors"))
    with refused() as r:
        draftsmith.assemble("eagle1-llama-fp8", target=target, draft=draft)
    assert f"wrong dtype: {name!r} is float32 (float) in the checkpoint, the model expects float8_e4m3fn (float8)" \
        in str(r.value)


def test_a_value_past_the_load_dtypes_range_is_refused(tiny_pair, tmp_path):
    """1e5 in a float32 file is finite (the file's check passed it); as float16 it is inf, and the model decoded
    '!!!!' with exit 0."""
    from safetensors.torch import load_file, save_file

    target = copy_folder(tiny_pair[0], tmp_path / "t")
    stored = load_file(str(target / "model.safetensors"))
    name = "model.layers.3.mlp.up_proj.weight"
    stored[name][0, 0] = 1e5
    save_file(stored, str(target / "model.safetensors"))
    with pytest.raises(CheckpointError) as r:
        draftsmith.assemble("eagle3-llama", target=target, draft=tiny_pair[1], dtype="float16")
    assert str(r.value) == (f"{target / 'model.safetensors'}: values past float16's range (largest 65504) in "
                            f"{name!r} (1 of {stored[name].numel()}): they would load as inf; load it in bfloat16 "
                            "or float32")
    draftsmith.assemble("eagle3-llama", target=target, draft=tiny_pair[1], dtype="bfloat16")


def _header_edit(fn):
    def edit(path):
        import struct
        data = path.read_bytes()
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + n])
        fn(header)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        path.write_bytes(struct.pack("<Q", len(text)) + text + data[8 + n:])
    return edit


@pytest.mark.parametrize("damage, says", [
    (lambda p: p.write_bytes(p.read_bytes()[:-1000]), r"the file is (\d+) bytes and its header describes (\d+): it "
                                                      r"is cut short \(an interrupted download\? fetch it again\)$"),
    (lambda p: p.write_bytes(p.read_bytes() + b"\0" * 100), r"the file is \d+ bytes, 100 past the data its header "
                                                            r"describes$"),
    (_header_edit(lambda h: h["fc.weight"].__setitem__("dtype", "F64")),
     r"tensor 'fc.weight' \(F64 \[16, 48\]\) needs 6144 bytes, its header gives it 3072$"),
    (_header_edit(lambda h: h["fc.weight"].__setitem__("dtype", "F12")), r"tensor 'fc.weight' has dtype 'F12', which "
                                                                         r"safetensors does not know$"),
], ids=["cut", "extra", "size", "dtype"])
def test_a_damaged_safetensors_file_is_said_in_its_own_terms(tiny_pair, tmp_path, damage, says):
    """safetensors said 'incomplete metadata, file not fully covered' both for a file cut short and one with bytes
    past its data, and named no tensor for a dtype or byte range that does not fit."""
    import re

    draft = copy_folder(tiny_pair[1], tmp_path / "d")
    damage(draft / "model.safetensors")
    with refused(kind=CheckpointError) as r:
        list_tensors(draft)
    found = re.search(says, str(r.value))
    assert str(r.value).startswith(f"{draft / 'model.safetensors'}: not a readable safetensors file: ") and found, \
        str(r.value)
    if found.groups():
        assert int(found.group(2)) - int(found.group(1)) == 1000
