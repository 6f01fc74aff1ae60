"""Kills for convert/inspect.py survivors (round 25): what changed_paths says where one side is a section and the
other is not, ..."""
import pytest

from draftsmith.convert.inspect import changed_paths


def test_a_section_on_one_side_only_is_compared_whole():
    """catches inspect.py changed_paths: 'isinstance(before, dict) and isinstance(after, dict)' -> 'or' (a section
    the family leaves null that the folder states, or one the folder drops, was walked key by key: a TypeError on
    the side that is no dict, so inspect raised instead of proposing a spec)."""
    assert changed_paths({"quant": None}, {"quant": {"method": "fp8"}}) == []   # left to the checkpoint
    assert changed_paths({"quant": {"method": "fp8"}}, {"quant": None}) == ["quant"]
    assert changed_paths({"a": {"b": 1}}, {"a": 5}) == ["a"]
    assert changed_paths({"a": "x"}, {"a": {"b": 1}}) == ["a"]


def _d2t_folder(folder, shape, t2d: bool):
    """A folder holding only a zero d2t of ``shape`` (and a t2d marking the first 4 of 8 target tokens)."""
    import torch
    from safetensors.torch import save_file

    from draftsmith.assembler.checkpoint import list_tensors

    folder.mkdir()
    tensors = {"d2t": torch.zeros(shape, dtype=torch.long)}
    if t2d:
        tensors["t2d"] = torch.arange(8) < 4
    save_file(tensors, folder / "model.safetensors")
    return list_tensors(folder)


def test_a_d2t_that_is_not_one_dimensional_is_left_to_the_load_plan_only_without_t2d(tmp_path):
    """catches inspect.py d2t_convention: 'not has_t2d and d2t.dim() != 1' -> 'has_t2d and ...' (without t2d a
    [4, 3] d2t was read as offsets: a raw torch broadcasting error; with t2d, a [4, 1] one that forms no map was
    left unsaid instead of 'loading will refuse it')."""
    from draftsmith.convert.inspect import d2t_convention

    assert d2t_convention(_d2t_folder(tmp_path / "a", (4, 3), t2d=False), 100) is None
    assert d2t_convention(_d2t_folder(tmp_path / "b", (4, 1), t2d=True), 100) == (
        "offset", "vocab.d2t: d2t / t2d form no valid map as offsets or as target ids; loading will refuse it")


@pytest.mark.parametrize("count", [6, 7])
def test_the_description_names_six_changed_paths_then_how_many_more(tmp_path, monkeypatch, count):
    """catches inspect.py inspect_checkpoint: 'len(changed) > 6' -> '>=' (six paths the folder overrides were said
    '... and 0 more'); a seventh is 'and 1 more' after the first six."""
    from draftsmith.convert import inspect as inspect_module
    from draftsmith.testing import write_eagle1, write_target

    paths = [f"p{i}" for i in range(count)]
    monkeypatch.setattr(inspect_module, "changed_paths", lambda *a, **k: list(paths))
    target = write_target(tmp_path / "t", "llama", seed=1)
    found = inspect_module.inspect_checkpoint(write_eagle1(tmp_path / "src", target))
    shown = "p0, p1, p2, p3, p4, p5" + (" and 1 more" if count == 7 else "")
    assert found.spec["description"].endswith(f"(proposed by draftsmith inspect for src: {shown} as the folder "
                                              "states)"), found.spec["description"]


@pytest.mark.parametrize("length", [100, 101])
def test_the_description_names_the_folder_whole_up_to_100_characters(tmp_path, monkeypatch, length):
    """catches inspect.py inspect_checkpoint: 'short_text(folder.name, 100)' -> 99 / 101 (a folder name of 100
    characters is said whole in the proposed description, one of 101 is cut in the middle to 100)."""
    from draftsmith.convert import inspect as inspect_module
    from draftsmith.testing import write_eagle1, write_target

    monkeypatch.setattr(inspect_module, "changed_paths", lambda *a, **k: ["quant.scheme"])
    target = write_target(tmp_path / "t", "llama", seed=1)
    name = "s" * 48 + "-" * (length - 96) + "e" * 48
    found = inspect_module.inspect_checkpoint(write_eagle1(tmp_path / name, target))
    said = found.spec["description"].split("(proposed by draftsmith inspect for ")[1].split(": quant.scheme")[0]
    assert said == (name if length == 100 else "s" * 48 + "..." + "e" * 48), said
