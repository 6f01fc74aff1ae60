"""Mutation survivor of assembler/weight_files.py header_fault (round 30): a header longer than limits.JSON_BYTES is
not read (safetensors' own words stand; a header-length field of a damaged file may ask for any size): catches
'size < 8 or n > limits.JSON_BYTES' -> 'and', which read it and told a size story."""
import json
import struct

from draftsmith import limits
from draftsmith.assembler.weight_files import header_fault


def test_a_header_past_the_json_limit_is_left_unread(tmp_path, monkeypatch):
    raw = json.dumps({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(9))   # one byte past the data
    assert header_fault(path) == f"the file is {8 + len(raw) + 9} bytes, 1 past the data its header describes"
    monkeypatch.setattr(limits, "JSON_BYTES", len(raw) - 1)   # the header one byte over the limit
    assert header_fault(path) is None
    monkeypatch.setattr(limits, "JSON_BYTES", len(raw))       # at the limit it is read
    assert header_fault(path) is not None


def test_a_file_of_its_length_field_alone_is_cut_short_inside_its_header_and_a_shorter_one_is_not_told(tmp_path):
    """catches '8 <= size < 8 + n' -> '9 <= ...' (8 bytes holding the length alone went unsaid) and -> '7 <= ...' (a
    7-byte file, no whole length field, was said to give a header length)."""
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", 10))
    assert header_fault(path) == ("the file is 8 bytes and its first 8 bytes give a header of 10: it is cut short "
                                  "inside its header (an interrupted download? fetch it again)")
    path.write_bytes(struct.pack("<Q", 10)[:7])
    assert header_fault(path) is None


def test_all_eight_bytes_of_the_length_field_are_read(tmp_path):
    """catches 'first[:8]' -> 'first[:7]': a length field past 2**56 (its eighth byte set) read as its low seven
    bytes gave a header of 10, and the file was said cut short inside a header it does not have."""
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", 2**56 + 10) + b'{"a": 1}')
    assert header_fault(path) == (f"its first 8 bytes give a header of {2**56 + 10} bytes, which no safetensors file "
                                  "has (at most 100000000): it is damaged, or no safetensors file")
