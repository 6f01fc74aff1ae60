"""A vision-language target in transformers 5's / the Hub's Qwen3-VL names (``model.language_model.embed_tokens``,
``model.language_model.layers.*`` beside ``model.visual.*``) is a whole model, as one in ``model.layers.*`` is:
``inspect`` on it, or the folder passed as the draft, says so (it said only that no family places its names)."""
from draftsmith.assembler.checkpoint import list_tensors
from draftsmith.assembler.detect import full_model, swap_note
from draftsmith.registry import default_registry
from draftsmith.testing.vl import write_vl_target


def test_a_language_model_layout_target_is_a_whole_model(tmp_path):
    folder = write_vl_target(tmp_path / "t", "qwen3_vl", layout="language_model")
    names = list(list_tensors(folder))
    assert any(n.startswith("model.language_model.layers.") for n in names)
    assert full_model(names)
    note = swap_note(default_registry(), folder, {}, names, "draft")
    assert note is not None and "looks like a whole model" in note and "swapped?" in note
