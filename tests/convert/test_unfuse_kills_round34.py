"""Mutation survivors (round 34) of draftsmith.convert.unfuse: a part's shape is its rows of the fused shape (the whole
where it has none); the modules a config's quantization names move by (weights only, a fused module's parts as a
tuple, one written name as a string); the note on fused tensors written apart (four names, then a count; a long
source path cut); a fused tensor no stand-in sizes is refused with the reason (no stand-in, or what refused it)."""
from types import SimpleNamespace

import pytest

from draftsmith.components.weights import SplitRefused
from draftsmith.convert import fits
from draftsmith.convert.unfuse import moved_modules, part_rows, part_shape, unfused_note


# catches unfuse.py part_shape rows is None -> is not None, rows[1] / rows[0] / shape[1:] index +-1
def test_a_part_s_shape_is_its_rows_of_the_fused_shape():
    assert part_shape((12, 8, 2), (4, 9)) == (5, 8, 2)
    assert part_shape((12, 8), None) == (12, 8)


# catches unfuse.py moved_modules '.weight' and dest -> or, len(news) == 1 -> == 0
def test_moved_modules_are_weights_written_somewhere_fused_ones_as_their_parts():
    sources = {"layers.0.q.weight": "midlayer.qkv.weight", "layers.0.k.weight": "midlayer.qkv.weight",
               "layers.0.o.weight": "midlayer.o.weight", "layers.0.o.weight_scale": "midlayer.o.weight_scale",
               "embed.weight": "embed_tokens.weight"}
    dest = {"layers.0.q.weight": "layers.0.attn.q_proj.weight", "layers.0.k.weight": "layers.0.attn.k_proj.weight",
            "layers.0.o.weight": "layers.0.attn.o_proj.weight", "layers.0.o.weight_scale": "layers.0.o.weight_scale",
            "embed.weight": None}
    assert moved_modules(sources, dest) == {"midlayer.qkv": ("layers.0.attn.q_proj", "layers.0.attn.k_proj"),
                                            "midlayer.o": "layers.0.attn.o_proj"}


# catches unfuse.py unfused_note short_list(fused, 4, ...) -> 3 / 5 and short_text(src, 300) -> 301
def test_the_note_names_four_fused_tensors_then_a_count_and_cuts_a_long_path():
    sources = {f"c{i}.{p}": f"f{i}.weight" for i in range(5) for p in "ab"}
    note = unfused_note("/x/" + "d" * 400, sources)
    assert "'f3.weight' and 1 more written as their parts" in note and "'f4.weight'" not in note
    assert note.startswith("note: /x/") and len(note.split(": fused ")[0]) == len("note: ") + 299
    assert unfused_note("/x", {"a": "a.weight", "b": "b.weight"}) is None


def _refused(monkeypatch, judged, fused=5):
    monkeypatch.setattr(fits, "stand_in_model", lambda folder, spec: judged)
    split = {f"f{i}.qkv_proj.weight": (f"q{i}", f"k{i}") for i in range(fused)}
    with pytest.raises(SplitRefused) as err:
        part_rows(SimpleNamespace(folder="/d", spec=None), split)
    return str(err.value)


# catches unfuse.py judged is None or isinstance -> and, judged is None -> is not None, short_list(sorted(split), 4)
def test_a_fused_tensor_no_stand_in_sizes_is_refused_with_the_reason(monkeypatch):
    said = _refused(monkeypatch, None)
    assert "'f3.qkv_proj.weight' and 1 more: fused" in said and "'f4.qkv_proj.weight'" not in said
    assert "but no stand-in target can be made from its config; load the draft with assemble()" in said
    said = _refused(monkeypatch, fits.Fit({}, ["one reason", "another"]), fused=1)
    assert "'f0.qkv_proj.weight': fused" in said and "but one reason; another; load the draft" in said
