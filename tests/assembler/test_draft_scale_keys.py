"""A spec's gqa scale_key / softcap_key read from a draft's config.json: a value that is no positive number is a
CheckpointError naming the file and the key (a target's is refused by its record's options_check first); before, 0
raised ZeroDivisionError, a string ValueError, and a cap of 0 loaded and attended with NaN / zero scores."""
import json
import shutil

import pytest

import draftsmith
from draftsmith.errors import CheckpointError
from draftsmith.testing import write_eagle3, write_target


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale_keys")
    target = write_target(root / "t", num_hidden_layers=8)
    return target, write_eagle3(root / "d", target)


def _assemble(pair, tmp_path, field, key, value):
    target, draft = pair
    cfg = json.loads((draft / "config.json").read_text())
    copy = shutil.copytree(draft, tmp_path / "d")
    (copy / "config.json").write_text(json.dumps({**cfg, key: value}))
    spec = tmp_path / "s.yaml"
    spec.write_text(f"name: x\nextends: eagle3-llama\ndraft:\n  attention: {{kind: gqa, rope: neox, {field}: {key}}}\n")
    return draftsmith.assemble(str(spec), target, copy)


@pytest.mark.parametrize("field", ["scale_key", "softcap_key"])
@pytest.mark.parametrize("value", [0, -4.0, "abc", True])
def test_a_draft_config_value_that_is_no_positive_number_is_refused_by_name(pair, tmp_path, field, value):
    with pytest.raises(CheckpointError, match=r"config\.json: my_key is .*allowed: a positive number, or null"):
        _assemble(pair, tmp_path, field, "my_key", value)


@pytest.mark.parametrize("field", ["scale_key", "softcap_key"])
def test_a_positive_number_or_null_loads(pair, tmp_path, field):
    model = _assemble(pair, tmp_path, field, "my_key", 24.0)
    attn = model.draft.layers[0].self_attn
    assert attn.scale == pytest.approx(24.0 ** -0.5) if field == "scale_key" else attn.backend.cap == 24.0
