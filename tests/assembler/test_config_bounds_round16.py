"""Kills of a mutation run over assembler/config.py lines 1-248 (round 16): the size bounds of limits.py exact and
inclusive (sliding_window 0, num_mtp_layers 0, hc_mult 0 accepted; an MLA width of 0 refused), a rope number of 0
refused and 1 accepted, and where long names are cut in messages."""
import pytest

from draftsmith.assembler.config_values import config_problems

# (field, smallest accepted, largest accepted): draftsmith/limits.py (WIDTH 1<<20, HEADS 4096, DRAFT_LAYERS 64)
BOUNDS = [("sliding_window", 0, 1 << 31), ("max_position_embeddings", 1, 1 << 31),
          ("num_nextn_predict_layers", 0, 64), ("num_mtp_layers", 0, 64), ("hc_mult", 0, 4096),
          ("q_lora_rank", 1, 1 << 20), ("kv_lora_rank", 1, 1 << 20), ("qk_rope_head_dim", 1, 1 << 20),
          ("qk_nope_head_dim", 0, 1 << 20), ("v_head_dim", 1, 1 << 20)]


@pytest.mark.parametrize(("key", "least", "most"), BOUNDS)
def test_size_bounds_are_exact_and_inclusive(key, least, most):
    assert config_problems({key: least}) == []          # e.g. sliding_window 0, num_mtp_layers 0, hc_mult 0
    assert config_problems({key: most}) == []
    for bad in (least - 1, most + 1):
        assert config_problems({key: bad}) == [f"{key} is {bad}; allowed {least}..{most} (draftsmith/limits.py)"]


@pytest.mark.parametrize("extra", [0, 100])   # a folder of exactly 300 characters, and a longer one
def test_no_config_names_the_folder_cut_at_300_characters(tmp_path, extra):
    from draftsmith.assembler.config import read_raw_config
    from draftsmith.errors import CheckpointNotFound
    base = str(tmp_path) + "/"
    rest = 300 + extra - len(base)
    folder = tmp_path / ("d" * (rest // 2)) / ("e" * (rest - rest // 2 - 1))   # a file name is at most 255
    folder.mkdir(parents=True)
    assert len(str(folder)) == 300 + extra
    with pytest.raises(CheckpointNotFound) as caught:
        read_raw_config(folder)
    shown = str(caught.value).split(": no config.json")[0]
    if extra == 0:
        assert shown == str(folder)                            # 300 characters: shown whole
    else:
        assert len(shown) == 299 and shown.startswith(str(folder)[:148]) and shown.endswith(str(folder)[-148:])


@pytest.mark.parametrize("length", [40, 60])   # a layer type of exactly 40 characters, and a longer one
def test_a_per_layer_type_rope_names_the_layer_type_cut_at_40_characters(length):
    from draftsmith.assembler.config_values import rope_problems
    layer = "x" * (length // 2) + "y" * (length - length // 2)
    (problem,) = rope_problems({"rope_parameters": {layer: {"rope_type": "bogus"}}})
    shown = problem.split("rope_parameters.", 1)[1].split(".rope_type is ")[0]
    assert shown == (layer if length == 40 else "x" * 18 + "..." + "y" * 18)


@pytest.mark.parametrize("name", ["rope_theta", "factor", "original_max_position_embeddings"])
def test_a_rope_number_of_zero_is_refused_and_one_is_accepted(name):
    from draftsmith.assembler.config_values import rope_problems
    assert rope_problems({"rope_scaling": {"rope_type": "linear", name: 1}}) == []
    assert rope_problems({"rope_scaling": {"rope_type": "linear", name: 0}}) == [
        f"rope_scaling.{name} is 0; a positive number is expected"]
